//===- BenchTensor.h - an f32 tensor that owns its storage ------*- C++ -*-===//
//
// For the kernel benchmarks, which call the CPU kernel table directly.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_BENCH_BENCHTENSOR_H
#define DSC_BENCH_BENCHTENSOR_H

#include "runtime/kernels/Kernel.h"

#include <cstdint>
#include <vector>

namespace dsc::bench {

struct Tensor {
  std::vector<int64_t> shape;
  std::vector<float> data;
  rt::TensorRef ref() {
    rt::TensorRef r;
    r.data = data.data();
    r.dtype = DType::f32;
    r.shape = shape.data();
    r.rank = int(shape.size());
    return r;
  }
};

} // namespace dsc::bench

#endif // DSC_BENCH_BENCHTENSOR_H
