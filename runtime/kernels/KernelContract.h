//===- KernelContract.h - each kernel's contract, from ODS -*- C++ -*-===//
//-*-===//
//
// What every backend implements for each kernel a plan can call: its name,
// arity, positional attributes, the aliasing it tolerates and the operand
// dtypes it must take, in columns (full width, 16-bit, 8-bit). The
// contracts are declared once, in ODS (dialects/ds/DsKernelContract.td and
// the `kernel` of each op in DsOps.td and DistOps.td), and generated into
// generated/KernelContracts.inc, which is checked in because the runtime
// builds without LLVM; the compiler build regenerates it and a test fails
// when the two differ.
//
// A backend uses the generated list DSC_FOR_EACH_KERNEL(X), X(Id, body) in
// KernelId order, to declare one body per kernel (`bool bodyBody(const
// KernelArgs &, std::string &)`) and to build its table; a backend that
// lacks a body does not link, and one whose table lacks a declared dtype
// column fails test/unit/conformance/KernelTableTest.cpp, which names it.
// Header-only, standard library only.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_KERNELS_KERNELCONTRACT_H
#define DSC_RUNTIME_KERNELS_KERNELCONTRACT_H

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace dsc::rt {

/// Which outputs may be exactly an input buffer.
enum class KernelAlias {
  None,     ///< outputs are disjoint from inputs
  AnyInput, ///< an output may be exactly any input (elementwise, row-wise)
  Update,   ///< an optimizer's p', states' may be p, states (inputs 0, 2..)
  /// As Update, for a rule that reads whole tensors (Lamb's trust ratio):
  /// one call per tensor, never merged over a flat range.
  TensorUpdate,
};

/// The dtype columns of a contract (DsKernelContract.td).
enum class KernelColumn {
  Full, ///< the operands' own width: f32, f64, integers, or dtype-generic
  Half, ///< f16/bf16 storage, f32 compute
  F8,   ///< 8-bit storage (no kernel declares one yet)
};
inline constexpr size_t kNumKernelColumns = 3;

inline constexpr std::string_view kernelColumnName(KernelColumn c) {
  return c == KernelColumn::Full   ? "full"
         : c == KernelColumn::Half ? "half"
                                   : "f8";
}

/// Dtype signatures (KernelSignature.h notation) of one column.
struct SignatureList {
  const std::string_view *data = nullptr;
  size_t size = 0;
  const std::string_view *begin() const { return data; }
  const std::string_view *end() const { return data + size; }
};

struct KernelContract {
  std::string_view name;
  /// Arity; -1 means any (an optional or variadic operand, or a
  /// rank-dependent attribute list).
  int numInputs, numOutputs, numIntAttrs, numFloatAttrs;
  KernelAlias alias;
  /// The operands' and attributes' names, comma-separated, for messages
  /// and documentation ("x, weight, bias?").
  std::string_view inputs, outputs, intAttrs, floatAttrs;
  SignatureList columns[kNumKernelColumns];

  SignatureList column(KernelColumn c) const { return columns[size_t(c)]; }
};

#include "runtime/kernels/generated/KernelContracts.inc"

inline const KernelContract &kernelContract(KernelId id) {
  return kKernelContracts[size_t(id)];
}

/// The contract of the kernel called `name`, or null.
inline const KernelContract *findKernelContract(std::string_view name) {
  for (const KernelContract &c : kKernelContracts)
    if (c.name == name)
      return &c;
  return nullptr;
}

} // namespace dsc::rt

#endif // DSC_RUNTIME_KERNELS_KERNELCONTRACT_H
