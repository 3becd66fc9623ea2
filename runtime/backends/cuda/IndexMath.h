//===- IndexMath.h - element offsets without 64-bit division ----*- C++ -*-===//
//
// A gather, scatter or broadcast kernel turns each flat output index into
// an offset per operand, dividing by every dim's extent. Done in 64 bits
// that is a division routine per dim per element: several times the cost
// of moving the element (a [B, T, H, D] transpose then runs near a tenth
// of the memory bandwidth). Where the index and every offset fit in 31
// bits, NarrowLayout divides with a multiply and a shift (Granlund and
// Montgomery's method for a divisor known before the launch) instead.
//
// Host and device code (one text; CudaHostLogicTest checks it against
// plain division without a GPU).
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_BACKENDS_CUDA_INDEXMATH_H
#define DSC_RUNTIME_BACKENDS_CUDA_INDEXMATH_H

#include "runtime/kernels/KernelChecks.h"

#include <cstdint>

#if defined(__CUDACC__)
#define DSC_INDEX_FN __host__ __device__ __forceinline__
#else
#define DSC_INDEX_FN inline
#endif

namespace dsc::rt::cuda {

/// n / d and n % d for 0 <= n < 2^31 and 1 <= d < 2^31.
struct FastDivmod {
  uint32_t d = 1, magic = 1, shift = 0;

  FastDivmod() = default;
  /// With shift = ceil(log2 d) and magic = 2^32 (2^shift - d) / d + 1,
  /// n / d = (mulhi(n, magic) + n) >> shift exactly for n < 2^31 (the sum
  /// cannot wrap: mulhi(n, magic) < n).
  explicit FastDivmod(uint32_t divisor) : d(divisor) {
    while ((uint64_t(1) << shift) < d)
      ++shift;
    magic =
        uint32_t((uint64_t(1) << 32) * ((uint64_t(1) << shift) - d) / d + 1);
  }
  DSC_INDEX_FN uint32_t div(uint32_t n) const {
#if defined(__CUDA_ARCH__)
    const uint32_t t = __umulhi(n, magic);
#else
    const uint32_t t = uint32_t((uint64_t(n) * magic) >> 32);
#endif
    return (t + n) >> shift;
  }
  DSC_INDEX_FN uint32_t mod(uint32_t n, uint32_t q) const { return n - q * d; }
};

/// A BroadcastLayout of up to two operands whose offsets all fit in 31
/// bits.
struct NarrowLayout {
  int rank = 1;
  FastDivmod dims[kMaxRank];
  uint32_t strides[2][kMaxRank] = {};

  /// Operand k's offsets (k < 2) of flat index i.
  DSC_INDEX_FN void offsets(uint32_t i, uint32_t &off0, uint32_t &off1) const {
    if (rank == 1) { // same shapes, or one operand a scalar
      off0 = i * strides[0][0];
      off1 = i * strides[1][0];
      return;
    }
    off0 = 0;
    off1 = 0;
    for (int d = rank - 1; d > 0; --d) {
      const uint32_t q = dims[d].div(i), idx = dims[d].mod(i, q);
      off0 += idx * strides[0][d];
      off1 += idx * strides[1][d];
      i = q;
    }
    off0 += i * strides[0][0]; // the outermost index needs no division
    off1 += i * strides[1][0];
  }
};

/// `l` as a NarrowLayout, or false when some index or offset of its
/// `total` elements would not fit in 31 bits (or a stride is negative).
inline bool narrowLayout(const BroadcastLayout &l, int64_t total,
                         NarrowLayout &n) {
  constexpr int64_t kLimit = int64_t(1) << 31;
  if (total >= kLimit || l.rank < 1 || l.rank > kMaxRank)
    return false;
  n.rank = l.rank;
  for (int k = 0; k < 2; ++k) {
    int64_t span = 0; // the largest offset
    for (int d = 0; d < l.rank; ++d) {
      if (l.strides[k][d] < 0 || l.shape[d] < 1 || l.shape[d] >= kLimit)
        return false;
      span += (l.shape[d] - 1) * l.strides[k][d];
      if (span >= kLimit)
        return false;
      n.strides[k][d] = uint32_t(l.strides[k][d]);
    }
  }
  for (int d = 0; d < l.rank; ++d)
    n.dims[d] = FastDivmod(uint32_t(l.shape[d]));
  return true;
}

} // namespace dsc::rt::cuda

#endif // DSC_RUNTIME_BACKENDS_CUDA_INDEXMATH_H
