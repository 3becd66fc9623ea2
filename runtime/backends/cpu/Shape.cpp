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

#include <cstring>
#include <type_traits>
#include <vector>

namespace dsc::rt::cpu {
namespace {

constexpr int64_t kGrain = 1 << 15;

void rowMajorStrides(const TensorRef &t, int64_t *strides) {
  int64_t s = 1;
  for (int d = t.rank - 1; d >= 0; --d) {
    strides[d] = s;
    s *= t.shape[d];
  }
}

// A walk over `shape` (row-major, contiguous on the walking side) reading or
// writing the other side at `strides`; size-1 dims dropped, mergeable dims
// merged. strides[1] is unused.
BroadcastLayout makeLayout(const int64_t *shape, const int64_t *strides,
                           int rank) {
  BroadcastLayout l;
  l.rank = 0;
  for (int d = 0; d < rank; ++d) {
    if (shape[d] == 1)
      continue;
    if (l.rank > 0 && l.strides[0][l.rank - 1] == strides[d] * shape[d]) {
      l.shape[l.rank - 1] *= shape[d];
      l.strides[0][l.rank - 1] = strides[d];
    } else {
      l.shape[l.rank] = shape[d];
      l.strides[0][l.rank] = strides[d];
      l.strides[1][l.rank] = 0;
      ++l.rank;
    }
  }
  if (l.rank == 0) {
    l.rank = 1;
    l.shape[0] = 1;
    l.strides[0][0] = 0;
  }
  return l;
}

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

bool sameDType(std::string &err, const KernelArgs &a) {
  DType t = a.numInputs ? a.inputs[0].dtype : a.outputs[0].dtype;
  for (size_t i = 0; i < a.numInputs; ++i)
    if (a.inputs[i].dtype != t)
      return fail(err, "input ", i, " has dtype ", dtypeName(a.inputs[i].dtype),
                  " but input 0 has ", dtypeName(t));
  for (size_t i = 0; i < a.numOutputs; ++i)
    if (a.outputs[i].dtype != t)
      return fail(err, "output ", i, " has dtype ",
                  dtypeName(a.outputs[i].dtype), " but input 0 has ",
                  dtypeName(t));
  return true;
}

bool checkAxis(std::string &err, int64_t axis, int rank) {
  if (axis < 0 || axis >= rank)
    return fail(err, "axis ", axis, " is out of range for rank ", rank);
  return true;
}

// Shapes equal except along `axis`.
bool sameExceptAxis(const TensorRef &a, const TensorRef &b, int64_t axis) {
  if (a.rank != b.rank)
    return false;
  for (int d = 0; d < a.rank; ++d)
    if (d != axis && a.shape[d] != b.shape[d])
      return false;
  return true;
}

} // namespace

bool transposeBody(const KernelArgs &a, std::string &err) {
  const TensorRef &x = a.inputs[0], &y = a.outputs[0];
  if (!sameDType(err, a))
    return false;
  const int64_t *perm = a.intAttrs;
  bool valid = a.numIntAttrs == size_t(x.rank);
  bool seen[kMaxRank] = {};
  for (int i = 0; valid && i < x.rank; ++i) {
    valid = perm[i] >= 0 && perm[i] < x.rank && !seen[perm[i]];
    if (valid)
      seen[perm[i]] = true;
  }
  if (!valid)
    return fail(err, listStr(perm, a.numIntAttrs),
                " is not a permutation of the dims of a tensor of shape ",
                shapeStr(x));
  int64_t xStrides[kMaxRank], strides[kMaxRank] = {};
  rowMajorStrides(x, xStrides);
  bool shapeOk = y.rank == x.rank;
  for (int i = 0; shapeOk && i < x.rank; ++i) {
    shapeOk = y.shape[i] == x.shape[perm[i]];
    strides[i] = xStrides[perm[i]];
  }
  if (!shapeOk)
    return fail(err, "output has shape ", shapeStr(y), " but permuting ",
                shapeStr(x), " by ", listStr(perm, a.numIntAttrs),
                " gives another");
  if (y.numel() == 0)
    return true;
  BroadcastLayout l = makeLayout(y.shape, strides, y.rank);
  return copyStrided(err, dtypeSize(x.dtype), l, y.numel(), x.data, 0, y.data,
                     0, false);
}

bool sliceBody(const KernelArgs &a, std::string &err) {
  const TensorRef &x = a.inputs[0], &y = a.outputs[0];
  if (!sameDType(err, a))
    return false;
  if (a.numIntAttrs != size_t(x.rank) || y.rank != x.rank)
    return fail(err, "a tensor of shape ", shapeStr(x),
                " needs one offset per dim and an output of the same rank, "
                "got offsets ",
                listStr(a.intAttrs, a.numIntAttrs), " and output ",
                shapeStr(y));
  int64_t strides[kMaxRank];
  rowMajorStrides(x, strides);
  int64_t base = 0;
  for (int d = 0; d < x.rank; ++d) {
    int64_t off = a.intAttrs[d], size = y.shape[d];
    if (off < 0 || off > x.shape[d] - size)
      return fail(err, "offset ", off, " size ", size,
                  " is out of range for dim ", d, " of shape ", shapeStr(x));
    base += off * strides[d];
  }
  if (y.numel() == 0)
    return true;
  BroadcastLayout l = makeLayout(y.shape, strides, y.rank);
  return copyStrided(err, dtypeSize(x.dtype), l, y.numel(), x.data, base,
                     y.data, 0, false);
}

bool padBody(const KernelArgs &a, std::string &err) {
  const TensorRef &x = a.inputs[0], &y = a.outputs[0];
  if (!sameDType(err, a))
    return false;
  if (a.numIntAttrs != size_t(x.rank) || y.rank != x.rank)
    return fail(err, "a tensor of shape ", shapeStr(x),
                " needs one low padding per dim and an output of the same "
                "rank, got low ",
                listStr(a.intAttrs, a.numIntAttrs), " and output ",
                shapeStr(y));
  int64_t strides[kMaxRank];
  rowMajorStrides(y, strides);
  int64_t base = 0;
  for (int d = 0; d < x.rank; ++d) {
    int64_t low = a.intAttrs[d];
    if (low < 0 || low > y.shape[d] - x.shape[d])
      return fail(err, "low padding ", low, " of dim ", d, " does not fit ",
                  shapeStr(x), " into ", shapeStr(y),
                  " (padding must be non-negative)");
    base += low * strides[d];
  }
  const size_t es = dtypeSize(x.dtype);
  if (y.numel() > 0)
    std::memset(y.data, 0, size_t(y.numel()) * es);
  if (x.numel() == 0)
    return true;
  // Walk x and scatter each element into its padded position.
  BroadcastLayout l = makeLayout(x.shape, strides, x.rank);
  return copyStrided(err, es, l, x.numel(), x.data, 0, y.data, base, true);
}

bool concatBody(const KernelArgs &a, std::string &err) {
  if (a.numInputs == 0)
    return fail(err, "needs at least one input");
  if (!sameDType(err, a))
    return false;
  const TensorRef &y = a.outputs[0], &first = a.inputs[0];
  const int64_t axis = a.intAttrs[0];
  if (!checkAxis(err, axis, first.rank))
    return false;
  int64_t total = 0;
  for (size_t i = 0; i < a.numInputs; ++i) {
    if (!sameExceptAxis(a.inputs[i], first, axis))
      return fail(err, "input ", i, " has shape ", shapeStr(a.inputs[i]),
                  ", incompatible with input 0's ", shapeStr(first),
                  " along axis ", axis);
    total += a.inputs[i].shape[axis];
  }
  if (!sameExceptAxis(y, first, axis) || y.shape[axis] != total)
    return fail(err, "output has shape ", shapeStr(y), " but the inputs ",
                "concatenate to ", total, " along axis ", axis, " of ",
                shapeStr(first));
  const size_t es = dtypeSize(y.dtype);
  const int64_t outer = dimProduct(y, 0, int(axis));
  const int64_t inner = dimProduct(y, int(axis) + 1, y.rank) * int64_t(es);
  char *dst = static_cast<char *>(y.data);
  for (int64_t o = 0; o < outer; ++o)
    for (size_t i = 0; i < a.numInputs; ++i) {
      int64_t chunk = a.inputs[i].shape[axis] * inner;
      if (chunk > 0)
        std::memcpy(dst,
                    static_cast<const char *>(a.inputs[i].data) + o * chunk,
                    size_t(chunk));
      dst += chunk;
    }
  return true;
}

bool splitBody(const KernelArgs &a, std::string &err) {
  if (a.numOutputs == 0)
    return fail(err, "needs at least one output");
  if (!sameDType(err, a))
    return false;
  const TensorRef &x = a.inputs[0];
  const int64_t axis = a.intAttrs[0];
  if (!checkAxis(err, axis, x.rank))
    return false;
  int64_t total = 0;
  for (size_t i = 0; i < a.numOutputs; ++i) {
    if (!sameExceptAxis(a.outputs[i], x, axis))
      return fail(err, "output ", i, " has shape ", shapeStr(a.outputs[i]),
                  ", incompatible with x's ", shapeStr(x), " along axis ",
                  axis);
    total += a.outputs[i].shape[axis];
  }
  if (total != x.shape[axis])
    return fail(err, "outputs sum to ", total, " along axis ", axis, " but x ",
                shapeStr(x), " has ", x.shape[axis]);
  const size_t es = dtypeSize(x.dtype);
  const int64_t outer = dimProduct(x, 0, int(axis));
  const int64_t inner = dimProduct(x, int(axis) + 1, x.rank) * int64_t(es);
  const char *src = static_cast<const char *>(x.data);
  for (int64_t o = 0; o < outer; ++o)
    for (size_t i = 0; i < a.numOutputs; ++i) {
      int64_t chunk = a.outputs[i].shape[axis] * inner;
      if (chunk > 0)
        std::memcpy(static_cast<char *>(a.outputs[i].data) + o * chunk, src,
                    size_t(chunk));
      src += chunk;
    }
  return true;
}

bool broadcastBody(const KernelArgs &a, std::string &err) {
  const TensorRef &x = a.inputs[0], &y = a.outputs[0];
  if (!sameDType(err, a))
    return false;
  if (!broadcastsTo(x, y))
    return fail(err, "cannot broadcast ", shapeStr(x), " to ", shapeStr(y));
  if (y.numel() == 0)
    return true;
  const BroadcastLayout l = broadcastLayout(y, &x);
  return copyStrided(err, dtypeSize(x.dtype), l, y.numel(), x.data, 0, y.data,
                     0, false);
}

bool iotaBody(const KernelArgs &a, std::string &err) {
  const TensorRef &y = a.outputs[0];
  const int64_t dim = a.intAttrs[0];
  if (dim < 0 || dim >= y.rank)
    return fail(err, "dim ", dim, " is out of range for shape ", shapeStr(y));
  const int64_t size = y.shape[dim];
  const int64_t inner = dimProduct(y, int(dim) + 1, y.rank);
  const int64_t n = y.numel();
  auto fill = [&](auto *out) {
    using T = std::remove_pointer_t<decltype(out)>;
    for (int64_t i = 0; i < n; ++i)
      out[i] = T((i / inner) % size);
  };
  switch (y.dtype) {
  case DType::f32:
    fill(static_cast<float *>(y.data));
    return true;
  case DType::f64:
    fill(static_cast<double *>(y.data));
    return true;
  case DType::i32:
    fill(static_cast<int32_t *>(y.data));
    return true;
  case DType::i64:
    fill(static_cast<int64_t *>(y.data));
    return true;
  default:
    return fail(err, "unsupported dtype ", dtypeName(y.dtype),
                " for the output (expected f32, f64, i32 or i64)");
  }
}

} // namespace dsc::rt::cpu
