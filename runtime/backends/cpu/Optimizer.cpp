//===- Optimizer.cpp - ds.adamw
//--------------------------------------------===//
//
// One AdamW step over flat buffers, PyTorch's formula:
//   g' = g * scale;  m' = b1 m + (1 - b1) g';  v' = b2 v + (1 - b2) g'^2
//   p' = p - lr wd p - lr (m' / (1 - b1^step)) / (sqrt(v' / (1 - b2^step)) +
//   eps)
// The bias corrections are computed once in double; the element loop runs
// in float and may update p, m and v in place (each element is read before
// it is written, so the restrict promise holds for exact aliasing). A
// non-finite scale (ds.overflow_guard) skips the step.
//
//===----------------------------------------------------------------------===//

#include "runtime/backends/cpu/CpuCommon.h"

#include <cmath>
#include <cstring>

namespace dsc::rt::cpu {
namespace {

constexpr int64_t kGrain = 1 << 15;

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

} // namespace

bool adamwBody(const KernelArgs &args, std::string &err) {
  if (!expectAllF32(args, err))
    return false;
  const TensorRef *in = args.inputs, *out = args.outputs;
  const char *names[] = {"p", "g", "m", "v"};
  for (int i = 1; i < 4; ++i)
    if (!sameShape(in[i], in[0]))
      return fail(err, names[i], " has shape ", shapeStr(in[i]),
                  " but p has shape ", shapeStr(in[0]));
  const char *outNames[] = {"p'", "m'", "v'"};
  for (int i = 0; i < 3; ++i)
    if (!sameShape(out[i], in[0]))
      return fail(err, "output ", outNames[i], " has shape ", shapeStr(out[i]),
                  " but p has shape ", shapeStr(in[0]));
  float lr, stepF, scale;
  if (!scalarOperand(err, in[4], "lr", lr) ||
      !scalarOperand(err, in[5], "step", stepF) ||
      !scalarOperand(err, in[6], "scale", scale))
    return false;
  if (!std::isfinite(scale)) {
    // ds.overflow_guard's NaN: an overflowed step leaves the state as it
    // was (the step number need not be valid then: nothing reads it).
    for (int i = 0; i < 3; ++i) {
      const int src = i == 0 ? 0 : i + 1; // p, m, v
      if (out[i].data != in[src].data)
        std::memcpy(out[i].data, in[src].data, size_t(in[0].numel()) * 4);
    }
    return true;
  }
  if (!(stepF >= 1) || stepF != std::floor(stepF) || std::isinf(stepF))
    return fail(err, "step must be an integer >= 1, got ", stepF);
  const double beta1 = args.floatAttrs[0], beta2 = args.floatAttrs[1];
  const double eps = args.floatAttrs[2], wd = args.floatAttrs[3];
  if (!(beta1 >= 0 && beta1 < 1) || !(beta2 >= 0 && beta2 < 1))
    return fail(err, "betas must be in [0, 1), got (", beta1, ", ", beta2, ")");
  if (!(eps >= 0) || !(wd >= 0) || std::isinf(eps) || std::isinf(wd))
    return fail(err, "eps and weight_decay must be finite and >= 0, got ", eps,
                " and ", wd);
  const double c1 = 1.0 - std::pow(beta1, double(stepF));
  const double c2 = 1.0 - std::pow(beta2, double(stepF));
  AdamConsts k{
      float(beta1),           float(1.0 - beta1), float(beta2),
      float(1.0 - beta2),     float(eps),         float(1.0 - double(lr) * wd),
      float(double(lr) / c1), float(1.0 / c2),    scale};
  const float *p = in[0].f32(), *g = in[1].f32(), *m = in[2].f32(),
              *v = in[3].f32();
  float *pOut = out[0].f32(), *mOut = out[1].f32(), *vOut = out[2].f32();
  parallelFor(in[0].numel(), kGrain, [&](int64_t b, int64_t e) {
    adamwRange(k, p + b, g + b, m + b, v + b, pOut + b, mOut + b, vOut + b,
               e - b);
  });
  return true;
}

} // namespace dsc::rt::cpu
