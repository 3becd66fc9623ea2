//===- Widening.cpp - 16-bit variants of the f32 kernels ------------------===//

#include "runtime/backends/cpu/Widening.h"

#include "runtime/backends/cpu/Convert.h"
#include "runtime/backends/cpu/CpuCommon.h"

#include <deque>
#include <memory>
#include <vector>

namespace dsc::rt::cpu {
namespace {

bool isHalf(DType t) { return t == DType::f16 || t == DType::bf16; }

void widen(const TensorRef &t, float *out) {
  const auto *in = static_cast<const uint16_t *>(t.data);
  (t.dtype == DType::bf16 ? bf16ToF32 : f16ToF32)(in, out, t.numel());
}

void narrow(const float *in, const TensorRef &t) {
  auto *out = static_cast<uint16_t *>(t.data);
  (t.dtype == DType::bf16 ? f32ToBf16 : f32ToF16)(in, out, t.numel());
}

} // namespace

namespace {

// Copies of at most kReusedFloats floats (a tile's operands) come from
// buffers this thread keeps, slot by slot: allocated per call, each would
// be fresh pages from the kernel (a tile's 64 KB copies sit at glibc's
// mmap threshold), which cost a bf16 attention_grad 4.2 ms against 2.9 ms
// reused on one thread. At most kMaxReusedSlots x 256 KB a thread stays
// held; larger copies are allocated per call.
constexpr int64_t kReusedFloats = 65536;
constexpr size_t kMaxReusedSlots = 8;
thread_local std::unique_ptr<float[]> reusedBuffers[kMaxReusedSlots];

} // namespace

const float *floatRow(const TensorRef &t, int64_t r, int64_t cols,
                      float *scratch) {
  return chunkAsF32(t.dtype, t.data, r * cols, cols, scratch);
}

float *outRow(const TensorRef &t, int64_t r, int64_t cols, float *scratch) {
  return t.dtype == DType::f32 ? t.f32() + r * cols : scratch;
}

void storeRow(const float *values, const TensorRef &t, int64_t r,
              int64_t cols) {
  if (t.dtype == DType::f32)
    return; // computed in place
  auto *out = static_cast<uint16_t *>(t.data) + r * cols;
  (t.dtype == DType::bf16 ? f32ToBf16 : f32ToF16)(values, out, cols);
}

bool runWidened(KernelFn f32Kernel, const KernelArgs &args,
                std::string &error) {
  struct Copy {
    const void *data;
    DType dtype;
    int64_t numel;
    std::unique_ptr<float[]> owned; // not zero-filled: written first
    float *values;
  };
  std::deque<Copy> copies; // stable addresses
  // An output gets its own copy unless it is an input's (in place): the
  // kernel writes all of it, so only inputs are widened.
  auto copyOf = [&](const TensorRef &t, bool input) -> TensorRef {
    if (!isHalf(t.dtype))
      return t;
    Copy *c = nullptr;
    for (Copy &k : copies)
      if (k.data == t.data && k.dtype == t.dtype && k.numel == t.numel())
        c = &k;
    if (!c) {
      const size_t slot = copies.size();
      copies.push_back({t.data, t.dtype, t.numel(), nullptr, nullptr});
      c = &copies.back();
      if (t.numel() <= kReusedFloats && slot < kMaxReusedSlots) {
        std::unique_ptr<float[]> &buffer = reusedBuffers[slot];
        if (!buffer)
          buffer.reset(new float[kReusedFloats]);
        c->values = buffer.get();
      } else {
        c->owned.reset(new float[size_t(t.numel())]);
        c->values = c->owned.get();
      }
      if (input)
        widen(t, c->values);
    }
    return {c->values, DType::f32, t.shape, t.rank};
  };
  std::vector<TensorRef> ins, outs;
  for (size_t i = 0; i < args.numInputs; ++i)
    ins.push_back(copyOf(args.inputs[i], true));
  for (size_t i = 0; i < args.numOutputs; ++i)
    outs.push_back(copyOf(args.outputs[i], false));
  KernelArgs wide = args;
  wide.inputs = ins.data();
  wide.outputs = outs.data();
  if (!f32Kernel(wide, error))
    return false;
  for (size_t i = 0; i < args.numOutputs; ++i)
    if (isHalf(args.outputs[i].dtype))
      narrow(outs[i].f32(), args.outputs[i]);
  return true;
}

bool isFusedPair(std::string_view kernel) {
  return kernel == "ds.add_layer_norm" || kernel == "ds.bias_gelu" ||
         kernel == "ds.matmul_bias" || kernel == "ds.matmul_bias_gelu" ||
         kernel == "ds.matmul_gelu_grad";
}

namespace {

/// The f32 body `body` widened, as a tileable step.
WidenedStep widened(Body body) {
  return [body](const KernelArgs &a, std::string &e) {
    return runWidened(body, a, e);
  };
}

/// Elementwise step `kernel` of a fused pair: as a program on the 16-bit
/// operands where it has one, else widened in tiles.
bool elementwiseStep(std::string_view kernel, Body body, const KernelArgs &args,
                     std::string &error) {
  return runHalfElementwise(kernel, args) ||
         runWidenedTiled(kernel, widened(body), args, error);
}

/// ds.bias_gelu's two steps, each widened and rounded (its operands
/// checked by the caller): for the shapes its program does not take.
bool biasThenGelu(const KernelArgs &args, std::string &error) {
  // Step one, the add: (x, bias) -> sum, outputs[0].
  KernelArgs add = args;
  add.numInputs = 2;
  add.numOutputs = 1;
  add.numIntAttrs = add.numFloatAttrs = 0;
  if (!runWidened(&addBody, add, error))
    return false;
  // Step two, the GELU of the stored sum.
  KernelArgs second = args;
  second.inputs = args.outputs;
  second.numInputs = 1;
  second.outputs = args.outputs + 1;
  second.numOutputs = 1;
  return runWidened(&geluBody, second, error);
}

} // namespace

bool runWidenedPair(std::string_view kernel, const KernelArgs &args,
                    std::string &error) {
  // The fused matmuls check their operands first, with the f32 kernel's
  // lines: the steps below would name a bad bias only after the product.
  MatmulShape m;
  if (kernel == "ds.matmul_gelu_grad") {
    if (!checkMatmulGeluGrad(args, m, error))
      return false;
    // The product, the GELU gradient and the row sum, each rounded.
    TensorRef ins[2];
    int64_t axes[kMaxRank];
    return halfMatmulBody(matmulProductArgs(args, args.outputs), error) &&
           elementwiseStep("ds.gelu_grad", &geluGradBody,
                           geluGradStepArgs(args, ins), error) &&
           halfReduceSumBody(biasGradStepArgs(args, axes), error);
  }
  if (kernel == "ds.matmul_bias" || kernel == "ds.matmul_bias_gelu") {
    // The product, rounded into the first output; then the bias (and the
    // GELU) on it as the pair they are unfused.
    if (!checkMatmulBias(args, m, error) ||
        !halfMatmulBody(matmulProductArgs(args, args.outputs), error))
      return false;
    TensorRef ins[2];
    KernelArgs rest = matmulEpilogueArgs(args, ins);
    return kernel == "ds.matmul_bias"
               ? elementwiseStep("ds.add", &addBody, rest, error)
               : runWidenedPair("ds.bias_gelu", rest, error);
  }
  // ds.add_layer_norm a row at a time (Norms.cpp), which checks its
  // operands (the contract leaves the input count open: the bias is
  // optional) with the f32 kernel's lines.
  if (kernel == "ds.add_layer_norm")
    return halfAddLayerNormBody(args, error);
  if (runHalfElementwise(kernel, args))
    return true;
  return runWidenedTiled(kernel, biasThenGelu, args, error);
}

} // namespace dsc::rt::cpu
