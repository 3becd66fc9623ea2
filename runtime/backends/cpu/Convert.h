//===- Convert.h - f16/bf16 <-> f32 over arrays -----------------*- C++ -*-===//
//
// Internal to runtime/backends/cpu: the conversions of mixed precision's
// widened kernels and casts. With AVX2 and F16C (checked once, at run time:
// the build targets plain x86-64) eight elements at a time, otherwise the
// scalar conversions of runtime/core/Half.h; both round to nearest even and
// give the same bits (NaNs stay NaN, quieted).
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_BACKENDS_CPU_CONVERT_H
#define DSC_RUNTIME_BACKENDS_CPU_CONVERT_H

#include "runtime/core/DType.h"

#include <cstdint>

namespace dsc::rt::cpu {

void f16ToF32(const uint16_t *in, float *out, int64_t n);
void f32ToF16(const float *in, uint16_t *out, int64_t n);
void bf16ToF32(const uint16_t *in, float *out, int64_t n);
void f32ToBf16(const float *in, uint16_t *out, int64_t n);

/// Elements [at, at + n) of `data`, f32, f16 or bf16 as `dtype` says, as
/// f32: a pointer into `data` for f32, else `wide` (n floats) filled. How
/// the kernels that take a 16-bit operand read it a chunk at a time.
const float *chunkAsF32(DType dtype, const void *data, int64_t at, int64_t n,
                        float *wide);

/// Whether the vector paths are in use on this CPU.
bool vectorConversions();

} // namespace dsc::rt::cpu

#endif // DSC_RUNTIME_BACKENDS_CPU_CONVERT_H
