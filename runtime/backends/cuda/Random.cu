//===- Random.cu - ds.dropout ---------------------------------------------===//
//
// The CPU backend's mask, bit for bit: element e of x is kept when the top
// 24 bits of rng::bitsAt(seed, id, step, offset + e) reach ceil(rate *
// 2^24), then scaled by 1 / (1 - rate); both backends call the same Philox
// code (runtime/rng/Philox.h). The seed, step and sample offset come from
// the run context in device memory, not from kernel parameters, so a
// replayed CUDA graph draws the current step's mask.
//
//===----------------------------------------------------------------------===//
#include "runtime/backends/cuda/CudaKernels.h"
#include "runtime/backends/cuda/DeviceSupport.cuh"
#include "runtime/kernels/DropoutLayout.h"
#include "runtime/rng/Philox.h"

#include <cmath>

namespace dsc::rt::cuda {
namespace {

// One thread per group of four elements: one Philox call gives their words.
__global__ void dropoutKernel(const void *x, Storage sx, void *y, Storage sy,
                              const RunContext *run, uint32_t stream,
                              uint32_t threshold, float scale,
                              DropoutLayout where, int64_t n) {
  const uint64_t offset =
      run->sampleOffset * where.sampleElements + where.partOffset;
  const uint64_t seed = run->seed;
  const uint32_t step = run->step;
  DSC_GRID_STRIDE(q, (n + 3) / 4) {
    uint32_t words[4];
    uint64_t block = ~uint64_t(0);
    for (int64_t e = 4 * q; e < 4 * q + 4 && e < n; ++e) {
      // The element's run and place in it (DropoutLayout.h); four
      // elements straddle two Philox blocks unless their run starts at a
      // multiple of 4.
      const uint64_t k = uint64_t(e) / where.segment;
      uint64_t g = offset + k * where.stride + uint64_t(e) % where.segment;
      if ((g >> 2) != block) {
        block = g >> 2;
        rng::blockWords(seed, stream, step, block, words);
      }
      store(y, sy, e,
            (words[g & 3] >> 8) >= threshold ? load(x, sx, e) * scale : 0.0f);
    }
  }
}

} // namespace

bool dropoutBody(const KernelArgs &args, std::string &err) {
  if (!expectFloatStorage(args, err))
    return false;
  const TensorRef &x = args.inputs[0], &y = args.outputs[0];
  if (!checkDropout(args, err))
    return false;
  const int64_t id = args.intAttrs[0];
  const double rate = args.floatAttrs[0];
  const CudaHandles *h = handlesOf(args);
  if (!h || !h->run)
    return fail(err, "needs the CUDA backend's run context (the seed and the "
                     "step)");
  const int64_t n = x.numel();
  if (n == 0)
    return true;
  // uniform = k * 2^-24 >= rate  <=>  k >= ceil(rate * 2^24) (exact). At
  // rate 0 every element is kept and scaled by 1, which copies.
  const uint32_t threshold = uint32_t(std::ceil(rate * 16777216.0));
  const float scale = float(1.0 / (1.0 - rate)); // inf at rate 1: unused
  // Keyed by the global element index: the leading dim is the micro-batch
  // (and x may be one part of the whole activation: DropoutLayout.h).
  const DropoutLayout where =
      dropoutLayout(x, args.intAttrs[1], args.intAttrs[2],
                    args.ctx ? args.ctx->tensorRank : 0, args.intAttrs[3]);
  dropoutKernel<<<gridFor((n + 3) / 4), kBlock, 0, streamOf(args)>>>(
      x.data, storage(x), y.data, storage(y), h->run, uint32_t(id), threshold,
      scale, where, n);
  return launched(err);
}

} // namespace dsc::rt::cuda
