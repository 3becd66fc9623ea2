//===- Contracts.h - what one pass tells the next, by name -------*- C++
//-*-===//
//
// Passes talk through explicit marks, never by recognising the shape of
// each other's output. Each mark is a unit attribute in the `ds` namespace,
// set by the pass that creates the op and read, and checked, by the passes
// after it:
//
//   ds.grad_accumulation   on a ds.store in @micro_step that adds this
//                          micro-step's gradient into its accumulator:
//                            %acc = ds.load @p.grad
//                            %sum = ds.add %acc, %d      (one use)
//                            ds.store %sum, @p.grad {ds.grad_accumulation}
//                          Set by ds-autodiff (and by ds-zero for the
//                          sharded accumulators it makes); read by ds-zero
//                          (which reduces %d) and by precision and remat.
//   ds.global_grad_norm    on the ds.sqrt in @apply whose result is the
//                          L2 norm over every gradient accumulator (its
//                          operand: the sum of their squares). Set by
//                          ds-adamw; ds-zero replaces the operand with the
//                          all-reduced sums of the shards; the loss scaler
//                          reads it for its overflow check.
//   ds.loss_seed           on the ds.constant in @micro_step that seeds the
//                          reverse pass (d loss / d loss, 1/(A N)). Set by
//                          ds-autodiff; ds-precision multiplies it by the
//                          loss scale; ds-remat splits @micro_step there
//                          into the forward and the backward.
//   ds.recompute           on an op of @micro_step's backward that
//                          recomputes a forward value instead of reading a
//                          kept one. Set by ds-remat; ds-fuse fuses only
//                          pairs that agree on it (so a recomputation is
//                          never pulled back into the forward) and keeps it
//                          on the fused op; plan lowering sums its FLOPs
//                          for --report.
//
//   ds.decay               on a parameter's ds.variable: whether it is in
//                          the weight-decay group. Set by ds-adamw only when
//                          the groups are given (decay-all, no-decay:
//                          dsc.initialize's parameter groups); without it
//                          the group is takesWeightDecay's (rank >= 2).
//                          Read through inDecayGroup by ds-adamw, ds-zero's
//                          stage-1 groups and plan layout's packing order.
//   ds.attention_heads     on a parameter's ds.variable: the attention heads
//                          its rows are blocked into (a query, key or value
//                          projection, [heads * head_dim, hidden]). Set by
//                          the torch exporter from the model's config (a
//                          fact of the model, whatever the optimizer); read
//                          by ds-adamw under per-head-muon, which copies it
//                          into ds.muon's `heads`.
//
// Optimizer state needs no mark: ds.adamw names its parameter, moments and
// gradient as operands, and the moments are `opt_state` variables `of`
// their parameter.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_DIALECTS_DS_CONTRACTS_H
#define DSC_DIALECTS_DS_CONTRACTS_H

#include "dialects/ds/DsOps.h"
#include "dialects/ds/DsUtils.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/SmallVector.h"

namespace mlir::ds {

// The marks are the dialect's discardable attributes (DsBase.td).
constexpr llvm::StringLiteral kGradAccumulationAttr =
    DSDialect::GradAccumulationAttrHelper::getNameStr();
constexpr llvm::StringLiteral kGlobalGradNormAttr =
    DSDialect::GlobalGradNormAttrHelper::getNameStr();
constexpr llvm::StringLiteral kLossSeedAttr =
    DSDialect::LossSeedAttrHelper::getNameStr();
constexpr llvm::StringLiteral kRecomputeAttr =
    DSDialect::RecomputeAttrHelper::getNameStr();

// Attributes that carry a value past the passes rather than a contract
// between them: ds.remat, the policy ds-remat applied (a string on the
// module, for --report); ds.aliases, the torch exporter's tied state-dict
// names (a dictionary alias -> parameter on the module, which plan
// lowering copies into the plan); ds.name, on an argument of @apply or
// @micro_step, what the runtime feeds it ("lr", "step", "loss_scale").
constexpr llvm::StringLiteral kRematAttr =
    DSDialect::RematAttrHelper::getNameStr();
constexpr llvm::StringLiteral kAliasesAttr =
    DSDialect::AliasesAttrHelper::getNameStr();
constexpr llvm::StringLiteral kArgNameAttr =
    DSDialect::NameAttrHelper::getNameStr();
constexpr llvm::StringLiteral kDecayAttr =
    DSDialect::DecayAttrHelper::getNameStr();
constexpr llvm::StringLiteral kAttentionHeadsAttr =
    DSDialect::AttentionHeadsAttrHelper::getNameStr();

/// Whether parameter `param` is in the weight-decay group (ds.decay).
inline bool inDecayGroup(VariableOp param) {
  if (auto decay = param->getAttrOfType<BoolAttr>(kDecayAttr))
    return decay.getValue();
  return takesWeightDecay(param.getTensorType());
}

/// Whether `op` recomputes a forward value (ds.recompute).
inline bool isRecompute(Operation *op) { return op->hasAttr(kRecomputeAttr); }

/// One gradient accumulation of the ds.grad_accumulation contract.
struct GradAccumulation {
  LoadOp load;
  AddOp add;
  StoreOp store;
  Value grad; ///< %d, this micro-step's gradient
};

/// Marks `store` as a gradient accumulation.
inline void markGradAccumulation(StoreOp store) {
  store->setAttr(kGradAccumulationAttr, UnitAttr::get(store.getContext()));
}

/// The marked accumulations of `func` in program order, each checked to
/// have the contract's form; an error at the first that does not.
FailureOr<SmallVector<GradAccumulation>>
findGradAccumulations(func::FuncOp func, StringRef pass);

/// Marks `sqrt` as the global gradient norm.
inline void markGlobalGradNorm(SqrtOp sqrt) {
  sqrt->setAttr(kGlobalGradNormAttr, UnitAttr::get(sqrt.getContext()));
}

/// The one op of `apply` marked as the global gradient norm; an error when
/// there is none or more than one.
FailureOr<SqrtOp> findGlobalGradNorm(func::FuncOp apply, StringRef pass);

/// Marks `seed` as the reverse pass's seed.
inline void markLossSeed(ConstantOp seed) {
  seed->setAttr(kLossSeedAttr, UnitAttr::get(seed.getContext()));
}

/// The one constant of `func` marked as the loss seed; an error when there
/// is none or more than one.
FailureOr<ConstantOp> findLossSeed(func::FuncOp func, StringRef pass);

} // namespace mlir::ds

#endif // DSC_DIALECTS_DS_CONTRACTS_H
