//===- ConfigMonitors.cpp - monitor and profiler sections -----------------===//
//
// DeepSpeed's monitor sections. dsc checks their keys and types as
// DeepSpeed documents them; the Python side (frontends/torch/dsc/monitor.py)
// writes the files from every step's record, in dsc.train and dsc-train.
// dsrun by itself writes --metrics JSON lines, which an enabled monitor's
// note says.
//
//===----------------------------------------------------------------------===//
#include "compiler/config/ConfigReader.h"

namespace dsc::config {

bool readMonitors(Reader &r, Section &root) {
  struct Monitor {
    StringRef key;
    std::vector<StringRef> strings; ///< its keys besides `enabled`
  };
  const Monitor monitors[] = {
      {"tensorboard", {"output_path", "job_name"}},
      {"csv_monitor", {"output_path", "job_name"}},
      {"wandb", {"group", "team", "project"}},
  };
  bool ok = true;
  for (const Monitor &m : monitors) {
    if (!root.get(m.key))
      continue;
    std::optional<Section> section;
    if (!root.section(m.key, section)) {
      ok = false;
      continue;
    }
    bool enabled = false;
    bool sectionOk =
        section->checkKeys() && section->boolean("enabled", enabled);
    for (StringRef key : m.strings)
      sectionOk &= section->ignoredString(key);
    ok &= sectionOk;
    if (sectionOk && enabled)
      r.note(root.at(m.key), "written by dsc-train and dsc.train (Python); "
                             "dsrun alone writes --metrics JSON lines");
  }
  return ok;
}

bool readFlopsProfiler(Reader &r, Section &root, DsConfig::FlopsProfiler &p) {
  std::optional<Section> s;
  if (!root.section("flops_profiler", s))
    return false;
  if (!s->present())
    return true;
  auto atLeast = [&](StringRef key, int64_t value, int64_t min) {
    return r.atLeast(s->at(key), value, min);
  };
  return Reader::all({s->checkKeys(), s->boolean("enabled", p.enabled),
                      s->integer("profile_step", p.profileStep) &&
                          atLeast("profile_step", p.profileStep, 1),
                      s->integer("module_depth", p.moduleDepth) &&
                          atLeast("module_depth", p.moduleDepth, -1),
                      s->integer("top_modules", p.topModules) &&
                          atLeast("top_modules", p.topModules, 1),
                      s->ignoredBoolean("detailed"),
                      s->ignoredNumber("recompute_fwd_factor")});
}

namespace {

/// The name dsc's plans give DeepSpeed's collective `op` (comm.<name>), or
/// "" for one of DeepSpeed's that dsc's plans never issue; null when op is
/// none of DeepSpeed's.
const char *collectiveNamed(StringRef op) {
  static const std::pair<const char *, const char *> kOps[] = {
      {"all_reduce", "all_reduce"},
      {"inference_all_reduce", "all_reduce"},
      {"all_gather", "all_gather"},
      {"all_gather_into_tensor", "all_gather"},
      {"all_gather_base", "all_gather"},
      {"reduce_scatter", "reduce_scatter"},
      {"reduce_scatter_tensor", "reduce_scatter"},
      {"reduce_scatter_base", "reduce_scatter"},
      {"broadcast", "broadcast"},
      {"all_to_all_single", ""},
      {"send", ""},
      {"recv", ""},
      {"isend", ""},
      {"irecv", ""},
      {"reduce", ""},
      {"gather", ""},
      {"scatter", ""},
      {"barrier", ""},
  };
  for (const auto &[name, ours] : kOps)
    if (op == name)
      return ours;
  return nullptr;
}

} // namespace

bool readCommsLogger(Reader &r, Section &root, DsConfig::CommsLogger &c) {
  std::optional<Section> s;
  if (!root.section("comms_logger", s))
    return false;
  if (!s->present())
    return true;
  bool profAll = c.allOps;
  bool ok = Reader::all({s->checkKeys(), s->boolean("enabled", c.enabled),
                         s->boolean("verbose", c.verbose),
                         s->boolean("prof_all", profAll),
                         s->ignoredBoolean("debug")});
  const json::Value *opsValue = s->get("prof_ops");
  if (!opsValue)
    return ok;
  const json::Array *ops = opsValue->getAsArray();
  if (!ops)
    return r.fail(s->at("prof_ops"),
                  Twine("expected a list of operation names, got ") +
                      kindName(*opsValue));
  std::vector<std::string> names;
  for (size_t i = 0; i < ops->size(); ++i) {
    const std::string at = s->at("prof_ops") + "[" + std::to_string(i) + "]";
    std::optional<StringRef> op = (*ops)[i].getAsString();
    const char *ours = op ? collectiveNamed(*op) : nullptr;
    if (!op)
      ok = r.fail(at, Twine("expected a string, got ") + kindName((*ops)[i]));
    else if (!ours)
      ok = r.fail(at, "unknown operation " + quote(*op) +
                          " (dsc's plans run all_reduce, all_gather, "
                          "reduce_scatter and broadcast)");
    else if (*ours)
      names.push_back(ours);
  }
  // DeepSpeed logs every operation while prof_all is true, and prof_ops
  // only after it is set false.
  c.allOps = profAll;
  if (!profAll)
    c.ops = names;
  return ok;
}

} // namespace dsc::config
