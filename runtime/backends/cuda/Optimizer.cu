//===- Optimizer.cu - the optimizer updates' kernels ----------------------===//
//
// PyTorch's AdamW over flat buffers, the CPU backend's formula and float
// operations (cpu/Optimizer.cpp). lr, step and scale are device scalars:
// one thread turns them into the step's constants (bias corrections in
// double) in the stream's scratch, checking the step number on the way,
// and the element kernel reads them, so a captured graph replays with the
// current values. A non-finite scale (ds.overflow_guard) leaves p, m and v
// as they were; ds.adamw_round also rounds the new fp32 master into the
// 16-bit parameter in the same pass, reading a 16-bit gradient directly.
// beta1 may be a device scalar too (beta1_value, OneCycle's momentum).
// ds.sgd, ds.lion and ds.adagrad work the same way with the CPU backend's
// formulas.
//
//===----------------------------------------------------------------------===//
#include "runtime/backends/cuda/CudaKernels.h"
#include "runtime/backends/cuda/DeviceSupport.cuh"

namespace dsc::rt::cuda {
namespace {

struct AdamConsts {
  float beta1, oneMinusBeta1, beta2, oneMinusBeta2, eps;
  float decay;    // 1 - lr * weight_decay
  float stepSize; // lr / (1 - beta1^step)
  float invC2;    // 1 / (1 - beta2^step)
  float scale;
  int skip;
};

struct Attrs {
  double beta1, beta2, eps, wd;
};

/// beta1: the attribute, or the beta1_value input when there is one
/// (`value`), which must be in [0, 1); false (and the run flagged) if not.
__device__ bool beta1Of(const float *value, double attr, double &beta1,
                        RunContext *run, RunError what) {
  beta1 = value ? double(*value) : attr;
  if (beta1 >= 0 && beta1 < 1)
    return true;
  flagBad(run, kBeta1Value, int64_t(__float_as_uint(float(beta1))), what, 0);
  return false;
}

__global__ void adamSetup(const float *lr, const float *step,
                          const float *scale, const float *beta1Value, Attrs a,
                          AdamConsts *k, RunContext *run, RunError what) {
  const float s = *scale, t = *step;
  k->skip = !isfinite(s);
  if (k->skip)
    return; // the step number need not be valid then: nothing reads it
  double beta1 = 0;
  if (!(t >= 1) || t != floorf(t) || isinf(t)) {
    flagBad(run, what, int64_t(__float_as_uint(t)), 0, 0);
    k->skip = 1; // leave the state alone; the run fails afterwards
    return;
  }
  if (!beta1Of(beta1Value, a.beta1, beta1, run, what)) {
    k->skip = 1;
    return;
  }
  const double c1 = 1.0 - pow(beta1, double(t));
  const double c2 = 1.0 - pow(a.beta2, double(t));
  k->beta1 = float(beta1);
  k->oneMinusBeta1 = float(1.0 - beta1);
  k->beta2 = float(a.beta2);
  k->oneMinusBeta2 = float(1.0 - a.beta2);
  k->eps = float(a.eps);
  k->decay = float(1.0 - double(*lr) * a.wd);
  k->stepSize = float(double(*lr) / c1);
  k->invC2 = float(1.0 / c2);
  k->scale = s;
}

__global__ void adamKernel(const AdamConsts *kp, const float *p, const void *g,
                           Storage sg, const float *m, const float *v,
                           float *pOut, float *mOut, float *vOut, void *p16,
                           Storage s16, int64_t n) {
  const AdamConsts k = *kp;
  DSC_GRID_STRIDE(i, n) {
    float pi = p[i], mi = m[i], vi = v[i];
    if (!k.skip) {
      float gs = load(g, sg, i) * k.scale;
      mi = k.beta1 * mi + k.oneMinusBeta1 * gs;
      vi = k.beta2 * vi + k.oneMinusBeta2 * gs * gs;
      float denom = sqrtf(vi * k.invC2) + k.eps;
      pi = pi * k.decay - k.stepSize * mi / denom;
    }
    pOut[i] = pi;
    mOut[i] = mi;
    vOut[i] = vi;
    if (p16)
      store(p16, s16, i, pi);
  }
}

bool adam(const KernelArgs &args, bool round, std::string &err) {
  const TensorRef *in = args.inputs, *out = args.outputs;
  const CudaHandles *h = handlesOf(args);
  void *scratch = nullptr;
  if (!h || !h->run)
    return fail(err, "needs the CUDA backend's run context");
  if (!scratchOf(args, sizeof(AdamConsts), scratch, err))
    return false;
  auto *k = static_cast<AdamConsts *>(scratch);
  cudaStream_t s = streamOf(args);
  Attrs attrs{args.floatAttrs[0], args.floatAttrs[1], args.floatAttrs[2],
              args.floatAttrs[3]};
  const float *beta1Value = args.numInputs > 7 ? in[7].f32() : nullptr;
  adamSetup<<<1, 1, 0, s>>>(in[4].f32(), in[5].f32(), in[6].f32(), beta1Value,
                            attrs, k, h->run,
                            round ? kAdamwRoundStep : kAdamwStep);
  const int64_t n = in[0].numel();
  if (n > 0)
    adamKernel<<<gridFor(n), kBlock, 0, s>>>(
        k, in[0].f32(), in[1].data, storage(in[1]), in[2].f32(), in[3].f32(),
        out[0].f32(), out[1].f32(), out[2].f32(), round ? out[3].data : nullptr,
        round ? storage(out[3]) : kF32, n);
  return launched(err);
}

} // namespace

bool adamwBody(const KernelArgs &args, std::string &err) {
  return expectAllF32(args, err) && checkAdamw(args, err) &&
         adam(args, false, err);
}

bool adamwRoundBody(const KernelArgs &args, std::string &err) {
  return checkRoundedUpdate(args, err) && checkAdamw(args, err) &&
         adam(args, true, err);
}

namespace {

/// The one-state updates' constants, written by oneStateSetup.
struct OneStateConsts {
  float lr, scale;
  float a, b, c, d, e; ///< SGD: momentum, 1 - dampening, weight decay;
                       ///< Lion: beta1, 1 - beta1, beta2, 1 - beta2, decay;
                       ///< Adagrad: decayed lr, eps, weight decay
  int first;           ///< step 1 (SGD's buffer starts as d)
  int skip;
};

struct OneStateAttrs {
  double x, y, z; ///< SGD: momentum, dampening, wd; Lion: beta1, beta2, wd;
                  ///< Adagrad: lr_decay, eps, wd
};

enum class Rule { sgd, lion, adagrad };

__global__ void oneStateSetup(const float *lr, const float *step,
                              const float *scale, const float *beta1Value,
                              OneStateAttrs a, Rule rule, OneStateConsts *k,
                              RunContext *run, RunError what) {
  const float s = *scale, t = *step;
  k->skip = !isfinite(s);
  if (k->skip)
    return;
  if (!(t >= 1) || t != floorf(t) || isinf(t)) {
    flagBad(run, what, int64_t(__float_as_uint(t)), 0, 0);
    k->skip = 1;
    return;
  }
  k->lr = *lr;
  k->scale = s;
  k->first = t == 1.0f;
  double beta1 = 0;
  if (rule == Rule::lion && !beta1Of(beta1Value, a.x, beta1, run, what)) {
    k->skip = 1;
    return;
  }
  if (rule == Rule::lion) {
    k->a = float(beta1);
    k->b = float(1.0 - beta1);
    k->c = float(a.y);
    k->d = float(1.0 - a.y);
    k->e = float(1.0 - double(*lr) * a.z);
  } else if (rule == Rule::adagrad) {
    k->a = float(double(*lr) / (1.0 + double(t - 1.0f) * a.x));
    k->b = float(a.y);
    k->c = float(a.z);
  } else {
    k->a = float(a.x);
    k->b = float(1.0 - a.y);
    k->c = float(a.z);
  }
}

/// The one-state kernels write p' into `p16` too when it is not null (the
/// _round variants), skipped steps included.
__global__ void sgdKernel(const OneStateConsts *kp, bool nesterov,
                          const float *p, const void *g, Storage sg,
                          const float *buf, float *pOut, float *bufOut,
                          void *p16, Storage s16, int64_t n) {
  const OneStateConsts k = *kp;
  DSC_GRID_STRIDE(i, n) {
    float pi = p[i], bi = buf[i];
    if (!k.skip) {
      float d = load(g, sg, i) * k.scale + k.c * pi;
      if (k.a != 0) {
        bi = k.first ? d : k.a * bi + k.b * d;
        d = nesterov ? d + k.a * bi : bi;
      }
      pi = pi - k.lr * d;
    }
    pOut[i] = pi;
    bufOut[i] = bi;
    if (p16)
      store(p16, s16, i, pi);
  }
}

__global__ void lionKernel(const OneStateConsts *kp, const float *p,
                           const void *g, Storage sg, const float *m,
                           float *pOut, float *mOut, void *p16, Storage s16,
                           int64_t n) {
  const OneStateConsts k = *kp;
  DSC_GRID_STRIDE(i, n) {
    float pi = p[i], mi = m[i];
    if (!k.skip) {
      float gs = load(g, sg, i) * k.scale;
      float c = k.a * mi + k.b * gs;
      float sign = c > 0 ? 1.0f : (c < 0 ? -1.0f : 0.0f);
      mi = k.c * mi + k.d * gs;
      pi = pi * k.e - k.lr * sign;
    }
    pOut[i] = pi;
    mOut[i] = mi;
    if (p16)
      store(p16, s16, i, pi);
  }
}

__global__ void adagradKernel(const OneStateConsts *kp, const float *p,
                              const void *g, Storage sg, const float *sum,
                              float *pOut, float *sumOut, void *p16,
                              Storage s16, int64_t n) {
  const OneStateConsts k = *kp;
  DSC_GRID_STRIDE(i, n) {
    float pi = p[i], si = sum[i];
    if (!k.skip) {
      float d = load(g, sg, i) * k.scale + k.c * pi;
      si = si + d * d;
      pi = pi - k.a * d / (sqrtf(si) + k.b);
    }
    pOut[i] = pi;
    sumOut[i] = si;
    if (p16)
      store(p16, s16, i, pi);
  }
}

bool oneState(const KernelArgs &args, Rule rule, std::string &err) {
  const TensorRef *in = args.inputs, *out = args.outputs;
  const CudaHandles *h = handlesOf(args);
  void *scratch = nullptr;
  if (!h || !h->run)
    return fail(err, "needs the CUDA backend's run context");
  if (!scratchOf(args, sizeof(OneStateConsts), scratch, err))
    return false;
  auto *k = static_cast<OneStateConsts *>(scratch);
  cudaStream_t s = streamOf(args);
  OneStateAttrs attrs{args.floatAttrs[0], args.floatAttrs[1],
                      args.floatAttrs[2]};
  const bool round = args.numOutputs == 3; // a _round variant
  const RunError what =
      rule == Rule::lion      ? (round ? kLionRoundStep : kLionStep)
      : rule == Rule::adagrad ? (round ? kAdagradRoundStep : kAdagradStep)
                              : (round ? kSgdRoundStep : kSgdStep);
  const float *beta1Value = args.numInputs > 6 ? in[6].f32() : nullptr;
  oneStateSetup<<<1, 1, 0, s>>>(in[3].f32(), in[4].f32(), in[5].f32(),
                                beta1Value, attrs, rule, k, h->run, what);
  const int64_t n = in[0].numel();
  void *p16 = round ? out[2].data : nullptr;
  const Storage s16 = round ? storage(out[2]) : kF32;
  if (n > 0 && rule == Rule::adagrad)
    adagradKernel<<<gridFor(n), kBlock, 0, s>>>(
        k, in[0].f32(), in[1].data, storage(in[1]), in[2].f32(), out[0].f32(),
        out[1].f32(), p16, s16, n);
  else if (n > 0 && rule == Rule::lion)
    lionKernel<<<gridFor(n), kBlock, 0, s>>>(
        k, in[0].f32(), in[1].data, storage(in[1]), in[2].f32(), out[0].f32(),
        out[1].f32(), p16, s16, n);
  else if (n > 0)
    sgdKernel<<<gridFor(n), kBlock, 0, s>>>(
        k, args.intAttrs[0] != 0, in[0].f32(), in[1].data, storage(in[1]),
        in[2].f32(), out[0].f32(), out[1].f32(), p16, s16, n);
  return launched(err);
}

} // namespace

bool sgdBody(const KernelArgs &args, std::string &err) {
  return checkSgd(args, err) && oneState(args, Rule::sgd, err);
}

bool lionBody(const KernelArgs &args, std::string &err) {
  return checkLion(args, err) && oneState(args, Rule::lion, err);
}

bool adagradBody(const KernelArgs &args, std::string &err) {
  return checkAdagrad(args, err) && oneState(args, Rule::adagrad, err);
}

bool sgdRoundBody(const KernelArgs &args, std::string &err) {
  return checkRoundedUpdate(args, err) && sgdBody(args, err);
}

bool lionRoundBody(const KernelArgs &args, std::string &err) {
  return checkRoundedUpdate(args, err) && lionBody(args, err);
}

bool adagradRoundBody(const KernelArgs &args, std::string &err) {
  return checkRoundedUpdate(args, err) && adagradBody(args, err);
}

} // namespace dsc::rt::cuda
