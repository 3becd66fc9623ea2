//===- Weights.cpp - parameters in and out as safetensors -----------------===//
#include "runtime/tooling/Weights.h"

#include "runtime/checkpoint/Safetensors.h"
#include "runtime/core/Printable.h"
#include "runtime/plan/VariableNames.h"
#include "runtime/tooling/CheckpointIndex.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <list>
#include <set>

namespace dsc::rt {

namespace {

const char *const kLmHead = "lm_head.weight";
const char *const kTokenEmbedding = "transformer.wte.weight";

// The session's f32 variable for parameter `name`, or null + error: the
// parameter itself, or under mixed precision its fp32 master weight (what
// the optimizer trains; the 16-bit parameter is its rounding).
NamedTensor *findParam(Session &session, const std::string &name,
                       std::string &error) {
  if (NamedTensor *master =
          session.findVariable(plan::stateName(name, plan::kMasterSuffix)))
    return master;
  NamedTensor *v = session.findVariable(name);
  if (!v)
    error = "plan: parameter '" + name + "' has no variable in the session";
  else if (v->ref.dtype != DType::f32)
    error = "parameter '" + name + "' is not f32; weights files hold F32";
  else
    return v;
  return nullptr;
}

} // namespace

WeightsLayout WeightsLayout::forModel(
    const std::string &model, std::vector<std::string> params,
    std::vector<std::pair<std::string, std::string>> aliases) {
  WeightsLayout layout;
  auto has = [&](const char *name) {
    return std::find(params.begin(), params.end(), name) != params.end();
  };
  if (model == "gpt2" && has(kTokenEmbedding) && !has(kLmHead))
    layout.aliases.push_back({kLmHead, kTokenEmbedding});
  for (auto &alias : aliases)
    layout.aliases.push_back(std::move(alias));
  layout.params = std::move(params);
  return layout;
}

std::vector<std::string>
WeightsLayout::aliasesOf(const std::string &param) const {
  std::vector<std::string> names;
  for (const auto &[alias, of] : aliases)
    if (of == param)
      names.push_back(alias);
  return names;
}

namespace {

/// False + "WHAT holds N non-finite values (the first, element I, is nan)".
bool checkFinite(const std::vector<float> &values, const std::string &what,
                 std::string &error) {
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < values.size(); ++i)
    if (!std::isfinite(values[i]) && bad++ == 0)
      first = i;
  if (!bad)
    return true;
  float v = values[first];
  error = what + " holds " + std::to_string(bad) + " non-finite value" +
          (bad == 1 ? "" : "s") + " (the first, element " +
          std::to_string(first) + ", is " +
          (std::isnan(v) ? "nan"
           : v > 0       ? "inf"
                         : "-inf") +
          ")";
  return false;
}

/// A weights file's header metadata: `metadata` and {"format": "pt"}
/// (Hugging Face loaders read "format" to pick the framework).
std::map<std::string, std::string>
weightsMetadata(std::map<std::string, std::string> metadata) {
  metadata["format"] = "pt";
  return metadata;
}

} // namespace

bool readWholeParam(Session &session, const std::string &name,
                    std::vector<float> &whole, std::vector<int64_t> &shape,
                    std::string &error) {
  NamedTensor *v = findParam(session, name, error);
  if (!v)
    return false;
  // Through the Session, which gathers a sharded parameter (every rank
  // takes part) and stages the copy out of the backend's memory.
  whole.assign(size_t(v->numel()), 0.0f);
  shape = v->shape;
  return session.readVariable(*v, whole.data(), error);
}

bool checkFiniteParam(const std::vector<float> &whole, const std::string &name,
                      const std::string &path, std::string &error) {
  if (checkFinite(whole, "the trained parameter '" + name + "'", error))
    return true;
  error += "; not exporting " + path;
  return false;
}

bool exportWeights(Session &session, const WeightsLayout &layout,
                   const std::string &path,
                   std::map<std::string, std::string> metadata, bool write,
                   std::string &error) {
  // The header first (names and shapes), then each parameter gathered,
  // checked and written in turn: a rank holds one parameter whole at a
  // time, not the model (under ZeRO-3 every rank of a machine would
  // otherwise hold all of it at the end of the run).
  std::vector<TensorToSave> tensors;
  for (const std::string &name : layout.params) {
    const NamedTensor *v = findParam(session, name, error);
    if (!v)
      return false;
    tensors.push_back({name, v->shape, nullptr});
    for (const std::string &alias : layout.aliasesOf(name))
      tensors.push_back({alias, v->shape, nullptr});
  }
  SafetensorsWriter writer;
  // A writer that fails still takes part in every gather (the other ranks
  // are in them) and reports at the end.
  std::string writeError;
  bool writing =
      write && writer.open(path, tensors, weightsMetadata(std::move(metadata)),
                           writeError);
  for (const std::string &name : layout.params) {
    std::vector<float> whole;
    std::vector<int64_t> shape;
    // Every rank holds the whole tensor here, so all refuse together (the
    // writer's unfinished file is removed, nothing replaced).
    if (!readWholeParam(session, name, whole, shape, error) ||
        !checkFiniteParam(whole, name, path, error))
      return false;
    const size_t copies = 1 + layout.aliasesOf(name).size();
    for (size_t c = 0; writing && c < copies; ++c)
      writing = writer.write(whole.data(), whole.size(), writeError);
  }
  if (!write)
    return true;
  if (writeError.empty() && writer.commit(writeError))
    return true;
  error = writeError;
  return false;
}

bool saveWeightsFile(const std::string &path,
                     const std::vector<TensorToSave> &tensors,
                     std::map<std::string, std::string> metadata,
                     std::string &error) {
  return saveSafetensors(path, tensors, weightsMetadata(std::move(metadata)),
                         error);
}

bool exportCheckpointWeights(const CheckpointIndex &checkpoint,
                             const WeightsLayout &layout,
                             const std::string &path,
                             std::map<std::string, std::string> metadata,
                             std::string &error) {
  // What each output tensor is read from: the fp32 master where the run
  // has one (the weights the optimizer trains), else the parameter.
  struct Source {
    std::string variable;
    uint64_t numel;
  };
  std::vector<TensorToSave> tensors;
  std::vector<Source> sources;
  const auto &shapes = checkpoint.shapes();
  for (const std::string &name : layout.params) {
    std::string master = plan::stateName(name, plan::kMasterSuffix);
    std::string variable = shapes.count(master) ? master : name;
    auto it = shapes.find(variable);
    if (it == shapes.end()) {
      error = checkpoint.path() + ": the checkpoint has no '" + name +
              "', a parameter of the plan";
      return false;
    }
    uint64_t numel = 1;
    for (int64_t d : it->second)
      numel *= uint64_t(d);
    tensors.push_back({name, it->second, nullptr});
    sources.push_back({variable, numel});
    for (const std::string &alias : layout.aliasesOf(name)) {
      tensors.push_back({alias, it->second, nullptr});
      sources.push_back({variable, numel});
    }
  }
  SafetensorsWriter writer;
  if (!writer.open(path, tensors, weightsMetadata(std::move(metadata)), error))
    return false;
  // One variable in memory at a time; the rank files are mapped.
  std::vector<float> buffer;
  for (const Source &s : sources) {
    buffer.resize(size_t(s.numel));
    if (!checkpoint.read(s.variable, 0, int64_t(s.numel), buffer.data(),
                         error) ||
        !writer.write(buffer.data(), s.numel, error))
      return false;
  }
  return writer.commit(error);
}

bool readLocalFloats(Session &session, const NamedTensor &v,
                     std::vector<float> &out, std::string &error) {
  out.resize(size_t(v.ref.numel()));
  return session.readFloats(v, 0, out.data(), v.ref.numel(), error);
}

bool dumpState(Session &session, int shardRank, const std::string &path,
               std::string &error) {
  std::list<std::vector<float>> values; // stable addresses
  std::vector<TensorToSave> tensors;
  for (const NamedTensor &v : session.variables()) {
    if (!isFloat(v.ref.dtype))
      continue;
    VariablePart part = v.partOn(shardRank);
    if (part.empty())
      continue;
    std::vector<float> local;
    if (!readLocalFloats(session, v, local, error))
      return false;
    std::vector<float> &out = values.emplace_back(local.begin() + part.local,
                                                  local.begin() + part.local +
                                                      (part.end - part.begin));
    if (v.sharded)
      tensors.push_back({v.name + "@" + std::to_string(part.begin),
                         {part.end - part.begin},
                         out.data()});
    else
      tensors.push_back({v.name, v.shape, out.data()});
  }
  return saveSafetensors(path, tensors, {{"producer", "dsrun --dump-state"}},
                         error);
}

bool importWeights(Session &session, const WeightsLayout &layout,
                   const std::string &path, std::string &error,
                   const WeightsLayout *model) {
  std::unique_ptr<SafetensorsFile> file = SafetensorsFile::read(path, error);
  if (!file)
    return false;

  std::vector<std::string> problems;
  std::vector<std::pair<NamedTensor *, const SafetensorsEntry *>> loads;
  for (const std::string &name : layout.params) {
    NamedTensor *v = findParam(session, name, error);
    if (!v)
      return false;
    const SafetensorsEntry *e = file->find(name);
    if (!e)
      problems.push_back("missing parameter '" + name + "' " +
                         formatShape(v->shape));
    else if (e->shape != v->shape)
      problems.push_back("'" + name + "' has shape " + formatShape(e->shape) +
                         ", the plan expects " + formatShape(v->shape));
    else if (e->dtype != "F32")
      problems.push_back("'" + name + "' is " + e->dtype +
                         "; only F32 can be loaded");
    else
      loads.emplace_back(v, e);
  }
  const WeightsLayout &all = model ? *model : layout;
  std::set<std::string> params(all.params.begin(), all.params.end());
  std::map<std::string, std::string> aliasOf(all.aliases.begin(),
                                             all.aliases.end());
  for (const SafetensorsEntry &e : file->tensors()) {
    if (params.count(e.name))
      continue;
    auto tied = aliasOf.find(e.name);
    if (tied == aliasOf.end()) {
      problems.push_back("unexpected tensor '" + printable(e.name) +
                         "' (not a parameter of this plan)");
      continue;
    }
    // A tied plan cannot represent two different tensors: refuse an alias
    // that differs rather than silently dropping it.
    const SafetensorsEntry *of = file->find(tied->second);
    if (of &&
        (of->shape != e.shape || of->dtype != e.dtype ||
         std::memcmp(file->data(*of), file->data(e), e.end - e.begin) != 0))
      problems.push_back(printable(e.name) + " differs from " + tied->second +
                         ", but this plan ties them");
  }
  if (!problems.empty()) {
    error = path + ": " + problems.front();
    if (problems.size() > 1)
      error += " (and " + std::to_string(problems.size() - 1) +
               " more problem" + (problems.size() > 2 ? "s" : "") + ")";
    return false;
  }
  std::vector<float> whole;
  for (auto &[v, e] : loads) {
    whole.resize(size_t(v->numel()));
    if (!file->readF32(*e, whole.data(), error))
      return false;
    // Training from them would only say "loss is nan" steps later.
    if (!checkFinite(whole, "'" + e->name + "'", error)) {
      error = path + ": " + error;
      return false;
    }
    session.writeVariable(*v, whole.data());
    // Mixed precision: the 16-bit parameter is the master's rounding.
    if (v->name != e->name)
      if (NamedTensor *param = session.findVariable(e->name))
        session.writeVariable(*param, whole.data());
  }
  return true;
}

} // namespace dsc::rt
