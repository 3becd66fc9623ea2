//===- AttentionBf16.h - bf16 attention on bf16 products ---------*- C++
//-*-===//
//
// Internal to runtime/backends/cpu: Attention.cpp's 16-bit column hands a
// call whose operands are all bf16 to these where bf16ProductsRunAttention says
// so (AttentionBf16.cpp explains the arithmetic and how it differs from the
// widened kernel).
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_BACKENDS_CPU_ATTENTIONBF16_H
#define DSC_RUNTIME_BACKENDS_CPU_ATTENTIONBF16_H

#include "runtime/kernels/Kernel.h"
#include "runtime/kernels/KernelChecks.h"

#include <cstddef>

namespace dsc::rt::cpu {

/// Whether the first `bf16Inputs` inputs (q, k, v; and g for the gradient)
/// are bf16, this CPU has bf16 products that pay (bf16Products) and
/// DSC_BF16_GEMM is not `widen`.
bool bf16ProductsRunAttention(const KernelArgs &args, size_t bf16Inputs);

/// ds.attention / ds.attention_grad on checked operands (checkAttention
/// and the output checks passed; at least one pair and one query row).
void bf16Attention(const KernelArgs &args, const AttentionDims &d, bool causal,
                   float scale);
void bf16AttentionGrad(const KernelArgs &args, const AttentionDims &d,
                       bool causal, float scale);

} // namespace dsc::rt::cpu

#endif // DSC_RUNTIME_BACKENDS_CPU_ATTENTIONBF16_H
