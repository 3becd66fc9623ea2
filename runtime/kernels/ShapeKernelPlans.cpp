//===- ShapeKernelPlans.cpp - data movement as a plan of strided copies ---===//
//
// The shape kernels (transpose, slice, pad, broadcast, concat, split, iota)
// check their arguments and reduce to a StridedCopy (KernelChecks.h) or a
// row layout here, so every backend refuses the same arguments with the
// same line and only executes the copy its own way.
//
//===----------------------------------------------------------------------===//
#include "runtime/kernels/KernelChecks.h"

#include <algorithm>
#include <vector>

namespace dsc::rt {
namespace {

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

bool planTranspose(const KernelArgs &a, StridedCopy &plan, std::string &err) {
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
  plan = {};
  plan.elemSize = dtypeSize(x.dtype);
  plan.total = y.numel();
  if (plan.total > 0)
    plan.layout = makeLayout(y.shape, strides, y.rank);
  return true;
}

bool planSlice(const KernelArgs &a, StridedCopy &plan, std::string &err) {
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
  plan = {};
  plan.elemSize = dtypeSize(x.dtype);
  plan.total = y.numel();
  plan.srcBase = base;
  if (plan.total > 0)
    plan.layout = makeLayout(y.shape, strides, y.rank);
  return true;
}

bool planPad(const KernelArgs &a, StridedCopy &plan, std::string &err) {
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
  plan = {};
  plan.elemSize = dtypeSize(x.dtype);
  plan.total = x.numel(); // walk x, scatter into its padded position
  plan.dstBase = base;
  plan.scatter = true;
  if (plan.total > 0)
    plan.layout = makeLayout(x.shape, strides, x.rank);
  return true;
}

bool planBroadcast(const KernelArgs &a, StridedCopy &plan, std::string &err) {
  const TensorRef &x = a.inputs[0], &y = a.outputs[0];
  if (!sameDType(err, a))
    return false;
  if (!broadcastsTo(x, y))
    return fail(err, "cannot broadcast ", shapeStr(x), " to ", shapeStr(y));
  plan = {};
  plan.elemSize = dtypeSize(x.dtype);
  plan.total = y.numel();
  if (plan.total > 0)
    plan.layout = broadcastLayout(y, &x);
  return true;
}

bool checkConcat(const KernelArgs &a, AxisBlocks &blocks, std::string &err) {
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
  blocks.outer = dimProduct(y, 0, int(axis));
  blocks.innerBytes =
      dimProduct(y, int(axis) + 1, y.rank) * int64_t(dtypeSize(y.dtype));
  return true;
}

bool checkSplit(const KernelArgs &a, AxisBlocks &blocks, std::string &err) {
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
  blocks.outer = dimProduct(x, 0, int(axis));
  blocks.innerBytes =
      dimProduct(x, int(axis) + 1, x.rank) * int64_t(dtypeSize(x.dtype));
  return true;
}

bool checkIota(const KernelArgs &a, int64_t &size, int64_t &inner,
               std::string &err) {
  const TensorRef &y = a.outputs[0];
  const int64_t dim = a.intAttrs[0];
  if (dim < 0 || dim >= y.rank)
    return fail(err, "dim ", dim, " is out of range for shape ", shapeStr(y));
  if (y.dtype != DType::f32 && y.dtype != DType::f64 && y.dtype != DType::i32 &&
      y.dtype != DType::i64)
    return fail(err, "unsupported dtype ", dtypeName(y.dtype),
                " for the output (expected f32, f64, i32 or i64)");
  size = y.shape[dim];
  inner = dimProduct(y, int(dim) + 1, y.rank);
  return true;
}

bool checkReduce(const KernelArgs &a, bool reduced[kMaxRank], int64_t &count,
                 std::string &err) {
  const TensorRef &x = a.inputs[0], &y = a.outputs[0];
  const int64_t *axes = a.intAttrs;
  const size_t numAxes = a.numIntAttrs;
  std::fill(reduced, reduced + kMaxRank, false);
  for (size_t i = 0; i < numAxes; ++i) {
    if (axes[i] < 0 || axes[i] >= x.rank || (i > 0 && axes[i] <= axes[i - 1]))
      return fail(err, "axes ", listStr(axes, numAxes),
                  " must be strictly increasing and within rank ", x.rank);
    reduced[axes[i]] = true;
  }
  // The output is x's shape without the reduced dims, or with them as 1.
  const bool keepdim = y.rank == x.rank;
  std::vector<int64_t> want;
  count = 1;
  for (int d = 0; d < x.rank; ++d) {
    if (reduced[d])
      count *= x.shape[d];
    if (!reduced[d])
      want.push_back(x.shape[d]);
    else if (keepdim)
      want.push_back(1);
  }
  if (y.rank != int(want.size()) ||
      !std::equal(want.begin(), want.end(), y.shape))
    return fail(err, "output has shape ", shapeStr(y), " but reducing ",
                shapeStr(x), " over ", listStr(axes, numAxes), " gives ",
                listStr(want.data(), want.size()), " (or with kept dims)");
  return true;
}

} // namespace dsc::rt
