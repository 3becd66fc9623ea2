//===- Shape.cpp - transpose, slice, pad, concat, split, broadcast, iota --===//
//
// Data movement for any dtype (elements are moved as 2-, 4- or 8-byte
// words). Transpose, slice, broadcast and pad are one strided copy: the
// output (or, for pad, the input) is walked in row-major order with the
// other side's strides, after size-1 dims are dropped and dims that stay
// contiguous together are merged; runs whose source stride is 1 are
// memcpy'd.
//
//===----------------------------------------------------------------------===//

#include "runtime/backends/cpu/CpuCommon.h"

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

namespace dsc::rt::cpu {
namespace {

constexpr int64_t kGrain = 1 << 15;

template <typename W>
void gatherRun(const W *src, int64_t stride, W *dst, int64_t n) {
  if (stride == 1) {
    std::memcpy(dst, src, size_t(n) * sizeof(W));
  } else if (stride == 0) {
    const W v = *src;
    for (int64_t i = 0; i < n; ++i)
      dst[i] = v;
  } else {
    for (int64_t i = 0; i < n; ++i)
      dst[i] = src[i * stride];
  }
}

template <typename W>
void scatterRun(const W *src, W *dst, int64_t stride, int64_t n) {
  if (stride == 1) {
    std::memcpy(dst, src, size_t(n) * sizeof(W));
  } else {
    for (int64_t i = 0; i < n; ++i)
      dst[i * stride] = src[i];
  }
}

template <typename W>
void stridedCopy(const BroadcastLayout &l, int64_t total, const void *src,
                 int64_t srcBase, void *dst, int64_t dstBase, bool scatter) {
  const W *s = static_cast<const W *>(src) + srcBase;
  W *d = static_cast<W *>(dst) + dstBase;
  const int64_t inner = l.strides[0][l.rank - 1];
  parallelFor(total, kGrain, [&](int64_t b, int64_t e) {
    forEachRun(l, b, e, [&](int64_t pos, const int64_t *off, int64_t n) {
      if (scatter)
        scatterRun(s + pos, d + off[0], inner, n);
      else
        gatherRun(s + off[0], inner, d + pos, n);
    });
  });
}

// Copies `total` elements along layout `l`: gather (dst is walked) or
// scatter (src is walked).
bool copyStrided(std::string &err, size_t elemSize, const BroadcastLayout &l,
                 int64_t total, const void *src, int64_t srcBase, void *dst,
                 int64_t dstBase, bool scatter) {
  switch (elemSize) {
  case 2:
    stridedCopy<uint16_t>(l, total, src, srcBase, dst, dstBase, scatter);
    return true;
  case 4:
    stridedCopy<uint32_t>(l, total, src, srcBase, dst, dstBase, scatter);
    return true;
  case 8:
    stridedCopy<uint64_t>(l, total, src, srcBase, dst, dstBase, scatter);
    return true;
  }
  return fail(err, "unsupported element size ", elemSize);
}

// Runs a plan: gathers and scatters in the backend's threads.
bool runPlan(std::string &err, const StridedCopy &p, const void *src,
             void *dst) {
  if (p.total == 0)
    return true;
  return copyStrided(err, p.elemSize, p.layout, p.total, src, p.srcBase, dst,
                     p.dstBase, p.scatter);
}

} // namespace

bool transposeBody(const KernelArgs &a, std::string &err) {
  StridedCopy p;
  return planTranspose(a, p, err) &&
         runPlan(err, p, a.inputs[0].data, a.outputs[0].data);
}

bool sliceBody(const KernelArgs &a, std::string &err) {
  StridedCopy p;
  return planSlice(a, p, err) &&
         runPlan(err, p, a.inputs[0].data, a.outputs[0].data);
}

bool padBody(const KernelArgs &a, std::string &err) {
  StridedCopy p;
  if (!planPad(a, p, err))
    return false;
  const TensorRef &y = a.outputs[0];
  if (y.numel() > 0)
    std::memset(y.data, 0, size_t(y.numel()) * dtypeSize(y.dtype));
  return runPlan(err, p, a.inputs[0].data, y.data);
}

bool broadcastBody(const KernelArgs &a, std::string &err) {
  StridedCopy p;
  return planBroadcast(a, p, err) &&
         runPlan(err, p, a.inputs[0].data, a.outputs[0].data);
}

// Concat and split move blocks of whole rows: each `outer` index holds one
// run per operand along the axis. The outer indices are split over the
// threads (a GPT's q, k, v split is 1024 rows of 3 x 1 KiB).
bool concatBody(const KernelArgs &a, std::string &err) {
  AxisBlocks blocks;
  if (!checkConcat(a, blocks, err))
    return false;
  const int64_t axis = a.intAttrs[0];
  const int64_t rowBytes = a.outputs[0].shape[axis] * blocks.innerBytes;
  char *dst = static_cast<char *>(a.outputs[0].data);
  parallelFor(blocks.outer,
              std::max<int64_t>(1, kGrain * 4 / std::max<int64_t>(rowBytes, 1)),
              [&](int64_t o0, int64_t o1) {
                char *to = dst + o0 * rowBytes;
                for (int64_t o = o0; o < o1; ++o)
                  for (size_t i = 0; i < a.numInputs; ++i) {
                    int64_t chunk = a.inputs[i].shape[axis] * blocks.innerBytes;
                    if (chunk > 0)
                      std::memcpy(to,
                                  static_cast<const char *>(a.inputs[i].data) +
                                      o * chunk,
                                  size_t(chunk));
                    to += chunk;
                  }
              });
  return true;
}

bool splitBody(const KernelArgs &a, std::string &err) {
  AxisBlocks blocks;
  if (!checkSplit(a, blocks, err))
    return false;
  const int64_t axis = a.intAttrs[0];
  const int64_t rowBytes = a.inputs[0].shape[axis] * blocks.innerBytes;
  const char *src = static_cast<const char *>(a.inputs[0].data);
  parallelFor(
      blocks.outer,
      std::max<int64_t>(1, kGrain * 4 / std::max<int64_t>(rowBytes, 1)),
      [&](int64_t o0, int64_t o1) {
        const char *from = src + o0 * rowBytes;
        for (int64_t o = o0; o < o1; ++o)
          for (size_t i = 0; i < a.numOutputs; ++i) {
            int64_t chunk = a.outputs[i].shape[axis] * blocks.innerBytes;
            if (chunk > 0)
              std::memcpy(static_cast<char *>(a.outputs[i].data) + o * chunk,
                          from, size_t(chunk));
            from += chunk;
          }
      });
  return true;
}

bool iotaBody(const KernelArgs &a, std::string &err) {
  int64_t size, inner;
  if (!checkIota(a, size, inner, err))
    return false;
  const TensorRef &y = a.outputs[0];
  const int64_t n = y.numel();
  auto fill = [&](auto *out) {
    using T = std::remove_pointer_t<decltype(out)>;
    for (int64_t i = 0; i < n; ++i)
      out[i] = T((i / inner) % size);
  };
  switch (y.dtype) {
  case DType::f32:
    fill(static_cast<float *>(y.data));
    break;
  case DType::f64:
    fill(static_cast<double *>(y.data));
    break;
  case DType::i32:
    fill(static_cast<int32_t *>(y.data));
    break;
  default:
    fill(static_cast<int64_t *>(y.data));
  }
  return true;
}

} // namespace dsc::rt::cpu
