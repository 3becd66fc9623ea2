//===- LinearCrossEntropyTest.cpp - the LM head and loss in one kernel ----===//
//
// ds.linear_cross_entropy against its definition in float64 (the logits'
// product, cross-entropy, its gradient and both products), with ignored
// rows and chunks of several sizes; against the unfused kernels of the
// same backend (close: a BLAS may take another path for a chunk's smaller
// products), for f32 and 16-bit heads; and its errors.
//
//===----------------------------------------------------------------------===//

#include "test/unit/conformance/KernelTestSupport.h"

using namespace dsc;
using namespace dsc::conformance;

namespace {

class LinearCrossEntropyKernels : public Conformance {};

struct Head {
  ref::Tensor loss, dh, dweight, lastRows;
};

// The definition: the unfused ops in float64.
Head reference(const Buf &h, const Buf &w, const Buf &targets, double g,
               int64_t ignore, int64_t chunkRows) {
  const int64_t V = w.shape[0], D = w.shape[1], N = targets.numel();
  Head out;
  auto logits = ref::matmul(h.toRef(), w.toRef(), false, true);
  auto loss = ref::cross_entropy(logits.value, targets.toRef(), ignore);
  auto grad = ref::cross_entropy_grad(logits.value, targets.toRef(), g, ignore);
  auto flatG = ref::reshape(grad.value, {N, V});
  auto flatH = ref::reshape(h.toRef(), {N, D});
  out.loss = loss.value;
  out.dh = ref::matmul(grad.value, w.toRef(), false, false).value;
  out.dweight = ref::matmul(flatG.value, flatH.value, true, false).value;
  out.lastRows = flatG.value;
  out.lastRows.shape = {chunkRows, V};
  out.lastRows.data.erase(out.lastRows.data.begin(),
                          out.lastRows.data.end() - chunkRows * V);
  return out;
}

TEST_P(LinearCrossEntropyKernels, MatchesTheUnfusedOpsInFloat64) {
  SEEDED_RNG(rng);
  for (const auto &[hShape, V, chunkRows] :
       {std::tuple<Shape, int64_t, int64_t>{{2, 6, 8}, 11, 4},
        {{2, 6, 8}, 11, 12},
        {{12, 8}, 11, 1},
        {{3, 5, 16}, 257, 5},
        {{4, 32}, 3, 2}})
    for (int64_t ignore : {int64_t(-1), int64_t(2)}) {
      SCOPED_TRACE(shapeString(hShape) + " V " + std::to_string(V) +
                   " chunk_rows " + std::to_string(chunkRows) + " ignore " +
                   std::to_string(ignore));
      const int64_t D = hShape.back();
      Shape tShape(hShape.begin(), hShape.end() - 1);
      Buf h = uniform(rng, hShape, -1, 1), w = uniform(rng, {V, D}, -1, 1);
      Buf targets = indices(rng, tShape, V, DType::i32);
      for (int64_t i = 1; i < targets.numel(); i += 4) // some ignored
        targets.set(i, double(ignore));
      Buf g = scalarBuf(0.75), loss = poisoned({}), dh = poisoned(hShape),
          dw = poisoned({V, D}), chunk = poisoned({chunkRows, V});
      RUN_OK("ds.linear_cross_entropy", {&h, &w, &targets, &g},
             {&loss, &dh, &dw, &chunk}, {ignore, chunkRows});
      Head want = reference(h, w, targets, 0.75, ignore, chunkRows);
      EXPECT_TRUE(close(loss, want.loss));
      EXPECT_TRUE(close(dh, want.dh));
      EXPECT_TRUE(close(dw, want.dweight));
      EXPECT_TRUE(close(chunk, want.lastRows));
    }
}

TEST_P(LinearCrossEntropyKernels, CloseToTheUnfusedKernels) {
  SEEDED_RNG(rng);
  const int64_t N = 24, V = 37, D = 16;
  Buf h = uniform(rng, {N, D}, -1, 1), w = uniform(rng, {V, D}, -1, 1);
  Buf targets = indices(rng, {N}, V, DType::i64);
  targets.set(5, -1);
  Buf g = scalarBuf(0.5), logits = poisoned({N, V}), loss = poisoned({});
  Buf grad = poisoned({N, V}), dh = poisoned({N, D});
  RUN_OK("ds.matmul", {&h, &w}, {&logits}, {0, 1});
  RUN_OK("ds.cross_entropy", {&logits, &targets}, {&loss}, {-1});
  RUN_OK("ds.cross_entropy_grad", {&logits, &targets, &g}, {&grad}, {-1});
  RUN_OK("ds.matmul", {&grad, &w}, {&dh}, {0, 0});
  Buf fusedLoss = poisoned({}), fusedDh = poisoned({N, D}),
      dw = poisoned({V, D}), chunk = poisoned({8, V});
  RUN_OK("ds.linear_cross_entropy", {&h, &w, &targets, &g},
         {&fusedLoss, &fusedDh, &dw, &chunk}, {-1, 8});
  EXPECT_TRUE(close(fusedLoss, loss.toRef(), 1e-6));
  EXPECT_TRUE(close(fusedDh, dh.toRef(), 1e-6));
}

// The share of `got`'s values equal to `want`'s.
double sameBits(const Buf &got, const ref::Tensor &want) {
  int64_t same = 0;
  for (int64_t i = 0; i < got.numel(); ++i)
    same += got.get(i) == want.data[size_t(i)];
  return double(same) / double(std::max<int64_t>(1, got.numel()));
}

// A 16-bit head: the logits and g rounded to the head's dtype where the
// unfused ops' results are, dh rounded, dweight the f32 sum; against the
// same backend's unfused 16-bit kernels (dweight from the 16-bit product's
// f32 result). A chunk's product may round a logit the other way than the
// whole product does: within one 16-bit ulp.
TEST_P(LinearCrossEntropyKernels, SixteenBitHeadAgreesWithTheUnfusedKernels) {
  SEEDED_RNG(rng);
  const int64_t N = 24, V = 37, D = 16;
  for (DType t : {DType::bf16, DType::f16}) {
    SCOPED_TRACE(rt::dtypeName(t));
    Buf h = uniform(rng, {N, D}, -1, 1, t), w = uniform(rng, {V, D}, -1, 1, t);
    Buf targets = indices(rng, {N}, V, DType::i32);
    targets.set(5, -1);
    Buf g = scalarBuf(0.5), logits = poisoned({N, V}, t), loss = poisoned({});
    Buf grad = poisoned({N, V}, t), dh = poisoned({N, D}, t);
    Buf dw = poisoned({V, D});
    RUN_OK("ds.matmul", {&h, &w}, {&logits}, {0, 1});
    RUN_OK("ds.cross_entropy", {&logits, &targets}, {&loss}, {-1});
    RUN_OK("ds.cross_entropy_grad", {&logits, &targets, &g}, {&grad}, {-1});
    RUN_OK("ds.matmul", {&grad, &w}, {&dh}, {0, 0});
    RUN_OK("ds.matmul", {&grad, &h}, {&dw}, {1, 0});
    Buf fusedLoss = poisoned({}), fusedDh = poisoned({N, D}, t),
        fusedDw = poisoned({V, D}), chunk = poisoned({8, V}, t);
    RUN_OK("ds.linear_cross_entropy", {&h, &w, &targets, &g},
           {&fusedLoss, &fusedDh, &fusedDw, &chunk}, {-1, 8});
    const double ulp = 8e-3; // bf16's relative step, above f16's
    EXPECT_TRUE(close(fusedLoss, loss.toRef(), 1e-4));
    EXPECT_TRUE(close(fusedDh, dh.toRef(), ulp));
    EXPECT_TRUE(close(fusedDw, dw.toRef(), ulp));
    ref::Tensor lastRows = grad.toRef();
    lastRows.shape = {8, V};
    lastRows.data.erase(lastRows.data.begin(), lastRows.data.end() - 8 * V);
    EXPECT_TRUE(close(chunk, lastRows, ulp));
    // Most values are the unfused ones to the bit: a head that skipped
    // rounding the logits or g (computing on wider values) would differ
    // in about half of them.
    EXPECT_GE(sameBits(chunk, lastRows), 0.9);
    EXPECT_GE(sameBits(fusedDh, dh.toRef()), 0.9);
  }
}

// Empty products: no rows (dweight all zeros, as the unfused product
// gives), and D = 0 (every logit 0: the loss is log V and g the uniform
// softmax's, dh and dweight empty).
TEST_P(LinearCrossEntropyKernels, EmptyProductsMatchTheDefinition) {
  Buf targets0({0}, DType::i32), h0({0, 3}), w({5, 3}, DType::f32);
  Buf g = scalarBuf(1), loss = poisoned({}), dh0({0, 3});
  Buf dw = poisoned({5, 3}), chunk1 = poisoned({1, 5});
  RUN_OK("ds.linear_cross_entropy", {&h0, &w, &targets0, &g},
         {&loss, &dh0, &dw, &chunk1}, {-1, 1});
  EXPECT_EQ(loss.get(0), 0.0);
  for (int64_t i = 0; i < dw.numel(); ++i)
    ASSERT_EQ(dw.get(i), 0.0) << i;

  Buf h({4, 0}), w0({5, 0}), targets({4}, DType::i32);
  for (int64_t i = 0; i < 4; ++i)
    targets.set(i, double(i));
  targets.set(1, -1); // ignored
  Buf dh({4, 0}), dw0({5, 0}), chunk = poisoned({2, 5});
  RUN_OK("ds.linear_cross_entropy", {&h, &w0, &targets, &g},
         {&loss, &dh, &dw0, &chunk}, {-1, 2});
  Head want = reference(h, w0, targets, 1.0, -1, 2);
  EXPECT_TRUE(close(loss, want.loss));
  EXPECT_NEAR(loss.get(0), std::log(5.0), 1e-6);
  EXPECT_TRUE(close(chunk, want.lastRows));
}

TEST_P(LinearCrossEntropyKernels, ErrorsNameTheOperand) {
  Buf h = filled({4, 3}, 0.5), w = filled({5, 3}, 0.25);
  Buf targets({4}, DType::i32), g = scalarBuf(1);
  Buf loss = poisoned({}), dh = poisoned({4, 3}), dw = poisoned({5, 3});
  Buf chunk = poisoned({2, 5});
  targets.set(2, 5);
  EXPECT_RUN_ERROR(run("ds.linear_cross_entropy", {&h, &w, &targets, &g},
                       {&loss, &dh, &dw, &chunk}, {-1, 2}),
                   "ds.linear_cross_entropy: target 5 at position 2 is "
                   "outside [0, 5) and is not the ignore index -1");
  targets.set(2, 1);
  EXPECT_RUN_ERROR(run("ds.linear_cross_entropy", {&h, &w, &targets, &g},
                       {&loss, &dh, &dw, &chunk}, {-1, 3}),
                   "ds.linear_cross_entropy: chunk_rows 3 must divide the 4 "
                   "rows");
  Buf w4 = filled({5, 4}, 0.25);
  EXPECT_RUN_ERROR(run("ds.linear_cross_entropy", {&h, &w4, &targets, &g},
                       {&loss, &dh, &dw, &chunk}, {-1, 2}),
                   "ds.linear_cross_entropy: weight of shape [5, 4] does not "
                   "match h of shape [4, 3] (need h [..., D] and weight [V, "
                   "D])");
  // A 16-bit head's dweight is f32; its chunk is the head's dtype.
  Buf h16 = filled({4, 3}, 0.5, DType::bf16),
      w16 = filled({5, 3}, 0.25, DType::bf16);
  Buf dh16 = poisoned({4, 3}, DType::bf16),
      dw16 = poisoned({5, 3}, DType::bf16);
  EXPECT_RUN_ERROR(run("ds.linear_cross_entropy", {&h16, &w16, &targets, &g},
                       {&loss, &dh16, &dw16, &chunk}, {-1, 2}),
                   "ds.linear_cross_entropy: unsupported dtype bf16 for "
                   "dweight (expected f32)");
}

INSTANTIATE_TEST_SUITE_P(Backends, LinearCrossEntropyKernels,
                         testing::ValuesIn(rt::backendNames()), backendName);

} // namespace
