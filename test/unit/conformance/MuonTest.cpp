//===- MuonTest.cpp - ds.muon_momentum and ds.muon_apply ------------------===//
//
// Conformance cases for the elementwise ends of a Muon step against the
// float64 reference (RefKernels.h): momentum with and without Nesterov, a
// 16-bit gradient (the kernel on the widened one, bitwise), in place and
// not, a non-finite scale (buffer and parameter kept, direction zero), and
// the operand errors; ds.muon_apply's direction may be 16-bit too. The
// Newton-Schulz iteration between them is ds.matmul and elementwise ops,
// checked in their own suites and end to end by test/e2e/optimizers.test
// against float64 Muon.
//
//===----------------------------------------------------------------------===//

#include "test/unit/conformance/KernelTestSupport.h"

using namespace dsc;
using namespace dsc::conformance;

namespace {

class MuonKernels : public Conformance {};

TEST_P(MuonKernels, MomentumMatchesReferenceAndRunsInPlace) {
  SEEDED_RNG(rng);
  for (const Shape &s : {Shape{3, 5}, Shape{257, 129}})
    for (bool nesterov : {false, true}) {
      SCOPED_TRACE(shapeString(s) + (nesterov ? " nesterov" : ""));
      Buf g = uniform(rng, s), buf = uniform(rng, s, -0.1, 0.1);
      Buf scale = scalarBuf(0.5);
      Buf nb = poisoned(s), dir = poisoned(s);
      RUN_OK("ds.muon_momentum", {&g, &buf, &scale}, {&nb, &dir}, {nesterov},
             {0.9});
      REF_OK(want,
             ref::muonMomentum(g.toRef(), buf.toRef(), 0.9, nesterov, 0.5));
      EXPECT_TRUE(close(nb, want.p));
      EXPECT_TRUE(close(dir, want.state));
      Buf g2 = g;
      RUN_OK("ds.muon_momentum", {&g2, &buf, &scale}, {&buf, &g2}, {nesterov},
             {0.9});
      EXPECT_TRUE(bitwiseEqual(buf, nb));
      EXPECT_TRUE(bitwiseEqual(g2, dir));
    }
}

// A 16-bit gradient is the kernel on the widened gradient, bitwise; a
// non-finite scale keeps the buffer and gives a zero direction.
TEST_P(MuonKernels, MomentumReadsA16BitGradientAndSkipsAnOverflow) {
  SEEDED_RNG(rng);
  const Shape s{40013};
  for (DType gt : {DType::f16, DType::bf16}) {
    SCOPED_TRACE(dtypeName(gt));
    Buf g(s, gt), gWide(s), buf = uniform(rng, s, -0.1, 0.1);
    for (int64_t i = 0; i < g.numel(); ++i)
      g.set(i, float(uniform(rng, {1}).get(0)));
    RUN_OK("ds.cast", {&g}, {&gWide});
    Buf scale = scalarBuf(0.25), a = poisoned(s), b = poisoned(s),
        c = poisoned(s), d = poisoned(s);
    RUN_OK("ds.muon_momentum", {&gWide, &buf, &scale}, {&a, &b}, {1}, {0.95});
    RUN_OK("ds.muon_momentum", {&g, &buf, &scale}, {&c, &d}, {1}, {0.95});
    EXPECT_TRUE(bitwiseEqual(a, c));
    EXPECT_TRUE(bitwiseEqual(b, d));
    Buf nan = scalarBuf(kNaN);
    RUN_OK("ds.muon_momentum", {&g, &buf, &nan}, {&a, &b}, {1}, {0.95});
    EXPECT_TRUE(bitwiseEqual(a, buf));
    EXPECT_TRUE(bitwiseEqual(b, filled(s, 0)));
  }
}

TEST_P(MuonKernels, ApplyMatchesReferenceAndSkipsAnOverflow) {
  SEEDED_RNG(rng);
  for (const Shape &s : {Shape{3, 5}, Shape{100003, 2}}) {
    SCOPED_TRACE(shapeString(s));
    Buf p = uniform(rng, s), x = uniform(rng, s, -0.2, 0.2);
    Buf lr = scalarBuf(0.02), scale = scalarBuf(1), out = poisoned(s);
    RUN_OK("ds.muon_apply", {&p, &x, &lr, &scale}, {&out}, {}, {0.1, 1.5});
    REF_OK(want, ref::muonApply(p.toRef(), x.toRef(), 0.02, 0.1, 1.5, 1));
    EXPECT_TRUE(close(out, want));
    Buf p2 = p;
    RUN_OK("ds.muon_apply", {&p2, &x, &lr, &scale}, {&p2}, {}, {0.1, 1.5});
    EXPECT_TRUE(bitwiseEqual(p2, out));
    Buf inf = scalarBuf(kInf), kept = poisoned(s);
    RUN_OK("ds.muon_apply", {&p, &x, &lr, &inf}, {&kept}, {}, {0.1, 1.5});
    EXPECT_TRUE(bitwiseEqual(kept, p));
  }
}

// A 16-bit direction is the kernel on the widened one, bitwise.
TEST_P(MuonKernels, ApplyReadsA16BitDirection) {
  SEEDED_RNG(rng);
  const Shape s{40013};
  for (DType xt : {DType::f16, DType::bf16}) {
    SCOPED_TRACE(dtypeName(xt));
    Buf p = uniform(rng, s), x(s, xt), xWide(s);
    for (int64_t i = 0; i < x.numel(); ++i)
      x.set(i, float(uniform(rng, {1}, -0.2, 0.2).get(0)));
    RUN_OK("ds.cast", {&x}, {&xWide});
    Buf lr = scalarBuf(0.02), scale = scalarBuf(1), a = poisoned(s),
        b = poisoned(s);
    RUN_OK("ds.muon_apply", {&p, &xWide, &lr, &scale}, {&a}, {}, {0.1, 2});
    RUN_OK("ds.muon_apply", {&p, &x, &lr, &scale}, {&b}, {}, {0.1, 2});
    EXPECT_TRUE(bitwiseEqual(a, b));
  }
}

TEST_P(MuonKernels, BadOperandsAreOneLine) {
  Buf g({4}), buf({4}), out({4}), dir({4}), short3({3}), one = scalarBuf(1),
                                                         i32({4}, DType::i32);
  EXPECT_RUN_ERROR(
      run("ds.muon_momentum", {&g, &buf, &one}, {&out, &dir}, {0}, {1.0}),
      "ds.muon_momentum: momentum must be in [0, 1), got 1");
  EXPECT_RUN_ERROR(
      run("ds.muon_momentum", {&g, &short3, &one}, {&out, &dir}, {0}, {0.9}),
      "ds.muon_momentum: buf has shape [3] but g has shape [4]");
  EXPECT_RUN_ERROR(
      run("ds.muon_momentum", {&g, &buf, &one}, {&out, &dir}, {2}, {0.9}),
      "ds.muon_momentum: nesterov must be 0 or 1, got 2");
  EXPECT_RUN_ERROR(
      run("ds.muon_apply", {&g, &buf, &one, &one}, {&out}, {}, {0.0, 0.5}),
      "ds.muon_apply: weight_decay must be finite and >= 0 and "
      "factor finite and >= 1, got 0 and 0.5");
  EXPECT_RUN_ERROR(
      run("ds.muon_apply", {&g, &buf, &g, &one}, {&out}, {}, {0.0, 1.0}),
      "ds.muon_apply: lr must hold one value, got shape [4]");
}

INSTANTIATE_TEST_SUITE_P(Backends, MuonKernels,
                         testing::ValuesIn(rt::backendNames()), backendName);

} // namespace
