//===- LambTest.cpp - ds.lamb ---------------------------------------------===//
//
// Conformance cases for ds.lamb (DeepSpeed's FusedLamb) against the
// float64 reference (RefKernels.h): each flag, weight decay, a trust ratio
// clamped from above, from below and a zero parameter (ratio 1), tensors
// of one and of many CPU chunks and CUDA blocks, in place and not, a
// 16-bit gradient (the update on the widened one, bitwise), a non-finite
// scale, and the operand errors.
//
//===----------------------------------------------------------------------===//

#include "test/unit/conformance/KernelTestSupport.h"

using namespace dsc;
using namespace dsc::conformance;

namespace {

class LambKernels : public Conformance {};

struct LambCase {
  bool biasCorrection, epsInsideSqrt;
  double decay;
  double pScale; ///< the parameter's magnitude: the trust ratio's size
};

std::vector<double> hyper(const LambCase &c) {
  return {0.9, 0.999, 1e-6, c.decay, 0.01, 10};
}

ref::LambParams params(const LambCase &c) {
  ref::LambParams k;
  k.beta1 = 0.9;
  k.beta2 = 0.999;
  k.eps = 1e-6;
  k.weightDecay = c.decay;
  k.biasCorrection = c.biasCorrection;
  k.epsInsideSqrt = c.epsInsideSqrt;
  return k;
}

TEST_P(LambKernels, MatchesReferenceAndRunsInPlace) {
  SEEDED_RNG(rng);
  const LambCase cases[] = {
      {true, false, 0.0, 1},    {true, false, 0.01, 1},
      {false, true, 0.01, 1},   {true, false, 0.0, 1000}, // clamped at 10
      {true, false, 0.0, 1e-5},                           // clamped at 0.01
      {true, false, 0.01, 0},                             // |p| = 0: ratio 1
  };
  for (const LambCase &c : cases)
    for (const Shape &s : {Shape{3, 5, 7}, Shape{100003}})
      for (int64_t step : {1, 5}) {
        SCOPED_TRACE(shapeString(s) + " step " + std::to_string(step) +
                     " |p| ~ " + std::to_string(c.pScale) +
                     (c.biasCorrection ? " bias_correction" : "") +
                     (c.epsInsideSqrt ? " eps_inside_sqrt" : ""));
        Buf p = uniform(rng, s, -c.pScale, c.pScale), g = uniform(rng, s),
            m = uniform(rng, s, -0.1, 0.1), v = uniform(rng, s, 0, 0.1);
        Buf lr = scalarBuf(1e-2), stepB = scalarBuf(double(step)),
            scale = scalarBuf(0.5);
        Buf p2 = poisoned(s), m2 = poisoned(s), v2 = poisoned(s);
        const std::vector<int64_t> ints = {c.biasCorrection, c.epsInsideSqrt};
        RUN_OK("ds.lamb", {&p, &g, &m, &v, &lr, &stepB, &scale},
               {&p2, &m2, &v2}, ints, hyper(c));
        REF_OK(want, ref::lamb(p.toRef(), g.toRef(), m.toRef(), v.toRef(), 1e-2,
                               step, params(c), 0.5));
        EXPECT_TRUE(close(p2, want.p));
        EXPECT_TRUE(close(m2, want.m));
        EXPECT_TRUE(close(v2, want.v));
        RUN_OK("ds.lamb", {&p, &g, &m, &v, &lr, &stepB, &scale}, {&p, &m, &v},
               ints, hyper(c));
        EXPECT_TRUE(bitwiseEqual(p, p2));
        EXPECT_TRUE(bitwiseEqual(m, m2));
        EXPECT_TRUE(bitwiseEqual(v, v2));
      }
}

// A 16-bit gradient (mixed precision) is the update on the widened
// gradient, bitwise; a non-finite scale leaves everything as it was.
TEST_P(LambKernels, ReadsA16BitGradientAndSkipsAnOverflowedStep) {
  SEEDED_RNG(rng);
  const LambCase c{true, false, 0.01, 1};
  for (DType gt : {DType::f16, DType::bf16}) {
    SCOPED_TRACE(dtypeName(gt));
    const Shape s{40013};
    Buf p = uniform(rng, s), m = uniform(rng, s, -0.1, 0.1),
        v = uniform(rng, s, 0, 0.1), g(s, gt), gWide(s);
    for (int64_t i = 0; i < g.numel(); ++i)
      g.set(i, float(uniform(rng, {1}).get(0)));
    RUN_OK("ds.cast", {&g}, {&gWide});
    Buf lr = scalarBuf(1e-2), step = scalarBuf(2), scale = scalarBuf(0.5);
    Buf pa = poisoned(s), ma = poisoned(s), va = poisoned(s);
    Buf pb = poisoned(s), mb = poisoned(s), vb = poisoned(s);
    RUN_OK("ds.lamb", {&p, &gWide, &m, &v, &lr, &step, &scale}, {&pa, &ma, &va},
           {1, 0}, hyper(c));
    RUN_OK("ds.lamb", {&p, &g, &m, &v, &lr, &step, &scale}, {&pb, &mb, &vb},
           {1, 0}, hyper(c));
    EXPECT_TRUE(bitwiseEqual(pa, pb));
    EXPECT_TRUE(bitwiseEqual(ma, mb));
    EXPECT_TRUE(bitwiseEqual(va, vb));
    Buf nan = scalarBuf(kNaN), zero = scalarBuf(0), p2 = p, m2 = m, v2 = v;
    RUN_OK("ds.lamb", {&p2, &g, &m2, &v2, &lr, &zero, &nan}, {&p2, &m2, &v2},
           {1, 0}, hyper(c));
    EXPECT_TRUE(bitwiseEqual(p2, p));
    EXPECT_TRUE(bitwiseEqual(m2, m));
    EXPECT_TRUE(bitwiseEqual(v2, v));
  }
}

TEST_P(LambKernels, BadOperandsAreOneLine) {
  Buf p({4}), g({4}), m({4}), v({4}), lr = scalarBuf(1e-3), one = scalarBuf(1),
                                      zero = scalarBuf(0), short3({3});
  const std::vector<double> ok = {0.9, 0.999, 1e-6, 0, 0.01, 10};
  EXPECT_RUN_ERROR(run("ds.lamb", {&p, &g, &m, &v, &lr, &zero, &one},
                       {&p, &m, &v}, {1, 0}, ok),
                   "ds.lamb: step must be an integer >= 1, got 0");
  EXPECT_RUN_ERROR(run("ds.lamb", {&p, &g, &m, &v, &lr, &one, &one},
                       {&p, &m, &v}, {2, 0}, ok),
                   "ds.lamb: bias_correction must be 0 or 1, got 2");
  EXPECT_RUN_ERROR(run("ds.lamb", {&p, &g, &m, &v, &lr, &one, &one},
                       {&p, &m, &v}, {1, 0}, {0.9, 0.999, 1e-6, 0, 0.5, 0.1}),
                   "ds.lamb: coeff needs 0 < min_coeff <= max_coeff, finite, "
                   "got (0.5, 0.1)");
  EXPECT_RUN_ERROR(run("ds.lamb", {&p, &g, &m, &short3, &lr, &one, &one},
                       {&p, &m, &v}, {1, 0}, ok),
                   "ds.lamb: v has shape [3] but p has shape [4]");
  EXPECT_RUN_ERROR(run("ds.lamb", {&p, &g, &m, &v, &lr, &one, &one},
                       {&m, &p, &v}, {1, 0}, ok),
                   "ds.lamb: output 0 overlaps input 2 (only an exact in-place "
                   "update is allowed)");
}

INSTANTIATE_TEST_SUITE_P(Backends, LambKernels,
                         testing::ValuesIn(rt::backendNames()), backendName);

} // namespace
