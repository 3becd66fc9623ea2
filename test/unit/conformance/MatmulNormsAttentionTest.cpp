//===- MatmulNormsAttentionTest.cpp - matmul, norms, softmax and attention
// kernels ---===//
//
// Conformance cases: GEMMs over transposes, batches and broadcasts; layer
// and RMS norms with their gradients, softmax; attention and rotary.
//
//===----------------------------------------------------------------------===//

#include "test/unit/conformance/KernelTestSupport.h"

#include <algorithm>
#include <cmath>

using namespace dsc;
using namespace dsc::conformance;

namespace {

class MatmulKernels : public Conformance {};
class NormsKernels : public Conformance {};
class AttentionKernels : public Conformance {};

//===--- Matmul -----------------------------------------------------------===//

TEST_P(MatmulKernels, AllTransposesBatchesAndBroadcasts) {
  SEEDED_RNG(rng);
  struct Case {
    Shape a, b; // untransposed: a [..., M, K], b [..., K, N]
  };
  const Case cases[] = {
      {{5, 7}, {7, 3}},
      {{13, 1}, {1, 5}},
      {{2, 3, 5, 7}, {2, 3, 7, 4}},
      {{2, 1, 5, 7}, {3, 7, 4}},
      {{5, 7}, {3, 7, 13}},
      {{2, 13, 7}, {7, 5}}, // the linear layer: one sgemm
      {{2, 3, 13, 7}, {1, 7, 5}},
      {{4, 65, 129}, {129, 33}},
      {{3, 0, 5}, {5, 4}},
      {{3, 5, 0}, {0, 4}}, // K = 0: zeros
  };
  for (const Case &c : cases)
    for (int ta : {0, 1})
      for (int tb : {0, 1}) {
        Shape sa = c.a, sb = c.b;
        if (ta)
          std::swap(sa[sa.size() - 1], sa[sa.size() - 2]);
        if (tb)
          std::swap(sb[sb.size() - 1], sb[sb.size() - 2]);
        SCOPED_TRACE(shapeString(sa) + (ta ? "^T" : "") + " x " +
                     shapeString(sb) + (tb ? "^T" : ""));
        Buf a = uniform(rng, sa), b = uniform(rng, sb);
        REF_OK(want, ref::matmul(a.toRef(), b.toRef(), ta, tb));
        Buf out = poisoned(want.shape);
        RUN_OK("ds.matmul", {&a, &b}, {&out}, {ta, tb});
        EXPECT_TRUE(close(out, want));
      }
}

TEST_P(MatmulKernels, ShapeErrors) {
  Buf a({3, 4}), b({5, 6}), out({3, 6}), v({4});
  EXPECT_RUN_ERROR(run("ds.matmul", {&a, &b}, {&out}, {0, 0}),
                   "ds.matmul: contraction dims differ: a [3, 4] vs b [5, 6]");
  EXPECT_RUN_ERROR(run("ds.matmul", {&a, &v}, {&out}, {0, 0}),
                   "ds.matmul: operands need rank >= 2, got [3, 4] and [4]");
  Buf b2({4, 6}), wrong({6, 3});
  EXPECT_RUN_ERROR(
      run("ds.matmul", {&a, &b2}, {&wrong}, {0, 0}),
      "ds.matmul: output has shape [6, 3] but [3, 4] x [4, 6] gives "
      "[3, 6]");
  Buf c({2, 3, 4}), d({3, 4, 6}), o({3, 3, 6});
  EXPECT_RUN_ERROR(run("ds.matmul", {&c, &d}, {&o}, {0, 0}),
                   "ds.matmul: batch dims of [2, 3, 4] and [3, 4, 6] do not "
                   "broadcast");
}

// The epilogues against ds.matmul's reference plus the bias (and GELU), on
// the shapes a backend runs as one call (a linear layer) and on those it
// runs batch by batch; the CPU's are the bits of its unfused kernels.
TEST_P(MatmulKernels, EpiloguesMatchMatmulThenBiasAndGelu) {
  SEEDED_RNG(rng);
  struct Case {
    Shape a, b;
    bool ta, tb;
  };
  const Case cases[] = {
      {{2, 13, 7}, {16, 7}, false, true}, // a linear layer: one call
      {{5, 7}, {7, 3}, false, false},     // odd N: no aux epilogue
      {{64, 33}, {33, 24}, false, false},
      {{7, 5}, {7, 16}, true, false},
      {{2, 3, 5, 7}, {2, 3, 7, 8}, false, false}, // batched
      {{3, 0, 5}, {5, 4}, false, false},
      {{3, 5, 0}, {0, 8}, false, false}, // K = 0: the bias alone
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(shapeString(c.a) + (c.ta ? "^T" : "") + " x " +
                 shapeString(c.b) + (c.tb ? "^T" : ""));
    const int64_t ta = c.ta, tb = c.tb;
    const int64_t N = c.tb ? c.b[c.b.size() - 2] : c.b.back();
    Buf a = uniform(rng, c.a), b = uniform(rng, c.b),
        bias = uniform(rng, {N}, -2, 2);
    REF_OK(product, ref::matmul(a.toRef(), b.toRef(), c.ta, c.tb));
    REF_OK(want, ref::binary(ref::BinaryKind::Add, product, bias.toRef()));
    Buf out = poisoned(want.shape);
    RUN_OK("ds.matmul_bias", {&a, &b, &bias}, {&out}, {ta, tb});
    EXPECT_TRUE(close(out, want));
    for (int64_t approx : {0, 1}) {
      SCOPED_TRACE(approx ? "tanh" : "erf");
      REF_OK(gelu, ref::unary(approx ? ref::UnaryKind::GeluTanh
                                     : ref::UnaryKind::GeluErf,
                              want));
      Buf sum = poisoned(want.shape), y = poisoned(want.shape);
      RUN_OK("ds.matmul_bias_gelu", {&a, &b, &bias}, {&sum, &y},
             {ta, tb, approx});
      EXPECT_TRUE(close(sum, want));
      EXPECT_TRUE(close(y, gelu));
      if (GetParam() != std::string("cpu"))
        continue;
      Buf p = poisoned(want.shape), s2 = poisoned(want.shape),
          y2 = poisoned(want.shape);
      RUN_OK("ds.matmul", {&a, &b}, {&p}, {ta, tb});
      RUN_OK("ds.bias_gelu", {&p, &bias}, {&s2, &y2}, {approx});
      EXPECT_TRUE(bitwiseEqual(sum, s2));
      EXPECT_TRUE(bitwiseEqual(y, y2));
      RUN_OK("ds.add", {&p, &bias}, {&s2});
      EXPECT_TRUE(bitwiseEqual(out, s2));
    }
  }
  Buf a({3, 4}), b({4, 6}), out({3, 6}), out2({3, 6}), bias({4}), y({3, 5});
  EXPECT_RUN_ERROR(run("ds.matmul_bias", {&a, &b, &bias}, {&out}, {0, 0}),
                   "ds.matmul_bias: bias has shape [4] but needs [6] (the "
                   "last dim of the product)");
  Buf bias6({6});
  EXPECT_RUN_ERROR(
      run("ds.matmul_bias_gelu", {&a, &b, &bias6}, {&out, &y}, {0, 0, 1}),
      "ds.matmul_bias_gelu: the output has shape [3, 5] but the product has "
      "shape [3, 6]");
  EXPECT_RUN_ERROR(
      run("ds.matmul_bias_gelu", {&a, &b, &bias6}, {&out, &out2}, {0, 0, 2}),
      "ds.matmul_bias_gelu: approximate must be 0 (erf) or 1 (tanh), got 2");
}

// The backward epilogue: the product, GELU's derivative at x, and the row
// sum as the bias gradient; on the CPU the bits of its three kernels.
TEST_P(MatmulKernels, GeluGradEpilogueMatchesItsThreeSteps) {
  SEEDED_RNG(rng);
  struct Case {
    Shape a, b;
    bool ta, tb;
  };
  const Case cases[] = {
      {{2, 13, 16}, {16, 8}, false, false}, // a linear layer's backward
      {{5, 7}, {7, 3}, false, false},
      {{7, 5}, {16, 7}, true, true},
      {{2, 3, 5, 7}, {2, 3, 7, 8}, false, false}, // batched
      {{3, 0, 5}, {5, 8}, false, false},          // no rows: dbias zeros
      {{3, 5, 0}, {0, 8}, false, false},          // K = 0
      {{40, 9}, {9, 1}, false, false},            // one column
      {{2, 150, 16}, {16, 300}, false, false},    // columns over threads
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(shapeString(c.a) + (c.ta ? "^T" : "") + " x " +
                 shapeString(c.b) + (c.tb ? "^T" : ""));
    const int64_t ta = c.ta, tb = c.tb;
    Buf a = uniform(rng, c.a), b = uniform(rng, c.b);
    REF_OK(product, ref::matmul(a.toRef(), b.toRef(), c.ta, c.tb));
    Buf x = uniform(rng, product.shape, -3, 3);
    std::vector<int64_t> axes;
    for (int64_t d = 0; d + 1 < int64_t(product.shape.size()); ++d)
      axes.push_back(d);
    for (int64_t approx : {0, 1}) {
      SCOPED_TRACE(approx ? "tanh" : "erf");
      REF_OK(want, ref::gelu_grad(x.toRef(), product, approx == 1));
      REF_OK(wantBias, ref::reduce(ref::ReduceKind::Sum, want, axes, false));
      Buf grad = poisoned(want.shape), dbias = poisoned(wantBias.shape);
      RUN_OK("ds.matmul_gelu_grad", {&a, &b, &x}, {&grad, &dbias},
             {ta, tb, approx});
      EXPECT_TRUE(close(grad, want));
      // A column's sum rounds each of its terms once in f32: held to the
      // sum of their magnitudes, not to the (possibly cancelled) sum.
      const int64_t columns = std::max<int64_t>(wantBias.numel(), 1);
      std::vector<double> magnitude(size_t(columns), 0.0);
      for (size_t i = 0; i < want.data.size(); ++i)
        magnitude[i % size_t(columns)] += std::fabs(want.data[i]);
      const double largest =
          *std::max_element(magnitude.begin(), magnitude.end());
      EXPECT_TRUE(close(dbias, wantBias, 1e-5, 1e-6 * largest));
      if (GetParam() != std::string("cpu"))
        continue;
      Buf p = poisoned(want.shape), g2 = poisoned(want.shape),
          db2 = poisoned(wantBias.shape);
      RUN_OK("ds.matmul", {&a, &b}, {&p}, {ta, tb});
      RUN_OK("ds.gelu_grad", {&x, &p}, {&g2}, {approx});
      RUN_OK("ds.reduce_sum", {&g2}, {&db2}, axes);
      EXPECT_TRUE(bitwiseEqual(grad, g2));
      EXPECT_TRUE(bitwiseEqual(dbias, db2));
    }
  }
  Buf a({3, 4}), b({4, 6}), x({3, 5}), x6({3, 6}), grad({3, 6}), db({5}),
      db6({6});
  EXPECT_RUN_ERROR(
      run("ds.matmul_gelu_grad", {&a, &b, &x}, {&grad, &db6}, {0, 0, 1}),
      "ds.matmul_gelu_grad: x has shape [3, 5] but the product has shape "
      "[3, 6]");
  EXPECT_RUN_ERROR(
      run("ds.matmul_gelu_grad", {&a, &b, &x6}, {&grad, &db}, {0, 0, 1}),
      "ds.matmul_gelu_grad: dbias has shape [5] but needs [6] (the last dim "
      "of the product)");
}

//===--- Norms and softmax ------------------------------------------------===//

// Row lengths for each of the CUDA backend's warp kernels (up to 256, 512,
// 768, 1024) and its block kernels (longer); enough rows that a warp takes
// several and the weight gradients sum over several ranges of rows.
const Shape kRowShapes[] = {{3, 5, 7}, {13},       {2, 3, 257}, {1, 1},
                            {300, 64}, {4, 768},   {3, 1000},   {2, 1500},
                            {9000, 8}, {130, 600}, {5, 0},      {200, 0}};

TEST_P(NormsKernels, LayerNormMatchesReference) {
  SEEDED_RNG(rng);
  for (const Shape &s : kRowShapes)
    for (bool bias : {true, false}) {
      SCOPED_TRACE(shapeString(s) + (bias ? " with bias" : ""));
      int64_t C = s.back();
      Buf x = uniform(rng, s, -3, 5), w = uniform(rng, {C}),
          b = uniform(rng, {C}), y = poisoned(s);
      std::vector<Buf *> ins = {&x, &w};
      if (bias)
        ins.push_back(&b);
      RUN_OK("ds.layer_norm", ins, {&y}, {}, {1e-5});
      ref::Tensor wr = w.toRef(), br = b.toRef();
      REF_OK(want, ref::layer_norm(x.toRef(), &wr, bias ? &br : nullptr, 1e-5));
      EXPECT_TRUE(close(y, want));
      RUN_OK("ds.layer_norm", ins, {&x}, {}, {1e-5}); // in place over x
      EXPECT_TRUE(bitwiseEqual(x, y));
    }
  Buf x({2, 4}), w({3}), y({2, 4});
  EXPECT_RUN_ERROR(
      run("ds.layer_norm", {&x, &w}, {&y}, {}, {1e-5}),
      "ds.layer_norm: w has shape [3] but needs [4] (the last dim of x)");
  EXPECT_RUN_ERROR(run("ds.layer_norm", {&x}, {&y}, {}, {1e-5}),
                   "ds.layer_norm: expects 2 or 3 inputs (x, w[, b]), got 1");
}

TEST_P(NormsKernels, AddLayerNormMatchesAddThenLayerNorm) {
  SEEDED_RNG(rng);
  for (const Shape &s : kRowShapes)
    for (bool bias : {true, false}) {
      SCOPED_TRACE(shapeString(s) + (bias ? " with bias" : ""));
      int64_t C = s.back();
      Buf x = uniform(rng, s, -3, 5), r = uniform(rng, s),
          w = uniform(rng, {C}), b = uniform(rng, {C});
      Buf sum = poisoned(s), y = poisoned(s);
      std::vector<Buf *> ins = {&x, &r, &w};
      if (bias)
        ins.push_back(&b);
      RUN_OK("ds.add_layer_norm", ins, {&sum, &y}, {}, {1e-5});
      REF_OK(wantSum, ref::binary(ref::BinaryKind::Add, x.toRef(), r.toRef()));
      EXPECT_TRUE(close(sum, ref::cast(wantSum, ref::DType::f32).value, 0));
      ref::Tensor wr = w.toRef(), br = b.toRef();
      REF_OK(want,
             ref::layer_norm(sum.toRef(), &wr, bias ? &br : nullptr, 1e-5));
      EXPECT_TRUE(close(y, want));
      // The residual stream updated in place, the output over x.
      RUN_OK("ds.add_layer_norm", ins, {&r, &x}, {}, {1e-5});
      EXPECT_TRUE(bitwiseEqual(r, sum));
      EXPECT_TRUE(bitwiseEqual(x, y));
    }
}

TEST_P(NormsKernels, LayerNormGradMatchesReference) {
  SEEDED_RNG(rng);
  for (const Shape &s : kRowShapes) {
    SCOPED_TRACE(shapeString(s));
    int64_t C = s.back();
    Buf x = uniform(rng, s, -3, 5), w = uniform(rng, {C}), g = uniform(rng, s);
    Buf dx = poisoned(s), dw = poisoned({C}), db = poisoned({C});
    RUN_OK("ds.layer_norm_grad", {&x, &w, &g}, {&dx, &dw, &db}, {}, {1e-5});
    ref::Tensor wr = w.toRef();
    REF_OK(want, ref::layer_norm_grad(x.toRef(), &wr, g.toRef(), 1e-5));
    EXPECT_TRUE(close(dx, want.dx, 1e-4));
    EXPECT_TRUE(close(dw, want.dw, 1e-4));
    EXPECT_TRUE(close(db, want.db, 1e-4));
  }
}

TEST_P(NormsKernels, RmsNormAndGradMatchReference) {
  SEEDED_RNG(rng);
  for (const Shape &s : kRowShapes) {
    SCOPED_TRACE(shapeString(s));
    int64_t C = s.back();
    Buf x = uniform(rng, s), w = uniform(rng, {C}), g = uniform(rng, s);
    ref::Tensor wr = w.toRef();
    Buf y = poisoned(s);
    RUN_OK("ds.rms_norm", {&x, &w}, {&y}, {}, {1e-6});
    REF_OK(want, ref::rms_norm(x.toRef(), &wr, 1e-6));
    EXPECT_TRUE(close(y, want));
    Buf dx = poisoned(s), dw = poisoned({C});
    RUN_OK("ds.rms_norm_grad", {&x, &w, &g}, {&dx, &dw}, {}, {1e-6});
    REF_OK(grads, ref::rms_norm_grad(x.toRef(), &wr, g.toRef(), 1e-6));
    EXPECT_TRUE(close(dx, grads.dx, 1e-4));
    EXPECT_TRUE(close(dw, grads.dw, 1e-4));
    RUN_OK("ds.rms_norm", {&x, &w}, {&x}, {}, {1e-6});
    EXPECT_TRUE(bitwiseEqual(x, y));
  }
}

TEST_P(NormsKernels, SoftmaxAndGradMatchReference) {
  SEEDED_RNG(rng);
  for (const Shape &s : kRowShapes) {
    SCOPED_TRACE(shapeString(s));
    Buf x = uniform(rng, s, -10, 10), g = uniform(rng, s), y = poisoned(s);
    RUN_OK("ds.softmax", {&x}, {&y});
    REF_OK(want, ref::softmax(x.toRef()));
    EXPECT_TRUE(close(y, want));
    Buf dx = poisoned(s);
    RUN_OK("ds.softmax_grad", {&y, &g}, {&dx});
    REF_OK(grad, ref::softmax_grad(y.toRef(), g.toRef()));
    EXPECT_TRUE(close(dx, grad));
    RUN_OK("ds.softmax", {&x}, {&x});
    EXPECT_TRUE(bitwiseEqual(x, y));
  }
}

//===--- Attention and rotary ---------------------------------------------===//

struct AttentionCase {
  int64_t B, H, Tq, Tk, D, Dv;
};
/// 1/sqrt(D), or 1 for a head dim of 0 (whose scores are all 0).
double scaleFor(int64_t D) { return D > 0 ? 1.0 / std::sqrt(double(D)) : 1.0; }

const AttentionCase kAttention[] = {
    {2, 3, 5, 5, 7, 7},     {1, 2, 13, 13, 8, 5},   {2, 3, 5, 13, 7, 5},
    {1, 1, 7, 3, 4, 4},     {2, 4, 33, 33, 16, 16}, {1, 1, 1, 1, 1, 1},
    {1, 1, 4, 4, 0, 4},     {1, 1, 4, 4, 3, 0},     {1, 2, 150, 150, 5, 3},
    {1, 1, 100, 131, 4, 6}, {1, 1, 131, 70, 3, 4},  {1, 1, 0, 5, 3, 4},
    {1, 1, 4, 0, 3, 4},
};

TEST_P(AttentionKernels, ForwardMatchesReference) {
  SEEDED_RNG(rng);
  for (const AttentionCase &c : kAttention)
    for (int causal : {0, 1}) {
      SCOPED_TRACE("B H Tq Tk D Dv " +
                   shapeString({c.B, c.H, c.Tq, c.Tk, c.D, c.Dv}) +
                   (causal ? " causal" : ""));
      Buf q = uniform(rng, {c.B, c.H, c.Tq, c.D}),
          k = uniform(rng, {c.B, c.H, c.Tk, c.D}),
          v = uniform(rng, {c.B, c.H, c.Tk, c.Dv});
      double scale = scaleFor(c.D);
      Buf out = poisoned({c.B, c.H, c.Tq, c.Dv});
      RUN_OK("ds.attention", {&q, &k, &v}, {&out}, {causal, 0}, {scale});
      REF_OK(want,
             ref::attention(q.toRef(), k.toRef(), v.toRef(), causal, scale));
      EXPECT_TRUE(close(out, want));
    }
}

TEST_P(AttentionKernels, GradMatchesReference) {
  SEEDED_RNG(rng);
  for (const AttentionCase &c : kAttention)
    for (int causal : {0, 1}) {
      SCOPED_TRACE("B H Tq Tk D Dv " +
                   shapeString({c.B, c.H, c.Tq, c.Tk, c.D, c.Dv}) +
                   (causal ? " causal" : ""));
      Buf q = uniform(rng, {c.B, c.H, c.Tq, c.D}),
          k = uniform(rng, {c.B, c.H, c.Tk, c.D}),
          v = uniform(rng, {c.B, c.H, c.Tk, c.Dv}),
          g = uniform(rng, {c.B, c.H, c.Tq, c.Dv});
      double scale = scaleFor(c.D);
      Buf dq = poisoned(q.shape), dk = poisoned(k.shape),
          dv = poisoned(v.shape);
      RUN_OK("ds.attention_grad", {&q, &k, &v, &g}, {&dq, &dk, &dv},
             {causal, 0}, {scale});
      REF_OK(want, ref::attention_grad(q.toRef(), k.toRef(), v.toRef(),
                                       g.toRef(), causal, scale));
      EXPECT_TRUE(close(dq, want.dq, 1e-4));
      EXPECT_TRUE(close(dk, want.dk, 1e-4));
      EXPECT_TRUE(close(dv, want.dv, 1e-4));
    }
  Buf q({1, 2, 3, 4}), k({1, 2, 5, 4}), v({1, 2, 5, 6}), out({1, 2, 3, 4});
  EXPECT_RUN_ERROR(run("ds.attention", {&q, &k, &v}, {&out}, {1, 0}, {0.5}),
                   "ds.attention: the output has shape [1, 2, 3, 4] but needs "
                   "[1, 2, 3, 6]");
  Buf k2({1, 2, 5, 3});
  EXPECT_RUN_ERROR(
      run("ds.attention", {&q, &k2, &v}, {&out}, {1, 0}, {0.5}),
      "ds.attention: incompatible shapes q [1, 2, 3, 4], k [1, 2, 5, 3], "
      "v [1, 2, 5, 6] (need k [B, H, Tk, D] and v [B, H, Tk, Dv])");
  EXPECT_RUN_ERROR(run("ds.attention", {&q, &k, &v}, {&out}, {1, 2}, {0.5}),
                   "ds.attention: seq_major must be 0 or 1, got 2");
  EXPECT_RUN_ERROR(
      run("ds.attention", {&q, &k2, &v}, {&out}, {1, 1}, {0.5}),
      "ds.attention: incompatible shapes q [1, 2, 3, 4], k [1, 2, 5, 3], "
      "v [1, 2, 5, 6] (need k [B, Tk, H, D] and v [B, Tk, H, Dv])");
}

// seq_major operands ([B, T, H, D], as the projections write them; phase
// fused's ds-fold-attention-layout) give the [B, H, T, D] results bit for
// bit, transposed: only the addresses differ. In f32 and bf16 (whose CPU
// kernel widens tiles of sequences).
TEST_P(AttentionKernels, SeqMajorGivesTheSameBits) {
  SEEDED_RNG(rng);
  const AttentionCase cases[] = {
      {2, 3, 5, 13, 7, 5}, {2, 4, 33, 33, 16, 16}, {3, 2, 70, 70, 64, 64}};
  for (DType t : {DType::f32, DType::bf16})
    for (const AttentionCase &c : cases)
      for (int causal : {0, 1}) {
        SCOPED_TRACE(std::string(rt::dtypeName(t)) + " B H Tq Tk D Dv " +
                     shapeString({c.B, c.H, c.Tq, c.Tk, c.D, c.Dv}) +
                     (causal ? " causal" : ""));
        Buf q = uniform(rng, {c.B, c.H, c.Tq, c.D}, -2, 2, t),
            k = uniform(rng, {c.B, c.H, c.Tk, c.D}, -2, 2, t),
            v = uniform(rng, {c.B, c.H, c.Tk, c.Dv}, -2, 2, t),
            g = uniform(rng, {c.B, c.H, c.Tq, c.Dv}, -2, 2, t);
        Buf qs = swapDims12(q), ks = swapDims12(k), vs = swapDims12(v),
            gs = swapDims12(g);
        const double scale = scaleFor(c.D);
        Buf out = poisoned({c.B, c.H, c.Tq, c.Dv}, t),
            outS = poisoned({c.B, c.Tq, c.H, c.Dv}, t);
        RUN_OK("ds.attention", {&q, &k, &v}, {&out}, {causal, 0}, {scale});
        RUN_OK("ds.attention", {&qs, &ks, &vs}, {&outS}, {causal, 1}, {scale});
        EXPECT_TRUE(bitwiseEqual(swapDims12(outS), out));
        Buf dq = poisoned(q.shape, t), dk = poisoned(k.shape, t),
            dv = poisoned(v.shape, t);
        Buf dqS = poisoned(qs.shape, t), dkS = poisoned(ks.shape, t),
            dvS = poisoned(vs.shape, t);
        RUN_OK("ds.attention_grad", {&q, &k, &v, &g}, {&dq, &dk, &dv},
               {causal, 0}, {scale});
        RUN_OK("ds.attention_grad", {&qs, &ks, &vs, &gs}, {&dqS, &dkS, &dvS},
               {causal, 1}, {scale});
        EXPECT_TRUE(bitwiseEqual(swapDims12(dqS), dq));
        EXPECT_TRUE(bitwiseEqual(swapDims12(dkS), dk));
        EXPECT_TRUE(bitwiseEqual(swapDims12(dvS), dv));
      }
}

// Head dims of GPT-2 and llama and odd ones, tails, Tk != Tq.
const AttentionCase kSixteenBitAttention[] = {{2, 3, 70, 70, 64, 64},
                                              {1, 2, 33, 150, 40, 24},
                                              {1, 1, 129, 100, 128, 96},
                                              {1, 1, 5, 5, 7, 7}};

// 16-bit q, k, v (the CUDA backend's tensor-core forward): within the
// rounding of the probabilities to the operands' type, which the CPU's
// f32 softmax does not do (its result is closer).
TEST_P(AttentionKernels, SixteenBitForwardMatchesReference) {
  SEEDED_RNG(rng);
  for (DType t : {DType::bf16, DType::f16})
    for (const AttentionCase &c : kSixteenBitAttention)
      for (int causal : {0, 1}) {
        SCOPED_TRACE(std::string(rt::dtypeName(t)) + " B H Tq Tk D Dv " +
                     shapeString({c.B, c.H, c.Tq, c.Tk, c.D, c.Dv}) +
                     (causal ? " causal" : ""));
        Buf q = uniform(rng, {c.B, c.H, c.Tq, c.D}, -2, 2, t),
            k = uniform(rng, {c.B, c.H, c.Tk, c.D}, -2, 2, t),
            v = uniform(rng, {c.B, c.H, c.Tk, c.Dv}, -2, 2, t);
        const double scale = scaleFor(c.D);
        REF_OK(want,
               ref::attention(q.toRef(), k.toRef(), v.toRef(), causal, scale));
        const double bound = t == DType::bf16 ? 1e-2 : 2e-3;
        // Rounding each weight (relative u) moves a weighted mean of v by
        // at most 2 u max |v| (max |v| = 2), however small the output.
        const double atol = 2 * (t == DType::bf16 ? 0x1p-8 : 0x1p-11) * 2;
        Buf out = poisoned({c.B, c.H, c.Tq, c.Dv});
        RUN_OK("ds.attention", {&q, &k, &v}, {&out}, {causal, 0}, {scale});
        EXPECT_TRUE(close(out, want, bound, atol));
        Buf out16 = poisoned({c.B, c.H, c.Tq, c.Dv}, t); // plus its rounding
        RUN_OK("ds.attention", {&q, &k, &v}, {&out16}, {causal, 0}, {scale});
        EXPECT_TRUE(close(out16, want, 2 * bound, atol));
      }
}

// And the gradient: the CUDA backend rounds P and dS to the operands'
// type before their products (test/unit/cuda/AttentionTilesTest.cpp
// measured the worst element at 0.029 of |want| + mean |want| in bf16).
TEST_P(AttentionKernels, SixteenBitGradMatchesReference) {
  SEEDED_RNG(rng);
  for (DType t : {DType::bf16, DType::f16})
    for (const AttentionCase &c : kSixteenBitAttention)
      for (int causal : {0, 1}) {
        SCOPED_TRACE(std::string(rt::dtypeName(t)) + " B H Tq Tk D Dv " +
                     shapeString({c.B, c.H, c.Tq, c.Tk, c.D, c.Dv}) +
                     (causal ? " causal" : ""));
        Buf q = uniform(rng, {c.B, c.H, c.Tq, c.D}, -2, 2, t),
            k = uniform(rng, {c.B, c.H, c.Tk, c.D}, -2, 2, t),
            v = uniform(rng, {c.B, c.H, c.Tk, c.Dv}, -2, 2, t),
            g = uniform(rng, {c.B, c.H, c.Tq, c.Dv}, -2, 2, t);
        const double scale = scaleFor(c.D);
        REF_OK(want, ref::attention_grad(q.toRef(), k.toRef(), v.toRef(),
                                         g.toRef(), causal, scale));
        const double bound = t == DType::bf16 ? 5e-2 : 1e-2;
        Buf dq = poisoned(q.shape), dk = poisoned(k.shape),
            dv = poisoned(v.shape);
        RUN_OK("ds.attention_grad", {&q, &k, &v, &g}, {&dq, &dk, &dv},
               {causal, 0}, {scale});
        EXPECT_TRUE(close(dq, want.dq, bound));
        EXPECT_TRUE(close(dk, want.dk, bound));
        EXPECT_TRUE(close(dv, want.dv, bound));
      }
}

TEST_P(AttentionKernels, RotaryMatchesReference) {
  SEEDED_RNG(rng);
  for (const Shape &s : {Shape{2, 3, 5, 8}, Shape{7, 6}, Shape{1, 13, 2}})
    for (int inverse : {0, 1}) {
      SCOPED_TRACE(shapeString(s));
      Buf x = uniform(rng, s), y = poisoned(s);
      RUN_OK("ds.rotary", {&x}, {&y}, {inverse, 0}, {10000.0});
      REF_OK(want, ref::rotary(x.toRef(), 10000.0, inverse));
      EXPECT_TRUE(close(y, want));
      RUN_OK("ds.rotary", {&x}, {&x}, {inverse, 0}, {10000.0});
      EXPECT_TRUE(bitwiseEqual(x, y));
    }
  Buf x({3, 5}), y({3, 5});
  EXPECT_RUN_ERROR(run("ds.rotary", {&x}, {&y}, {0, 0}, {10000.0}),
                   "ds.rotary: x must be [..., T, D] with D even, got [3, 5]");
  Buf x3({2, 3, 4}), y3({2, 3, 4});
  EXPECT_RUN_ERROR(run("ds.rotary", {&x3}, {&y3}, {0, 1}, {10000.0}),
                   "ds.rotary: x must be [B, T, H, D] with D even "
                   "(seq_major), got [2, 3, 4]");
  EXPECT_RUN_ERROR(run("ds.rotary", {&x3}, {&y3}, {0, 2}, {10000.0}),
                   "ds.rotary: seq_major must be 0 or 1, got 2");
}

// seq_major x [B, T, H, D] (moved past by ds-fold-attention-layout) gives
// the [B, H, T, D] rotation's bits, transposed.
TEST_P(AttentionKernels, SeqMajorRotaryGivesTheSameBits) {
  SEEDED_RNG(rng);
  for (DType t : {DType::f32, DType::bf16})
    for (const Shape &s : {Shape{2, 3, 5, 8}, Shape{1, 4, 130, 64}})
      for (int inverse : {0, 1}) {
        SCOPED_TRACE(std::string(rt::dtypeName(t)) + " " + shapeString(s));
        Buf x = uniform(rng, s, -2, 2, t), y = poisoned(s, t);
        Buf xs = swapDims12(x), ys = poisoned(xs.shape, t);
        RUN_OK("ds.rotary", {&x}, {&y}, {inverse, 0}, {10000.0});
        RUN_OK("ds.rotary", {&xs}, {&ys}, {inverse, 1}, {10000.0});
        EXPECT_TRUE(bitwiseEqual(swapDims12(ys), y));
      }
}

INSTANTIATE_TEST_SUITE_P(Backends, MatmulKernels,
                         testing::ValuesIn(rt::backendNames()), backendName);
INSTANTIATE_TEST_SUITE_P(Backends, NormsKernels,
                         testing::ValuesIn(rt::backendNames()), backendName);
INSTANTIATE_TEST_SUITE_P(Backends, AttentionKernels,
                         testing::ValuesIn(rt::backendNames()), backendName);

} // namespace
