//===- Lamb.cu - ds.lamb and ds.lamb_norms: DeepSpeed's FusedLamb ---------===//
//
// The CPU backend's formula (cpu/Lamb.cpp) in launches on the stream:
// lambSetup (one thread: the step's constants into the stream scratch, the
// step number checked, as the AdamW kernel does), lambMoments (m' and v'
// written; each of at most kLambBlocks blocks sums p^2 and u^2 in double
// into the scratch) and lambApply (each block adds the blocks' sums in
// block order, so the trust ratio has the same bits every run, and writes
// p' = p - stepSize r u). A non-finite scale leaves p, m and v as they
// were. In place is fine: lambMoments writes m and v only, lambApply p
// only.
//
// Over a ZeRO shard (LambShard.h): ds.lamb_norms runs lambMoments (without
// writing the moments) and lambRunTotal once per run of one member, in
// stream order through the one scratch; the sharded ds.lamb runs
// lambShardApply once per run, each element updated in one pass at its
// member's ratio. A run is a launch: a shard overlaps few members.
//
//===----------------------------------------------------------------------===//
#include "runtime/backends/cuda/CudaKernels.h"
#include "runtime/backends/cuda/DeviceSupport.cuh"
#include "runtime/kernels/LambShard.h"

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

/// The constants; lr and step are null for ds.lamb_norms (no step size).
__global__ void lambSetup(const float *lr, const float *step,
                          const float *scale, LambAttrs a, LambConsts *k,
                          RunContext *run) {
  const float s = *scale;
  k->skip = !isfinite(s);
  if (k->skip)
    return;
  double stepSize = 0;
  if (step) {
    const float t = *step;
    if (!(t >= 1) || t != floorf(t) || isinf(t)) {
      flagBad(run, kLambStep, int64_t(__float_as_uint(t)), 0, 0);
      k->skip = 1;
      return;
    }
    stepSize = *lr;
    if (a.biasCorrection)
      stepSize *=
          sqrt(1.0 - pow(a.beta2, double(t))) / (1.0 - pow(a.beta1, double(t)));
  }
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

/// Over elements [begin, begin + n): m' and v' (written unless mOut is
/// null) and each block's sums of p^2 and u^2.
__global__ void lambMoments(LambConsts *k, const float *p, const void *g,
                            Storage sg, const float *m, const float *v,
                            float *mOut, float *vOut, int64_t begin,
                            int64_t n) {
  __shared__ double pPart[kBlock], uPart[kBlock];
  const bool skip = k->skip;
  double pSq = 0, uSq = 0;
  DSC_GRID_STRIDE(j, n) {
    const int64_t i = begin + j;
    float mi = m[i], vi = v[i];
    if (!skip) {
      float gs = load(g, sg, i) * k->scale;
      mi = k->beta1 * mi + k->oneMinusBeta1 * gs;
      vi = k->beta2 * vi + k->oneMinusBeta2 * gs * gs;
      float pi = p[i], u = direction(k, mi, vi, pi);
      pSq += double(pi) * pi;
      uSq += double(u) * u;
    }
    if (mOut) {
      mOut[i] = mi;
      vOut[i] = vi;
    }
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

__device__ inline double trustRatio(const LambConsts *k, double pSq,
                                    double uSq) {
  if (pSq == 0 || uSq == 0)
    return 1;
  return fmin(fmax(sqrt(pSq) / sqrt(uSq), double(k->minCoeff)),
              double(k->maxCoeff));
}

/// The blocks' sums in block order.
__device__ inline void blockTotals(const LambConsts *k, int sumBlocks,
                                   double &pSq, double &uSq) {
  pSq = uSq = 0;
  for (int b = 0; b < sumBlocks; ++b) {
    pSq += k->sums[2 * b];
    uSq += k->sums[2 * b + 1];
  }
}

__global__ void lambApply(const LambConsts *k, const float *p, const float *m,
                          const float *v, float *pOut, int sumBlocks,
                          int64_t n) {
  __shared__ float step;
  if (threadIdx.x == 0) {
    double pSq, uSq;
    blockTotals(k, sumBlocks, pSq, uSq);
    step = float(double(k->stepSize) * trustRatio(k, pSq, uSq));
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

/// ds.lamb_norms: one run's sums as the member's two floats.
__global__ void lambRunTotal(const LambConsts *k, int sumBlocks, float *out) {
  double pSq, uSq;
  blockTotals(k, sumBlocks, pSq, uSq);
  out[0] = float(pSq);
  out[1] = float(uSq);
}

/// The sharded ds.lamb over one run [begin, begin + n) of `member` (-1:
/// padding, ratio 1), with the members' summed norms.
__global__ void lambShardApply(const LambConsts *k, const float *norms,
                               int64_t member, const float *p, const void *g,
                               Storage sg, const float *m, const float *v,
                               float *pOut, float *mOut, float *vOut,
                               int64_t begin, int64_t n) {
  __shared__ float step;
  const bool skip = k->skip; // p, m and v kept (copied to the outputs)
  if (threadIdx.x == 0 && !skip) {
    double ratio = 1;
    if (member >= 0)
      ratio = trustRatio(k, norms[2 * member], norms[2 * member + 1]);
    step = float(double(k->stepSize) * ratio);
  }
  __syncthreads();
  DSC_GRID_STRIDE(j, n) {
    const int64_t i = begin + j;
    float pi = p[i], mi = m[i], vi = v[i];
    if (!skip) {
      float gs = load(g, sg, i) * k->scale;
      mi = k->beta1 * mi + k->oneMinusBeta1 * gs;
      vi = k->beta2 * vi + k->oneMinusBeta2 * gs * gs;
      pi = pi - step * direction(k, mi, vi, pi);
    }
    mOut[i] = mi;
    vOut[i] = vi;
    pOut[i] = pi;
  }
}

/// The stream scratch as LambConsts and the run context, or false + err.
bool lambScratch(const KernelArgs &args, LambConsts *&k, RunContext *&run,
                 std::string &err) {
  const CudaHandles *h = handlesOf(args);
  void *scratch = nullptr;
  if (!h || !h->run)
    return fail(err, "needs the CUDA backend's run context");
  if (!scratchOf(args, sizeof(LambConsts), scratch, err))
    return false;
  k = static_cast<LambConsts *>(scratch);
  run = h->run;
  return true;
}

LambAttrs lambAttrs(const KernelArgs &args, bool insideSqrt, bool withStep) {
  const double *f = args.floatAttrs;
  return {f[0],
          f[1],
          f[2],
          f[3],
          withStep ? f[4] : 1.0,
          withStep ? f[5] : 1.0,
          withStep && args.intAttrs[0] != 0,
          insideSqrt};
}

/// The sharded update, one launch per run.
bool lambShard(const KernelArgs &args, LambConsts *k, std::string &err) {
  const TensorRef *in = args.inputs, *out = args.outputs;
  cudaStream_t s = streamOf(args);
  const int rank = args.ctx ? args.ctx->rank : 0;
  for (const LambRun &run : lambShardRuns(
           in[0].numel(), rank, args.intAttrs + 2, args.numIntAttrs - 2)) {
    const int64_t n = run.end - run.begin;
    lambShardApply<<<gridFor(n), kBlock, 0, s>>>(
        k, in[7].f32(), run.member, in[0].f32(), in[1].data, storage(in[1]),
        in[2].f32(), in[3].f32(), out[0].f32(), out[1].f32(), out[2].f32(),
        run.begin, n);
  }
  return launched(err);
}

} // namespace

bool lambBody(const KernelArgs &args, std::string &err) {
  if (!checkLamb(args, err))
    return false;
  const TensorRef *in = args.inputs, *out = args.outputs;
  LambConsts *k = nullptr;
  RunContext *run = nullptr;
  if (!lambScratch(args, k, run, err))
    return false;
  cudaStream_t s = streamOf(args);
  lambSetup<<<1, 1, 0, s>>>(in[4].f32(), in[5].f32(), in[6].f32(),
                            lambAttrs(args, args.intAttrs[1] != 0, true), k,
                            run);
  if (args.numInputs == 8)
    return lambShard(args, k, err);
  const int64_t n = in[0].numel();
  if (n > 0) {
    const int blocks = int(std::min<unsigned>(gridFor(n), kLambBlocks));
    lambMoments<<<blocks, kBlock, 0, s>>>(
        k, in[0].f32(), in[1].data, storage(in[1]), in[2].f32(), in[3].f32(),
        out[1].f32(), out[2].f32(), 0, n);
    lambApply<<<gridFor(n), kBlock, 0, s>>>(
        k, in[0].f32(), out[1].f32(), out[2].f32(), out[0].f32(), blocks, n);
  }
  return launched(err);
}

bool lambNormsBody(const KernelArgs &args, std::string &err) {
  if (!checkLambNorms(args, err))
    return false;
  const TensorRef *in = args.inputs;
  LambConsts *k = nullptr;
  RunContext *run = nullptr;
  if (!lambScratch(args, k, run, err))
    return false;
  cudaStream_t s = streamOf(args);
  const size_t members = args.numIntAttrs - 1;
  float *norms = args.outputs[0].f32();
  cudaMemsetAsync(norms, 0, 2 * members * sizeof(float), s);
  lambSetup<<<1, 1, 0, s>>>(nullptr, nullptr, in[4].f32(),
                            lambAttrs(args, args.intAttrs[0] != 0, false), k,
                            run);
  const int rank = args.ctx ? args.ctx->rank : 0;
  for (const LambRun &r :
       lambShardRuns(in[0].numel(), rank, args.intAttrs + 1, members)) {
    if (r.member < 0)
      continue;
    const int64_t n = r.end - r.begin;
    const int blocks = int(std::min<unsigned>(gridFor(n), kLambBlocks));
    lambMoments<<<blocks, kBlock, 0, s>>>(
        k, in[0].f32(), in[1].data, storage(in[1]), in[2].f32(), in[3].f32(),
        nullptr, nullptr, r.begin, n);
    lambRunTotal<<<1, 1, 0, s>>>(k, blocks, norms + 2 * r.member);
  }
  return launched(err);
}

} // namespace dsc::rt::cuda
