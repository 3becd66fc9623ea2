//===- Kernel.cpp - the kernel ABI: dtype helpers -------------------------===//

#include "runtime/kernels/Kernel.h"

namespace dsc::rt {

size_t dtypeSize(DType t) {
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

const char *dtypeName(DType t) {
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

} // namespace dsc::rt
