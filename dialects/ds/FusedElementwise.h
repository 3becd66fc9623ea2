//===- FusedElementwise.h - what a ds.fused_elementwise body holds -*- C++
//-*-===//
//
// The ops a fused elementwise group may contain and how each is written in
// its program (runtime/kernels/FusedProgram.h): shared by the verifier, the
// kernel-attribute encoding and phase fused's grouping pass.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_DIALECTS_DS_FUSEDELEMENTWISE_H
#define DSC_DIALECTS_DS_FUSEDELEMENTWISE_H

#include "runtime/kernels/FusedProgram.h"

#include "mlir/IR/Operation.h"

#include <optional>

namespace mlir::ds {

/// The instruction that computes `op` per element, or nullopt when `op`
/// is not an elementwise op a group can hold (its operand and result
/// shapes are not checked here).
std::optional<dsc::rt::fused::Opcode> fusedOpcodeOf(Operation *op);

/// The rounding of a value of `type` inside a group, or nullopt for an
/// element type a program does not hold (f64, integers).
std::optional<dsc::rt::fused::Rounding> fusedRoundingOf(Type type);

/// Whether `op` is a sum a group of `groupShape` can end in: a
/// ds.reduce_sum without keepdim over the leading dims [0, k), k >= 1, of
/// an operand of the group's shape, its result of a type a program holds
/// (runtime/kernels/FusedProgram.h's ReduceSum).
bool isFusedSum(Operation *op, ArrayRef<int64_t> groupShape);

/// Whether `shape` can be a group input of a group of `groupShape`: the
/// same, or its trailing dims (broadcast along the leading ones).
bool isFusedInputShape(ArrayRef<int64_t> shape, ArrayRef<int64_t> groupShape);

} // namespace mlir::ds

#endif // DSC_DIALECTS_DS_FUSEDELEMENTWISE_H
