//===- Lamb.cu - ds.lamb: DeepSpeed's FusedLamb over one tensor ----------===//
//
// The CPU backend's formula (cpu/Lamb.cpp) in three launches on the
// stream: lambSetup (one thread: the step's constants into the stream
// scratch, the step number checked, as the AdamW kernel does), lambMoments
// (m' and v' written; each of at most kLambBlocks blocks sums p^2 and u^2
// in double into the scratch) and lambApply (each block adds the blocks'
// sums in block order, so the trust ratio has the same bits every run, and
// writes p' = p - stepSize r u). A non-finite scale leaves p, m and v as
// they were. In place is fine: lambMoments writes m and v only,
// lambApply p only.
//
//===----------------------------------------------------------------------===//
#include "runtime/backends/cuda/CudaKernels.h"
#include "runtime/backends/cuda/DeviceSupport.cuh"

#include <algorithm>

namespace dsc::rt::cuda {
namespace {

constexpr int kLambBlocks = 256;

struct LambConsts {
  float beta1, oneMinusBeta1, beta2, oneMinusBeta2, eps, decay, scale;
  float stepSize, minCoeff, maxCoeff;
  int epsInsideSqrt, skip;
  double sums[2 * kLambBlocks]; ///< per block of lambMoments: p^2, u^2
};

struct LambAttrs {
  double beta1, beta2, eps, wd, minCoeff, maxCoeff;
  int biasCorrection, epsInsideSqrt;
};

__global__ void lambSetup(const float *lr, const float *step,
                          const float *scale, LambAttrs a, LambConsts *k,
                          RunContext *run) {
  const float s = *scale, t = *step;
  k->skip = !isfinite(s);
  if (k->skip)
    return;
  if (!(t >= 1) || t != floorf(t) || isinf(t)) {
    flagBad(run, kLambStep, int64_t(__float_as_uint(t)), 0, 0);
    k->skip = 1;
    return;
  }
  double stepSize = *lr;
  if (a.biasCorrection)
    stepSize *=
        sqrt(1.0 - pow(a.beta2, double(t))) / (1.0 - pow(a.beta1, double(t)));
  k->beta1 = float(a.beta1);
  k->oneMinusBeta1 = float(1.0 - a.beta1);
  k->beta2 = float(a.beta2);
  k->oneMinusBeta2 = float(1.0 - a.beta2);
  k->eps = float(a.eps);
  k->decay = float(a.wd);
  k->scale = s;
  k->stepSize = float(stepSize);
  k->minCoeff = float(a.minCoeff);
  k->maxCoeff = float(a.maxCoeff);
  k->epsInsideSqrt = a.epsInsideSqrt;
}

__device__ inline float direction(const LambConsts *k, float m, float v,
                                  float p) {
  float denom = k->epsInsideSqrt ? sqrtf(v + k->eps) : sqrtf(v) + k->eps;
  return m / denom + k->decay * p;
}

__global__ void lambMoments(LambConsts *k, const float *p, const void *g,
                            Storage sg, const float *m, const float *v,
                            float *mOut, float *vOut, int64_t n) {
  __shared__ double pPart[kBlock], uPart[kBlock];
  const bool skip = k->skip;
  double pSq = 0, uSq = 0;
  DSC_GRID_STRIDE(i, n) {
    float mi = m[i], vi = v[i];
    if (!skip) {
      float gs = load(g, sg, i) * k->scale;
      mi = k->beta1 * mi + k->oneMinusBeta1 * gs;
      vi = k->beta2 * vi + k->oneMinusBeta2 * gs * gs;
      float pi = p[i], u = direction(k, mi, vi, pi);
      pSq += double(pi) * pi;
      uSq += double(u) * u;
    }
    mOut[i] = mi;
    vOut[i] = vi;
  }
  pPart[threadIdx.x] = pSq;
  uPart[threadIdx.x] = uSq;
  __syncthreads();
  for (int half = kBlock / 2; half > 0; half /= 2) {
    if (int(threadIdx.x) < half) {
      pPart[threadIdx.x] += pPart[threadIdx.x + half];
      uPart[threadIdx.x] += uPart[threadIdx.x + half];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    k->sums[2 * blockIdx.x] = pPart[0];
    k->sums[2 * blockIdx.x + 1] = uPart[0];
  }
}

__global__ void lambApply(const LambConsts *k, const float *p, const float *m,
                          const float *v, float *pOut, int sumBlocks,
                          int64_t n) {
  __shared__ float step;
  if (threadIdx.x == 0) {
    double pSq = 0, uSq = 0;
    for (int b = 0; b < sumBlocks; ++b) {
      pSq += k->sums[2 * b];
      uSq += k->sums[2 * b + 1];
    }
    double ratio = 1;
    if (pSq != 0 && uSq != 0)
      ratio = fmin(fmax(sqrt(pSq) / sqrt(uSq), double(k->minCoeff)),
                   double(k->maxCoeff));
    step = float(double(k->stepSize) * ratio);
  }
  __syncthreads();
  const bool skip = k->skip;
  DSC_GRID_STRIDE(i, n) {
    float pi = p[i];
    if (!skip)
      pi = pi - step * direction(k, m[i], v[i], pi);
    pOut[i] = pi;
  }
}

} // namespace

bool lambBody(const KernelArgs &args, std::string &err) {
  if (!checkLamb(args, err))
    return false;
  const TensorRef *in = args.inputs, *out = args.outputs;
  const CudaHandles *h = handlesOf(args);
  void *scratch = nullptr;
  if (!h || !h->run)
    return fail(err, "needs the CUDA backend's run context");
  if (!scratchOf(args, sizeof(LambConsts), scratch, err))
    return false;
  auto *k = static_cast<LambConsts *>(scratch);
  cudaStream_t s = streamOf(args);
  LambAttrs attrs{args.floatAttrs[0],    args.floatAttrs[1],
                  args.floatAttrs[2],    args.floatAttrs[3],
                  args.floatAttrs[4],    args.floatAttrs[5],
                  int(args.intAttrs[0]), int(args.intAttrs[1])};
  lambSetup<<<1, 1, 0, s>>>(in[4].f32(), in[5].f32(), in[6].f32(), attrs, k,
                            h->run);
  const int64_t n = in[0].numel();
  if (n > 0) {
    const int blocks = int(std::min<unsigned>(gridFor(n), kLambBlocks));
    lambMoments<<<blocks, kBlock, 0, s>>>(
        k, in[0].f32(), in[1].data, storage(in[1]), in[2].f32(), in[3].f32(),
        out[1].f32(), out[2].f32(), n);
    lambApply<<<gridFor(n), kBlock, 0, s>>>(
        k, in[0].f32(), out[1].f32(), out[2].f32(), out[0].f32(), blocks, n);
  }
  return launched(err);
}

} // namespace dsc::rt::cuda
