//===- Bf16DotProducts.h - bf16 products on AVX512-BF16 ---------*- C++ -*-===//
//
// Internal to runtime/backends/cpu: the small bf16 GEMM of AmxTiles.h, with
// the same operands and padding, on AVX512-BF16's dot-product instruction
// (VDPBF16PS: each f32 lane adds the two products of a pair of bf16
// elements) for CPUs without AMX. The packed B operand is already in the
// pairs the instruction reads (row kk of the packing holds (B[2kk][n],
// B[2kk+1][n]) for every column n: 16 columns a 512-bit register), and A's
// pair (A[i][2kk], A[i][2kk+1]) is broadcast to every lane. Products of
// bf16 values are exact in f32; each element's sum runs over the pairs in
// order, each pair rounded into it once.
//
// Its functions are compiled for AVX512-BF16 whatever the build machine
// (target attributes); nothing here runs unless dotProductsUsable() said
// yes.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_BACKENDS_CPU_BF16DOTPRODUCTS_H
#define DSC_RUNTIME_BACKENDS_CPU_BF16DOTPRODUCTS_H

#include <cstdint>

namespace dsc::rt::cpu {

/// Whether this CPU has AVX512-BF16 (and the build's compiler its
/// intrinsics).
bool dotProductsUsable();

/// amxGemm's contract (AmxTiles.h): C [M x N] (f32, row stride ldc) = A B,
/// or C += A B with `accumulate`; A bf16 row-major [M x K] (row stride lda),
/// B packed [K / 2][ldb][2]; M and N multiples of 16, K of 32 (K of 2
/// suffices here). Only after dotProductsUsable().
void dotGemm(int64_t M, int64_t N, int64_t K, const uint16_t *A, int64_t lda,
             const uint16_t *packedB, int64_t ldb, float *C, int64_t ldc,
             bool accumulate);

/// A small bf16 GEMM with amxGemm's contract.
using Bf16Product = void (*)(int64_t M, int64_t N, int64_t K, const uint16_t *A,
                             int64_t lda, const uint16_t *packedB, int64_t ldb,
                             float *C, int64_t ldc, bool accumulate);

/// Whether AVX512-BF16's dot products beat f32 FMAs on this CPU: on an AMD
/// core with them (Zen 4 runs a 512-bit dot product, 32 multiply-adds, at
/// twice its f32 FMAs' rate: oneDNN's bf16 matmul 1.8-2.2x OpenBLAS's
/// sgemm), not on an Intel core (one a cycle against two FMAs: 0.55x on a
/// Xeon that showed no AMX; bench/RESULTS.md).
bool dotProductsPay();

/// The products 16-bit kernels run instead of widening to f32: AMX's tiles
/// where this process may use them, else the dot products where they pay,
/// else none (nullptr).
Bf16Product bf16Products();

} // namespace dsc::rt::cpu

#endif // DSC_RUNTIME_BACKENDS_CPU_BF16DOTPRODUCTS_H
