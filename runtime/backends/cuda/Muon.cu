//===- Muon.cu - ds.muon_momentum and ds.muon_apply -----------------------===//
//
// The CPU backend's formulas (cpu/Muon.cpp), one grid-stride launch each;
// the scalars (scale, lr) are read on the device, so nothing waits for
// the host. A non-finite scale keeps the buffer and the parameter (and
// gives a zero direction). In place is fine: each element is read before
// it is written.
//
//===----------------------------------------------------------------------===//
#include "runtime/backends/cuda/CudaKernels.h"
#include "runtime/backends/cuda/DeviceSupport.cuh"

namespace dsc::rt::cuda {
namespace {

__global__ void muonMomentumKernel(const void *g, Storage sg, const float *buf,
                                   const float *scale, float beta, int nesterov,
                                   float *bufOut, float *dir, int64_t n) {
  const float s = *scale;
  const bool skip = !isfinite(s);
  DSC_GRID_STRIDE(i, n) {
    const float bi = buf[i];
    if (skip) {
      bufOut[i] = bi;
      dir[i] = 0.0f;
      continue;
    }
    const float gi = load(g, sg, i) * s;
    const float nb = bi + (1.0f - beta) * (gi - bi);
    bufOut[i] = nb;
    dir[i] = nesterov ? gi + beta * (nb - gi) : nb;
  }
}

__global__ void muonApplyKernel(const float *p, const void *x, Storage sx,
                                const float *lr, const float *scale,
                                double decay, double factor, float *out,
                                int64_t n) {
  const bool skip = !isfinite(*scale);
  const float shrink = float(1.0 - double(*lr) * decay);
  const float step = float(double(*lr) * factor);
  DSC_GRID_STRIDE(i, n) {
    out[i] = skip ? p[i] : p[i] * shrink - step * load(x, sx, i);
  }
}

} // namespace

bool muonMomentumBody(const KernelArgs &args, std::string &err) {
  if (!checkMuonMomentum(args, err))
    return false;
  const TensorRef *in = args.inputs, *out = args.outputs;
  const int64_t n = in[0].numel();
  if (n > 0)
    muonMomentumKernel<<<gridFor(n), kBlock, 0, streamOf(args)>>>(
        in[0].data, storage(in[0]), in[1].f32(), in[2].f32(),
        float(args.floatAttrs[0]), int(args.intAttrs[0]), out[0].f32(),
        out[1].f32(), n);
  return launched(err);
}

bool muonApplyBody(const KernelArgs &args, std::string &err) {
  if (!checkMuonApply(args, err))
    return false;
  const TensorRef *in = args.inputs;
  const int64_t n = in[0].numel();
  if (n > 0)
    muonApplyKernel<<<gridFor(n), kBlock, 0, streamOf(args)>>>(
        in[0].f32(), in[1].data, storage(in[1]), in[2].f32(), in[3].f32(),
        args.floatAttrs[0], args.floatAttrs[1], args.outputs[0].f32(), n);
  return launched(err);
}

} // namespace dsc::rt::cuda
