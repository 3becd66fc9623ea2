//===- Optimizer.cpp - the optimizer updates' kernels ---------------------===//
//
// One AdamW step over flat buffers, PyTorch's formula:
//   g' = g * scale;  m' = b1 m + (1 - b1) g';  v' = b2 v + (1 - b2) g'^2
//   p' = p - lr wd p - lr (m' / (1 - b1^step)) / (sqrt(v' / (1 - b2^step)) +
//   eps)
// The bias corrections are computed once in double; the element loop runs
// in float and may update p, m and v in place (each element is read before
// it is written, so the restrict promise holds for exact aliasing). A
// non-finite scale (ds.overflow_guard) skips the step. ds.adamw_round also
// rounds the new master weights into their 16-bit parameter, reading a
// 16-bit gradient directly (mixed precision, and the CPU optimizer of
// offload). beta1 may be an input (beta1_value, OneCycle's momentum
// cycling). ds.sgd, ds.lion and ds.adagrad follow PyTorch's SGD, the Lion
// paper and PyTorch's Adagrad with the same conventions (RefKernels.h gives
// their formulas), and their _round variants round as ds.adamw_round does.
//
//===----------------------------------------------------------------------===//

#include "runtime/backends/cpu/Convert.h"
#include "runtime/backends/cpu/CpuCommon.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace dsc::rt::cpu {
namespace {

constexpr int64_t kGrain = 1 << 18;

/// beta1: the attribute, or the update's beta1_value input (OneCycle's
/// cycle_momentum), which must be in [0, 1).
bool beta1Of(const KernelArgs &args, size_t input, double &beta1,
             std::string &err) {
  beta1 = args.floatAttrs[0];
  if (args.numInputs <= input)
    return true;
  beta1 = *args.inputs[input].f32();
  if (!(beta1 >= 0 && beta1 < 1))
    return fail(err, "beta1_value must be in [0, 1), got ", beta1);
  return true;
}

struct AdamConsts {
  float beta1, oneMinusBeta1, beta2, oneMinusBeta2, eps;
  float decay;    // 1 - lr * weight_decay
  float stepSize; // lr / (1 - beta1^step)
  float invC2;    // 1 / (1 - beta2^step)
  float scale;
};

void adamwRange(const AdamConsts &k, const float *__restrict p,
                const float *__restrict g, const float *__restrict m,
                const float *__restrict v, float *__restrict pOut,
                float *__restrict mOut, float *__restrict vOut, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    float gs = g[i] * k.scale;
    float mi = k.beta1 * m[i] + k.oneMinusBeta1 * gs;
    float vi = k.beta2 * v[i] + k.oneMinusBeta2 * gs * gs;
    float denom = std::sqrt(vi * k.invC2) + k.eps;
    pOut[i] = p[i] * k.decay - k.stepSize * mi / denom;
    mOut[i] = mi;
    vOut[i] = vi;
  }
}

/// The checks both AdamW kernels share (KernelChecks.h: checkAdamw), the
/// step number, and the step's constants. `skip`: the scale is not finite
/// (ds.overflow_guard).
bool prepare(const KernelArgs &args, AdamConsts &k, bool &skip,
             std::string &err) {
  if (!checkAdamw(args, err))
    return false;
  const TensorRef *in = args.inputs;
  const float lr = *in[4].f32(), stepF = *in[5].f32(), scale = *in[6].f32();
  skip = !std::isfinite(scale);
  if (skip) // the step number need not be valid then: nothing reads it
    return true;
  if (!(stepF >= 1) || stepF != std::floor(stepF) || std::isinf(stepF))
    return fail(err, "step must be an integer >= 1, got ", stepF);
  double beta1 = 0;
  if (!beta1Of(args, 7, beta1, err))
    return false;
  const double beta2 = args.floatAttrs[1];
  const double eps = args.floatAttrs[2], wd = args.floatAttrs[3];
  const double c1 = 1.0 - std::pow(beta1, double(stepF));
  const double c2 = 1.0 - std::pow(beta2, double(stepF));
  k = AdamConsts{
      float(beta1),           float(1.0 - beta1), float(beta2),
      float(1.0 - beta2),     float(eps),         float(1.0 - double(lr) * wd),
      float(double(lr) / c1), float(1.0 / c2),    scale};
  return true;
}

} // namespace

void keepTwoStateUpdate(const KernelArgs &args) {
  const TensorRef *in = args.inputs, *out = args.outputs;
  for (int i = 0; i < 3; ++i) {
    const int src = i == 0 ? 0 : i + 1; // p, m, v
    if (out[i].data != in[src].data)
      std::memcpy(out[i].data, in[src].data, size_t(in[0].numel()) * 4);
  }
}

bool adamwBody(const KernelArgs &args, std::string &err) {
  if (!expectAllF32(args, err))
    return false;
  AdamConsts k{};
  bool skip = false;
  if (!prepare(args, k, skip, err))
    return false;
  if (skip) {
    keepTwoStateUpdate(args);
    return true;
  }
  const TensorRef *in = args.inputs, *out = args.outputs;
  const float *p = in[0].f32(), *g = in[1].f32(), *m = in[2].f32(),
              *v = in[3].f32();
  float *pOut = out[0].f32(), *mOut = out[1].f32(), *vOut = out[2].f32();
  parallelFor(in[0].numel(), kGrain, [&](int64_t b, int64_t e) {
    adamwRange(k, p + b, g + b, m + b, v + b, pOut + b, mOut + b, vOut + b,
               e - b);
  });
  return true;
}

// Mixed precision's update in one pass over memory: the 16-bit gradient is
// widened a chunk at a time into a stack buffer and the new fp32 master
// rounded into the 16-bit parameter as each chunk is done, with the
// conversions the widened ds.adamw and ds.cast use, so the bits are theirs.
bool adamwRoundBody(const KernelArgs &args, std::string &err) {
  const TensorRef *in = args.inputs, *out = args.outputs;
  if (!checkRoundedUpdate(args, err))
    return false;
  const DType gt = in[1].dtype, pt = out[3].dtype;
  AdamConsts k{};
  bool skip = false;
  if (!prepare(args, k, skip, err))
    return false;
  if (skip)
    keepTwoStateUpdate(args);
  const float *p = in[0].f32(), *m = in[2].f32(), *v = in[3].f32();
  float *pOut = out[0].f32(), *mOut = out[1].f32(), *vOut = out[2].f32();
  auto *p16 = static_cast<uint16_t *>(out[3].data);
  auto round = [&](const float *from, int64_t at, int64_t n) {
    (pt == DType::f16 ? f32ToF16 : f32ToBf16)(from, p16 + at, n);
  };
  parallelFor(in[0].numel(), kGrain, [&](int64_t b, int64_t e) {
    constexpr int64_t kChunk = 2048;
    float wide[kChunk];
    for (int64_t c = b; c < e; c += kChunk) {
      int64_t n = std::min(kChunk, e - c);
      if (skip) {
        round(pOut + c, c, n);
        continue;
      }
      const float *g = chunkAsF32(gt, in[1].data, c, n, wide);
      adamwRange(k, p + c, g, m + c, v + c, pOut + c, mOut + c, vOut + c, n);
      round(pOut + c, c, n);
    }
  });
  return true;
}

namespace {

/// A one-state update's scalars (inputs 3-5).
struct OneStateScalars {
  float lr = 0, scale = 0;
  int64_t step = 0;
};

/// A rounded one-state update (ds.sgd_round, ...): p' elements [at, at +
/// n) into the 16-bit copy, its third output, with ds.cast's conversion.
void roundChunk(const KernelArgs &args, int64_t at, int64_t n) {
  const TensorRef &p16 = args.outputs[2];
  (p16.dtype == DType::f16 ? f32ToF16 : f32ToBf16)(
      args.outputs[0].f32() + at, static_cast<uint16_t *>(p16.data) + at, n);
}

bool rounded(const KernelArgs &args) { return args.numOutputs == 3; }

/// A skipped one-state update leaves p and its state as they were (and
/// rounds p into its 16-bit copy, as the fused cast would).
void keepOneState(const KernelArgs &args) {
  const TensorRef *in = args.inputs, *out = args.outputs;
  const size_t bytes = size_t(in[0].numel()) * 4;
  if (out[0].data != in[0].data)
    std::memcpy(out[0].data, in[0].data, bytes);
  if (out[1].data != in[2].data)
    std::memcpy(out[1].data, in[2].data, bytes);
  if (rounded(args))
    parallelFor(in[0].numel(), kGrain,
                [&](int64_t b, int64_t e) { roundChunk(args, b, e - b); });
}

/// The start every one-state update shares: `check`'s operand checks, the
/// scalars (the step checked only when it is read), and for a non-finite
/// scale the state kept. False on an error; `run` false for a skipped step.
bool startOneState(const KernelArgs &args,
                   bool (*check)(const KernelArgs &, std::string &),
                   OneStateScalars &k, bool &run, std::string &err) {
  if (!check(args, err))
    return false;
  const TensorRef *in = args.inputs;
  k.lr = *in[3].f32();
  const float stepF = *in[4].f32();
  k.scale = *in[5].f32();
  run = false;
  if (!std::isfinite(k.scale)) {
    keepOneState(args);
    return true;
  }
  if (!(stepF >= 1) || stepF != std::floor(stepF) || std::isinf(stepF))
    return fail(err, "step must be an integer >= 1, got ", stepF);
  k.step = int64_t(stepF);
  run = true;
  return true;
}

/// Runs `body(begin, n, g)` over [0, numel) in chunks, in parallel, with
/// g the chunk of the gradient (input 1) in f32: a 16-bit gradient is
/// widened a chunk at a time into a stack buffer, with ds.cast's
/// conversions. A rounded update's chunk of p' is rounded as soon as it is
/// written, while it is in cache.
template <typename Body>
void forEachGradChunk(const KernelArgs &args, const Body &body) {
  const TensorRef &grad = args.inputs[1];
  parallelFor(grad.numel(), kGrain, [&](int64_t b, int64_t e) {
    constexpr int64_t kChunk = 2048;
    float wide[kChunk];
    for (int64_t c = b; c < e; c += kChunk) {
      int64_t n = std::min(kChunk, e - c);
      const float *g = chunkAsF32(grad.dtype, grad.data, c, n, wide);
      body(c, n, g);
      if (rounded(args))
        roundChunk(args, c, n);
    }
  });
}

} // namespace

bool sgdBody(const KernelArgs &args, std::string &err) {
  OneStateScalars k;
  bool run = false;
  if (!startOneState(args, checkSgd, k, run, err))
    return false;
  if (!run)
    return true;
  const float lr = k.lr, scale = k.scale;
  const int64_t step = k.step;
  const bool nesterov = args.intAttrs[0] != 0, first = step == 1;
  const float momentum = float(args.floatAttrs[0]);
  const float keep = float(1.0 - args.floatAttrs[1]); // 1 - dampening
  const float wd = float(args.floatAttrs[2]);
  const TensorRef *in = args.inputs, *out = args.outputs;
  const float *p = in[0].f32(), *buf = in[2].f32();
  float *pOut = out[0].f32(), *bufOut = out[1].f32();
  forEachGradChunk(args, [&](int64_t at, int64_t n, const float *g) {
    for (int64_t j = 0; j < n; ++j) {
      const int64_t i = at + j;
      float d = g[j] * scale + wd * p[i];
      float bi = buf[i];
      if (momentum != 0) {
        bi = first ? d : momentum * bi + keep * d;
        d = nesterov ? d + momentum * bi : bi;
      }
      pOut[i] = p[i] - lr * d;
      bufOut[i] = bi;
    }
  });
  return true;
}

bool lionBody(const KernelArgs &args, std::string &err) {
  OneStateScalars k;
  bool run = false;
  if (!startOneState(args, checkLion, k, run, err))
    return false;
  if (!run)
    return true;
  double beta1d = 0;
  if (!beta1Of(args, 6, beta1d, err))
    return false;
  const float lr = k.lr, scale = k.scale;
  const float beta1 = float(beta1d);
  const float beta2 = float(args.floatAttrs[1]);
  const float oneMinusBeta1 = float(1.0 - beta1d);
  const float oneMinusBeta2 = float(1.0 - args.floatAttrs[1]);
  const float decay = float(1.0 - double(lr) * args.floatAttrs[2]);
  const TensorRef *in = args.inputs, *out = args.outputs;
  const float *p = in[0].f32(), *m = in[2].f32();
  float *pOut = out[0].f32(), *mOut = out[1].f32();
  forEachGradChunk(args, [&](int64_t at, int64_t n, const float *g) {
    for (int64_t j = 0; j < n; ++j) {
      const int64_t i = at + j;
      float gs = g[j] * scale;
      float c = beta1 * m[i] + oneMinusBeta1 * gs;
      float sign = c > 0 ? 1.0f : (c < 0 ? -1.0f : 0.0f);
      float mi = beta2 * m[i] + oneMinusBeta2 * gs;
      pOut[i] = p[i] * decay - lr * sign;
      mOut[i] = mi;
    }
  });
  return true;
}

bool adagradBody(const KernelArgs &args, std::string &err) {
  OneStateScalars k;
  bool run = false;
  if (!startOneState(args, checkAdagrad, k, run, err))
    return false;
  if (!run)
    return true;
  const float lr = k.lr, scale = k.scale;
  const int64_t step = k.step;
  // The decayed step size in double, once, as the bias corrections are.
  const float clr =
      float(double(lr) / (1.0 + double(step - 1) * args.floatAttrs[0]));
  const float eps = float(args.floatAttrs[1]), wd = float(args.floatAttrs[2]);
  const TensorRef *in = args.inputs, *out = args.outputs;
  const float *p = in[0].f32(), *sum = in[2].f32();
  float *pOut = out[0].f32(), *sumOut = out[1].f32();
  forEachGradChunk(args, [&](int64_t at, int64_t n, const float *g) {
    for (int64_t j = 0; j < n; ++j) {
      const int64_t i = at + j;
      float d = g[j] * scale + wd * p[i];
      float si = sum[i] + d * d;
      pOut[i] = p[i] - clr * d / (std::sqrt(si) + eps);
      sumOut[i] = si;
    }
  });
  return true;
}

// The rounded variants: the same bodies, which round p' into the third
// output when there is one.
bool sgdRoundBody(const KernelArgs &args, std::string &err) {
  return checkRoundedUpdate(args, err) && sgdBody(args, err);
}

bool lionRoundBody(const KernelArgs &args, std::string &err) {
  return checkRoundedUpdate(args, err) && lionBody(args, err);
}

bool adagradRoundBody(const KernelArgs &args, std::string &err) {
  return checkRoundedUpdate(args, err) && adagradBody(args, err);
}

} // namespace dsc::rt::cpu
