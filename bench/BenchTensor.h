//===- BenchTensor.h - a tensor that owns its storage -----------*- C++ -*-===//
//
// For the kernel benchmarks, which call the CPU kernel table directly; f32,
// or bf16 for the 16-bit variants.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_BENCH_BENCHTENSOR_H
#define DSC_BENCH_BENCHTENSOR_H

#include "runtime/kernels/Kernel.h"

#include <cstdint>
#include <cstring>
#include <vector>

namespace dsc::bench {

struct Tensor {
  std::vector<int64_t> shape;
  std::vector<float> data;
  /// bf16 storage instead (see asBf16), when not empty.
  std::vector<uint16_t> bf16;
  rt::TensorRef ref() {
    rt::TensorRef r;
    r.data = bf16.empty() ? static_cast<void *>(data.data()) : bf16.data();
    r.dtype = bf16.empty() ? DType::f32 : DType::bf16;
    r.shape = shape.data();
    r.rank = int(shape.size());
    return r;
  }
};

/// The same values rounded to bf16 (nearest even), stored as bf16.
inline Tensor asBf16(const Tensor &t) {
  Tensor b{t.shape, {}, {}};
  b.bf16.resize(t.data.size());
  for (size_t i = 0; i < t.data.size(); ++i) {
    uint32_t u;
    std::memcpy(&u, &t.data[i], 4);
    b.bf16[i] = uint16_t((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
  }
  return b;
}

} // namespace dsc::bench

#endif // DSC_BENCH_BENCHTENSOR_H
