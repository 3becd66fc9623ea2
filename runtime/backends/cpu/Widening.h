//===- Widening.h - 16-bit variants of the f32 kernels ----------*- C++ -*-===//
//
// Internal to runtime/backends/cpu. A kernel contract's 16-bit column
// (KernelContract.h; for an f32 kernel, f32, f16 or bf16 for each float
// operand, in any mix) is 16-bit storage and f32 compute, as mixed
// precision trains. The CPU backend runs it by widening each 16-bit operand
// into an f32 copy (one copy per buffer, so an exact in-place update stays in
// place), runs the f32 kernel on the copies and rounds the 16-bit outputs back
// to nearest even. Its result is therefore exactly the f32 kernel's on the
// widened inputs, rounded once; a fused pair's (runWidenedPair) is its two
// kernels', each rounded. Elementwise and row-wise kernels do this a tile
// at a time (runWidenedTiled); the rest widen whole operands per call.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_BACKENDS_CPU_WIDENING_H
#define DSC_RUNTIME_BACKENDS_CPU_WIDENING_H

#include "runtime/kernels/Kernel.h"

#include <functional>
#include <string>
#include <string_view>

namespace dsc::rt::cpu {

/// Row r (of `cols` elements) of a float tensor as f32: t's own row when
/// it is f32, else its widened copy in `scratch` (exact: every 16-bit value
/// is a float). How the kernels with a native 16-bit column read a row.
const float *floatRow(const TensorRef &t, int64_t r, int64_t cols,
                      float *scratch);
/// Where row r of t is computed: t's own row when it is f32, else
/// `scratch`, which storeRow then rounds into t (to nearest even).
float *outRow(const TensorRef &t, int64_t r, int64_t cols, float *scratch);
void storeRow(const float *values, const TensorRef &t, int64_t r, int64_t cols);

/// Runs `f32Kernel` on f32 copies of `args`' 16-bit operands (the caller
/// has checked the arity and the aliasing on `args` itself).
bool runWidened(KernelFn f32Kernel, const KernelArgs &args, std::string &error);

/// One widened call (runWidened or a fused pair's steps) on some operands.
using WidenedStep = std::function<bool(const KernelArgs &, std::string &)>;

/// `step` over tiles of `args` where `kernel` is elementwise or row-wise and
/// the shapes allow it (WideningTiles.cpp), in parallel, each tile's copies
/// in cache; otherwise `step` on the whole. The result is the whole call's,
/// bit for bit.
bool runWidenedTiled(std::string_view kernel, const WidenedStep &step,
                     const KernelArgs &args, std::string &error);

/// An elementwise kernel's 16-bit column (ds.add, ds.mul, ds.gelu,
/// ds.gelu_grad, ds.bias_gelu, ...) as a ds.fused_elementwise program over
/// the 16-bit operands themselves, the widened kernel's bits without f32
/// copies (HalfElementwise.cpp). False, having done nothing, when the kernel
/// has no program or its shapes are not a program's (same shape, or trailing
/// dims broadcast along the leading ones): the caller widens.
bool runHalfElementwise(std::string_view kernel, const KernelArgs &args);

/// ds.matmul's 16-bit column: bf16 operands (into a bf16 or f32 result)
/// through oneDNN where nativeBf16Gemm() says so (OneDnn.cpp), every other
/// mix widened. The caller has checked the arity and the aliasing.
bool halfMatmulBody(const KernelArgs &args, std::string &error);

/// ds.reduce_sum's, ds.reduce_mean's and ds.reduce_max's 16-bit columns:
/// a reduction over rows (a bias gradient) reads the 16-bit x as it is,
/// bitwise the widened call (Reduce.cpp); any other pattern widens.
bool halfReduceSumBody(const KernelArgs &args, std::string &error);
bool halfReduceMeanBody(const KernelArgs &args, std::string &error);
bool halfReduceMaxBody(const KernelArgs &args, std::string &error);

/// ds.layer_norm_grad and ds.rms_norm_grad with 16-bit operands widened a
/// row at a time (Norms.cpp): the widened kernels' bits without
/// whole-operand copies.
bool halfLayerNormGradBody(const KernelArgs &args, std::string &error);
bool halfRmsNormGradBody(const KernelArgs &args, std::string &error);

/// ds.attention's and ds.attention_grad's 16-bit columns: each (batch,
/// head) pair's rows widened into the thread's scratch and its results
/// rounded back from it (Attention.cpp), the f32 kernel's bits.
bool halfAttentionBody(const KernelArgs &args, std::string &error);
bool halfAttentionGradBody(const KernelArgs &args, std::string &error);

/// ds.embedding's, ds.embedding_grad's, ds.cross_entropy's and
/// ds.cross_entropy_grad's 16-bit columns on the operands themselves, a row
/// at a time (Lookup.cpp): the widened kernels' bits.
bool halfEmbeddingBody(const KernelArgs &args, std::string &error);
bool halfEmbeddingGradBody(const KernelArgs &args, std::string &error);
bool halfCrossEntropyBody(const KernelArgs &args, std::string &error);
bool halfCrossEntropyGradBody(const KernelArgs &args, std::string &error);
/// The vocabulary-parallel loss's statistics and gradient likewise.
bool halfCrossEntropyPartBody(const KernelArgs &args, std::string &error);
bool halfCrossEntropyPartGradBody(const KernelArgs &args, std::string &error);

/// ds.dropout's 16-bit column a batch of elements at a time (Random.cpp):
/// the tiles of runWidenedTiled cannot run it, as an element's mask is keyed
/// by its index in the whole tensor.
bool halfDropoutBody(const KernelArgs &args, std::string &error);

/// ds.add_layer_norm's 16-bit column a row at a time in the thread's
/// scratch (Norms.cpp): runWidenedPair's two rounded steps, bit for bit.
bool halfAddLayerNormBody(const KernelArgs &args, std::string &error);

/// Whether `kernel` is a fused op (ds.add_layer_norm, ds.bias_gelu,
/// ds.matmul_bias, ds.matmul_bias_gelu, ds.matmul_gelu_grad) that
/// runWidenedPair computes step by step.
bool isFusedPair(std::string_view kernel);

/// A fused pair's 16-bit variant, in two widened steps: the intermediate is
/// rounded to its own dtype before the second step reads it, so the fused
/// op gives exactly what its two ops give unfused. (One widened call would
/// feed the second step the unrounded f32 intermediate: then fusing or not,
/// as for a recomputed op beside its fused forward, would change results.)
bool runWidenedPair(std::string_view kernel, const KernelArgs &args,
                    std::string &error);

} // namespace dsc::rt::cpu

#endif // DSC_RUNTIME_BACKENDS_CPU_WIDENING_H
