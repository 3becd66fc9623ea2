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

} // namespace dsc::config
