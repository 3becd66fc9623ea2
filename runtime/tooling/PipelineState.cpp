//===- PipelineState.cpp - what a pipeline's stages hold ------------------===//

#include "runtime/tooling/PipelineState.h"

#include "runtime/plan/LoadedPlan.h"
#include "runtime/plan/PlanFormat.h"
#include "runtime/tooling/PlanInfo.h"

#include <algorithm>

namespace dsc::rt {

namespace fb = dsc::plan;

PipelineState pipelineStateOf(const LoadedPlan &file, uint32_t stage) {
  PipelineState out;
  std::set<std::string> lower; // the state of the stages before `s`
  for (uint32_t s = 0; s < file.stageCount(); ++s) {
    // The file's verifier checked each stage's nested plan.
    const fb::Plan *plan = file.plan().stages()->Get(s)->plan_nested_root();
    if (!plan || !plan->variables())
      continue;
    std::vector<std::string> mine;
    for (const fb::Variable *v : *plan->variables()) {
      if (!v->name() || v->kind() == fb::VarKind::grad)
        continue;
      const std::string name = v->name()->str();
      mine.push_back(name);
      if (s == stage && lower.count(name))
        out.heldEarlier.insert(name);
      if (v->kind() == fb::VarKind::param && !lower.count(name))
        out.params.push_back(name);
    }
    for (auto &[name, shape] : paramShapes(*plan))
      out.paramShapes.emplace(name, shape);
    if (plan->aliases())
      for (const fb::Alias *a : *plan->aliases())
        if (a->name() && a->of() &&
            std::find_if(out.aliases.begin(), out.aliases.end(),
                         [&](const auto &x) {
                           return x.first == a->name()->str();
                         }) == out.aliases.end())
          out.aliases.push_back({a->name()->str(), a->of()->str()});
    lower.insert(mine.begin(), mine.end());
  }
  out.state = std::move(lower);
  return out;
}

} // namespace dsc::rt
