//===- Random.cpp - ds.dropout
//---------------------------------------------===//
//
// Element e of x is kept when rng::uniformAt(seed, id, step, e) >= rate,
// then scaled by 1 / (1 - rate): the mask is a pure function of (seed, id,
// step, e), so a recomputation (remat, the backward pass) or another world
// size sees the same mask. Philox runs 16 counters side by side here so the
// rounds vectorize; each call yields the words of four consecutive elements,
// exactly as rng::bitsAt assigns them.
//
//===----------------------------------------------------------------------===//

#include "runtime/backends/cpu/CpuCommon.h"
#include "runtime/kernels/DropoutLayout.h"
#include "runtime/rng/Philox.h"

#include <cmath>
#include <cstring>

namespace dsc::rt::cpu {
namespace {

constexpr int kLanes = 16;                 // Philox blocks per batch
constexpr int64_t kBatch = 4 * kLanes;     // elements per batch
constexpr int64_t kGrainBatches = 1 << 10; // batches per parallel chunk

// The 32-bit words of elements [4 * firstBlock, 4 * firstBlock + kBatch),
// identical to rng::bitsAt for each of them.
void philoxBatch(uint64_t seed, uint32_t stream, uint32_t step,
                 uint64_t firstBlock, uint32_t words[kBatch]) {
  uint32_t c0[kLanes], c1[kLanes], c2[kLanes], c3[kLanes];
  for (int l = 0; l < kLanes; ++l) {
    uint64_t block = firstBlock + uint64_t(l);
    c0[l] = uint32_t(block);
    c1[l] = uint32_t(block >> 32);
    c2[l] = stream;
    c3[l] = step;
  }
  uint32_t k0 = uint32_t(seed), k1 = uint32_t(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    for (int l = 0; l < kLanes; ++l) {
      uint64_t p0 = uint64_t(0xD2511F53u) * c0[l];
      uint64_t p1 = uint64_t(0xCD9E8D57u) * c2[l];
      uint32_t n0 = uint32_t(p1 >> 32) ^ c1[l] ^ k0;
      uint32_t n2 = uint32_t(p0 >> 32) ^ c3[l] ^ k1;
      c1[l] = uint32_t(p1);
      c3[l] = uint32_t(p0);
      c0[l] = n0;
      c2[l] = n2;
    }
  }
  for (int l = 0; l < kLanes; ++l) {
    words[4 * l] = c0[l];
    words[4 * l + 1] = c1[l];
    words[4 * l + 2] = c2[l];
    words[4 * l + 3] = c3[l];
  }
}

/// One run of x whose elements are consecutive in the whole, the first at
/// global index `offset`.
void dropoutRun(const float *xp, float *yp, int64_t n, uint64_t offset,
                uint64_t seed, uint32_t stream, uint32_t step,
                uint32_t threshold, float scale) {
  if (offset % 4 != 0) {
    // Rows not a multiple of 4 elements: the batched draw does not line up.
    for (int64_t e = 0; e < n; ++e)
      yp[e] = (rng::bitsAt(seed, stream, step, offset + uint64_t(e)) >> 8) >=
                      threshold
                  ? xp[e] * scale
                  : 0.0f;
    return;
  }
  parallelFor((n + kBatch - 1) / kBatch, kGrainBatches,
              [&](int64_t first, int64_t last) {
                uint32_t words[kBatch];
                for (int64_t batch = first; batch < last; ++batch) {
                  int64_t base = batch * kBatch;
                  philoxBatch(seed, stream, step, (offset + uint64_t(base)) / 4,
                              words);
                  int64_t count = std::min<int64_t>(kBatch, n - base);
                  const float *xb = xp + base;
                  float *yb = yp + base;
                  for (int64_t j = 0; j < count; ++j)
                    yb[j] = (words[j] >> 8) >= threshold ? xb[j] * scale : 0.0f;
                }
              });
}

} // namespace

bool dropoutBody(const KernelArgs &args, std::string &err) {
  if (!expectAllF32(args, err))
    return false;
  const TensorRef &x = args.inputs[0], &y = args.outputs[0];
  if (!checkDropout(args, err))
    return false;
  const int64_t id = args.intAttrs[0];
  const double rate = args.floatAttrs[0];
  if (!args.ctx)
    return fail(err, "needs a KernelContext (the seed and the step)");
  const int64_t n = x.numel();
  const float *xp = x.f32();
  float *yp = y.f32();
  if (rate == 0) {
    if (xp != yp && n > 0)
      std::memcpy(yp, xp, size_t(n) * sizeof(float));
    return true;
  }
  // uniform = k * 2^-24 >= rate  <=>  k >= ceil(rate * 2^24) (exact).
  const uint32_t threshold = uint32_t(std::ceil(rate * 16777216.0));
  const float scale = float(1.0 / (1.0 - rate)); // inf at rate 1: unused
  const uint64_t seed = args.ctx->seed;
  const uint32_t stream = uint32_t(id), step = args.ctx->step;
  // Element e is keyed by its global index: the leading dimension is the
  // micro-batch, which starts at sample ctx->sampleOffset (and x may be
  // one part of the whole activation, in runs: DropoutLayout.h).
  const DropoutLayout where =
      dropoutLayout(x, args.intAttrs[1], args.intAttrs[2], args.ctx->tensorRank,
                    args.intAttrs[3]);
  const uint64_t first =
      args.ctx->sampleOffset * where.sampleElements + where.partOffset;
  const int64_t segment = int64_t(where.segment);
  for (int64_t at = 0; at < n; at += segment)
    dropoutRun(xp + at, yp + at, std::min(segment, n - at),
               first + uint64_t(at / segment) * where.stride, seed, stream,
               step, threshold, scale);
  return true;
}

} // namespace dsc::rt::cpu
