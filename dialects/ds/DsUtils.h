//===- DsUtils.h - shape helpers shared by inference and VJPs ---*- C++ -*-===//
#ifndef DSC_DIALECTS_DS_DSUTILS_H
#define DSC_DIALECTS_DS_DSUTILS_H

#include "runtime/core/DType.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/SmallVector.h"

#include <optional>
#include <string>

namespace mlir::ds {

/// v's ranked tensor type; null for any other type.
inline RankedTensorType tensorOf(Value v) {
  return dyn_cast<RankedTensorType>(v.getType());
}

/// numpy broadcast of two shapes; std::nullopt when incompatible.
std::optional<SmallVector<int64_t>> broadcastShapes(ArrayRef<int64_t> a,
                                                    ArrayRef<int64_t> b);

/// ds.matmul's result type for these operands and flags, or failure with
/// `why` (ds.matmul_bias and ds.matmul_bias_gelu share it).
FailureOr<RankedTensorType> inferMatmulType(Value lhs, Value rhs,
                                            bool transposeLhs,
                                            bool transposeRhs,
                                            std::string &why);

/// "4x3x?": the way MLIR prints a shape, for error messages.
std::string shapeStr(ArrayRef<int64_t> shape);

/// Sums `grad` (shaped like a broadcast result) down to `target`'s shape:
/// the VJP of numpy broadcasting.
Value sumToShape(OpBuilder &b, Location loc, Value grad, ShapedType target);

/// Where attention's operands keep their heads and their positions:
/// [B, H, T, D] (heads 1, seq 2), or [B, T, H, D] with seq_major.
struct AttentionAxes {
  int64_t heads, seq;
};
inline AttentionAxes attentionAxes(bool seqMajor) {
  return seqMajor ? AttentionAxes{2, 1} : AttentionAxes{1, 2};
}

/// Whether op is a ds.attention, ds.attention_grad or ds.rotary in the
/// seq_major ([B, T, H, D]) layout.
bool isSeqMajor(Operation *op);

/// The inverse of a permutation.
SmallVector<int64_t> invertPermutation(ArrayRef<int64_t> perm);

/// Whether AdamW decays a parameter of this type: nanoGPT's grouping (and
/// most trainers'), matrices and embeddings yes, biases and norm gains no.
/// The one place the rule lives; ds-adamw writes it into each update's
/// weight_decay, and plan layout packs the decayed parameters first.
inline bool takesWeightDecay(ShapedType param) { return param.getRank() >= 2; }

/// The dsc::DType of an element type (runtime/core/DType.h, shared with the
/// runtime and the plan); std::nullopt for a type dsc has no dtype for.
inline std::optional<dsc::DType> dtypeOfElement(Type t) {
  if (t.isF32())
    return dsc::DType::f32;
  if (t.isF16())
    return dsc::DType::f16;
  if (t.isBF16())
    return dsc::DType::bf16;
  if (t.isF64())
    return dsc::DType::f64;
  if (t.isInteger(32))
    return dsc::DType::i32;
  if (t.isInteger(64))
    return dsc::DType::i64;
  return std::nullopt;
}

/// A splat constant of `type` holding `value`.
Value splat(OpBuilder &b, Location loc, RankedTensorType type, double value);

} // namespace mlir::ds

#endif // DSC_DIALECTS_DS_DSUTILS_H
