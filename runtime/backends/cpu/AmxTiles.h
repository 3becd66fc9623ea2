//===- AmxTiles.h - bf16 products on Intel AMX tiles ------------*- C++ -*-===//
//
// Internal to runtime/backends/cpu: a small bf16 GEMM on AMX's tile
// registers (TDPBF16PS: a 16 x 32 bf16 tile times a 32 x 16 one, summed
// into a 16 x 16 f32 tile), for products too small for a library call to
// pay: attention's per-(batch, head) blocks (Attention.cpp), each a few
// hundred thousand multiply-adds, where oneDNN's per-call cost would
// dominate and OpenBLAS's sgemm on widened copies runs at a tenth of the
// tiles' rate. Operands are padded by the caller: M and N multiples of
// 16, K of 32, the B operand packed as the tiles read it (VNNI pairs: row
// kk of the packing holds (B[2kk][n], B[2kk+1][n]) for every column n).
// Products of bf16 values are exact in f32; the sums are f32 in the
// hardware's order.
//
// The file is compiled with -mamx-tile -mamx-bf16 (CMakeLists.txt); nothing
// here runs unless amxUsable() said yes.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_BACKENDS_CPU_AMXTILES_H
#define DSC_RUNTIME_BACKENDS_CPU_AMXTILES_H

#include <cstdint>

namespace dsc::rt::cpu {

/// Whether this CPU has AMX-BF16 and the kernel lets this process use the
/// tile registers (Linux grants them per process on request, asked once
/// here). False where the build's compiler had no AMX intrinsics.
bool amxUsable();

/// C [M x N] (f32, row stride ldc) = A B, or C += A B with `accumulate`.
/// A is bf16 bits, row-major [M x K] with row stride lda (elements); B is
/// packed [K / 2][ldb][2] (the first N of ldb >= N packed columns are B's,
/// so a product may take a prefix of a wider packing). M and N are
/// multiples of 16, K of 32. Only after amxUsable().
void amxGemm(int64_t M, int64_t N, int64_t K, const uint16_t *A, int64_t lda,
             const uint16_t *packedB, int64_t ldb, float *C, int64_t ldc,
             bool accumulate);

} // namespace dsc::rt::cpu

#endif // DSC_RUNTIME_BACKENDS_CPU_AMXTILES_H
