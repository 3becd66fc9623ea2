//===- Lamb.cpp - ds.lamb and ds.lamb_norms: DeepSpeed's FusedLamb --------===//
//
// Over one tensor (RefKernels.h gives the formula), two passes: the first
// writes m' and v' and sums p^2 and u^2 (u = m' / (sqrt(v') + eps) + wd p)
// per fixed chunk in double; the chunks' sums are added in chunk order, so
// the trust ratio has the same bits whichever thread ran which chunk; the
// second recomputes u from m' and v' and writes p' = p - stepSize r u, with
// the bias correction in stepSize as DeepSpeed's kernel has it.
//
// Over a ZeRO shard (LambShard.h), ds.lamb_norms sums p^2 and u^2 per run
// of one member the same way, and the sharded ds.lamb, given the summed
// norms, is one pass: each element takes its member's trust ratio.
//
// Elements run in float like the AdamW kernel; p, m and v may be updated
// in place (each pass reads an element before writing it). A 16-bit
// gradient is widened a chunk at a time; a non-finite scale skips the step.
//
//===----------------------------------------------------------------------===//

#include "runtime/backends/cpu/Convert.h"
#include "runtime/backends/cpu/CpuCommon.h"
#include "runtime/kernels/LambShard.h"

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

/// The constants from [beta1, beta2, eps, weight_decay] and the scale.
LambConsts lambConsts(const KernelArgs &args, float scale, bool insideSqrt) {
  const double beta1 = args.floatAttrs[0], beta2 = args.floatAttrs[1];
  return {float(beta1),
          float(1.0 - beta1),
          float(beta2),
          float(1.0 - beta2),
          float(args.floatAttrs[2]),
          float(args.floatAttrs[3]),
          scale,
          insideSqrt};
}

/// The operands a pass reads and writes; mOut null: the moments are not
/// written (ds.lamb_norms).
struct LambTensors {
  const float *p, *m, *v;
  TensorRef g;
  float *mOut, *vOut;
};

float direction(const LambConsts &k, float m, float v, float p) {
  float denom = k.epsInsideSqrt ? std::sqrt(v + k.eps) : std::sqrt(v) + k.eps;
  return m / denom + k.decay * p;
}

/// m', v' over [at, at + n) (written where t asks) and their sums.
void moments(const LambConsts &k, const LambTensors &t, int64_t at, int64_t n,
             double &pSq, double &uSq) {
  float wide[kChunk];
  const float *g = chunkAsF32(t.g.dtype, t.g.data, at, n, wide);
  pSq = uSq = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t e = at + i;
    float gs = g[i] * k.scale, p = t.p[e];
    float mi = k.beta1 * t.m[e] + k.oneMinusBeta1 * gs;
    float vi = k.beta2 * t.v[e] + k.oneMinusBeta2 * gs * gs;
    float u = direction(k, mi, vi, p);
    if (t.mOut) {
      t.mOut[e] = mi;
      t.vOut[e] = vi;
    }
    pSq += double(p) * p;
    uSq += double(u) * u;
  }
}

/// The sums of p^2 and u^2 over [begin, end), by fixed chunks added in
/// order.
void rangeSums(const LambConsts &k, const LambTensors &t, int64_t begin,
               int64_t end, double &pSq, double &uSq) {
  const int64_t chunks = (end - begin + kChunk - 1) / kChunk;
  std::vector<double> sums(size_t(2 * chunks), 0.0);
  parallelFor(chunks, 1, [&](int64_t cb, int64_t ce) {
    for (int64_t c = cb; c < ce; ++c) {
      const int64_t at = begin + c * kChunk;
      moments(k, t, at, std::min(kChunk, end - at), sums[size_t(2 * c)],
              sums[size_t(2 * c + 1)]);
    }
  });
  pSq = uSq = 0;
  for (int64_t c = 0; c < chunks; ++c) {
    pSq += sums[size_t(2 * c)];
    uSq += sums[size_t(2 * c + 1)];
  }
}

/// The trust ratio from the norms squared.
double trustRatio(const KernelArgs &args, double pSq, double uSq) {
  if (pSq == 0 || uSq == 0)
    return 1;
  return std::clamp(std::sqrt(pSq) / std::sqrt(uSq), args.floatAttrs[4],
                    args.floatAttrs[5]);
}

/// The sharded update: m', v' and p' in one pass, each run of a member at
/// its ratio (padding at 1).
void shardUpdate(const KernelArgs &args, const LambConsts &k,
                 const LambTensors &t, float *pOut, double stepSize) {
  const int rank = args.ctx ? args.ctx->rank : 0;
  const float *norms = args.inputs[7].f32();
  for (const LambRun &run :
       lambShardRuns(args.inputs[0].numel(), rank, args.intAttrs + 2,
                     args.numIntAttrs - 2)) {
    double ratio = 1;
    if (run.member >= 0)
      ratio =
          trustRatio(args, norms[2 * run.member], norms[2 * run.member + 1]);
    const float step = float(stepSize * ratio);
    parallelFor(run.end - run.begin, kChunk, [&](int64_t b, int64_t e) {
      float wide[kChunk];
      for (int64_t at = run.begin + b; at < run.begin + e; at += kChunk) {
        const int64_t n = std::min(kChunk, run.begin + e - at);
        const float *g = chunkAsF32(t.g.dtype, t.g.data, at, n, wide);
        for (int64_t i = 0; i < n; ++i) {
          const int64_t x = at + i;
          float gs = g[i] * k.scale, p = t.p[x];
          float mi = k.beta1 * t.m[x] + k.oneMinusBeta1 * gs;
          float vi = k.beta2 * t.v[x] + k.oneMinusBeta2 * gs * gs;
          t.mOut[x] = mi;
          t.vOut[x] = vi;
          pOut[x] = p - step * direction(k, mi, vi, p);
        }
      }
    });
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
  const LambConsts k = lambConsts(args, scale, args.intAttrs[1] != 0);
  double stepSize = lr;
  if (args.intAttrs[0] != 0)
    stepSize *= std::sqrt(1.0 - std::pow(args.floatAttrs[1], double(stepF))) /
                (1.0 - std::pow(args.floatAttrs[0], double(stepF)));
  const LambTensors t{in[0].f32(), in[2].f32(),  in[3].f32(),
                      in[1],       out[1].f32(), out[2].f32()};
  if (args.numInputs == 8) {
    shardUpdate(args, k, t, out[0].f32(), stepSize);
    return true;
  }
  const int64_t n = in[0].numel();
  double pSq = 0, uSq = 0;
  rangeSums(k, t, 0, n, pSq, uSq);
  const float step = float(stepSize * trustRatio(args, pSq, uSq));
  const float *p = in[0].f32(), *m = out[1].f32(), *v = out[2].f32();
  float *pOut = out[0].f32();
  parallelFor(n, 1 << 16, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      pOut[i] = p[i] - step * direction(k, m[i], v[i], p[i]);
  });
  return true;
}

bool lambNormsBody(const KernelArgs &args, std::string &err) {
  if (!checkLambNorms(args, err))
    return false;
  const TensorRef *in = args.inputs;
  float *norms = args.outputs[0].f32();
  const size_t members = args.numIntAttrs - 1;
  std::fill(norms, norms + 2 * members, 0.0f);
  const LambConsts k = lambConsts(args, *in[4].f32(), args.intAttrs[0] != 0);
  const LambTensors t{in[0].f32(), in[2].f32(), in[3].f32(),
                      in[1],       nullptr,     nullptr};
  const int rank = args.ctx ? args.ctx->rank : 0;
  for (const LambRun &run :
       lambShardRuns(in[0].numel(), rank, args.intAttrs + 1, members)) {
    if (run.member < 0)
      continue;
    double pSq = 0, uSq = 0;
    rangeSums(k, t, run.begin, run.end, pSq, uSq);
    norms[2 * run.member] = float(pSq);
    norms[2 * run.member + 1] = float(uSq);
  }
  return true;
}

} // namespace dsc::rt::cpu
