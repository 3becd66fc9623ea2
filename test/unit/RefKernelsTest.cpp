//===- RefKernelsTest.cpp - Reference kernels and Philox tests ------------===//
//
// Gradient kernels are checked against central finite differences of
// <f(x), cotangent> on fresh random inputs each run; the seed is printed on
// failure. Forward kernels with exact answers are pinned by hand.
//
//===----------------------------------------------------------------------===//

#include "runtime/reference/RefKernels.h"
#include "runtime/rng/Philox.h"
#include "test/support/TestSeed.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <random>

using namespace dsc;
using ref::Shape;
using ref::Tensor;

namespace {

// Binds `var` to the value of a kernel Result, failing the test on error.
#define ASSIGN_OK(var, expr)                                                   \
  auto var##Result = (expr);                                                   \
  ASSERT_TRUE(var##Result.ok()) << var##Result.error;                          \
  auto var = std::move(var##Result.value)

double dot(const Tensor &a, const Tensor &b) {
  double s = 0;
  for (size_t i = 0; i < a.data.size(); ++i)
    s += a.data[i] * b.data[i];
  return s;
}

using Fn = std::function<ref::Result<Tensor>(const std::vector<Tensor> &)>;

// Checks grads[i] (the analytic VJP of f with cotangent `cot`) against central
// differences of <f(inputs), cot> for every element of every input.
void checkVjp(const Fn &f, std::vector<Tensor> inputs, const Tensor &cot,
              const std::vector<Tensor> &grads) {
  ASSERT_EQ(grads.size(), inputs.size());
  const double h = 1e-6;
  for (size_t i = 0; i < inputs.size(); ++i) {
    ASSERT_EQ(grads[i].shape, inputs[i].shape) << "input " << i;
    for (size_t e = 0; e < inputs[i].data.size(); ++e) {
      double saved = inputs[i].data[e];
      inputs[i].data[e] = saved + h;
      ref::Result<Tensor> plus = f(inputs);
      inputs[i].data[e] = saved - h;
      ref::Result<Tensor> minus = f(inputs);
      inputs[i].data[e] = saved;
      ASSERT_TRUE(plus.ok() && minus.ok()) << plus.error << minus.error;
      double fd = (dot(plus.value, cot) - dot(minus.value, cot)) / (2 * h);
      double an = grads[i].data[e];
      EXPECT_NEAR(an, fd, 1e-6 * std::max({1.0, std::abs(an), std::abs(fd)}))
          << "input " << i << " element " << e;
    }
  }
}

void expectAllNear(const Tensor &a, const Tensor &b, double tol) {
  ASSERT_EQ(a.shape, b.shape);
  for (size_t i = 0; i < a.data.size(); ++i)
    EXPECT_NEAR(a.data[i], b.data[i], tol) << "element " << i;
}

class RefKernels : public ::testing::Test {
protected:
  RefKernels() {
    seed_ = dsc::test::testSeed();
    gen_.seed(seed_);
  }
  std::string seedNote() const { return dsc::test::seedNote(seed_); }
  Tensor randn(Shape shape, double mean = 0.0, double stddev = 1.0) {
    Tensor t(std::move(shape));
    std::normal_distribution<double> dist(mean, stddev);
    for (double &v : t.data)
      v = dist(gen_);
    return t;
  }
  int64_t randint(int64_t n) {
    return std::uniform_int_distribution<int64_t>(0, n - 1)(gen_);
  }

  uint64_t seed_;
  std::mt19937_64 gen_;
};

//===--- Philox -----------------------------------------------------------===//

TEST(Philox, KnownAnswerVectors) {
  using A = std::array<uint32_t, 4>;
  EXPECT_EQ(rng::philox4x32_10({0, 0, 0, 0}, {0, 0}),
            (A{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(rng::philox4x32_10({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
                               {0xffffffff, 0xffffffff}),
            (A{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(rng::philox4x32_10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
                               {0xa4093822, 0x299f31d0}),
            (A{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

TEST(Philox, BitsAtLayout) {
  uint64_t seed = 0x0123456789abcdefull;
  uint64_t block = 0x100000002ull;
  std::array<uint32_t, 4> words =
      rng::philox4x32_10({0x2, 0x1, 7, 9}, {0x89abcdef, 0x01234567});
  for (uint64_t w = 0; w < 4; ++w)
    EXPECT_EQ(rng::bitsAt(seed, 7, 9, block * 4 + w), words[w]);
}

TEST_F(RefKernels, UniformMoments) {
  SCOPED_TRACE(seedNote());
  const int n = 100000;
  double sum = 0, sumSq = 0, lo = 1, hi = 0;
  for (int i = 0; i < n; ++i) {
    float u = rng::uniformAt(seed_, 3, 11, uint64_t(i));
    ASSERT_EQ(double(u), rng::uniformAt64(seed_, 3, 11, uint64_t(i)));
    sum += u;
    sumSq += double(u) * u;
    lo = std::min<double>(lo, u);
    hi = std::max<double>(hi, u);
  }
  double mean = sum / n, var = sumSq / n - mean * mean;
  EXPECT_GE(lo, 0.0);
  EXPECT_LT(hi, 1.0);
  EXPECT_NEAR(mean, 0.5, 0.01);
  EXPECT_NEAR(var, 1.0 / 12, 0.003);
}

TEST_F(RefKernels, NormalMoments) {
  SCOPED_TRACE(seedNote());
  const int n = 100000;
  double sum = 0, sumSq = 0, sum4 = 0;
  for (int i = 0; i < n; ++i) {
    double z = rng::normalAt(seed_, 5, 0, uint64_t(i));
    ASSERT_TRUE(std::isfinite(z));
    sum += z;
    sumSq += z * z;
    sum4 += z * z * z * z;
  }
  double mean = sum / n;
  EXPECT_NEAR(mean, 0.0, 0.02);
  EXPECT_NEAR(sumSq / n - mean * mean, 1.0, 0.03);
  EXPECT_NEAR(sum4 / n, 3.0, 0.2); // kurtosis of a normal
}

//===--- Gradients against finite differences
//------------------------------===//

TEST_F(RefKernels, LayerNormGrad) {
  SCOPED_TRACE(seedNote());
  const double eps = 1e-5;
  Tensor x = randn({3, 5}, 0.5, 2.0), w = randn({5}), b = randn({5});
  Tensor cot = randn({3, 5});
  ASSIGN_OK(gr, ref::layer_norm_grad(x, &w, cot, eps));
  checkVjp(
      [&](const std::vector<Tensor> &in) {
        return ref::layer_norm(in[0], &in[1], &in[2], eps);
      },
      {x, w, b}, cot, {gr.dx, gr.dw, gr.db});

  // Without weight and bias the forward uses 1 and 0.
  ASSIGN_OK(plain, ref::layer_norm_grad(x, nullptr, cot, eps));
  checkVjp(
      [&](const std::vector<Tensor> &in) {
        return ref::layer_norm(in[0], nullptr, nullptr, eps);
      },
      {x}, cot, {plain.dx});
}

TEST_F(RefKernels, RmsNormGrad) {
  SCOPED_TRACE(seedNote());
  const double eps = 1e-6;
  Tensor x = randn({2, 3, 7}), w = randn({7}), cot = randn({2, 3, 7});
  ASSIGN_OK(gr, ref::rms_norm_grad(x, &w, cot, eps));
  checkVjp(
      [&](const std::vector<Tensor> &in) {
        return ref::rms_norm(in[0], &in[1], eps);
      },
      {x, w}, cot, {gr.dx, gr.dw});
}

TEST_F(RefKernels, SoftmaxGrad) {
  SCOPED_TRACE(seedNote());
  Tensor x = randn({4, 5}, 0.0, 3.0), cot = randn({4, 5});
  ASSIGN_OK(y, ref::softmax(x));
  for (int64_t r = 0; r < 4; ++r) {
    double rowSum = 0;
    for (int64_t c = 0; c < 5; ++c)
      rowSum += y.data[r * 5 + c];
    EXPECT_NEAR(rowSum, 1.0, 1e-12);
  }
  ASSIGN_OK(dx, ref::softmax_grad(y, cot));
  checkVjp([](const std::vector<Tensor> &in) { return ref::softmax(in[0]); },
           {x}, cot, {dx});
}

TEST_F(RefKernels, AttentionGrad) {
  SCOPED_TRACE(seedNote());
  const int64_t B = 2, H = 2, D = 3, Dv = 4;
  // (Tq, Tk): square, decode-like (Tq < Tk) and Tq > Tk, where the causal
  // mask hides every key from the first queries.
  for (auto [Tq, Tk] : {std::pair<int64_t, int64_t>{5, 5}, {3, 5}, {5, 3}})
    for (bool causal : {false, true}) {
      SCOPED_TRACE(::testing::Message()
                   << "Tq=" << Tq << " Tk=" << Tk << " causal=" << causal);
      double scale = 1.0 / std::sqrt(double(D));
      Tensor q = randn({B, H, Tq, D}), k = randn({B, H, Tk, D});
      Tensor v = randn({B, H, Tk, Dv}), cot = randn({B, H, Tq, Dv});
      ASSIGN_OK(gr, ref::attention_grad(q, k, v, cot, causal, scale));
      checkVjp(
          [&](const std::vector<Tensor> &in) {
            return ref::attention(in[0], in[1], in[2], causal, scale);
          },
          {q, k, v}, cot, {gr.dq, gr.dk, gr.dv});
    }
}

TEST_F(RefKernels, AttentionCausalMatchesMaskedSoftmax) {
  SCOPED_TRACE(seedNote());
  // Tq=2, Tk=4: query 0 sees keys 0..2, query 1 sees keys 0..3.
  Tensor q = randn({1, 1, 2, 3}), k = randn({1, 1, 4, 3});
  Tensor v = randn({1, 1, 4, 2});
  ASSIGN_OK(out, ref::attention(q, k, v, /*causal=*/true, 0.7));
  for (int64_t i = 0; i < 2; ++i) {
    int64_t visible = 3 + i;
    std::vector<double> s(visible);
    double mx = -1e300, sum = 0;
    for (int64_t j = 0; j < visible; ++j) {
      s[j] = 0;
      for (int64_t c = 0; c < 3; ++c)
        s[j] += 0.7 * q.data[i * 3 + c] * k.data[j * 3 + c];
      mx = std::max(mx, s[j]);
    }
    for (double &e : s)
      sum += (e = std::exp(e - mx));
    for (int64_t c = 0; c < 2; ++c) {
      double expect = 0;
      for (int64_t j = 0; j < visible; ++j)
        expect += s[j] / sum * v.data[j * 2 + c];
      EXPECT_NEAR(out.data[i * 2 + c], expect, 1e-12);
    }
  }
}

TEST_F(RefKernels, CrossEntropyGrad) {
  SCOPED_TRACE(seedNote());
  const int64_t V = 7;
  Tensor logits = randn({2, 3, V}, 0.0, 2.0), targets(Shape{2, 3});
  for (double &t : targets.data)
    t = double(randint(V));
  targets.data[4] = -1; // ignored
  double g = 1.7;
  ASSIGN_OK(dx, ref::cross_entropy_grad(logits, targets, g));
  for (int64_t c = 0; c < V; ++c)
    EXPECT_EQ(dx.data[4 * V + c], 0.0);
  checkVjp(
      [&](const std::vector<Tensor> &in) {
        return ref::cross_entropy(in[0], targets);
      },
      {logits}, Tensor::scalar(g), {dx});
}

TEST_F(RefKernels, CrossEntropyValue) {
  // Uniform logits over V=4: the loss is log 4 at each counted position.
  Tensor logits({3, 4}, std::vector<double>(12, 0.25));
  Tensor targets({3}, {0, 9, 3});
  ASSIGN_OK(loss, ref::cross_entropy(logits, targets, /*ignoreIndex=*/9));
  EXPECT_TRUE(loss.shape.empty());
  EXPECT_NEAR(loss.data[0], std::log(4.0), 1e-15);
  ASSIGN_OK(none, ref::cross_entropy(logits, Tensor({3}, {-1, -1, -1})));
  EXPECT_EQ(none.data[0], 0.0);
  auto bad = ref::cross_entropy(logits, Tensor({3}, {0, 4, 1}));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error.find("target 4"), std::string::npos) << bad.error;
}

TEST_F(RefKernels, EmbeddingGrad) {
  SCOPED_TRACE(seedNote());
  const int64_t V = 6, C = 4;
  Tensor table = randn({V, C});
  Tensor idx({2, 5}, {1, 3, 1, 0, 5, 3, 3, 2, 5, 1}); // repeats accumulate
  Tensor cot = randn({2, 5, C});
  ASSIGN_OK(dt, ref::embedding_grad(idx, cot, V));
  EXPECT_EQ(dt.shape, (Shape{V, C}));
  checkVjp(
      [&](const std::vector<Tensor> &in) { return ref::embedding(in[0], idx); },
      {table}, cot, {dt});
}

TEST_F(RefKernels, EmbeddingIndexOutOfRange) {
  Tensor table({5, 2});
  auto r = ref::embedding(table, Tensor({3}, {0, 7, 1}));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error.find("7"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("5"), std::string::npos) << r.error;
  EXPECT_FALSE(ref::embedding(table, Tensor({1}, {-1})).ok());
  EXPECT_FALSE(ref::embedding(table, Tensor({1}, {1.5})).ok());
  EXPECT_FALSE(ref::embedding_grad(Tensor({1}, {5}), Tensor({1, 2}), 5).ok());
}

TEST_F(RefKernels, ActivationGrads) {
  SCOPED_TRACE(seedNote());
  Tensor x = randn({3, 7}, 0.0, 2.0), cot = randn({3, 7});
  struct Case {
    const char *name;
    ref::UnaryKind kind;
    std::function<ref::Result<Tensor>(const Tensor &, const Tensor &)> grad;
  };
  Case cases[] = {
      {"gelu_tanh", ref::UnaryKind::GeluTanh,
       [](const Tensor &a, const Tensor &g) {
         return ref::gelu_grad(a, g, true);
       }},
      {"gelu_erf", ref::UnaryKind::GeluErf,
       [](const Tensor &a, const Tensor &g) {
         return ref::gelu_grad(a, g, false);
       }},
      {"silu", ref::UnaryKind::Silu, ref::silu_grad},
      {"relu", ref::UnaryKind::Relu, ref::relu_grad},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.name);
    ASSIGN_OK(dx, c.grad(x, cot));
    checkVjp(
        [&](const std::vector<Tensor> &in) {
          return ref::unary(c.kind, in[0]);
        },
        {x}, cot, {dx});
  }
  ASSIGN_OK(atZero,
            ref::relu_grad(Tensor({2}, {0.0, -1.0}), Tensor({2}, {1.0, 1.0})));
  EXPECT_EQ(atZero.data, (std::vector<double>{0.0, 0.0}));
  EXPECT_FALSE(ref::relu_grad(Tensor({2}), Tensor({3})).ok());
}

TEST_F(RefKernels, ActivationValues) {
  Tensor x({3}, {-1.0, 0.0, 2.0});
  ASSIGN_OK(gelu, ref::unary(ref::UnaryKind::GeluErf, x));
  EXPECT_NEAR(gelu.data[0], -0.15865525393145707, 1e-15);
  EXPECT_NEAR(gelu.data[2], 1.9544997361036416, 1e-15);
  ASSIGN_OK(geluT, ref::unary(ref::UnaryKind::GeluTanh, x));
  EXPECT_NEAR(geluT.data[2], 1.9545976940871754, 1e-12);
  ASSIGN_OK(silu, ref::unary(ref::UnaryKind::Silu, x));
  EXPECT_NEAR(silu.data[2], 2.0 / (1.0 + std::exp(-2.0)), 1e-15);
  ASSIGN_OK(rs, ref::unary(ref::UnaryKind::Rsqrt, Tensor({1}, {4.0})));
  EXPECT_EQ(rs.data[0], 0.5);
}

//===--- Rotary -----------------------------------------------------------===//

TEST_F(RefKernels, RotaryInverseAndTranspose) {
  SCOPED_TRACE(seedNote());
  const double theta = 10000.0;
  Tensor x = randn({2, 3, 5, 6});
  ASSIGN_OK(y, ref::rotary(x, theta, false));
  ASSIGN_OK(back, ref::rotary(y, theta, true));
  expectAllNear(back, x, 1e-12);

  // rotary is linear: build its Jacobian and the inverse's column by column
  // and check that J^T == J_inv, i.e. the map is orthogonal.
  Shape shape{1, 4, 6};
  const size_t n = 24;
  std::vector<Tensor> fwd, inv;
  for (size_t k = 0; k < n; ++k) {
    Tensor e(shape);
    e.data[k] = 1.0;
    ASSIGN_OK(f, ref::rotary(e, theta, false));
    ASSIGN_OK(i, ref::rotary(e, theta, true));
    fwd.push_back(f);
    inv.push_back(i);
  }
  for (size_t r = 0; r < n; ++r)
    for (size_t c = 0; c < n; ++c)
      EXPECT_NEAR(fwd[r].data[c], inv[c].data[r], 1e-14) << r << "," << c;
}

TEST_F(RefKernels, RotaryPinned) {
  // T=2, D=4 with theta=100: position 1 rotates pair 0 by 1 rad and pair 1
  // by 100^(-1/2) = 0.1 rad; position 0 is unchanged.
  Tensor x({2, 4}, {1, 2, 3, 4, 1, 2, 3, 4});
  ASSIGN_OK(y, ref::rotary(x, 100.0, false));
  std::vector<double> expect = {1,
                                2,
                                3,
                                4,
                                1 * std::cos(1.0) - 3 * std::sin(1.0),
                                2 * std::cos(0.1) - 4 * std::sin(0.1),
                                3 * std::cos(1.0) + 1 * std::sin(1.0),
                                4 * std::cos(0.1) + 2 * std::sin(0.1)};
  for (size_t i = 0; i < expect.size(); ++i)
    EXPECT_NEAR(y.data[i], expect[i], 1e-14) << i;
  EXPECT_FALSE(ref::rotary(Tensor({2, 3}), 100.0, false).ok());
}

//===--- Optimizer --------------------------------------------------------===//

TEST(RefKernelsPinned, AdamW) {
  // g' = 3 * 0.5 = 1.5; m' = 0.5*1 + 0.5*1.5 = 1.25;
  // v' = 0.75*1 + 0.25*2.25 = 1.3125; mhat = 1.25/(1-0.25) = 5/3;
  // vhat = 1.3125/(1-0.5625) = 3; p' = 2 - 0.1*0.5*2 - 0.1*(5/3)/(sqrt3+0.5).
  Tensor p({2}, {2.0, 0.0}), g({2}, {3.0, 0.0}), m({2}, {1.0, 0.0}),
      v({2}, {1.0, 0.0});
  ASSIGN_OK(s, ref::adamw(p, g, m, v, /*lr=*/0.1, /*step=*/2, /*beta1=*/0.5,
                          /*beta2=*/0.75, /*eps=*/0.5, /*weightDecay=*/0.5,
                          /*gradScale=*/0.5));
  EXPECT_DOUBLE_EQ(s.m.data[0], 1.25);
  EXPECT_DOUBLE_EQ(s.v.data[0], 1.3125);
  EXPECT_NEAR(s.p.data[0], 1.9 - (1.0 / 6.0) / (std::sqrt(3.0) + 0.5), 1e-15);
  EXPECT_EQ(s.p.data[1], 0.0);
  EXPECT_FALSE(ref::adamw(p, g, m, v, 0.1, 0, 0.9, 0.99, 1e-8, 0, 1).ok());
  EXPECT_FALSE(
      ref::adamw(p, Tensor({3}), m, v, 0.1, 1, 0.9, 0.99, 1e-8, 0, 1).ok());
}

//===--- Matmul -----------------------------------------------------------===//

TEST(RefKernelsPinned, MatmulTransposesAndBatch) {
  // a stores two [3,2] matrices read transposed as [2,3]; b is a 2-D [2,3]
  // read transposed as [3,2] and shared by both batches.
  Tensor a({2, 3, 2}, {1, 2, 3, 4, 5, 6, 0, 1, 1, 0, 2, 2});
  Tensor b({2, 3}, {1, 0, 1, 0, 1, -1});
  ASSIGN_OK(c, ref::matmul(a, b, true, true));
  EXPECT_EQ(c.shape, (Shape{2, 2, 2}));
  EXPECT_EQ(c.data, (std::vector<double>{6, -2, 8, -2, 2, -1, 3, -2}));

  // Batch dims [2,1] and [3] broadcast to [2,3]: out[i,j] = a_i . b_j.
  Tensor rows({2, 1, 1, 2}, {1, 2, 3, 4});
  Tensor cols({3, 2, 1}, {1, 0, 0, 1, 1, 1});
  ASSIGN_OK(d, ref::matmul(rows, cols, false, false));
  EXPECT_EQ(d.shape, (Shape{2, 3, 1, 1}));
  EXPECT_EQ(d.data, (std::vector<double>{1, 2, 3, 3, 4, 7}));

  auto bad = ref::matmul(Tensor({2, 3}), Tensor({2, 3}), false, false);
  EXPECT_FALSE(bad.ok());
  EXPECT_FALSE(ref::matmul(Tensor({3}), Tensor({3, 1}), false, false).ok());
}

//===--- Casts ------------------------------------------------------------===//

TEST(RefKernelsPinned, CastRounding) {
  using ref::DType;
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(ref::roundToDType(1.0 + std::ldexp(1, -8), DType::bf16), 1.0);
  EXPECT_EQ(ref::roundToDType(1.0 + 3 * std::ldexp(1, -8), DType::bf16),
            1.0 + std::ldexp(1, -6)); // tie goes to the even mantissa
  EXPECT_EQ(ref::roundToDType(3.14159265358979323846, DType::bf16), 3.140625);
  const double bf16Max = 3.3895313892515355e38; // 0x7F7F
  EXPECT_EQ(ref::roundToDType(3.39e38, DType::bf16), bf16Max);
  EXPECT_EQ(ref::roundToDType(3.4e38, DType::bf16), inf);
  EXPECT_EQ(ref::roundToDType(65520.0, DType::f16), inf);
  EXPECT_EQ(ref::roundToDType(-65520.0, DType::f16), -inf);
  EXPECT_EQ(ref::roundToDType(65519.0, DType::f16), 65504.0);
  EXPECT_EQ(ref::roundToDType(1.0 / 3, DType::f16), 0.333251953125);
  // Half subnormals: quantum 2^-24; a tie at half of it rounds to zero.
  EXPECT_EQ(ref::roundToDType(std::ldexp(1, -25), DType::f16), 0.0);
  EXPECT_EQ(ref::roundToDType(3 * std::ldexp(1, -26), DType::f16),
            std::ldexp(1, -24));
  EXPECT_EQ(ref::roundToDType(5 * std::ldexp(1, -25), DType::f16),
            2 * std::ldexp(1, -24));
  EXPECT_TRUE(std::signbit(ref::roundToDType(-1e-30, DType::f16)));
  EXPECT_TRUE(std::isnan(ref::roundToDType(std::nan(""), DType::bf16)));
  EXPECT_EQ(ref::roundToDType(inf, DType::f16), inf);

  auto c = ref::cast(Tensor({2}, {0.1, 1.0 / 3}), DType::f32);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c.value.data[0], double(0.1f));
  EXPECT_EQ(c.value.data[1], double(1.0f / 3));
}

TEST_F(RefKernels, CastF32MatchesHardware) {
  SCOPED_TRACE(seedNote());
  std::uniform_real_distribution<double> mant(-1.0, 1.0);
  std::uniform_int_distribution<int> exp(-160, 130);
  for (int i = 0; i < 20000; ++i) {
    double x = std::ldexp(mant(gen_), exp(gen_));
    ASSERT_EQ(ref::roundToDType(x, ref::DType::f32), double(float(x))) << x;
  }
}

//===--- Shapes, reductions and other forward kernels ---------------------===//

TEST(RefKernelsPinned, BinaryBroadcast) {
  Tensor a({2, 1}, {1, 2}), b({3}, {10, 20, 30});
  ASSIGN_OK(s, ref::binary(ref::BinaryKind::Add, a, b));
  EXPECT_EQ(s.shape, (Shape{2, 3}));
  EXPECT_EQ(s.data, (std::vector<double>{11, 21, 31, 12, 22, 32}));
  ASSIGN_OK(eq, ref::binary(ref::BinaryKind::Equal, a, Tensor::scalar(2)));
  EXPECT_EQ(eq.data, (std::vector<double>{0, 1}));
  ASSIGN_OK(mx, ref::binary(ref::BinaryKind::Maximum, a, Tensor({1}, {1.5})));
  EXPECT_EQ(mx.data, (std::vector<double>{1.5, 2}));
  EXPECT_FALSE(
      ref::binary(ref::BinaryKind::Mul, Tensor({2}), Tensor({3})).ok());
  // A tensor whose data does not match its shape is rejected, not read.
  EXPECT_FALSE(ref::binary(ref::BinaryKind::Add, Tensor({2}, {1}), b).ok());
}

// Muon's iteration with heads (per_head_muon) is the iteration on each
// head's block of rows; the factor is a block's. Orthogonalizing makes a
// wide block's rows near-orthonormal (the quintic iteration leaves the
// singular values in about [0.7, 1.2]).
TEST(RefKernelsPinned, NewtonSchulzByHeads) {
  std::vector<double> v(4 * 3);
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = std::sin(double(i) + 1);
  Tensor u({4, 3}, v);
  ASSIGN_OK(whole, ref::newtonSchulz(u, 5));
  ASSIGN_OK(heads, ref::newtonSchulz(u, 5, 2));
  ASSIGN_OK(top,
            ref::newtonSchulz(Tensor({2, 3}, {v.begin(), v.begin() + 6}), 5));
  ASSIGN_OK(bottom,
            ref::newtonSchulz(Tensor({2, 3}, {v.begin() + 6, v.end()}), 5));
  std::vector<double> blocks = top.data;
  blocks.insert(blocks.end(), bottom.data.begin(), bottom.data.end());
  EXPECT_EQ(heads.shape, u.shape);
  EXPECT_EQ(heads.data, blocks);
  EXPECT_NE(heads.data, whole.data);
  for (int row = 0; row < 2; ++row) {
    double sq = 0;
    for (int c = 0; c < 3; ++c)
      sq += top.data[size_t(row * 3 + c)] * top.data[size_t(row * 3 + c)];
    EXPECT_NEAR(std::sqrt(sq), 1.0, 0.3);
  }
  EXPECT_DOUBLE_EQ(ref::muonFactor({4, 3}), std::sqrt(4.0 / 3.0));
  EXPECT_DOUBLE_EQ(ref::muonFactor({4, 3}, 2), 1.0);
  EXPECT_DOUBLE_EQ(ref::muonFactor({8, 3}, 2), std::sqrt(4.0 / 3.0));
  ref::Result<Tensor> bad = ref::newtonSchulz(u, 5, 3);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error, "newton_schulz: 4 rows do not split into 3 heads");
}

TEST(RefKernelsPinned, TransposeSlicePadConcatSplit) {
  Tensor x = ref::iota({2, 3, 4}, 2).value;
  for (size_t i = 0; i < x.data.size(); ++i)
    x.data[i] = double(i);
  ASSIGN_OK(t, ref::transpose(x, {2, 0, 1}));
  EXPECT_EQ(t.shape, (Shape{4, 2, 3}));
  EXPECT_EQ(t.data[1 * 6 + 1 * 3 + 2], x.data[1 * 12 + 2 * 4 + 1]);

  ASSIGN_OK(s, ref::slice(x, {1, 1, 2}, {1, 2, 2}));
  EXPECT_EQ(s.data, (std::vector<double>{18, 19, 22, 23}));
  EXPECT_FALSE(ref::slice(x, {0, 2, 0}, {1, 2, 1}).ok());

  ASSIGN_OK(p, ref::pad(Tensor({2}, {5, 6}), {1}, {2}));
  EXPECT_EQ(p.data, (std::vector<double>{0, 5, 6, 0, 0}));

  ASSIGN_OK(parts, ref::split(x, 1, {1, 2}));
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[1].shape, (Shape{2, 2, 4}));
  ASSIGN_OK(joined, ref::concat(parts, 1));
  EXPECT_EQ(joined.data, x.data);
  EXPECT_FALSE(ref::split(x, 1, {1, 1}).ok());
  EXPECT_FALSE(ref::concat({x, Tensor({2, 3, 5})}, 1).ok());

  ASSIGN_OK(r, ref::reshape(x, {4, -1}));
  EXPECT_EQ(r.shape, (Shape{4, 6}));
  EXPECT_FALSE(ref::reshape(x, {5, -1}).ok());
}

TEST(RefKernelsPinned, ReduceBroadcastIota) {
  Tensor x({2, 3}, {1, 5, 3, -2, 0, 4});
  ASSIGN_OK(sum, ref::reduce(ref::ReduceKind::Sum, x, {1}, false));
  EXPECT_EQ(sum.shape, (Shape{2}));
  EXPECT_EQ(sum.data, (std::vector<double>{9, 2}));
  ASSIGN_OK(mx, ref::reduce(ref::ReduceKind::Max, x, {0}, true));
  EXPECT_EQ(mx.shape, (Shape{1, 3}));
  EXPECT_EQ(mx.data, (std::vector<double>{1, 5, 4}));
  ASSIGN_OK(mean, ref::reduce(ref::ReduceKind::Mean, x, {0, 1}, false));
  EXPECT_TRUE(mean.shape.empty());
  EXPECT_DOUBLE_EQ(mean.data[0], 11.0 / 6);
  EXPECT_FALSE(ref::reduce(ref::ReduceKind::Sum, x, {1, 0}, false).ok());

  ASSIGN_OK(bc, ref::broadcast_to(Tensor({3, 1}, {1, 2, 3}), {2, 3, 2}));
  EXPECT_EQ(bc.data, (std::vector<double>{1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3}));
  EXPECT_FALSE(ref::broadcast_to(Tensor({3}), {2}).ok());

  ASSIGN_OK(io, ref::iota({2, 3}, 0));
  EXPECT_EQ(io.data, (std::vector<double>{0, 0, 0, 1, 1, 1}));
}

TEST_F(RefKernels, DropoutAndInit) {
  SCOPED_TRACE(seedNote());
  Tensor x = randn({100, 100});
  ASSIGN_OK(same, ref::dropout(x, 0.0, seed_, 3, 1));
  EXPECT_EQ(same.data, x.data);
  ASSIGN_OK(d, ref::dropout(x, 0.25, seed_, 3, 1));
  int64_t kept = 0;
  for (size_t e = 0; e < x.data.size(); ++e) {
    bool keep = rng::uniformAt(seed_, 3, 1, e) >= 0.25;
    kept += keep;
    EXPECT_EQ(d.data[e], keep ? x.data[e] / 0.75 : 0.0);
  }
  EXPECT_NEAR(double(kept) / 10000, 0.75, 0.03);
  EXPECT_FALSE(ref::dropout(x, 1.5, seed_, 3, 1).ok());

  ASSIGN_OK(w,
            ref::init(ref::InitKind::Normal, {50, 40}, seed_, 17, 1.0, 0.02));
  EXPECT_EQ(w.data[123],
            rng::normalAt(seed_, 17, 0xFFFFFFFF, 123) * 0.02 + 1.0);
  double mean = 0;
  for (double v : w.data)
    mean += v / 2000;
  EXPECT_NEAR(mean, 1.0, 0.003);
  ASSIGN_OK(ones, ref::init(ref::InitKind::Ones, {3}, 0, 0, 0, 0));
  EXPECT_EQ(ones.data, (std::vector<double>{1, 1, 1}));
  EXPECT_FALSE(ref::init(ref::InitKind::Zeros, {-1}, 0, 0, 0, 0).ok());
}

} // namespace
