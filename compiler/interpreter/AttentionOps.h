//===- AttentionOps.h - interpreter: attention and rotary ---*- C++ -*-===//
//-*-===//
//
// Internal to the interpreter: ds.attention, ds.attention_grad and ds.rotary
// evaluated with the float64 reference kernels, including their seq_major
// ([B, T, H, D]) forms.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_COMPILER_INTERPRETER_ATTENTIONOPS_H
#define DSC_COMPILER_INTERPRETER_ATTENTIONOPS_H

#include "runtime/reference/RefKernels.h"

#include "llvm/ADT/ArrayRef.h"

#include <vector>

namespace mlir::ds {
class AttentionOp;
class AttentionGradOp;
class RotaryOp;
} // namespace mlir::ds

namespace dsc {

using RefTensors = ref::Result<std::vector<ref::Tensor>>;
using RefOperands = llvm::ArrayRef<const ref::Tensor *>;

RefTensors evaluateAttention(mlir::ds::AttentionOp op, RefOperands in);
RefTensors evaluateAttentionGrad(mlir::ds::AttentionGradOp op, RefOperands in);
RefTensors evaluateRotary(mlir::ds::RotaryOp op, RefOperands in);

} // namespace dsc

#endif // DSC_COMPILER_INTERPRETER_ATTENTIONOPS_H
