//===- FlopsProfile.cpp - ds_config's flops_profiler, from the plan -------===//
#include "runtime/tooling/FlopsProfile.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <string_view>
#include <vector>

namespace dsc::rt {

namespace {

namespace fb = dsc::plan;

/// "1.23 G", "456.7 M": a count with an SI prefix.
std::string si(double v) {
  const char *prefixes[] = {"", " K", " M", " G", " T", " P", " E"};
  int p = 0;
  while (v >= 1000 && p < 6) {
    v /= 1000;
    ++p;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.4g%s", v, prefixes[p]);
  return buf;
}

/// The first `depth` dot-separated parts of `name`, or "" when it has
/// fewer.
std::string_view ancestor(std::string_view name, int depth) {
  size_t end = 0;
  for (int d = 0; d < depth; ++d) {
    if (end > name.size())
      return {};
    size_t dot = name.find('.', end);
    end = dot == std::string_view::npos ? name.size() + 1 : dot + 1;
  }
  return name.substr(0, end - 1);
}

int depthOf(std::string_view name) {
  return name.empty() ? 0 : 1 + int(std::count(name.begin(), name.end(), '.'));
}

struct Module {
  double flops = 0;
  uint64_t params = 0;
  double ms = 0; ///< measured; with ModuleTimes only
};

/// "  1.234 ms  5.678 GFLOPS": a measured time and the rate it makes.
std::string measuredText(double flops, double ms) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), " %9.3f ms %10sFLOPS", ms,
                si(ms > 0 ? flops / (ms * 1e-3) : 0).c_str());
  return buf;
}

/// How many times each program runs in an optimizer step: the micro-step
/// once per micro-batch (the last as micro_step_sync when the plan has
/// one), apply once; eval not at all.
std::map<std::string, double> runsPerStep(const fb::Plan &plan) {
  double accumulation = std::max<uint32_t>(1, plan.accumulation_steps());
  bool sync = false;
  for (const fb::Program *p : *plan.programs())
    sync |= p->name() && p->name()->string_view() == fb::kMicroStepSyncProgram;
  return {{std::string(fb::kMicroStepProgram),
           sync ? accumulation - 1 : accumulation},
          {std::string(fb::kMicroStepSyncProgram), 1.0},
          {std::string(fb::kApplyProgram), 1.0}};
}

} // namespace

uint64_t flopsProfileStep(const fb::Plan &plan) {
  const fb::FlopsProfile *f = plan.flops_profile();
  return f && f->profile_step() > 0 ? uint64_t(f->profile_step()) : 0;
}

std::string flopsProfileText(const fb::Plan &plan,
                             const ModuleTimes *measured) {
  const fb::FlopsProfile *f = plan.flops_profile();
  if (!f || !plan.programs())
    return "";
  // Each instruction's FLOPs under its module's name, per step.
  std::map<std::string, double> flopsOf;
  const std::map<std::string, double> runs = runsPerStep(plan);
  double total = 0;
  for (const fb::Program *p : *plan.programs()) {
    auto it = runs.find(p->name() ? p->name()->str() : "");
    if (it == runs.end() || !p->instrs())
      continue;
    for (const fb::Instr *i : *p->instrs()) {
      double flops = i->flops() * it->second;
      flopsOf[i->loc() ? i->loc()->str() : ""] += flops;
      total += flops;
    }
  }
  std::map<std::string, uint64_t> paramsOf;
  uint64_t params = 0;
  if (plan.variables())
    for (const fb::Variable *v : *plan.variables()) {
      if (v->kind() != fb::VarKind::param || !v->name())
        continue;
      uint64_t n = 1;
      if (v->shape())
        for (int64_t d : *v->shape())
          n *= uint64_t(d);
      paramsOf[v->name()->str()] += n;
      params += n;
    }
  // A tied weight counts in each module that holds it (gpt2's lm_head
  // holds the embedding), as module.parameters() would; once in the total.
  if (plan.aliases())
    for (const fb::Alias *a : *plan.aliases())
      if (a->name() && a->of())
        if (auto it = paramsOf.find(a->of()->str()); it != paramsOf.end())
          paramsOf[a->name()->str()] += it->second;
  int maxDepth = 0;
  for (const auto &[name, _] : flopsOf)
    maxDepth = std::max(maxDepth, depthOf(name));
  int depths =
      f->module_depth() < 0 ? maxDepth : std::min(maxDepth, f->module_depth());

  std::string out = "flops profile (counted by dsc when it compiled the plan; "
                    "per optimizer step";
  out += measured ? "; ms: this step's kernels, measured):\n" : "):\n";
  out +=
      "  model: " + si(double(params)) + " parameters, " + si(total) + "FLOPs";
  if (measured) {
    double ms = 0;
    for (const auto &[name, t] : *measured)
      ms += t;
    out += "," + measuredText(total, ms);
  }
  out += "\n";
  for (int d = 1; d <= depths; ++d) {
    std::map<std::string, Module> modules;
    for (const auto &[name, flops] : flopsOf)
      if (std::string_view a = ancestor(name, d); !a.empty())
        modules[std::string(a)].flops += flops;
    for (const auto &[name, n] : paramsOf)
      if (std::string_view a = ancestor(name, d); !a.empty())
        if (auto it = modules.find(std::string(a)); it != modules.end())
          it->second.params += n;
    if (measured)
      for (const auto &[name, ms] : *measured)
        if (std::string_view a = ancestor(name, d); !a.empty())
          if (auto it = modules.find(std::string(a)); it != modules.end())
            it->second.ms += ms;
    std::vector<std::pair<std::string, Module>> ranked(modules.begin(),
                                                       modules.end());
    std::stable_sort(ranked.begin(), ranked.end(),
                     [](const auto &a, const auto &b) {
                       return a.second.flops > b.second.flops;
                     });
    ranked.resize(std::min<size_t>(ranked.size(), size_t(f->top_modules())));
    out += "  depth " + std::to_string(d) + ":\n";
    for (const auto &[name, m] : ranked) {
      char line[512];
      std::snprintf(line, sizeof(line),
                    "    %-40s %12s params %12sFLOPs %6.2f%%", name.c_str(),
                    si(double(m.params)).c_str(), si(m.flops).c_str(),
                    total > 0 ? 100.0 * m.flops / total : 0.0);
      out += line;
      if (measured)
        out += measuredText(m.flops, m.ms);
      out += "\n";
    }
  }
  return out;
}

} // namespace dsc::rt
