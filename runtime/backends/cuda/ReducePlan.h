//===- ReducePlan.h - how a CUDA reduction walks its input ------*- C++ -*-===//
//
// Host-only and pure, so CudaHostLogicTest checks the choice without a GPU.
// A reduction has outN outputs of `count` elements each. The walk keeps
// loads coalesced and the GPU busy (an H100 holds about 2^18 threads):
//
//   kBlocks   a block per output, for row sums (the innermost dim reduced:
//             a block's threads read neighbouring elements);
//   kSlices   a few huge row sums (a gradient norm's sum of squares): each
//             output cut into `parts` slices, a block per slice;
//   kColumns  column sums (the innermost dim kept: a bias gradient over
//             B*T rows): a thread per output per part, each output's rows
//             cut into `parts` ranges so that enough threads run;
//   kThreads  a thread per output: small reductions, or enough outputs to
//             fill the GPU on their own.
//
// Sliced walks write double partials to scratch and combine them in part
// order, so every order is fixed by the shapes.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_BACKENDS_CUDA_REDUCEPLAN_H
#define DSC_RUNTIME_BACKENDS_CUDA_REDUCEPLAN_H

#include <cstddef>
#include <cstdint>

namespace dsc::rt::cuda {

struct ReducePlan {
  enum Walk { kThreads, kBlocks, kSlices, kColumns } walk = kThreads;
  int64_t parts = 1;  ///< kSlices, kColumns: pieces of each output
  int threads = 256;  ///< threads per block
  int64_t blocks = 1; ///< blocks of the (first) launch
  size_t scratch = 0; ///< bytes of double partials
};

/// Merges dims d-1 and d of a row-major walk (element strides) wherever
/// dim d-1's stride is dim d's extent times its stride: one index then
/// visits the same offsets in the same order, with fewer divisions.
inline void mergeWalkDims(int &rank, int64_t *shape, int64_t *stride) {
  int n = 0;
  for (int d = 0; d < rank; ++d) {
    if (n > 0 && stride[n - 1] == shape[d] * stride[d]) {
      shape[n - 1] *= shape[d];
      stride[n - 1] = stride[d];
      continue;
    }
    shape[n] = shape[d];
    stride[n++] = stride[d];
  }
  rank = n;
}

/// The walk for outN outputs of `count` elements (both > 0); innermost
/// says whether x's innermost dim is reduced; scratchBytes bounds the
/// partials.
inline ReducePlan planReduce(int64_t outN, int64_t count, bool innermost,
                             size_t scratchBytes) {
  constexpr int64_t kBusyThreads = int64_t(1) << 18;
  constexpr int64_t kMaxBlocks = int64_t(1) << 20;
  auto ceilDiv = [](int64_t a, int64_t b) { return (a + b - 1) / b; };
  ReducePlan p;
  if (innermost) {
    constexpr int64_t kSlice = 16384; // 64 elements per thread
    if (outN <= 64 && count >= 4 * kSlice) {
      p.walk = ReducePlan::kSlices;
      p.parts = ceilDiv(count, kSlice) < 1024 ? ceilDiv(count, kSlice) : 1024;
      p.blocks = outN * p.parts;
      p.scratch = size_t(p.blocks) * sizeof(double);
      return p;
    }
    if (count >= 256) {
      p.walk = ReducePlan::kBlocks;
      p.blocks = outN < kMaxBlocks ? outN : kMaxBlocks;
      return p;
    }
  } else if (count >= 128) {
    // Enough parts to fill the GPU, each at least 64 rows long, and no more
    // partials than the scratch holds.
    int64_t parts = ceilDiv(kBusyThreads, outN);
    if (parts > count / 64)
      parts = count / 64;
    const int64_t fit = int64_t(scratchBytes / sizeof(double)) / outN;
    if (parts > fit)
      parts = fit;
    if (parts >= 2) {
      p.walk = ReducePlan::kColumns;
      p.parts = parts;
      p.threads = outN < 256 ? int((outN + 31) / 32 * 32) : 256;
      p.blocks = ceilDiv(outN, p.threads) * parts;
      p.scratch = size_t(outN * parts) * sizeof(double);
      return p;
    }
  }
  p.blocks = ceilDiv(outN, p.threads) < kMaxBlocks ? ceilDiv(outN, p.threads)
                                                   : kMaxBlocks;
  return p;
}

} // namespace dsc::rt::cuda

#endif // DSC_RUNTIME_BACKENDS_CUDA_REDUCEPLAN_H
