//===- ElementwiseTest.cpp - elementwise, cast, copy and dropout kernels
//---===//
//
// Conformance cases: binary and unary ops under broadcasting and in place,
// activation gradients, casts between float formats, copies, fills and
// dropout masks keyed by the global sample.
//
//===----------------------------------------------------------------------===//

#include "test/unit/conformance/KernelTestSupport.h"

using namespace dsc;
using namespace dsc::conformance;

namespace {

class ElementwiseKernels : public Conformance {};
class CastKernels : public Conformance {};
class CopyKernels : public Conformance {};
class DropoutKernels : public Conformance {};

//===--- Elementwise ------------------------------------------------------===//

struct BinaryCase {
  const char *name;
  ref::BinaryKind kind;
};
const BinaryCase kBinary[] = {
    {"ds.add", ref::BinaryKind::Add},
    {"ds.sub", ref::BinaryKind::Sub},
    {"ds.mul", ref::BinaryKind::Mul},
    {"ds.div", ref::BinaryKind::Div},
    {"ds.minimum", ref::BinaryKind::Minimum},
    {"ds.maximum", ref::BinaryKind::Maximum},
    {"ds.equal", ref::BinaryKind::Equal},
};

// (a, b, out) shapes covering same-shape, bias, scalar and general
// broadcasts.
const std::vector<std::array<Shape, 3>> kBroadcasts = {
    {Shape{3, 5, 7}, Shape{3, 5, 7}, Shape{3, 5, 7}},
    {Shape{4, 13}, Shape{13}, Shape{4, 13}},
    {Shape{13}, Shape{4, 13}, Shape{4, 13}},
    {Shape{2, 3, 5}, Shape{3, 1}, Shape{2, 3, 5}},
    {Shape{}, Shape{5, 7}, Shape{5, 7}},
    {Shape{5, 7}, Shape{}, Shape{5, 7}},
    {Shape{5, 1, 7}, Shape{1, 3, 1}, Shape{5, 3, 7}},
    {Shape{7, 1}, Shape{1, 5}, Shape{7, 5}},
    {Shape{1}, Shape{13}, Shape{13}},
    {Shape{2, 1, 3, 1}, Shape{5, 1, 4}, Shape{2, 5, 3, 4}},
    {Shape{40000}, Shape{40000}, Shape{40000}},
    {Shape{300, 257}, Shape{257}, Shape{300, 257}},
    {Shape{0, 3}, Shape{3}, Shape{0, 3}},
};

TEST_P(ElementwiseKernels, BinaryOpsMatchReferenceUnderBroadcasting) {
  SEEDED_RNG(rng);
  for (const BinaryCase &op : kBinary)
    for (const auto &[sa, sb, so] : kBroadcasts) {
      SCOPED_TRACE(std::string(op.name) + " " + shapeString(sa) + " " +
                   shapeString(sb));
      Buf a = uniform(rng, sa), b = uniform(rng, sb, 0.5, 2);
      if (op.kind == ref::BinaryKind::Equal) // small integers: ties happen
        for (Buf *t : {&a, &b})
          for (int64_t i = 0; i < t->numel(); ++i)
            t->set(i, std::round(t->get(i)));
      Buf out = poisoned(so);
      RUN_OK(op.name, {&a, &b}, {&out});
      REF_OK(want, ref::binary(op.kind, a.toRef(), b.toRef()));
      EXPECT_TRUE(close(out, want));
    }
}

TEST_P(ElementwiseKernels, BinaryOpsInPlaceMatchOutOfPlace) {
  SEEDED_RNG(rng);
  for (const BinaryCase &op : kBinary)
    for (const auto &[sa, sb] : {std::pair<Shape, Shape>{{3, 5, 7}, {3, 5, 7}},
                                 {{300, 257}, {257}},
                                 {{40013}, {40013}}}) {
      Buf a = uniform(rng, sa), b = uniform(rng, sb, 0.5, 2);
      Buf out = poisoned(sa);
      RUN_OK(op.name, {&a, &b}, {&out});
      RUN_OK(op.name, {&a, &b}, {&a}); // a updated in place
      EXPECT_TRUE(bitwiseEqual(a, out)) << op.name;
    }
  Buf a({4, 5}), b({5}); // the broadcast operand cannot be the output
  EXPECT_RUN_ERROR(
      run("ds.add", {&a, &b}, {&b}),
      "ds.add: output has shape [5] but [4, 5] and [5] broadcast to a "
      "different shape");
}

TEST_P(ElementwiseKernels, BinaryShapeErrors) {
  Buf a({3, 4}), b({5}), out({3, 4}), wrong({4, 3});
  EXPECT_RUN_ERROR(run("ds.mul", {&a, &b}, {&out}),
                   "ds.mul: cannot broadcast shapes [3, 4] and [5]");
  Buf c({4});
  EXPECT_RUN_ERROR(
      run("ds.mul", {&a, &c}, {&wrong}),
      "ds.mul: output has shape [4, 3] but [3, 4] and [4] broadcast to "
      "a different shape");
}

TEST_P(ElementwiseKernels, NanPropagatesThroughMinimumAndMaximum) {
  Buf a = filled({4}, 1.0), b = filled({4}, 2.0), out = poisoned({4});
  a.set(1, kNaN);
  b.set(2, kNaN);
  for (const char *name : {"ds.minimum", "ds.maximum"}) {
    RUN_OK(name, {&a, &b}, {&out});
    REF_OK(want, ref::binary(std::string(name) == "ds.minimum"
                                 ? ref::BinaryKind::Minimum
                                 : ref::BinaryKind::Maximum,
                             a.toRef(), b.toRef()));
    EXPECT_TRUE(close(out, want)) << name;
  }
}

struct UnaryCase {
  const char *name;
  ref::UnaryKind kind;
  double lo, hi;
  int64_t approx; // ds.gelu's attribute, -1 for none
};
const UnaryCase kUnary[] = {
    {"ds.neg", ref::UnaryKind::Neg, -3, 3, -1},
    {"ds.exp", ref::UnaryKind::Exp, -30, 30, -1},
    {"ds.log", ref::UnaryKind::Log, 1e-3, 100, -1},
    {"ds.tanh", ref::UnaryKind::Tanh, -5, 5, -1},
    {"ds.sqrt", ref::UnaryKind::Sqrt, 0, 100, -1},
    {"ds.rsqrt", ref::UnaryKind::Rsqrt, 1e-3, 100, -1},
    {"ds.relu", ref::UnaryKind::Relu, -3, 3, -1},
    {"ds.silu", ref::UnaryKind::Silu, -12, 12, -1},
    {"ds.gelu", ref::UnaryKind::GeluErf, -8, 8, 0},
    {"ds.gelu", ref::UnaryKind::GeluTanh, -8, 8, 1},
};

std::vector<int64_t> approxAttr(int64_t approx) {
  return approx < 0 ? std::vector<int64_t>{} : std::vector<int64_t>{approx};
}

TEST_P(ElementwiseKernels, UnaryOpsMatchReference) {
  SEEDED_RNG(rng);
  for (const UnaryCase &op : kUnary)
    for (const Shape &s : {Shape{3, 5, 7}, Shape{13}, Shape{}, Shape{40001}}) {
      SCOPED_TRACE(std::string(op.name) + " " + shapeString(s));
      Buf x = uniform(rng, s, op.lo, op.hi), y = poisoned(s);
      RUN_OK(op.name, {&x}, {&y}, approxAttr(op.approx));
      REF_OK(want, ref::unary(op.kind, x.toRef()));
      // The reference's 1 + erf(x) in double is off by ~1e-16 absolute.
      EXPECT_TRUE(close(y, want, 1e-5, 1e-14));
      // Element by element: the transcendental ones are accurate everywhere,
      // not just on average (down to the reference's own absolute error:
      // 1 + erf(x) in double has ~1e-16 of it).
      for (int64_t i = 0; i < y.numel(); ++i) {
        double w = want.data[size_t(i)];
        ASSERT_NEAR(y.get(i), w, 2e-6 * std::fabs(w) + 1e-14)
            << op.name << " at x = " << x.get(i);
      }
    }
}

TEST_P(ElementwiseKernels, UnaryOpsAtSpecialValues) {
  std::vector<double> v = {0.0,    -0.0,   1e-30, -1e-30, 0.5,  -0.5,
                           0.625,  1.0,    -1.0,  1.5,    -1.5, 10.0,
                           -10.0,  20.0,   -20.0, 88.7,   88.8, -87.0,
                           -103.0, -110.0, kInf,  -kInf,  kNaN};
  Buf x({int64_t(v.size())});
  for (size_t i = 0; i < v.size(); ++i)
    x.set(int64_t(i), v[i]);
  for (const UnaryCase &op : kUnary) {
    if (op.kind == ref::UnaryKind::Log || op.kind == ref::UnaryKind::Sqrt ||
        op.kind == ref::UnaryKind::Rsqrt)
      continue; // libm's, and NaN below 0 either way
    Buf y = poisoned(x.shape);
    RUN_OK(op.name, {&x}, {&y}, approxAttr(op.approx));
    REF_OK(want, ref::unary(op.kind, x.toRef()));
    for (size_t i = 0; i < v.size(); ++i) {
      double w = ref::roundToDType(want.data[i], ref::DType::f32);
      double g = y.get(int64_t(i));
      if (std::isnan(w) || std::isinf(w)) {
        EXPECT_TRUE(std::isnan(w) ? std::isnan(g) : g == w)
            << op.name << "(" << v[i] << ") = " << g << ", want " << w;
      } else { // subnormal results may flush; see above for 1e-14
        EXPECT_NEAR(g, w, 2e-6 * std::fabs(w) + 1e-14)
            << op.name << "(" << v[i] << ")";
      }
    }
  }
}

TEST_P(ElementwiseKernels, UnaryOpsInPlaceMatchOutOfPlace) {
  SEEDED_RNG(rng);
  for (const UnaryCase &op : kUnary) {
    Buf x = uniform(rng, {40013}, op.lo, op.hi), y = poisoned({40013});
    RUN_OK(op.name, {&x}, {&y}, approxAttr(op.approx));
    RUN_OK(op.name, {&x}, {&x}, approxAttr(op.approx));
    EXPECT_TRUE(bitwiseEqual(x, y)) << op.name;
  }
}

// silu(gate) * up against the float64 reference's two steps, and in place
// over either operand.
TEST_P(ElementwiseKernels, SwigluMatchesSiluTimesUp) {
  SEEDED_RNG(rng);
  for (const Shape &s : {Shape{3, 5, 7}, Shape{13}, Shape{40001}}) {
    Buf gate = uniform(rng, s, -12, 12), up = uniform(rng, s),
        out = poisoned(s);
    RUN_OK("ds.swiglu", {&gate, &up}, {&out});
    REF_OK(silu, ref::unary(ref::UnaryKind::Silu, gate.toRef()));
    REF_OK(want, ref::binary(ref::BinaryKind::Mul, silu, up.toRef()));
    EXPECT_TRUE(close(out, want));
    Buf upCopy = up;
    RUN_OK("ds.swiglu", {&gate, &upCopy}, {&upCopy});
    EXPECT_TRUE(bitwiseEqual(upCopy, out));
    RUN_OK("ds.swiglu", {&gate, &up}, {&gate});
    EXPECT_TRUE(bitwiseEqual(gate, out));
  }
  Buf a({2, 3}), b({3, 2}), out({2, 3});
  EXPECT_RUN_ERROR(
      run("ds.swiglu", {&a, &b}, {&out}),
      "ds.swiglu: input 1 has shape [3, 2] but the output has shape "
      "[2, 3]");
}

TEST_P(ElementwiseKernels, ActivationGradientsMatchReference) {
  SEEDED_RNG(rng);
  for (const Shape &s : {Shape{3, 5, 7}, Shape{13}, Shape{40001}}) {
    Buf x = uniform(rng, s, -8, 8), g = uniform(rng, s), out = poisoned(s);
    RUN_OK("ds.relu_grad", {&x, &g}, {&out});
    REF_OK(relu, ref::relu_grad(x.toRef(), g.toRef()));
    EXPECT_TRUE(close(out, relu));
    RUN_OK("ds.silu_grad", {&x, &g}, {&out});
    REF_OK(silu, ref::silu_grad(x.toRef(), g.toRef()));
    EXPECT_TRUE(close(out, silu));
    for (int64_t approx : {0, 1}) {
      RUN_OK("ds.gelu_grad", {&x, &g}, {&out}, {approx});
      REF_OK(gelu, ref::gelu_grad(x.toRef(), g.toRef(), approx == 1));
      EXPECT_TRUE(close(out, gelu)) << "approx " << approx;
    }
    Buf gi = g; // in place over g
    RUN_OK("ds.gelu_grad", {&x, &gi}, {&gi}, {0});
    RUN_OK("ds.gelu_grad", {&x, &g}, {&out}, {0});
    EXPECT_TRUE(bitwiseEqual(gi, out));
  }
  Buf x({3}), g({3}), out({3});
  EXPECT_RUN_ERROR(
      run("ds.gelu_grad", {&x, &g}, {&out}, {2}),
      "ds.gelu_grad: approximate must be 0 (erf) or 1 (tanh), got 2");
}

TEST_P(ElementwiseKernels, BiasGeluMatchesAddThenGelu) {
  SEEDED_RNG(rng);
  for (const Shape &s : {Shape{3, 5, 7}, Shape{13}, Shape{300, 257}})
    for (int64_t approx : {0, 1}) {
      SCOPED_TRACE(shapeString(s) + " approx " + std::to_string(approx));
      Buf x = uniform(rng, s, -4, 4), b = uniform(rng, {s.back()});
      Buf sum = poisoned(s), y = poisoned(s);
      RUN_OK("ds.bias_gelu", {&x, &b}, {&sum, &y}, {approx});
      REF_OK(wantSum, ref::binary(ref::BinaryKind::Add, x.toRef(), b.toRef()));
      EXPECT_TRUE(close(sum, ref::cast(wantSum, ref::DType::f32).value, 0));
      REF_OK(want, ref::unary(approx ? ref::UnaryKind::GeluTanh
                                     : ref::UnaryKind::GeluErf,
                              sum.toRef()));
      EXPECT_TRUE(close(y, want, 1e-5, 1e-14));
      RUN_OK("ds.bias_gelu", {&x, &b}, {&x, &sum}, {approx}); // sum over x
      EXPECT_TRUE(bitwiseEqual(sum, y));
    }
  Buf x({2, 4}), b({3}), s({2, 4}), y({2, 4});
  EXPECT_RUN_ERROR(
      run("ds.bias_gelu", {&x, &b}, {&s, &y}, {0}),
      "ds.bias_gelu: bias has shape [3] but needs [4] (the last dim of "
      "x)");
}

//===--- Cast, copy, dropout ----------------------------------------------===//

ref::DType refDType(DType t) {
  switch (t) {
  case DType::f16:
    return ref::DType::f16;
  case DType::bf16:
    return ref::DType::bf16;
  case DType::f32:
    return ref::DType::f32;
  default:
    return ref::DType::f64;
  }
}

TEST_P(CastKernels, RoundsToNearestEvenBetweenFloatFormats) {
  SEEDED_RNG(rng);
  // Random values over many binades plus ties, overflow, subnormals, NaN.
  std::vector<double> v;
  std::uniform_real_distribution<double> mant(-1, 1);
  std::uniform_int_distribution<int> expo(-30, 20);
  for (int i = 0; i < 3000; ++i)
    v.push_back(std::ldexp(mant(rng), expo(rng)));
  for (double s : {1.0, -1.0})
    for (double e : {0.0, 0x1p-11, 0x1p-11 + 0x1p-40, 3 * 0x1p-11, 0x1p-8,
                     3 * 0x1p-8, 0x1p-9 + 0x1p-40})
      v.push_back(s * (1 + e));
  for (double x :
       {65504.0, 65519.0, 65520.0, 70000.0, 3.4e38, 3.5e38, 1e39, 6e-8, 3e-8,
        2.9e-8, 1e-40, 1e-46, 0.0, -0.0, kInf, -kInf, kNaN})
    v.push_back(x);
  const DType floats[] = {DType::f32, DType::f64, DType::f16, DType::bf16};
  for (DType from : floats)
    for (DType to : floats) {
      SCOPED_TRACE(std::string(rt::dtypeName(from)) + " -> " +
                   rt::dtypeName(to));
      Buf x({int64_t(v.size())}, from);
      for (size_t i = 0; i < v.size(); ++i) // the source's own rounding
        x.set(int64_t(i),
              ref::roundToDType(
                  v[i], refDType(from == DType::f64 ? DType::f64 : from)));
      if (from == DType::f16 || from == DType::bf16) // set() goes via float
        for (size_t i = 0; i < v.size(); ++i)
          x.set(int64_t(i), ref::roundToDType(float(v[i]), refDType(from)));
      Buf y = poisoned(x.shape, to);
      RUN_OK("ds.cast", {&x}, {&y});
      int bad = 0;
      for (int64_t i = 0; i < x.numel(); ++i) {
        double want = ref::roundToDType(x.get(i), refDType(to));
        double got = y.get(i);
        bool ok = std::isnan(want)
                      ? std::isnan(got)
                      : got == want && std::signbit(got) == std::signbit(want);
        if (!ok && bad++ < 5)
          ADD_FAILURE() << x.get(i) << " -> " << got << ", want " << want;
      }
    }
}

TEST_P(CastKernels, ShapeAndDtypeErrors) {
  Buf x({3}), y({4}, DType::f16), i({3}, DType::i32), z({3}, DType::f16);
  EXPECT_RUN_ERROR(run("ds.cast", {&x}, {&y}),
                   "ds.cast: output has shape [4] but x has shape [3]");
  EXPECT_RUN_ERROR(
      run("ds.cast", {&i}, {&z}),
      "ds.cast: unsupported dtype i32 for x (expected f32, f64, f16 or "
      "bf16)");
}

TEST_P(CopyKernels, CopiesBytesAcrossShapes) {
  SEEDED_RNG(rng);
  Buf x = uniform(rng, {3, 5, 7}), y = poisoned({105}), z = poisoned({7, 15});
  RUN_OK("ds.copy", {&x}, {&y});
  EXPECT_EQ(std::memcmp(x.words.data(), y.words.data(), x.bytes()), 0);
  RUN_OK("ds.copy", {&x}, {&x}); // in place: nothing to do
  Buf idx = indices(rng, {5, 3}, 100, DType::i64), w({5, 3}, DType::i64);
  RUN_OK("ds.copy", {&idx}, {&w});
  EXPECT_TRUE(bitwiseEqual(idx, w));
  Buf small({104});
  EXPECT_RUN_ERROR(
      run("ds.copy", {&x}, {&small}),
      "ds.copy: x holds 420 bytes (f32 [3, 5, 7]) but the output holds "
      "416 (f32 [104])");
  (void)z;
}

TEST_P(CopyKernels, FillWritesTheValueInTheOutputDtype) {
  for (DType t : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32,
                  DType::i64}) {
    Buf y = poisoned({3, 5}, t);
    double v = t == DType::i32 || t == DType::i64 ? -7 : 0.1;
    RUN_OK("ds.fill", {}, {&y}, {}, {v});
    double want = t == DType::i32 || t == DType::i64
                      ? v
                      : ref::roundToDType(v, refDType(t));
    for (int64_t i = 0; i < y.numel(); ++i)
      ASSERT_EQ(y.get(i), want) << rt::dtypeName(t);
  }
  Buf i({2}, DType::i32), empty({0});
  EXPECT_RUN_ERROR(run("ds.fill", {}, {&i}, {}, {0.5}),
                   "ds.fill: value 0.5 is not an integer in the range of i32");
  RUN_OK("ds.fill", {}, {&empty}, {}, {1.0});
}

TEST_P(DropoutKernels, MatchesReferenceMask) {
  SEEDED_RNG(rng);
  for (double rate : {0.0, 0.1, 0.5, 0.9, 1.0})
    for (const Shape &s : {Shape{3, 5, 7}, Shape{1013}, Shape{64}, Shape{}}) {
      SCOPED_TRACE("rate " + std::to_string(rate) + " " + shapeString(s));
      rt::KernelContext ctx;
      ctx.seed = rng();
      ctx.step = uint32_t(rng());
      uint32_t id = uint32_t(rng());
      Buf x = uniform(rng, s), y = poisoned(s);
      RUN_OK("ds.dropout", {&x}, {&y}, {int64_t(id), 1, 0, 0}, {rate}, &ctx);
      REF_OK(want, ref::dropout(x.toRef(), rate, ctx.seed, id, ctx.step));
      EXPECT_TRUE(close(y, want));
      for (int64_t i = 0; i < y.numel(); ++i) // the very same mask
        ASSERT_EQ(y.get(i) == 0, want.data[size_t(i)] == 0) << i;
      RUN_OK("ds.dropout", {&x}, {&x}, {int64_t(id), 1, 0, 0}, {rate}, &ctx);
      EXPECT_TRUE(bitwiseEqual(x, y));
    }
  Buf x({4}), y({4});
  EXPECT_RUN_ERROR(run("ds.dropout", {&x}, {&y}, {1, 1, 0, 0}, {1.5}),
                   "ds.dropout: rate must be in [0, 1], got 1.5");
  EXPECT_RUN_ERROR(run("ds.dropout", {&x}, {&y}, {1, 0, 0, 0}, {0.5}),
                   "ds.dropout: parts must be at least 1, got 0");
  EXPECT_RUN_ERROR(run("ds.dropout", {&x}, {&y}, {1, 2, 1, 0}, {0.5}),
                   "ds.dropout: part_dim must be a dimension of x, got 1");
  EXPECT_RUN_ERROR(run("ds.dropout", {&x}, {&y}, {1, 1, 0, -1}, {0.5}),
                   "ds.dropout: sample_offset must be at least 0, got -1");
}

// sample_offset k: rows that start k samples into the micro-batch (a
// chunk of it, a later micro-batch of a pipeline stage's step) draw the
// whole micro-batch's mask, alone and as one rank's part of the chunk
// (sequence parallelism cutting the chunk's samples).
TEST_P(DropoutKernels, ASampleOffsetDrawsTheLaterRows) {
  SEEDED_RNG(rng);
  for (int64_t row : {12, 7}) {
    SCOPED_TRACE("row " + std::to_string(row));
    rt::KernelContext ctx;
    ctx.seed = rng();
    ctx.step = uint32_t(rng());
    ctx.sampleOffset = 3;
    Buf whole = uniform(rng, Shape{8, row}), all = poisoned(Shape{8, row});
    RUN_OK("ds.dropout", {&whole}, {&all}, {4, 1, 0, 0}, {0.5}, &ctx);
    // The chunk of rows 4-7, whole and in 2 parts of 2 rows.
    Buf chunk = poisoned(Shape{4, row}), out = poisoned(Shape{4, row});
    for (int64_t i = 0; i < 4 * row; ++i)
      chunk.set(i, whole.get(4 * row + i));
    RUN_OK("ds.dropout", {&chunk}, {&out}, {4, 1, 0, 4}, {0.5}, &ctx);
    for (int64_t i = 0; i < 4 * row; ++i)
      ASSERT_EQ(out.get(i), all.get(4 * row + i)) << i;
    for (int rank = 0; rank < 2; ++rank) {
      Buf part = poisoned(Shape{2, row}), got = poisoned(Shape{2, row});
      for (int64_t i = 0; i < 2 * row; ++i)
        part.set(i, whole.get((4 + 2 * rank) * row + i));
      ctx.tensorRank = rank;
      RUN_OK("ds.dropout", {&part}, {&got}, {4, 2, 0, 4}, {0.5}, &ctx);
      for (int64_t i = 0; i < 2 * row; ++i)
        ASSERT_EQ(got.get(i), all.get((4 + 2 * rank) * row + i))
            << rank << " " << i;
    }
  }
}

// A micro-batch's rows get the masks they would get as rows of a bigger
// batch: element keys are global sample indices, whatever the split.
TEST_P(DropoutKernels, MasksFollowTheGlobalSample) {
  SEEDED_RNG(rng);
  // 12 elements a row keeps the batched draw; 7 takes the per-element path.
  for (int64_t row : {12, 7}) {
    SCOPED_TRACE("row " + std::to_string(row));
    rt::KernelContext ctx;
    ctx.seed = rng();
    ctx.step = uint32_t(rng());
    Buf whole = uniform(rng, Shape{5, row}), all = poisoned(Shape{5, row});
    RUN_OK("ds.dropout", {&whole}, {&all}, {3, 1, 0, 0}, {0.5}, &ctx);
    for (int64_t first : {1, 3}) {
      Buf part = uniform(rng, Shape{2, row}), out = poisoned(Shape{2, row});
      for (int64_t i = 0; i < 2 * row; ++i)
        part.set(i, whole.get(first * row + i));
      ctx.sampleOffset = uint64_t(first);
      RUN_OK("ds.dropout", {&part}, {&out}, {3, 1, 0, 0}, {0.5}, &ctx);
      REF_OK(want, ref::dropout(part.toRef(), 0.5, ctx.seed, 3, ctx.step,
                                uint64_t(first)));
      EXPECT_TRUE(close(out, want));
      for (int64_t i = 0; i < 2 * row; ++i)
        ASSERT_EQ(out.get(i), all.get(first * row + i)) << i;
      ctx.sampleOffset = 0;
    }
  }
}

// Far into a long run the 64-bit block counter of the draw crosses 2^32:
// samples of 32 elements from sample 2^29 - 1 put element index 2^34 - 32
// first, blocks 2^32 - 8 .. 2^32 + 7 in the first batch of 16 (the CPU's
// vector draw carries into each block's high word itself).
TEST_P(DropoutKernels, TheBlockCounterCarriesIntoItsHighWord) {
  SEEDED_RNG(rng);
  rt::KernelContext ctx;
  ctx.seed = rng();
  ctx.step = uint32_t(rng());
  ctx.sampleOffset = (uint64_t(1) << 29) - 1;
  Buf x = uniform(rng, Shape{3, 32}), y = poisoned(Shape{3, 32});
  RUN_OK("ds.dropout", {&x}, {&y}, {6, 1, 0, 0}, {0.5}, &ctx);
  REF_OK(want,
         ref::dropout(x.toRef(), 0.5, ctx.seed, 6, ctx.step, ctx.sampleOffset));
  EXPECT_TRUE(close(y, want));
}

// Sequence parallelism: a rank's contiguous part of an activation, cut
// along the batch or (a batch of one) along the sequence, draws the mask
// of its elements in the whole, at any sample offset.
TEST_P(DropoutKernels, APartDrawsItsShareOfTheWholeMask) {
  SEEDED_RNG(rng);
  struct Cut {
    Shape whole;
    int64_t parts, dim;
  };
  // 12 elements a row keeps the batched draw; 7 takes the per-element path.
  // A cut after the batch with more than one sample (Ulysses' tokens of
  // several sequences, or a later dimension) is a run per outer index.
  for (const Cut &c :
       {Cut{{4, 3, 12}, 2, 0}, Cut{{1, 6, 12}, 3, 1}, Cut{{4, 3, 7}, 4, 0},
        Cut{{1, 4, 7}, 2, 1}, Cut{{3, 4, 12}, 2, 1}, Cut{{2, 6, 7}, 3, 1},
        Cut{{2, 3, 4, 5}, 2, 2}}) {
    SCOPED_TRACE(shapeString(c.whole) + " in " + std::to_string(c.parts) +
                 " along " + std::to_string(c.dim));
    rt::KernelContext ctx;
    ctx.seed = rng();
    ctx.step = uint32_t(rng());
    ctx.sampleOffset = 5;
    Buf whole = uniform(rng, c.whole), all = poisoned(c.whole);
    RUN_OK("ds.dropout", {&whole}, {&all}, {9, 1, 0, 0}, {0.5}, &ctx);
    Shape local = c.whole;
    local[size_t(c.dim)] /= c.parts;
    // Elements from the cut dimension on: a run of the part, parts of them
    // a run of the whole.
    int64_t span = 1;
    for (size_t d = size_t(c.dim); d < local.size(); ++d)
      span *= local[d];
    const int64_t n = whole.numel() / c.parts;
    for (int rank = 0; rank < c.parts; ++rank) {
      auto wholeIndex = [&](int64_t e) {
        return e / span * span * c.parts + rank * span + e % span;
      };
      Buf part = poisoned(local), out = poisoned(local);
      for (int64_t i = 0; i < n; ++i)
        part.set(i, whole.get(wholeIndex(i)));
      ctx.tensorRank = rank;
      RUN_OK("ds.dropout", {&part}, {&out}, {9, c.parts, c.dim, 0}, {0.5},
             &ctx);
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(out.get(i), all.get(wholeIndex(i))) << rank << " " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, ElementwiseKernels,
                         testing::ValuesIn(rt::backendNames()), backendName);
INSTANTIATE_TEST_SUITE_P(Backends, CastKernels,
                         testing::ValuesIn(rt::backendNames()), backendName);
INSTANTIATE_TEST_SUITE_P(Backends, CopyKernels,
                         testing::ValuesIn(rt::backendNames()), backendName);
INSTANTIATE_TEST_SUITE_P(Backends, DropoutKernels,
                         testing::ValuesIn(rt::backendNames()), backendName);

} // namespace
