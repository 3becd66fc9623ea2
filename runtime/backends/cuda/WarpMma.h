//===- WarpMma.h - tensor-core tile products, for device and host -*- C++
//-*-===//
//
// One warp multiplies a 16 x 16 tile of 16-bit A by a 16 x 8 tile of 16-bit
// B into a 16 x 8 f32 accumulator with mma.sync.m16n8k16 (sm_80 and up),
// both operands read from shared memory through strides, so one helper
// serves Q K^T, P V and the gradient's transposed products. Each lane holds
// four accumulator entries at the places the PTX ISA fixes for this shape
// (accumulatorAt), so a program may rescale or mask them by row.
//
// On the host (the tile programs' emulation, AttentionTiles.h) mmaTile
// gathers every lane's operand registers with the very code the device
// runs, puts each half back where the PTX layout says it belongs (counting
// any element placed twice or never: layoutFaults), multiplies in f32 and
// gives the lane its entries. So the gather is tested against the layout
// without a GPU; the layout itself is the PTX ISA's ("Matrix Fragments for
// mma.m16n8k16 with floating point type").
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_BACKENDS_CUDA_WARPMMA_H
#define DSC_RUNTIME_BACKENDS_CUDA_WARPMMA_H

#include "runtime/backends/cuda/AttentionTiles.h"

#include <cstdint>
#if !defined(__CUDA_ARCH__)
#include <array>
#include <map>
#endif

// Under nvcc the conversions are CUDA's (host and device); a plain C++
// compile (the emulation's tests) uses dsc's.
#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#else
#include "runtime/core/Half.h"
#endif

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#error "WarpMma.h: mma.sync.m16n8k16 with bf16 needs sm_80 or newer"
#endif

namespace dsc::rt::cuda::tiles {

/// 16-bit bits to float and back (round to nearest even), bf16 or f16.
template <bool kBF16> DSC_TILE_FN float from16(uint16_t h) {
#if defined(__CUDACC__)
  if constexpr (kBF16)
    return __bfloat162float(__ushort_as_bfloat16(h));
  else
    return __half2float(__ushort_as_half(h));
#else
  return kBF16 ? bf16ToFloat(h) : f16ToFloat(h);
#endif
}
template <bool kBF16> DSC_TILE_FN uint16_t to16(float f) {
#if defined(__CUDACC__)
  if constexpr (kBF16)
    return __bfloat16_as_ushort(__float2bfloat16_rn(f));
  else
    return __half_as_ushort(__float2half_rn(f));
#else
  return kBF16 ? floatToBf16(f) : floatToF16(f);
#endif
}

/// The accumulator element lane's register i (0..3) holds: rows g and
/// g + 8, columns 2c and 2c + 1, for g = lane / 4 and c = lane % 4.
DSC_TILE_FN void accumulatorAt(int lane, int i, int &row, int &col) {
  row = lane / 4 + (i >= 2 ? 8 : 0);
  col = 2 * (lane % 4) + (i & 1);
}

DSC_TILE_FN uint32_t pack(uint16_t lo, uint16_t hi) {
  return uint32_t(lo) | uint32_t(hi) << 16;
}

/// Lane's A registers for A(i, k) = a[i * ai + k * ak]: register r holds
/// row g + 8 (r & 1), columns 2c + 8 (r >> 1) and the next (low half
/// first).
DSC_TILE_FN void gatherA(const uint16_t *a, int ai, int ak, int lane,
                         uint32_t (&r)[4]) {
  const int g = lane / 4, c = 2 * (lane % 4);
  for (int n = 0; n < 4; ++n) {
    const int row = g + 8 * (n & 1), col = c + 8 * (n >> 1);
    r[n] = pack(a[row * ai + col * ak], a[row * ai + (col + 1) * ak]);
  }
}

/// Lane's B registers for B(k, n) = b[k * bk + n * bn]: register r holds
/// column g, rows 2c + 8 r and the next.
DSC_TILE_FN void gatherB(const uint16_t *b, int bk, int bn, int lane,
                         uint32_t (&r)[2]) {
  const int g = lane / 4, c = 2 * (lane % 4);
  for (int n = 0; n < 2; ++n) {
    const int k = c + 8 * n;
    r[n] = pack(b[k * bk + g * bn], b[(k + 1) * bk + g * bn]);
  }
}

#if !defined(__CUDA_ARCH__)
/// Host emulation: operand elements the gather placed other than once.
inline int &layoutFaults() {
  static int faults = 0;
  return faults;
}

/// Host emulation: the products computed in the running phase, by operand
/// addresses and strides (the 32 lanes of a warp ask for each).
struct EmulatedProducts {
  uint64_t phase = ~uint64_t(0);
  std::map<std::array<intptr_t, 6>, std::array<float, 128>> byOperands;
};
inline EmulatedProducts &emulatedProducts() {
  static EmulatedProducts memo;
  return memo;
}

/// The 16 x 8 product A B as every lane's gather delivers it.
template <bool kBF16>
std::array<float, 128> emulatedProduct(const uint16_t *a, int ai, int ak,
                                       const uint16_t *b, int bk, int bn) {
  EmulatedProducts &memo = emulatedProducts();
  if (memo.phase != emulatedPhase()) {
    memo.phase = emulatedPhase();
    memo.byOperands.clear();
  }
  const std::array<intptr_t, 6> key = {intptr_t(a), ai, ak,
                                       intptr_t(b), bk, bn};
  auto found = memo.byOperands.find(key);
  if (found != memo.byOperands.end())
    return found->second;
  // Every lane's registers, put back where the layout says.
  float A[16][16], B[16][8];
  int seenA[16][16] = {}, seenB[16][8] = {};
  for (int l = 0; l < 32; ++l) {
    uint32_t ra[4], rb[2];
    gatherA(a, ai, ak, l, ra);
    gatherB(b, bk, bn, l, rb);
    const int g = l / 4, c = 2 * (l % 4);
    for (int n = 0; n < 4; ++n)
      for (int h = 0; h < 2; ++h) {
        const int row = g + 8 * (n & 1), col = c + h + 8 * (n >> 1);
        A[row][col] = from16<kBF16>(uint16_t(ra[n] >> (16 * h)));
        ++seenA[row][col];
      }
    for (int n = 0; n < 2; ++n)
      for (int h = 0; h < 2; ++h) {
        const int k = c + h + 8 * n;
        B[k][g] = from16<kBF16>(uint16_t(rb[n] >> (16 * h)));
        ++seenB[k][g];
      }
  }
  for (int k = 0; k < 16; ++k) {
    for (int i = 0; i < 16; ++i)
      layoutFaults() += seenA[i][k] != 1;
    for (int n = 0; n < 8; ++n)
      layoutFaults() += seenB[k][n] != 1;
  }
  std::array<float, 128> product;
  for (int i = 0; i < 16; ++i)
    for (int n = 0; n < 8; ++n) {
      float sum = 0;
      for (int k = 0; k < 16; ++k)
        sum += A[i][k] * B[k][n];
      product[size_t(i * 8 + n)] = sum;
    }
  memo.byOperands.emplace(key, product);
  return product;
}
#endif

#if defined(__CUDA_ARCH__)
/// ldmatrix: four (X4) or two 8 x 8 matrices of 16-bit elements whose rows
/// are 16 contiguous bytes at the addresses lanes 8 m .. 8 m + 7 give for
/// matrix m; register m of lane l receives row l / 4, elements 2 (l % 4)
/// and the next of matrix m (transposed first with kTrans).
template <bool kTrans>
__device__ __forceinline__ void ldmatrixX4(const uint16_t *row,
                                           uint32_t (&r)[4]) {
  const uint32_t at = uint32_t(__cvta_generic_to_shared(row));
  if constexpr (kTrans)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 "
                 "{%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(at));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 "
                 "{%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(at));
}
template <bool kTrans>
__device__ __forceinline__ void ldmatrixX2(const uint16_t *row,
                                           uint32_t (&r)[2]) {
  const uint32_t at = uint32_t(__cvta_generic_to_shared(row));
  if constexpr (kTrans)
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 "
                 "{%0, %1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"(at));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"(at));
}

/// Whether rows starting at p, stride elements apart, are 16-byte aligned.
__device__ __forceinline__ bool rowsAligned(const uint16_t *p, int stride) {
  return ((reinterpret_cast<uintptr_t>(p) | uintptr_t(stride) * 2) & 15) == 0;
}

/// gatherA's registers in one ldmatrix where A is row- or column-major
/// with aligned rows (every product of the attention programs): matrix m
/// is A's rows 8 (m & 1).., columns 8 (m >> 1)..; else gatherA.
__device__ __forceinline__ void loadA(const uint16_t *a, int ai, int ak,
                                      int lane, uint32_t (&r)[4]) {
  const int m = lane / 8, i0 = 8 * (m & 1), k0 = 8 * (m >> 1), row = lane % 8;
  if (ak == 1 && rowsAligned(a, ai))
    ldmatrixX4<false>(a + (i0 + row) * ai + k0, r);
  else if (ai == 1 && rowsAligned(a, ak)) // stored rows are A's columns
    ldmatrixX4<true>(a + i0 + (k0 + row) * ak, r);
  else
    gatherA(a, ai, ak, lane, r);
}

/// gatherB's registers in one ldmatrix (x2: lanes 0-15 give the rows,
/// matrix m being B's rows 8 m..), or gatherB.
__device__ __forceinline__ void loadB(const uint16_t *b, int bk, int bn,
                                      int lane, uint32_t (&r)[2]) {
  const int l = lane % 16; // lanes 16-31 repeat 0-15 (their rows unread)
  if (bk == 1 && rowsAligned(b, bn)) // stored rows are B's columns
    ldmatrixX2<false>(b + (l % 8) * bn + 8 * (l / 8), r);
  else if (bn == 1 && rowsAligned(b, bk))
    ldmatrixX2<true>(b + l * bk, r);
  else
    gatherB(b, bk, bn, lane, r);
}
#endif

/// A's registers for mma.m16n8k16, loaded once and multiplied with many B
/// tiles (a warp's P row block against every column tile of V, say), which
/// saves the shared-memory reads of loading A again per product. On the
/// host it keeps where A is: the emulated product reads it at the
/// multiply, the same bits as long as nothing writes A in between (within a
/// phase nothing may).
struct FragmentA {
#if defined(__CUDA_ARCH__)
  uint32_t r[4];
#else
  const uint16_t *a = nullptr;
  int ai = 0, ak = 0;
#endif
  /// A(i, k) = a[i * ai + k * ak], 16 x 16; every lane of the warp calls it.
  DSC_TILE_FN void load(const uint16_t *from, int i, int k, int lane) {
#if defined(__CUDA_ARCH__)
    loadA(from, i, k, lane, r);
#else
    (void)lane;
    a = from;
    ai = i;
    ak = k;
#endif
  }
};

/// acc += A B for A already loaded (FragmentA) and B 16 x 8, 16-bit in
/// shared memory, B(k, n) = b[k * bk + n * bn]; every lane of the warp
/// calls it together.
template <bool kBF16>
DSC_TILE_FN void mmaFragment(float (&acc)[4], const FragmentA &fa,
                             const uint16_t *b, int bk, int bn, int lane) {
#if defined(__CUDA_ARCH__)
  uint32_t rb[2];
  loadB(b, bk, bn, lane, rb);
  float d[4];
  if constexpr (kBF16)
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%10, %11, %12, %13};\n"
                 : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
                 : "r"(fa.r[0]), "r"(fa.r[1]), "r"(fa.r[2]), "r"(fa.r[3]),
                   "r"(rb[0]), "r"(rb[1]), "f"(acc[0]), "f"(acc[1]),
                   "f"(acc[2]), "f"(acc[3]));
  else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%10, %11, %12, %13};\n"
                 : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
                 : "r"(fa.r[0]), "r"(fa.r[1]), "r"(fa.r[2]), "r"(fa.r[3]),
                   "r"(rb[0]), "r"(rb[1]), "f"(acc[0]), "f"(acc[1]),
                   "f"(acc[2]), "f"(acc[3]));
  for (int i = 0; i < 4; ++i)
    acc[i] = d[i];
#else
  const std::array<float, 128> product =
      emulatedProduct<kBF16>(fa.a, fa.ai, fa.ak, b, bk, bn);
  for (int i = 0; i < 4; ++i) {
    int row, col;
    accumulatorAt(lane, i, row, col);
    acc[i] += product[size_t(row * 8 + col)];
  }
#endif
}

/// acc += A B (A 16 x 16, B 16 x 8, both 16-bit in shared memory) for the
/// lane's four entries; every lane of the warp calls it together. On the
/// device the operands come by ldmatrix where their rows allow (the
/// registers gatherA and gatherB would fill, which the host emulation
/// checks against the PTX layout).
template <bool kBF16>
DSC_TILE_FN void mmaTile(float (&acc)[4], const uint16_t *a, int ai, int ak,
                         const uint16_t *b, int bk, int bn, int lane) {
  FragmentA fa;
  fa.load(a, ai, ak, lane);
  mmaFragment<kBF16>(acc, fa, b, bk, bn, lane);
}

} // namespace dsc::rt::cuda::tiles

#endif // DSC_RUNTIME_BACKENDS_CUDA_WARPMMA_H
