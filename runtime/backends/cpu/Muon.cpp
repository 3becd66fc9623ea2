//===- Muon.cpp - ds.muon_momentum and ds.muon_apply ----------------------===//
//
// The elementwise ends of a Muon step (RefKernels.h gives the formulas);
// the Newton-Schulz iteration between them is ds.matmul and elementwise
// ops (ds-expand-updates). Elements run in float; a 16-bit gradient is
// widened a chunk at a time (so is a 16-bit direction); a non-finite scale
// keeps the buffer and the parameter. Either output may be its input (each
// element is read before it is written).
//
//===----------------------------------------------------------------------===//

#include "runtime/backends/cpu/Convert.h"
#include "runtime/backends/cpu/CpuCommon.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace dsc::rt::cpu {
namespace {
constexpr int64_t kChunk = 4096;
} // namespace

bool muonMomentumBody(const KernelArgs &args, std::string &err) {
  if (!checkMuonMomentum(args, err))
    return false;
  const TensorRef &g = args.inputs[0];
  const float *buf = args.inputs[1].f32();
  float *bufOut = args.outputs[0].f32(), *dir = args.outputs[1].f32();
  const float scale = *args.inputs[2].f32();
  const int64_t n = g.numel();
  if (!std::isfinite(scale)) {
    if (bufOut != buf)
      std::memmove(bufOut, buf, size_t(n) * sizeof(float));
    std::fill(dir, dir + n, 0.0f);
    return true;
  }
  const float beta = float(args.floatAttrs[0]);
  const float keep = float(1.0 - args.floatAttrs[0]);
  const bool nesterov = args.intAttrs[0] != 0;
  parallelFor(n, kChunk, [&](int64_t b, int64_t e) {
    float wide[kChunk];
    for (int64_t at = b; at < e; at += kChunk) {
      const int64_t len = std::min(kChunk, e - at);
      const float *gs = chunkAsF32(g.dtype, g.data, at, len, wide);
      for (int64_t i = 0; i < len; ++i) {
        const float gi = gs[i] * scale, bi = buf[at + i];
        const float nb = bi + keep * (gi - bi);
        bufOut[at + i] = nb;
        dir[at + i] = nesterov ? gi + beta * (nb - gi) : nb;
      }
    }
  });
  return true;
}

bool muonApplyBody(const KernelArgs &args, std::string &err) {
  if (!checkMuonApply(args, err))
    return false;
  const float *p = args.inputs[0].f32();
  const TensorRef &x = args.inputs[1];
  float *out = args.outputs[0].f32();
  const float lr = *args.inputs[2].f32(), scale = *args.inputs[3].f32();
  const int64_t n = args.inputs[0].numel();
  if (!std::isfinite(scale)) {
    if (out != p)
      std::memmove(out, p, size_t(n) * sizeof(float));
    return true;
  }
  const float shrink = float(1.0 - double(lr) * args.floatAttrs[0]);
  const float step = float(double(lr) * args.floatAttrs[1]);
  parallelFor(n, kChunk, [&](int64_t b, int64_t e) {
    float wide[kChunk];
    for (int64_t at = b; at < e; at += kChunk) {
      const int64_t len = std::min(kChunk, e - at);
      const float *xs = chunkAsF32(x.dtype, x.data, at, len, wide);
      for (int64_t i = 0; i < len; ++i)
        out[at + i] = p[at + i] * shrink - step * xs[i];
    }
  });
  return true;
}

} // namespace dsc::rt::cpu
