//===- DType.h - the element types of dsc's tensors -------------*- C++ -*-===//
//
// One enum for the compiler's plan model, the kernel ABI, the reference
// kernels and the interpreter's rounding, with the values of dsc.plan.DType
// in runtime/schema/plan.fbs (the runtime checks that with a static_assert
// where both are visible). Header-only, standard library only.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_CORE_DTYPE_H
#define DSC_RUNTIME_CORE_DTYPE_H

#include <cstddef>
#include <cstdint>

namespace dsc {

enum class DType : uint8_t {
  f32 = 0,
  f16 = 1,
  bf16 = 2,
  f64 = 3,
  i32 = 4,
  i64 = 5
};

/// Bytes per element; 0 for a value outside the enum.
constexpr size_t dtypeSize(DType t) {
  switch (t) {
  case DType::f32:
  case DType::i32:
    return 4;
  case DType::f16:
  case DType::bf16:
    return 2;
  case DType::f64:
  case DType::i64:
    return 8;
  }
  return 0;
}

/// "f32", "bf16", ...; "unknown" for a value outside the enum.
constexpr const char *dtypeName(DType t) {
  switch (t) {
  case DType::f32:
    return "f32";
  case DType::f16:
    return "f16";
  case DType::bf16:
    return "bf16";
  case DType::f64:
    return "f64";
  case DType::i32:
    return "i32";
  case DType::i64:
    return "i64";
  }
  return "unknown";
}

constexpr bool isFloat(DType t) {
  return t == DType::f32 || t == DType::f16 || t == DType::bf16 ||
         t == DType::f64;
}

} // namespace dsc

#endif // DSC_RUNTIME_CORE_DTYPE_H
