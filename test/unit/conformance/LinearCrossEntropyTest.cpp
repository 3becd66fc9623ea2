//===- LinearCrossEntropyTest.cpp - the LM head and loss in one kernel ----===//
//
// ds.linear_cross_entropy against its definition in float64 (the logits'
// product, cross-entropy, its gradient and both products), with ignored
// rows and chunks of several sizes; against the unfused kernels of the
// same backend (close: a BLAS may take another path for a chunk's smaller
// products); and its errors.
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
}

INSTANTIATE_TEST_SUITE_P(Backends, LinearCrossEntropyKernels,
                         testing::ValuesIn(rt::backendNames()), backendName);

} // namespace
