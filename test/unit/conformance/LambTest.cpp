//===- LambTest.cpp - ds.lamb ---------------------------------------------===//
//
// Conformance cases for ds.lamb (DeepSpeed's FusedLamb) against the
// float64 reference (RefKernels.h): each flag, weight decay, a trust ratio
// clamped from above, from below and a zero parameter (ratio 1), tensors
// of one and of many CPU chunks and CUDA blocks, in place and not, a
// 16-bit gradient (the update on the widened one, bitwise), a non-finite
// scale, and the operand errors. The ZeRO-sharded form (ds.lamb_norms on
// each rank's shard, the norms summed as an all-reduce would, then
// ds.lamb with them) against the reference over each whole parameter.
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

/// Elements [at, at + n) of `flat` as a tensor of their own.
Buf slice(const Buf &flat, int64_t at, int64_t n) {
  Buf out({n}, flat.dtype);
  for (int64_t i = 0; i < n; ++i)
    out.set(i, flat.get(at + i));
  return out;
}

/// A flat group laid out as ZeRO lays it: the members one after another,
/// zero padding up to a multiple of the world size.
struct ShardedGroup {
  std::vector<int64_t> members;
  int ranks;
  int64_t total() const {
    int64_t t = 0;
    for (int64_t n : members)
      t += n;
    return t;
  }
  int64_t shard() const { return (total() + ranks - 1) / ranks; }
};

// Each rank's ds.lamb_norms, summed over the ranks in f32 (as the
// all-reduce sums), then each rank's ds.lamb with them: every member
// updated as ds.lamb over the whole parameter (the reference), the padding
// left at zero, in place as out of place. Members cross shard boundaries,
// one has |p| = 0 (ratio 1), one is clamped at max_coeff; 3 ranks leave a
// shard that holds padding only where the members are small.
TEST_P(LambKernels, ShardedMatchesWholeParameters) {
  SEEDED_RNG(rng);
  const LambCase c{true, false, 0.01, 1};
  const ShardedGroup groups[] = {
      {{5000, 37, 12000, 1, 9000}, 2},
      {{5000, 37, 12000, 1, 9000}, 3},
      {{3, 4}, 3},
      {{70001}, 4},
  };
  for (const ShardedGroup &grp : groups) {
    const int64_t S = grp.shard(), flatSize = S * grp.ranks;
    const size_t K = grp.members.size();
    SCOPED_TRACE(std::to_string(K) + " members on " +
                 std::to_string(grp.ranks) + " ranks");
    Buf p({flatSize}), g({flatSize}), m({flatSize}), v({flatSize});
    int64_t at = 0;
    for (size_t j = 0; j < K; ++j) {
      const double pScale = j == 0 ? 0 : j == 2 ? 1000 : 1;
      for (int64_t i = at; i < at + grp.members[j]; ++i) {
        std::uniform_real_distribution<double> u(-1, 1);
        p.set(i, pScale * u(rng));
        g.set(i, u(rng));
        m.set(i, 0.1 * u(rng));
        v.set(i, 0.05 * (u(rng) + 1));
      }
      at += grp.members[j];
    }
    std::vector<int64_t> ints = {1, 0}, normInts = {0};
    for (int64_t n : grp.members) {
      ints.push_back(n);
      normInts.push_back(n);
    }
    const std::vector<double> h = hyper(c);
    const std::vector<double> normFloats(h.begin(), h.begin() + 4);
    Buf lr = scalarBuf(1e-2), step = scalarBuf(3), scale = scalarBuf(0.5);
    Buf norms = filled({int64_t(2 * K)}, 0);
    std::vector<Buf> ps, gs, ms, vs;
    for (int r = 0; r < grp.ranks; ++r) {
      ps.push_back(slice(p, r * S, S));
      gs.push_back(slice(g, r * S, S));
      ms.push_back(slice(m, r * S, S));
      vs.push_back(slice(v, r * S, S));
      rt::KernelContext ctx = defaultContext();
      ctx.rank = r;
      ctx.worldSize = grp.ranks;
      Buf part = poisoned({int64_t(2 * K)});
      RUN_OK("ds.lamb_norms", {&ps[r], &gs[r], &ms[r], &vs[r], &scale}, {&part},
             normInts, normFloats, &ctx);
      for (int64_t i = 0; i < part.numel(); ++i)
        norms.set(i, float(norms.get(i)) + float(part.get(i)));
    }
    Buf pOut({flatSize}), mOut({flatSize}), vOut({flatSize});
    for (int r = 0; r < grp.ranks; ++r) {
      rt::KernelContext ctx = defaultContext();
      ctx.rank = r;
      ctx.worldSize = grp.ranks;
      Buf p2 = poisoned({S}), m2 = poisoned({S}), v2 = poisoned({S});
      RUN_OK("ds.lamb",
             {&ps[r], &gs[r], &ms[r], &vs[r], &lr, &step, &scale, &norms},
             {&p2, &m2, &v2}, ints, h, &ctx);
      RUN_OK("ds.lamb",
             {&ps[r], &gs[r], &ms[r], &vs[r], &lr, &step, &scale, &norms},
             {&ps[r], &ms[r], &vs[r]}, ints, h, &ctx);
      EXPECT_TRUE(bitwiseEqual(ps[r], p2));
      EXPECT_TRUE(bitwiseEqual(ms[r], m2));
      EXPECT_TRUE(bitwiseEqual(vs[r], v2));
      for (int64_t i = 0; i < S; ++i) {
        pOut.set(r * S + i, p2.get(i));
        mOut.set(r * S + i, m2.get(i));
        vOut.set(r * S + i, v2.get(i));
      }
    }
    at = 0;
    for (size_t j = 0; j < K; ++j) {
      SCOPED_TRACE("member " + std::to_string(j));
      const int64_t n = grp.members[j];
      REF_OK(want, ref::lamb(slice(p, at, n).toRef(), slice(g, at, n).toRef(),
                             slice(m, at, n).toRef(), slice(v, at, n).toRef(),
                             1e-2, 3, params(c), 0.5));
      EXPECT_TRUE(close(slice(pOut, at, n), want.p));
      EXPECT_TRUE(close(slice(mOut, at, n), want.m));
      EXPECT_TRUE(close(slice(vOut, at, n), want.v));
      at += n;
    }
    const int64_t pad = flatSize - at;
    if (pad > 0) {
      EXPECT_TRUE(bitwiseEqual(slice(pOut, at, pad), filled({pad}, 0)));
      EXPECT_TRUE(bitwiseEqual(slice(vOut, at, pad), filled({pad}, 0)));
    }
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
  // The sharded forms: the norms' shape follows the member counts.
  Buf norms({4}), norms3({3});
  EXPECT_RUN_ERROR(run("ds.lamb", {&p, &g, &m, &v, &lr, &one, &one, &norms3},
                       {&p, &m, &v}, {1, 0, 2, 2}, ok),
                   "ds.lamb: norms is f32 [3], expected f32 [4]");
  EXPECT_RUN_ERROR(run("ds.lamb", {&p, &g, &m, &v, &lr, &one, &one, &norms},
                       {&p, &m, &v}, {1, 0, 4, 0}, ok),
                   "ds.lamb: member 1 has 0 elements, expected >= 1");
  EXPECT_RUN_ERROR(run("ds.lamb", {&p, &g, &m, &v, &lr, &one, &one},
                       {&p, &m, &v}, {1, 0, 4}, ok),
                   "ds.lamb: takes member counts only with norms");
  const std::vector<double> moments = {0.9, 0.999, 1e-6, 0};
  EXPECT_RUN_ERROR(run("ds.lamb_norms", {&p, &g, &m, &v, &one}, {&norms3},
                       {0, 2, 2}, moments),
                   "ds.lamb_norms: output norms is f32 [3], expected f32 [4]");
  EXPECT_RUN_ERROR(run("ds.lamb_norms", {&p, &g, &m, &short3, &one}, {&norms},
                       {0, 2, 2}, moments),
                   "ds.lamb_norms: v has shape [3] but p has shape [4]");
  EXPECT_RUN_ERROR(
      run("ds.lamb_norms", {&p, &g, &m, &v, &one}, {&norms}, {0}, moments),
      "ds.lamb_norms: needs one or more member counts");
}

INSTANTIATE_TEST_SUITE_P(Backends, LambKernels,
                         testing::ValuesIn(rt::backendNames()), backendName);

} // namespace
