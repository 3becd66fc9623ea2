//===- VariableNames.h - how state variables are named ----------*- C++ -*-===//
//
// The state a parameter or a ZeRO group owns is named after its owner plus
// a suffix: the passes that create it compose the name, and the passes,
// the plan lowering and the runtime that look for it (a parameter's master
// weight, the gradient accumulators) match it. Each suffix is declared here
// once. The names reach the plan and checkpoints, so changing one changes
// both. Header-only, standard library only (the runtime's MLIR-free build
// includes it); llvm::StringRef converts from std::string_view.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_PLAN_VARIABLENAMES_H
#define DSC_RUNTIME_PLAN_VARIABLENAMES_H

#include <string>
#include <string_view>

namespace dsc::plan {

/// P.grad: parameter P's gradient accumulator (ds-autodiff).
constexpr std::string_view kGradSuffix = ".grad";
/// P.exp_avg, P.exp_avg_sq: Adam's first and second moments of P
/// (ds-adamw), or of a ZeRO group's shard (ds-zero, stages 1-3).
constexpr std::string_view kExpAvgSuffix = ".exp_avg";
constexpr std::string_view kExpAvgSqSuffix = ".exp_avg_sq";
/// P.momentum_buffer: SGD's momentum of P (PyTorch's state name), or of
/// a ZeRO group's shard. Lion's one moment is P.exp_avg.
constexpr std::string_view kMomentumBufferSuffix = ".momentum_buffer";
/// P.sum: Adagrad's sum of squared gradients of P (PyTorch's name), or of
/// a ZeRO group's shard.
constexpr std::string_view kSumSuffix = ".sum";
/// P.master: the fp32 master weight of a 16-bit parameter (ds-precision),
/// or of a ZeRO group's shard. dsrun saves and loads weights from it.
constexpr std::string_view kMasterSuffix = ".master";
/// G.param: stage 3's shard of ZeRO group G's parameters (ds-zero).
constexpr std::string_view kParamShardSuffix = ".param";
/// G.grad_padding: the zeros that pad group G's flat gradient to a multiple
/// of the world size (plan lowering).
constexpr std::string_view kGradPaddingSuffix = ".grad_padding";

/// `owner` + `suffix`, e.g. stateName("wte.weight", kGradSuffix).
inline std::string stateName(std::string_view owner, std::string_view suffix) {
  std::string name(owner);
  name += suffix;
  return name;
}

/// Whether `name` is some owner's `suffix` state.
constexpr bool hasStateSuffix(std::string_view name, std::string_view suffix) {
  return name.size() > suffix.size() &&
         name.substr(name.size() - suffix.size()) == suffix;
}

} // namespace dsc::plan

#endif // DSC_RUNTIME_PLAN_VARIABLENAMES_H
