//===- RefKernels.cpp - Reference kernels: core, elementwise, shapes ------===//
//
// Tensor utilities, elementwise ops, casts, data movement, reductions and
// matmul. The NN-specific kernels live in RefKernelsNN.cpp.
//
//===----------------------------------------------------------------------===//

#include "runtime/reference/RefKernels.h"
#include "runtime/reference/RefFail.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>

namespace dsc::ref {
namespace {

using detail::fail;

std::string listToString(const std::vector<int64_t> &v) {
  return shapeToString(v);
}

Shape rowMajorStrides(const Shape &shape) {
  Shape strides(shape.size(), 1);
  for (int64_t d = int64_t(shape.size()) - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * shape[d + 1];
  return strides;
}

// Strides of `in` viewed as `out` under numpy broadcasting: dims that are
// missing or expanded from size 1 get stride 0.
Shape broadcastStrides(const Shape &in, const Shape &out) {
  Shape inStrides = rowMajorStrides(in);
  Shape strides(out.size(), 0);
  size_t lead = out.size() - in.size();
  for (size_t d = 0; d < in.size(); ++d)
    if (in[d] != 1)
      strides[lead + d] = inStrides[d];
  return strides;
}

// Walks `shape` in row-major order keeping one flat offset per operand, so a
// step costs amortized O(1) rather than a division per dim per element.
class StridedWalk {
public:
  StridedWalk(Shape shape, std::vector<Shape> strides,
              std::vector<int64_t> bases = {})
      : shape_(std::move(shape)), idx_(shape_.size(), 0),
        strides_(std::move(strides)), off_(std::move(bases)) {
    off_.resize(strides_.size(), 0);
  }
  int64_t operator[](size_t operand) const { return off_[operand]; }
  void next() {
    for (int64_t d = int64_t(shape_.size()) - 1; d >= 0; --d) {
      ++idx_[d];
      for (size_t k = 0; k < off_.size(); ++k)
        off_[k] += strides_[k][d];
      if (idx_[d] < shape_[d])
        return;
      idx_[d] = 0;
      for (size_t k = 0; k < off_.size(); ++k)
        off_[k] -= strides_[k][d] * shape_[d];
    }
  }

private:
  Shape shape_, idx_;
  std::vector<Shape> strides_;
  std::vector<int64_t> off_;
};

int64_t shapeNumel(const Shape &shape) { return Tensor(shape, {}).numel(); }

Result<Tensor> zerosOf(const char *kernel, const Shape &shape) {
  int64_t n = shapeNumel(shape);
  if (n < 0)
    return fail(kernel, ": invalid shape ", shapeToString(shape));
  return Tensor(shape, std::vector<double>(size_t(n), 0.0));
}

std::string checkSameShape(const char *kernel, const Tensor &x,
                           const char *xName, const Tensor &y,
                           const char *yName) {
  if (x.shape == y.shape)
    return "";
  std::ostringstream os;
  os << kernel << ": " << xName << " has shape " << shapeToString(x.shape)
     << " but " << yName << " has shape " << shapeToString(y.shape);
  return os.str();
}

// Rounds to a binary format with `mantBits` stored mantissa bits and normal
// exponents in [emin, emax], working on the double's bits: round-to-nearest-
// even at the target quantum, which is coarser below emin (subnormals).
double roundToFormat(double x, int mantBits, int emin, int emax) {
  uint64_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  bool negative = bits >> 63;
  int biasedExp = int((bits >> 52) & 0x7FF);
  if (biasedExp == 0x7FF)
    return x;         // inf or nan
  if (biasedExp == 0) // zero or a double subnormal, below every target's range
    return negative ? -0.0 : 0.0;
  int e = biasedExp - 1023;
  uint64_t sig = (bits & ((uint64_t(1) << 52) - 1)) | (uint64_t(1) << 52);
  // x = sig * 2^(e-52); the target quantum is 2^q.
  int q = std::max(e, emin) - mantBits;
  int shift = q - (e - 52);
  uint64_t kept = 0;
  if (shift <= 53) { // otherwise x < quantum/2 and rounds to zero
    kept = sig >> shift;
    uint64_t rem = sig & ((uint64_t(1) << shift) - 1);
    uint64_t half = uint64_t(1) << (shift - 1);
    if (rem > half || (rem == half && (kept & 1)))
      ++kept;
  }
  double mag = std::ldexp(double(kept), q);
  if (mag >= std::ldexp(1.0, emax + 1))
    mag = std::numeric_limits<double>::infinity();
  return negative ? -mag : mag;
}

double applyBinary(BinaryKind kind, double a, double b) {
  switch (kind) {
  case BinaryKind::Add:
    return a + b;
  case BinaryKind::Sub:
    return a - b;
  case BinaryKind::Mul:
    return a * b;
  case BinaryKind::Div:
    return a / b;
  case BinaryKind::Minimum: // nan propagates, as in numpy
    return (a < b || std::isnan(a)) ? a : b;
  case BinaryKind::Maximum:
    return (a > b || std::isnan(a)) ? a : b;
  case BinaryKind::Equal:
    return a == b ? 1.0 : 0.0;
  }
  return std::nan("");
}

const double kSqrt2OverPi = 0.79788456080286535587989211986876;
const double kInvSqrt2 = 0.70710678118654752440084436210485;
const double kInvSqrt2Pi = 0.39894228040143267793994605993438;

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

double applyUnary(UnaryKind kind, double x) {
  switch (kind) {
  case UnaryKind::Neg:
    return -x;
  case UnaryKind::Exp:
    return std::exp(x);
  case UnaryKind::Log:
    return std::log(x);
  case UnaryKind::Tanh:
    return std::tanh(x);
  case UnaryKind::Rsqrt:
    return 1.0 / std::sqrt(x);
  case UnaryKind::Sqrt:
    return std::sqrt(x);
  case UnaryKind::Relu:
    return x > 0 ? x : 0.0;
  case UnaryKind::Silu:
    return x * sigmoid(x);
  case UnaryKind::GeluTanh:
    return 0.5 * x * (1 + std::tanh(kSqrt2OverPi * (x + 0.044715 * x * x * x)));
  case UnaryKind::GeluErf:
    return 0.5 * x * (1 + std::erf(x * kInvSqrt2));
  }
  return std::nan("");
}

// Shared driver for the elementwise derivative kernels: x and g same shape.
template <typename F>
Result<Tensor> elementwiseGrad(const char *kernel, const Tensor &x,
                               const Tensor &g, F derivative) {
  if (auto e = checkTensor(kernel, "x", x); !e.empty())
    return Error{e};
  if (auto e = checkTensor(kernel, "g", g); !e.empty())
    return Error{e};
  if (auto e = checkSameShape(kernel, x, "x", g, "g"); !e.empty())
    return Error{e};
  Tensor out(x.shape, std::vector<double>(x.data.size()));
  for (size_t i = 0; i < x.data.size(); ++i)
    out.data[i] = g.data[i] * derivative(x.data[i]);
  return out;
}

bool axisInRange(int64_t axis, int64_t rank) {
  return axis >= 0 && axis < rank;
}

} // namespace

//===--- Tensor and utilities ---------------------------------------------===//

Tensor::Tensor(Shape s) : shape(std::move(s)) {
  int64_t n = numel();
  data.assign(size_t(std::max<int64_t>(n, 0)), 0.0);
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0)
      return -1;
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d)
      return -1;
    n *= d;
  }
  return n;
}

std::string Tensor::validate() const {
  int64_t n = numel();
  std::ostringstream os;
  if (n < 0)
    os << "shape " << shapeToString(shape)
       << " has a negative dim or too many elements";
  else if (uint64_t(n) != data.size())
    os << "shape " << shapeToString(shape) << " needs " << n
       << " values but the tensor holds " << data.size();
  return os.str();
}

std::string shapeToString(const Shape &shape) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < shape.size(); ++i)
    os << (i ? ", " : "") << shape[i];
  os << "]";
  return os.str();
}

std::string checkTensor(const char *kernel, const char *arg, const Tensor &t) {
  std::string problem = t.validate();
  if (problem.empty())
    return "";
  return std::string(kernel) + ": " + arg + ": " + problem;
}

Result<Shape> broadcastShapes(const Shape &a, const Shape &b) {
  size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    // Align trailing dims; a missing leading dim acts as 1.
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      return fail("cannot broadcast shapes ", shapeToString(a), " and ",
                  shapeToString(b));
    out[i] = da == 1 ? db : da;
  }
  return out;
}

double roundToDType(double x, DType dtype) {
  switch (dtype) {
  case DType::f64:
    return x;
  case DType::f32:
    return roundToFormat(x, 23, -126, 127);
  case DType::f16:
    return roundToFormat(x, 10, -14, 15);
  case DType::bf16:
    return roundToFormat(x, 7, -126, 127);
  case DType::i32:
  case DType::i64:
    return x; // integer tensors hold integral doubles already
  }
  return x;
}

//===--- Elementwise ------------------------------------------------------===//

Result<Tensor> binary(BinaryKind kind, const Tensor &a, const Tensor &b) {
  if (auto e = checkTensor("binary", "a", a); !e.empty())
    return Error{e};
  if (auto e = checkTensor("binary", "b", b); !e.empty())
    return Error{e};
  Result<Shape> shape = broadcastShapes(a.shape, b.shape);
  if (!shape)
    return fail("binary: ", shape.error);
  Tensor out(shape.value);
  StridedWalk walk(shape.value, {broadcastStrides(a.shape, shape.value),
                                 broadcastStrides(b.shape, shape.value)});
  for (double &o : out.data) {
    o = applyBinary(kind, a.data[walk[0]], b.data[walk[1]]);
    walk.next();
  }
  return out;
}

Result<Tensor> unary(UnaryKind kind, const Tensor &x) {
  if (auto e = checkTensor("unary", "x", x); !e.empty())
    return Error{e};
  Tensor out = x;
  for (double &v : out.data)
    v = applyUnary(kind, v);
  return out;
}

Result<Tensor> gelu_grad(const Tensor &x, const Tensor &g, bool tanhForm) {
  if (tanhForm)
    return elementwiseGrad("gelu_grad", x, g, [](double v) {
      double inner = kSqrt2OverPi * (v + 0.044715 * v * v * v);
      double t = std::tanh(inner);
      // Product rule on 0.5 v (1 + tanh(inner)); tanh' = 1 - tanh^2.
      return 0.5 * (1 + t) +
             0.5 * v * (1 - t * t) * kSqrt2OverPi * (1 + 3 * 0.044715 * v * v);
    });
  return elementwiseGrad("gelu_grad", x, g, [](double v) {
    // Phi(v) + v * phi(v): the CDF plus v times the normal density.
    return 0.5 * (1 + std::erf(v * kInvSqrt2)) +
           v * kInvSqrt2Pi * std::exp(-0.5 * v * v);
  });
}

Result<Tensor> silu_grad(const Tensor &x, const Tensor &g) {
  return elementwiseGrad("silu_grad", x, g, [](double v) {
    double s = sigmoid(v);
    return s * (1 + v * (1 - s)); // sigmoid' = s(1-s)
  });
}

Result<Tensor> relu_grad(const Tensor &x, const Tensor &g) {
  return elementwiseGrad("relu_grad", x, g,
                         [](double v) { return v > 0 ? 1.0 : 0.0; });
}

Result<Tensor> cast(const Tensor &x, DType dtype) {
  if (auto e = checkTensor("cast", "x", x); !e.empty())
    return Error{e};
  Tensor out = x;
  for (double &v : out.data)
    v = roundToDType(v, dtype);
  return out;
}

//===--- Shape and data movement ------------------------------------------===//

Result<Tensor> reshape(const Tensor &x, const Shape &shape) {
  if (auto e = checkTensor("reshape", "x", x); !e.empty())
    return Error{e};
  Shape target = shape;
  int64_t inferred = -1;
  for (size_t i = 0; i < target.size(); ++i) {
    if (target[i] == -1 && inferred < 0) {
      inferred = int64_t(i);
      target[i] = 1; // placeholder while the other dims are multiplied
    } else if (target[i] < 0) {
      return fail("reshape: invalid target shape ", shapeToString(shape),
                  " (at most one -1, other dims non-negative)");
    }
  }
  int64_t known = shapeNumel(target);
  if (inferred >= 0) {
    if (known <= 0 || x.numel() % known != 0)
      return fail("reshape: cannot infer the -1 in ", shapeToString(shape),
                  " for ", x.numel(), " elements");
    target[inferred] = x.numel() / known;
  }
  if (shapeNumel(target) != x.numel())
    return fail("reshape: cannot reshape ", shapeToString(x.shape), " (",
                x.numel(), " elements) to ", shapeToString(shape));
  return Tensor(target, x.data);
}

Result<Tensor> transpose(const Tensor &x, const std::vector<int64_t> &perm) {
  if (auto e = checkTensor("transpose", "x", x); !e.empty())
    return Error{e};
  std::vector<bool> seen(x.shape.size(), false);
  bool valid = perm.size() == x.shape.size();
  for (size_t i = 0; valid && i < perm.size(); ++i) {
    valid = axisInRange(perm[i], x.rank()) && !seen[perm[i]];
    if (valid)
      seen[perm[i]] = true;
  }
  if (!valid)
    return fail("transpose: ", listToString(perm),
                " is not a permutation of the dims of a tensor of shape ",
                shapeToString(x.shape));
  Shape inStrides = rowMajorStrides(x.shape), outShape(perm.size()),
        strides(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) {
    outShape[i] = x.shape[perm[i]];
    strides[i] = inStrides[perm[i]];
  }
  Tensor out(outShape);
  StridedWalk walk(outShape, {strides});
  for (double &o : out.data) {
    o = x.data[walk[0]];
    walk.next();
  }
  return out;
}

Result<Tensor> slice(const Tensor &x, const std::vector<int64_t> &offsets,
                     const std::vector<int64_t> &sizes) {
  if (auto e = checkTensor("slice", "x", x); !e.empty())
    return Error{e};
  if (offsets.size() != x.shape.size() || sizes.size() != x.shape.size())
    return fail("slice: a tensor of shape ", shapeToString(x.shape),
                " needs one offset and one size per dim, got offsets ",
                listToString(offsets), " and sizes ", listToString(sizes));
  Shape strides = rowMajorStrides(x.shape);
  int64_t base = 0;
  for (size_t d = 0; d < offsets.size(); ++d) {
    if (offsets[d] < 0 || sizes[d] < 0 || offsets[d] > x.shape[d] - sizes[d])
      return fail("slice: offset ", offsets[d], " size ", sizes[d],
                  " is out of range for dim ", d, " of shape ",
                  shapeToString(x.shape));
    base += offsets[d] * strides[d];
  }
  Tensor out(sizes);
  StridedWalk walk(sizes, {strides}, {base});
  for (double &o : out.data) {
    o = x.data[walk[0]];
    walk.next();
  }
  return out;
}

Result<Tensor> pad(const Tensor &x, const std::vector<int64_t> &low,
                   const std::vector<int64_t> &high) {
  if (auto e = checkTensor("pad", "x", x); !e.empty())
    return Error{e};
  if (low.size() != x.shape.size() || high.size() != x.shape.size())
    return fail("pad: a tensor of shape ", shapeToString(x.shape),
                " needs one low and one high padding per dim, got ",
                listToString(low), " and ", listToString(high));
  Shape outShape(x.shape.size());
  for (size_t d = 0; d < outShape.size(); ++d) {
    if (low[d] < 0 || high[d] < 0)
      return fail("pad: padding must be non-negative, got low ",
                  listToString(low), " high ", listToString(high));
    const int64_t kMax = std::numeric_limits<int64_t>::max();
    if (high[d] > kMax - x.shape[d] || low[d] > kMax - x.shape[d] - high[d])
      return fail("pad: padding of dim ", d, " is too large");
    outShape[d] = x.shape[d] + low[d] + high[d];
  }
  Result<Tensor> out = zerosOf("pad", outShape);
  if (!out)
    return out;
  Shape outStrides = rowMajorStrides(outShape);
  int64_t base = 0;
  for (size_t d = 0; d < outShape.size(); ++d)
    base += low[d] * outStrides[d];
  // Walk the input and scatter each value into its padded position.
  StridedWalk walk(x.shape, {outStrides}, {base});
  for (double v : x.data) {
    out.value.data[walk[0]] = v;
    walk.next();
  }
  return out;
}

Result<Tensor> concat(const std::vector<Tensor> &xs, int64_t axis) {
  if (xs.empty())
    return fail("concat: needs at least one tensor");
  const Shape &first = xs[0].shape;
  if (!axisInRange(axis, int64_t(first.size())))
    return fail("concat: axis ", axis, " is out of range for rank ",
                first.size());
  Shape outShape = first;
  outShape[axis] = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    if (auto e = checkTensor("concat", "input", xs[i]); !e.empty())
      return fail(e, " (input ", i, ")");
    Shape expect = first, got = xs[i].shape;
    if (got.size() == expect.size())
      expect[axis] = got[axis];
    if (got != expect)
      return fail("concat: input ", i, " has shape ", shapeToString(got),
                  ", incompatible with input 0's ", shapeToString(first),
                  " along axis ", axis);
    outShape[axis] += got[axis];
  }
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= first[d];
  for (size_t d = axis + 1; d < first.size(); ++d)
    inner *= first[d];
  Tensor out(outShape);
  auto dst = out.data.begin();
  for (int64_t o = 0; o < outer; ++o)
    for (const Tensor &x : xs) {
      int64_t chunk = x.shape[axis] * inner;
      dst = std::copy_n(x.data.begin() + o * chunk, chunk, dst);
    }
  return out;
}

Result<std::vector<Tensor>> split(const Tensor &x, int64_t axis,
                                  const std::vector<int64_t> &sizes) {
  if (auto e = checkTensor("split", "x", x); !e.empty())
    return Error{e};
  if (!axisInRange(axis, x.rank()))
    return fail("split: axis ", axis, " is out of range for rank ", x.rank());
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0 || s > x.shape[axis] - total)
      return fail("split: sizes ", listToString(sizes),
                  " do not partition dim ", axis, " of ",
                  shapeToString(x.shape));
    total += s;
  }
  if (total != x.shape[axis])
    return fail("split: sizes ", listToString(sizes), " sum to ", total,
                " but dim ", axis, " of ", shapeToString(x.shape), " is ",
                x.shape[axis]);
  std::vector<Tensor> outs;
  std::vector<int64_t> offsets(x.shape.size(), 0);
  for (int64_t s : sizes) {
    Shape sizesHere = x.shape;
    sizesHere[axis] = s;
    Result<Tensor> part = slice(x, offsets, sizesHere);
    if (!part)
      return Error{part.error};
    outs.push_back(std::move(part.value));
    offsets[axis] += s;
  }
  return outs;
}

Result<Tensor> broadcast_to(const Tensor &x, const Shape &shape) {
  if (auto e = checkTensor("broadcast_to", "x", x); !e.empty())
    return Error{e};
  bool valid = x.shape.size() <= shape.size();
  size_t lead = shape.size() - std::min(shape.size(), x.shape.size());
  for (size_t d = 0; valid && d < x.shape.size(); ++d)
    valid = x.shape[d] == 1 || x.shape[d] == shape[lead + d];
  if (!valid)
    return fail("broadcast_to: cannot broadcast ", shapeToString(x.shape),
                " to ", shapeToString(shape));
  Result<Tensor> out = zerosOf("broadcast_to", shape);
  if (!out)
    return out;
  StridedWalk walk(shape, {broadcastStrides(x.shape, shape)});
  for (double &o : out.value.data) {
    o = x.data[walk[0]];
    walk.next();
  }
  return out;
}

Result<Tensor> reduce(ReduceKind kind, const Tensor &x,
                      const std::vector<int64_t> &axes, bool keepdim) {
  if (auto e = checkTensor("reduce", "x", x); !e.empty())
    return Error{e};
  std::vector<bool> reduced(x.shape.size(), false);
  for (size_t i = 0; i < axes.size(); ++i) {
    if (!axisInRange(axes[i], x.rank()) || (i > 0 && axes[i] <= axes[i - 1]))
      return fail("reduce: axes ", listToString(axes),
                  " must be strictly increasing and within rank ", x.rank());
    reduced[axes[i]] = true;
  }
  Shape keptShape(x.shape.size()), outShape;
  int64_t count = 1;
  for (size_t d = 0; d < x.shape.size(); ++d) {
    keptShape[d] = reduced[d] ? 1 : x.shape[d];
    if (reduced[d])
      count *= x.shape[d];
    if (!reduced[d] || keepdim)
      outShape.push_back(keptShape[d]);
  }
  double identity =
      kind == ReduceKind::Max ? -std::numeric_limits<double>::infinity() : 0.0;
  Tensor out(outShape,
             std::vector<double>(size_t(shapeNumel(outShape)), identity));
  // Walk the input; reduced dims have stride 0 in the output.
  StridedWalk walk(x.shape, {broadcastStrides(keptShape, x.shape)});
  for (double v : x.data) {
    double &acc = out.data[walk[0]];
    if (kind != ReduceKind::Max)
      acc += v;
    else if (v > acc || std::isnan(v))
      acc = v;
    walk.next();
  }
  if (kind == ReduceKind::Mean)
    for (double &v : out.data)
      v /= double(count);
  return out;
}

Result<Tensor> iota(const Shape &shape, int64_t dim) {
  Result<Tensor> out = zerosOf("iota", shape);
  if (!out)
    return out;
  if (!axisInRange(dim, int64_t(shape.size())))
    return fail("iota: dim ", dim, " is out of range for shape ",
                shapeToString(shape));
  int64_t inner = rowMajorStrides(shape)[dim];
  for (size_t i = 0; i < out.value.data.size(); ++i)
    out.value.data[i] = double((int64_t(i) / inner) % shape[dim]);
  return out;
}

//===--- Matmul -----------------------------------------------------------===//

Result<Tensor> matmul(const Tensor &a, const Tensor &b, bool transposeA,
                      bool transposeB) {
  if (auto e = checkTensor("matmul", "a", a); !e.empty())
    return Error{e};
  if (auto e = checkTensor("matmul", "b", b); !e.empty())
    return Error{e};
  if (a.rank() < 2 || b.rank() < 2)
    return fail("matmul: operands need rank >= 2, got ", shapeToString(a.shape),
                " and ", shapeToString(b.shape));
  int64_t ra = a.rank(), rb = b.rank();
  int64_t M = a.shape[ra - 2], K = a.shape[ra - 1];
  int64_t Kb = b.shape[rb - 2], N = b.shape[rb - 1];
  if (transposeA)
    std::swap(M, K);
  if (transposeB)
    std::swap(Kb, N);
  if (K != Kb)
    return fail("matmul: contraction dims differ: a ", shapeToString(a.shape),
                transposeA ? " (transposed)" : "", " vs b ",
                shapeToString(b.shape), transposeB ? " (transposed)" : "");
  Shape batchA(a.shape.begin(), a.shape.end() - 2);
  Shape batchB(b.shape.begin(), b.shape.end() - 2);
  Result<Shape> batch = broadcastShapes(batchA, batchB);
  if (!batch)
    return fail("matmul: batch dims: ", batch.error);
  Shape outShape = batch.value;
  outShape.push_back(M);
  outShape.push_back(N);
  Tensor out(outShape);
  // Element (m, k) of a's matrix sits at m*aM + k*aK; likewise for b.
  int64_t aM = transposeA ? 1 : K, aK = transposeA ? M : 1;
  int64_t bK = transposeB ? 1 : N, bN = transposeB ? K : 1;
  Shape stridesA = broadcastStrides(batchA, batch.value);
  Shape stridesB = broadcastStrides(batchB, batch.value);
  for (int64_t &s : stridesA)
    s *= M * K;
  for (int64_t &s : stridesB)
    s *= K * N;
  StridedWalk walk(batch.value, {stridesA, stridesB});
  int64_t numBatches = shapeNumel(batch.value);
  double *o = out.data.data();
  for (int64_t bi = 0; bi < numBatches; ++bi, walk.next()) {
    const double *pa = a.data.data() + walk[0];
    const double *pb = b.data.data() + walk[1];
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double acc = 0;
        for (int64_t k = 0; k < K; ++k)
          acc += pa[m * aM + k * aK] * pb[k * bK + n * bN];
        *o++ = acc;
      }
  }
  return out;
}

} // namespace dsc::ref
