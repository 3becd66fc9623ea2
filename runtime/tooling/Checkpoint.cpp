//===- Checkpoint.cpp - training checkpoints: save, find, resume ----------===//
#include "runtime/tooling/Checkpoint.h"
#include "runtime/tooling/CheckpointIndex.h"

#include "runtime/checkpoint/Safetensors.h"
#include "runtime/comm/Communicator.h"
#include "runtime/core/Fnv1a.h"
#include "runtime/core/InputFile.h"
#include "runtime/core/OutputPath.h"
#include "runtime/core/Printable.h"
#include "runtime/tooling/Weights.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <list>
#include <map>
#include <memory>
#include <unistd.h>

namespace dsc::rt {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char *kPartial = ".partial";

/// The state a checkpoint holds: everything but the gradient accumulators,
/// which every step boundary leaves at zero.
bool checkpointed(const NamedTensor &v) {
  return v.kind == StateKind::param || v.kind == StateKind::master ||
         v.kind == StateKind::optState;
}

std::string stepName(uint64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "step-%08llu",
                static_cast<unsigned long long>(step));
  return name;
}

/// The plan identity as the manifest writes it: 16 hex digits.
std::string hex(uint64_t id) {
  char text[20];
  std::snprintf(text, sizeof text, "%016llx",
                static_cast<unsigned long long>(id));
  return text;
}

std::string rankFile(int rank, int worldSize) {
  char name[64];
  std::snprintf(name, sizeof name, "rank-%05d-of-%05d.safetensors", rank,
                worldSize);
  return name;
}

bool syncDirectory(const std::string &dir, std::string &error) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0 || ::fsync(fd) != 0) {
    error = "cannot sync directory '" + dir + "': " + std::strerror(errno);
    if (fd >= 0)
      ::close(fd);
    return false;
  }
  ::close(fd);
  return true;
}

/// One rank's result, agreed on by all: false on every rank if any failed,
/// so that no rank waits for a commit that will not come.
bool agree(const CheckpointRun &run, bool ok, std::string &error) {
  if (!run.comm || run.worldSize == 1)
    return ok;
  double failed = ok ? 0 : 1, any = 0;
  std::string commError;
  if (!run.comm->allReduceSum(&failed, &any, 1, commError)) {
    error = commError;
    return false;
  }
  if (any > 0 && ok)
    error = "another rank failed to write its part of the checkpoint";
  return any == 0;
}

/// Removes a checkpoint directory dsrun made (only the files it writes),
/// then the directory itself.
void removeCheckpointDir(const fs::path &dir) {
  std::error_code ec;
  for (const fs::directory_entry &e : fs::directory_iterator(dir, ec)) {
    std::string name = e.path().filename().string();
    if (e.is_regular_file(ec) && (name.rfind("rank-", 0) == 0 ||
                                  name.rfind(kCheckpointManifest, 0) == 0))
      fs::remove(e.path(), ec);
  }
  fs::remove(dir, ec); // fails, harmlessly, if something else is in it
}

/// Committed checkpoints in `dir`, oldest first, and uncommitted leftovers.
void listCheckpoints(const fs::path &dir, std::vector<fs::path> &committed,
                     std::vector<fs::path> &partial, std::error_code &ec) {
  for (const fs::directory_entry &e : fs::directory_iterator(dir, ec)) {
    std::string name = e.path().filename().string();
    if (name.rfind("step-", 0) != 0 || !e.is_directory())
      continue;
    if (name.size() > 8 && name.compare(name.size() - 8, 8, kPartial) == 0)
      partial.push_back(e.path());
    else if (fs::exists(e.path() / kCheckpointManifest))
      committed.push_back(e.path());
    else
      partial.push_back(e.path()); // a step directory without its manifest
  }
  std::sort(committed.begin(), committed.end());
}

} // namespace

uint64_t planIdentity(const std::vector<uint8_t> &bytes) {
  return fnv1a64(bytes.data(), bytes.size());
}

bool saveCheckpoint(const CheckpointRun &run, const std::string &dir,
                    const RunState &state, uint64_t keep, std::string &path,
                    std::string &error) {
  const fs::path final = fs::path(dir) / stepName(state.step);
  const fs::path partial = fs::path(dir) / (stepName(state.step) + kPartial);
  bool ok = true;
  std::error_code ec;
  if (run.rank == 0) {
    fs::create_directories(dir, ec);
    if (!ec && fs::exists(partial))
      removeCheckpointDir(partial); // an earlier, interrupted save
    if (!ec)
      fs::create_directory(partial, ec);
    if (ec) {
      error = "cannot create '" + partial.string() + "': " + ec.message();
      ok = false;
    }
  }
  if (!agree(run, ok, error))
    return false;

  // This rank's part of every checkpointed variable.
  std::list<std::vector<float>> values; // stable addresses
  std::vector<TensorToSave> tensors;
  json shapes = json::object();
  std::map<const void *, std::vector<float>> shards; // one read per buffer
  for (const NamedTensor &v : run.session->variables()) {
    if (!checkpointed(v))
      continue;
    shapes[v.name] = v.shape;
    VariablePart part = v.partOn(run.rank);
    if (part.empty() || (!v.sharded && run.rank != 0))
      continue; // nothing here, or rank 0 writes what every rank holds
    auto it = shards.find(v.ref.data);
    if (it == shards.end()) {
      std::vector<float> local;
      if (!readLocalFloats(*run.session, v, local, error)) {
        ok = false;
        break;
      }
      it = shards.emplace(v.ref.data, std::move(local)).first;
    }
    const float *first = it->second.data() + part.local;
    std::vector<float> &piece =
        values.emplace_back(first, first + (part.end - part.begin));
    if (v.sharded)
      tensors.push_back({v.name + "@" + std::to_string(part.begin),
                         {part.end - part.begin},
                         piece.data()});
    else
      tensors.push_back({v.name, v.shape, piece.data()});
  }
  if (ok)
    ok = saveSafetensors(
        (partial / rankFile(run.rank, run.worldSize)).string(), tensors,
        {{"format", kCheckpointFormat}, {"shapes", shapes.dump()}}, error);
  if (!agree(run, ok, error))
    return false;

  // The commit: the manifest, then the directory's rename.
  if (run.rank == 0) {
    json m;
    m["format"] = kCheckpointFormat;
    m["step"] = state.step;
    m["applied"] = state.applied;
    m["skipped"] = state.skipped;
    m["seed"] = run.seed;
    m["world_size"] = run.worldSize;
    m["model"] = run.model;
    m["plan"] = hex(run.planId);
    if (state.scaler)
      m["loss_scaler"] = {{"scale", state.scaler->scale},
                          {"hysteresis", state.scaler->hysteresis},
                          {"iteration", state.scaler->iteration},
                          {"last_overflow", state.scaler->lastOverflow}};
    std::vector<std::string> files;
    for (int r = 0; r < run.worldSize; ++r)
      files.push_back(rankFile(r, run.worldSize));
    m["files"] = files;
    std::string text = m.dump(2) + "\n";
    ok = writeOutput((partial / kCheckpointManifest).string(), text.data(),
                     text.size(), error) &&
         syncDirectory(partial.string(), error);
    if (ok && fs::exists(final)) {
      // The same step saved before (a resumed run): the new one replaces
      // it only once it is whole.
      fs::path old = fs::path(dir) / (stepName(state.step) + ".old");
      fs::rename(final, old, ec);
      if (!ec)
        fs::rename(partial, final, ec);
      if (!ec)
        removeCheckpointDir(old);
    } else if (ok) {
      fs::rename(partial, final, ec);
    }
    if (ok && ec) {
      error = "cannot commit '" + final.string() + "': " + ec.message();
      ok = false;
    }
    ok = ok && syncDirectory(dir, error);
    if (ok && keep > 0) {
      std::vector<fs::path> committed, leftovers;
      listCheckpoints(dir, committed, leftovers, ec);
      for (size_t i = 0; i + keep < committed.size(); ++i)
        removeCheckpointDir(committed[i]);
    }
  }
  if (!agree(run, ok, error))
    return false;
  path = final.string();
  return true;
}

bool findLatestCheckpoint(const std::string &dir, std::string &path,
                          std::vector<std::string> &notes, std::string &error) {
  path.clear();
  std::error_code ec;
  if (!fs::exists(dir, ec))
    return true;
  if (!fs::is_directory(dir, ec)) {
    error = "--save-dir '" + dir + "' is not a directory";
    return false;
  }
  std::vector<fs::path> committed, partial;
  listCheckpoints(dir, committed, partial, ec);
  if (ec) {
    error = "cannot read '" + dir + "': " + ec.message();
    return false;
  }
  for (const fs::path &p : partial)
    notes.push_back("ignoring '" + p.string() +
                    "': not committed (an interrupted save)");
  if (!committed.empty())
    path = committed.back().string();
  return true;
}

bool loadCheckpoint(const CheckpointRun &run, const std::string &path,
                    RunState &state, std::vector<std::string> &notes,
                    std::string &error) {
  CheckpointIndex index;
  if (!index.open(path, error))
    return false;
  state = index.state();
  if (index.model() != run.model)
    notes.push_back("checkpoint '" + path + "' is of model '" + index.model() +
                    "', the plan's is '" + run.model + "'");
  if (index.planId() != hex(run.planId) || index.worldSize() != run.worldSize)
    notes.push_back("resuming '" + path + "' (" +
                    std::to_string(index.worldSize()) +
                    " ranks) into another plan (" +
                    std::to_string(run.worldSize) + " ranks)");

  // The plan and the checkpoint must hold the same state.
  const auto &shapes = index.shapes();
  std::vector<std::string> problems;
  std::map<std::string, const NamedTensor *> wanted;
  for (const NamedTensor &v : run.session->variables())
    if (checkpointed(v)) {
      wanted[v.name] = &v;
      auto it = shapes.find(v.name);
      if (it == shapes.end())
        problems.push_back("the checkpoint has no '" + v.name + "'");
      else if (it->second != v.shape)
        problems.push_back("'" + v.name + "' is " + formatShape(it->second) +
                           " in the checkpoint and " + formatShape(v.shape) +
                           " in the plan");
    }
  for (const auto &[name, shape] : shapes)
    if (!wanted.count(name))
      problems.push_back("the plan has no '" + printable(name) +
                         "', which the checkpoint holds");
  if (!problems.empty()) {
    error = path + ": " + problems.front() +
            (problems.size() > 1
                 ? " (and " + std::to_string(problems.size() - 1) + " more)"
                 : "");
    return false;
  }

  // Each variable: only the elements this rank holds are read.
  for (const NamedTensor &v : run.session->variables()) {
    if (!checkpointed(v))
      continue;
    VariablePart part = v.partOn(run.rank);
    if (part.empty())
      continue;
    std::vector<float> whole(size_t(v.numel()), 0.0f);
    if (!index.read(v.name, part.begin, part.end, whole.data() + part.begin,
                    error))
      return false;
    run.session->writeVariable(v, whole.data());
  }
  return true;
}

} // namespace dsc::rt
