//===- OptimizerTest.cpp - ds.sgd, ds.lion and ds.adagrad ----------------===//
//
// Conformance cases for the one-state optimizer updates against the
// float64 references (RefKernels.h): every step kind (SGD's first step
// starts its buffer), in place and not, a non-finite scale that skips the
// step, the operand errors, and beta1 as an input (AdamW's and Lion's).
// AdamW's other cases are in LookupShapeTest.cpp.
//
//===----------------------------------------------------------------------===//

#include "test/unit/conformance/KernelTestSupport.h"

#include <cmath>

using namespace dsc;
using namespace dsc::conformance;

namespace {

class OptimizerKernels : public Conformance {};

struct SgdCase {
  double momentum, dampening, decay;
  bool nesterov;
};

TEST_P(OptimizerKernels, SgdMatchesReferenceAndRunsInPlace) {
  SEEDED_RNG(rng);
  for (SgdCase c : {SgdCase{0.9, 0, 0.1, false}, SgdCase{0.9, 0, 0.01, true},
                    SgdCase{0.8, 0.3, 0, false}, SgdCase{0, 0, 0.05, false}})
    for (const Shape &s : {Shape{3, 5, 7}, Shape{40013}})
      for (int64_t step : {1, 2, 7}) {
        SCOPED_TRACE(shapeString(s) + " step " + std::to_string(step) +
                     " momentum " + std::to_string(c.momentum) +
                     (c.nesterov ? " nesterov" : ""));
        Buf p = uniform(rng, s), g = uniform(rng, s),
            buf = uniform(rng, s, -0.1, 0.1);
        Buf lr = scalarBuf(0.05), stepB = scalarBuf(double(step)),
            scale = scalarBuf(0.5);
        Buf p2 = poisoned(s), buf2 = poisoned(s);
        const std::vector<int64_t> ints = {c.nesterov ? 1 : 0};
        const std::vector<double> hyper = {c.momentum, c.dampening, c.decay};
        RUN_OK("ds.sgd", {&p, &g, &buf, &lr, &stepB, &scale}, {&p2, &buf2},
               ints, hyper);
        REF_OK(want,
               ref::sgd(p.toRef(), g.toRef(), buf.toRef(), 0.05, step,
                        c.momentum, c.dampening, c.decay, c.nesterov, 0.5));
        EXPECT_TRUE(close(p2, want.p));
        EXPECT_TRUE(close(buf2, want.state));
        RUN_OK("ds.sgd", {&p, &g, &buf, &lr, &stepB, &scale}, {&p, &buf}, ints,
               hyper);
        EXPECT_TRUE(bitwiseEqual(p, p2));
        EXPECT_TRUE(bitwiseEqual(buf, buf2));
      }
}

TEST_P(OptimizerKernels, LionMatchesReferenceAndRunsInPlace) {
  SEEDED_RNG(rng);
  for (const Shape &s : {Shape{3, 5, 7}, Shape{13}, Shape{40013}}) {
    SCOPED_TRACE(shapeString(s));
    Buf p = uniform(rng, s), g = uniform(rng, s),
        m = uniform(rng, s, -0.1, 0.1);
    // Zeros where m is zero too: sign(0) is 0, the parameter only decays.
    for (int64_t i = 0; i < p.numel(); i += 5) {
      g.set(i, 0);
      m.set(i, 0);
    }
    Buf lr = scalarBuf(1e-3), stepB = scalarBuf(3), scale = scalarBuf(0.5);
    Buf p2 = poisoned(s), m2 = poisoned(s);
    const std::vector<double> hyper = {0.9, 0.99, 0.1};
    RUN_OK("ds.lion", {&p, &g, &m, &lr, &stepB, &scale}, {&p2, &m2}, {}, hyper);
    REF_OK(want, ref::lion(p.toRef(), g.toRef(), m.toRef(), 1e-3, 0.9, 0.99,
                           0.1, 0.5));
    EXPECT_TRUE(close(p2, want.p));
    EXPECT_TRUE(close(m2, want.state));
    RUN_OK("ds.lion", {&p, &g, &m, &lr, &stepB, &scale}, {&p, &m}, {}, hyper);
    EXPECT_TRUE(bitwiseEqual(p, p2));
    EXPECT_TRUE(bitwiseEqual(m, m2));
  }
}

TEST_P(OptimizerKernels, AdagradMatchesReferenceAndRunsInPlace) {
  SEEDED_RNG(rng);
  for (double lrDecay : {0.0, 0.05})
    for (double decay : {0.0, 0.1})
      for (int64_t step : {1, 4}) {
        const Shape s{40013};
        SCOPED_TRACE("lr_decay " + std::to_string(lrDecay) + " decay " +
                     std::to_string(decay) + " step " + std::to_string(step));
        Buf p = uniform(rng, s), g = uniform(rng, s),
            sum = uniform(rng, s, 0, 0.5);
        Buf lr = scalarBuf(0.01), stepB = scalarBuf(double(step)),
            scale = scalarBuf(0.5);
        Buf p2 = poisoned(s), sum2 = poisoned(s);
        const std::vector<double> hyper = {lrDecay, 1e-10, decay};
        RUN_OK("ds.adagrad", {&p, &g, &sum, &lr, &stepB, &scale}, {&p2, &sum2},
               {}, hyper);
        REF_OK(want, ref::adagrad(p.toRef(), g.toRef(), sum.toRef(), 0.01, step,
                                  lrDecay, 1e-10, decay, 0.5));
        EXPECT_TRUE(close(p2, want.p));
        EXPECT_TRUE(close(sum2, want.state));
        RUN_OK("ds.adagrad", {&p, &g, &sum, &lr, &stepB, &scale}, {&p, &sum},
               {}, hyper);
        EXPECT_TRUE(bitwiseEqual(p, p2));
        EXPECT_TRUE(bitwiseEqual(sum, sum2));
      }
}

// An overflowed step (ds.overflow_guard's NaN scale) leaves the parameter
// and the state bitwise as they were; the step number is not read then.
TEST_P(OptimizerKernels, ANonFiniteScaleSkipsTheUpdate) {
  SEEDED_RNG(rng);
  const Shape s{3, 7};
  Buf p = uniform(rng, s), g = uniform(rng, s), st = uniform(rng, s);
  Buf lr = scalarBuf(1e-2), step = scalarBuf(0), nan = scalarBuf(kNaN);
  for (const char *kernel : {"ds.sgd", "ds.lion", "ds.adagrad"}) {
    SCOPED_TRACE(kernel);
    const bool sgd = std::string(kernel) == "ds.sgd";
    const std::vector<int64_t> ints =
        sgd ? std::vector<int64_t>{0} : std::vector<int64_t>{};
    const std::vector<double> hyper = sgd ? std::vector<double>{0.9, 0, 0.1}
                                          : std::vector<double>{0.5, 0.5, 0};
    Buf p2 = poisoned(s), st2 = poisoned(s);
    RUN_OK(kernel, {&p, &g, &st, &lr, &step, &nan}, {&p2, &st2}, ints, hyper);
    EXPECT_TRUE(bitwiseEqual(p2, p));
    EXPECT_TRUE(bitwiseEqual(st2, st));
  }
}

// Mixed precision's updates read the 16-bit gradient itself: the same bits
// as reading its f32 value.
TEST_P(OptimizerKernels, A16BitGradientIsReadAsItsValue) {
  SEEDED_RNG(rng);
  const Shape s{5001};
  for (DType half : {DType::bf16, DType::f16})
    for (const char *kernel : {"ds.sgd", "ds.lion", "ds.adagrad"}) {
      SCOPED_TRACE(std::string(kernel) + " " + rt::dtypeName(half));
      const bool sgd = std::string(kernel) == "ds.sgd";
      const std::vector<int64_t> ints =
          sgd ? std::vector<int64_t>{1} : std::vector<int64_t>{};
      const std::vector<double> hyper =
          sgd ? std::vector<double>{0.9, 0, 0.1}
              : std::vector<double>{0.5, 0.5, 0.1}; // Lion's betas, Adagrad's
                                                    // lr_decay and eps
      Buf p = uniform(rng, s), st = uniform(rng, s, 0, 0.1),
          g = uniform(rng, s), g16(s, half), wide(s);
      for (int64_t i = 0; i < g.numel(); ++i)
        g16.set(i, g.get(i));
      for (int64_t i = 0; i < g.numel(); ++i)
        wide.set(i, g16.get(i));
      Buf lr = scalarBuf(1e-2), step = scalarBuf(2), scale = scalarBuf(0.5);
      Buf pa = poisoned(s), sa = poisoned(s), pb = poisoned(s),
          sb = poisoned(s);
      RUN_OK(kernel, {&p, &g16, &st, &lr, &step, &scale}, {&pa, &sa}, ints,
             hyper);
      RUN_OK(kernel, {&p, &wide, &st, &lr, &step, &scale}, {&pb, &sb}, ints,
             hyper);
      EXPECT_TRUE(bitwiseEqual(pa, pb));
      EXPECT_TRUE(bitwiseEqual(sa, sb));
    }
}

TEST_P(OptimizerKernels, BadOperandsAreOneLine) {
  Buf p({4}), g({4}), b({4}), lr = scalarBuf(1e-3), zero = scalarBuf(0),
                              one = scalarBuf(1);
  EXPECT_RUN_ERROR(
      run("ds.sgd", {&p, &g, &b, &lr, &zero, &one}, {&p, &b}, {0}, {0.9, 0, 0}),
      "ds.sgd: step must be an integer >= 1, got 0");
  EXPECT_RUN_ERROR(run("ds.lion", {&p, &g, &b, &lr, &zero, &one}, {&p, &b}, {},
                       {0.9, 0.99, 0}),
                   "ds.lion: step must be an integer >= 1, got 0");
  EXPECT_RUN_ERROR(run("ds.sgd", {&p, &g, &b, &lr, &one, &one}, {&p, &b}, {1},
                       {0.9, 0.5, 0}),
                   "ds.sgd: nesterov needs momentum > 0 and dampening 0");
  EXPECT_RUN_ERROR(run("ds.lion", {&p, &g, &b, &lr, &one, &one}, {&p, &b}, {},
                       {1.5, 0.99, 0}),
                   "ds.lion: betas must be in [0, 1), got (1.5, 0.99)");
  EXPECT_RUN_ERROR(run("ds.lion", {&p, &g, &b, &lr, &one, &one}, {&b, &p}, {},
                       {0.9, 0.99, 0}),
                   "ds.lion: output 0 overlaps input 2 (only an exact in-place "
                   "update is allowed)");
  EXPECT_RUN_ERROR(run("ds.adagrad", {&p, &g, &b, &lr, &zero, &one}, {&p, &b},
                       {}, {0, 1e-10, 0}),
                   "ds.adagrad: step must be an integer >= 1, got 0");
  Buf short3({3});
  EXPECT_RUN_ERROR(run("ds.sgd", {&p, &g, &short3, &lr, &one, &one}, {&p, &b},
                       {0}, {0.9, 0, 0}),
                   "ds.sgd: buf has shape [3] but p has shape [4]");
}

// ds.sgd_round, ds.lion_round and ds.adagrad_round (mixed precision's
// update in one pass): bitwise the update on the widened gradient followed
// by ds.cast of p', in place, over sizes that are not multiples of the CPU
// chunk; an overflowed step rounds the unchanged p.
TEST_P(OptimizerKernels, RoundingUpdatesAreTheUpdateThenTheCast) {
  SEEDED_RNG(rng);
  const std::pair<const char *, const char *> kernels[] = {
      {"ds.sgd", "ds.sgd_round"},
      {"ds.lion", "ds.lion_round"},
      {"ds.adagrad", "ds.adagrad_round"}};
  for (auto [kernel, roundKernel] : kernels)
    for (DType gt : {DType::f32, DType::bf16})
      for (DType pt : {DType::f16, DType::bf16})
        for (const Shape &s : {Shape{13}, Shape{40013}}) {
          const std::string round = roundKernel;
          SCOPED_TRACE(round + " " + dtypeName(gt) + " g, " + dtypeName(pt) +
                       " p16, " + shapeString(s));
          const bool sgd = std::string(kernel) == "ds.sgd";
          const std::vector<int64_t> ints =
              sgd ? std::vector<int64_t>{1} : std::vector<int64_t>{};
          const std::vector<double> hyper =
              sgd ? std::vector<double>{0.9, 0, 0.1}
                  : std::vector<double>{0.5, 0.9, 0.1};
          Buf p = uniform(rng, s), st = uniform(rng, s, 0, 0.1), g(s, gt),
              gWide(s);
          for (int64_t i = 0; i < g.numel(); ++i)
            g.set(i, float(uniform(rng, {1}).get(0)));
          RUN_OK("ds.cast", {&g}, {&gWide});
          Buf lr = scalarBuf(1e-2), step = scalarBuf(3), scale = scalarBuf(0.5);
          Buf p2 = poisoned(s), st2 = poisoned(s), half = poisoned(s, pt);
          RUN_OK(kernel, {&p, &gWide, &st, &lr, &step, &scale}, {&p2, &st2},
                 ints, hyper);
          RUN_OK("ds.cast", {&p2}, {&half});
          Buf p3 = p, st3 = st, half3 = poisoned(s, pt);
          RUN_OK(round, {&p3, &g, &st3, &lr, &step, &scale},
                 {&p3, &st3, &half3}, ints, hyper);
          EXPECT_TRUE(bitwiseEqual(p3, p2));
          EXPECT_TRUE(bitwiseEqual(st3, st2));
          EXPECT_TRUE(bitwiseEqual(half3, half));
          Buf nan = scalarBuf(kNaN), p4 = p, st4 = st, half4 = poisoned(s, pt),
              half5 = poisoned(s, pt);
          RUN_OK(round, {&p4, &g, &st4, &lr, &step, &nan}, {&p4, &st4, &half4},
                 ints, hyper);
          RUN_OK("ds.cast", {&p}, {&half5});
          EXPECT_TRUE(bitwiseEqual(p4, p));
          EXPECT_TRUE(bitwiseEqual(st4, st));
          EXPECT_TRUE(bitwiseEqual(half4, half5));
        }
  Buf p({4}), g({4}, DType::bf16), b({4}),
      lr = scalarBuf(1e-3), one = scalarBuf(1), wrong({4}), zero = scalarBuf(0);
  EXPECT_RUN_ERROR(run("ds.sgd_round", {&p, &g, &b, &lr, &one, &one},
                       {&p, &b, &wrong}, {0}, {0.9, 0, 0}),
                   "ds.sgd_round: output p16 is f32, expected f16 or bf16");
  Buf half({4}, DType::bf16);
  EXPECT_RUN_ERROR(run("ds.adagrad_round", {&p, &g, &b, &lr, &zero, &one},
                       {&p, &b, &half}, {}, {0, 1e-10, 0}),
                   "ds.adagrad_round: step must be an integer >= 1, got 0");
}

// OneCycle's cycle_momentum: beta1 read from the beta1_value input, not the
// attribute (which is then unused). The reference takes the value as the
// f32 buffer holds it; the attribute with that same value gives the same
// bits.
TEST_P(OptimizerKernels, ABeta1InputReplacesTheAttribute) {
  SEEDED_RNG(rng);
  const Shape s{40013};
  const double beta1 = double(0.85f);
  Buf p = uniform(rng, s), g = uniform(rng, s), m = uniform(rng, s, -0.1, 0.1),
      v = uniform(rng, s, 0, 0.1);
  Buf lr = scalarBuf(1e-3), step = scalarBuf(3), scale = scalarBuf(0.5),
      b1 = scalarBuf(beta1);
  {
    SCOPED_TRACE("ds.adamw");
    Buf pa = poisoned(s), ma = poisoned(s), va = poisoned(s), pb = poisoned(s),
        mb = poisoned(s), vb = poisoned(s);
    RUN_OK("ds.adamw", {&p, &g, &m, &v, &lr, &step, &scale, &b1},
           {&pa, &ma, &va}, {}, {0.5, 0.99, 1e-8, 0.1});
    REF_OK(want, ref::adamw(p.toRef(), g.toRef(), m.toRef(), v.toRef(), 1e-3, 3,
                            beta1, 0.99, 1e-8, 0.1, 0.5));
    EXPECT_TRUE(close(pa, want.p));
    EXPECT_TRUE(close(ma, want.m));
    EXPECT_TRUE(close(va, want.v));
    RUN_OK("ds.adamw", {&p, &g, &m, &v, &lr, &step, &scale}, {&pb, &mb, &vb},
           {}, {beta1, 0.99, 1e-8, 0.1});
    EXPECT_TRUE(bitwiseEqual(pa, pb));
    EXPECT_TRUE(bitwiseEqual(ma, mb));
    // ds.adamw_round: the same update, and its rounding.
    Buf pc = p, mc = m, vc = v, p16(s, DType::bf16);
    RUN_OK("ds.adamw_round", {&pc, &g, &mc, &vc, &lr, &step, &scale, &b1},
           {&pc, &mc, &vc, &p16}, {}, {0.5, 0.99, 1e-8, 0.1});
    EXPECT_TRUE(bitwiseEqual(pc, pa));
    EXPECT_TRUE(bitwiseEqual(mc, ma));
  }
  {
    SCOPED_TRACE("ds.lion");
    Buf pa = poisoned(s), ma = poisoned(s), pb = poisoned(s), mb = poisoned(s);
    RUN_OK("ds.lion", {&p, &g, &m, &lr, &step, &scale, &b1}, {&pa, &ma}, {},
           {0.5, 0.99, 0.1});
    REF_OK(want, ref::lion(p.toRef(), g.toRef(), m.toRef(), 1e-3, beta1, 0.99,
                           0.1, 0.5));
    EXPECT_TRUE(close(pa, want.p));
    EXPECT_TRUE(close(ma, want.state));
    RUN_OK("ds.lion", {&p, &g, &m, &lr, &step, &scale}, {&pb, &mb}, {},
           {beta1, 0.99, 0.1});
    EXPECT_TRUE(bitwiseEqual(pa, pb));
    EXPECT_TRUE(bitwiseEqual(ma, mb));
  }
}

TEST_P(OptimizerKernels, ABadBeta1InputIsOneLine) {
  Buf p({4}), g({4}), m({4}), v({4}), lr = scalarBuf(1e-3), one = scalarBuf(1),
                                      b1 = scalarBuf(1.0),
                                      bad = scalarBuf(-0.5);
  EXPECT_RUN_ERROR(run("ds.adamw", {&p, &g, &m, &v, &lr, &one, &one, &b1},
                       {&p, &m, &v}, {}, {0.9, 0.99, 1e-8, 0}),
                   "ds.adamw: beta1_value must be in [0, 1), got 1");
  EXPECT_RUN_ERROR(run("ds.lion", {&p, &g, &m, &lr, &one, &one, &bad}, {&p, &m},
                       {}, {0.9, 0.99, 0}),
                   "ds.lion: beta1_value must be in [0, 1), got -0.5");
  EXPECT_RUN_ERROR(run("ds.lion", {&p, &g, &m, &lr, &one, &one, &b1, &b1},
                       {&p, &m}, {}, {0.9, 0.99, 0}),
                   "ds.lion: takes 6 or one more (beta1) inputs, got 8");
}

INSTANTIATE_TEST_SUITE_P(Backends, OptimizerKernels,
                         testing::ValuesIn(rt::backendNames()), backendName);

} // namespace
