//===- Lamb.cpp - ds.lamb: DeepSpeed's FusedLamb over one tensor ---------===//
//
// Two passes over the tensor (RefKernels.h gives the formula): the first
// writes m' and v' and sums p^2 and u^2 (u = m' / (sqrt(v') + eps) + wd p)
// per fixed chunk in double; the chunks' sums are added in chunk order, so
// the trust ratio has the same bits whichever thread ran which chunk; the
// second recomputes u from m' and v' and writes p' = p - stepSize r u, with
// the bias correction in stepSize as DeepSpeed's kernel has it. Elements
// run in float like the AdamW kernel; p, m and v may be updated in place
// (the first pass writes m and v only, the second p only). A 16-bit
// gradient is widened a chunk at a time; a non-finite scale skips the step.
//
//===----------------------------------------------------------------------===//

#include "runtime/backends/cpu/Convert.h"
#include "runtime/backends/cpu/CpuCommon.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace dsc::rt::cpu {
namespace {

constexpr int64_t kChunk = 4096;

struct LambConsts {
  float beta1, oneMinusBeta1, beta2, oneMinusBeta2, eps, decay, scale;
  bool epsInsideSqrt;
};

float direction(const LambConsts &k, float m, float v, float p) {
  float denom = k.epsInsideSqrt ? std::sqrt(v + k.eps) : std::sqrt(v) + k.eps;
  return m / denom + k.decay * p;
}

/// Pass one over chunk [at, at + n): m', v' and the chunk's sums.
void moments(const LambConsts &k, const KernelArgs &args, int64_t at, int64_t n,
             double &pSq, double &uSq) {
  const TensorRef *in = args.inputs, *out = args.outputs;
  float wide[kChunk];
  const float *g = in[1].f32() + at;
  if (in[1].dtype != DType::f32) {
    const auto *g16 = static_cast<const uint16_t *>(in[1].data) + at;
    (in[1].dtype == DType::f16 ? f16ToF32 : bf16ToF32)(g16, wide, n);
    g = wide;
  }
  const float *p = in[0].f32() + at, *m = in[2].f32() + at,
              *v = in[3].f32() + at;
  float *mOut = out[1].f32() + at, *vOut = out[2].f32() + at;
  pSq = uSq = 0;
  for (int64_t i = 0; i < n; ++i) {
    float gs = g[i] * k.scale;
    float mi = k.beta1 * m[i] + k.oneMinusBeta1 * gs;
    float vi = k.beta2 * v[i] + k.oneMinusBeta2 * gs * gs;
    float u = direction(k, mi, vi, p[i]);
    mOut[i] = mi;
    vOut[i] = vi;
    pSq += double(p[i]) * p[i];
    uSq += double(u) * u;
  }
}

} // namespace

bool lambBody(const KernelArgs &args, std::string &err) {
  if (!checkLamb(args, err))
    return false;
  const TensorRef *in = args.inputs, *out = args.outputs;
  const float lr = *in[4].f32(), stepF = *in[5].f32(), scale = *in[6].f32();
  if (!std::isfinite(scale)) {
    keepTwoStateUpdate(args);
    return true;
  }
  if (!(stepF >= 1) || stepF != std::floor(stepF) || std::isinf(stepF))
    return fail(err, "step must be an integer >= 1, got ", stepF);
  const double beta1 = args.floatAttrs[0], beta2 = args.floatAttrs[1];
  LambConsts k{float(beta1),
               float(1.0 - beta1),
               float(beta2),
               float(1.0 - beta2),
               float(args.floatAttrs[2]),
               float(args.floatAttrs[3]),
               scale,
               args.intAttrs[1] != 0};
  double stepSize = lr;
  if (args.intAttrs[0] != 0)
    stepSize *= std::sqrt(1.0 - std::pow(beta2, double(stepF))) /
                (1.0 - std::pow(beta1, double(stepF)));

  const int64_t n = in[0].numel();
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  std::vector<double> sums(size_t(2 * chunks), 0.0);
  parallelFor(chunks, 1, [&](int64_t cb, int64_t ce) {
    for (int64_t c = cb; c < ce; ++c)
      moments(k, args, c * kChunk, std::min(kChunk, n - c * kChunk),
              sums[size_t(2 * c)], sums[size_t(2 * c + 1)]);
  });
  double pSq = 0, uSq = 0;
  for (int64_t c = 0; c < chunks; ++c) {
    pSq += sums[size_t(2 * c)];
    uSq += sums[size_t(2 * c + 1)];
  }
  double ratio = 1;
  if (pSq != 0 && uSq != 0)
    ratio = std::clamp(std::sqrt(pSq) / std::sqrt(uSq), args.floatAttrs[4],
                       args.floatAttrs[5]);
  const float step = float(stepSize * ratio);
  const float *p = in[0].f32(), *m = out[1].f32(), *v = out[2].f32();
  float *pOut = out[0].f32();
  parallelFor(n, 1 << 16, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      pOut[i] = p[i] - step * direction(k, m[i], v[i], p[i]);
  });
  return true;
}

} // namespace dsc::rt::cpu
