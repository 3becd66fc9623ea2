//===- ReducePlanTest.cpp - which walk a CUDA reduction takes -------------===//
//
// planReduce and mergeWalkDims (runtime/backends/cuda/ReducePlan.h) need no
// GPU. The walks themselves run in the conformance suite's CUDA instance;
// these tests pin that its ReduceKernels cases reach every walk, and that
// the benchmark's bias gradients (column sums over B*T rows) spread over
// the GPU instead of a dozen blocks.
//
//===----------------------------------------------------------------------===//
#include "runtime/backends/cuda/ReducePlan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

using dsc::rt::cuda::mergeWalkDims;
using dsc::rt::cuda::planReduce;
using dsc::rt::cuda::ReducePlan;

namespace {

constexpr size_t kWorkspace = size_t(32) << 20; // CudaDevice's per stream

struct Dims {
  std::vector<int64_t> shape, stride;
};

Dims merged(Dims d) {
  int rank = int(d.shape.size());
  mergeWalkDims(rank, d.shape.data(), d.stride.data());
  d.shape.resize(rank);
  d.stride.resize(rank);
  return d;
}

TEST(ReducePlan, MergesOnlyDimsOneIndexWalks) {
  // [B, T] rows of a [B, T, C] gradient: one index of B*T rows.
  Dims d = merged({{4, 1024}, {1024 * 768, 768}});
  EXPECT_EQ(d.shape, (std::vector<int64_t>{4096}));
  EXPECT_EQ(d.stride, (std::vector<int64_t>{768}));
  // Dims 0 and 2 of [40, 3, 50, 7]: dim 1 lies between them.
  d = merged({{40, 50}, {1050, 7}});
  EXPECT_EQ(d.shape, (std::vector<int64_t>{40, 50}));
  EXPECT_EQ(d.stride, (std::vector<int64_t>{1050, 7}));
  // A size-1 dim between two others merges away.
  d = merged({{3, 1, 5}, {5, 5, 1}});
  EXPECT_EQ(d.shape, (std::vector<int64_t>{15}));
  EXPECT_EQ(d.stride, (std::vector<int64_t>{1}));
  d = merged({{}, {}});
  EXPECT_TRUE(d.shape.empty());
}

TEST(ReducePlan, BiasGradientsFillTheGpu) {
  // GPT-2 124M at micro-batch 128: c_attn's bias [2304] and c_fc's [3072]
  // over 131072 rows ran on 9 and 12 blocks of one thread per column.
  for (int64_t cols : {768, 2304, 3072}) {
    const ReducePlan p = planReduce(cols, 131072, false, kWorkspace);
    EXPECT_EQ(p.walk, ReducePlan::kColumns) << cols;
    EXPECT_GE(p.parts * cols, int64_t(1) << 18) << cols;
    EXPECT_GE(p.blocks, 1000) << cols;
    EXPECT_EQ(p.scratch, size_t(cols * p.parts) * sizeof(double)) << cols;
  }
  // No more parts than 64-row ranges, and no more partials than scratch.
  ReducePlan p = planReduce(3, 1000, false, kWorkspace);
  EXPECT_EQ(p.walk, ReducePlan::kColumns);
  EXPECT_EQ(p.parts, 15);
  EXPECT_EQ(p.threads, 32);
  p = planReduce(100000, 1 << 20, false, kWorkspace);
  EXPECT_EQ(p.parts, 3); // 2^18 threads
  p = planReduce(100000, 1 << 20, false, 100000 * 8 * 2);
  EXPECT_EQ(p.parts, 2);
  EXPECT_EQ(p.scratch, size_t(100000 * 8 * 2));
  // Without room for two parts: a thread per column.
  EXPECT_EQ(planReduce(100000, 1 << 20, false, 100000 * 8).walk,
            ReducePlan::kThreads);
}

TEST(ReducePlan, RowSumsAndNorms) {
  EXPECT_EQ(planReduce(131072, 768, true, kWorkspace).walk,
            ReducePlan::kBlocks);
  // One gradient's sum of squares: sliced, 64 elements per thread.
  ReducePlan p = planReduce(1, 768 * 768, true, kWorkspace);
  EXPECT_EQ(p.walk, ReducePlan::kSlices);
  EXPECT_EQ(p.parts, 36);
  EXPECT_EQ(p.blocks, 36);
  EXPECT_EQ(planReduce(1, int64_t(124) << 20, true, kWorkspace).parts, 1024);
  EXPECT_EQ(planReduce(1, 768, true, kWorkspace).walk, ReducePlan::kBlocks);
  EXPECT_EQ(planReduce(7, 5, true, kWorkspace).walk, ReducePlan::kThreads);
  // Grids stay within CUDA's 2^31 - 1 blocks.
  EXPECT_EQ(planReduce(int64_t(1) << 34, 512, true, kWorkspace).blocks,
            int64_t(1) << 20);
  EXPECT_EQ(planReduce(int64_t(1) << 34, 2, false, kWorkspace).blocks,
            int64_t(1) << 20);
}

/// The walk Reduce.cu takes for x of `shape` reduced over `axes`: kept and
/// reduced dims with x's strides, merged, as reduceBody builds them.
ReducePlan::Walk walkFor(const std::vector<int64_t> &shape,
                         const std::vector<int64_t> &axes) {
  std::vector<int64_t> strides(shape.size());
  int64_t stride = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    strides[d] = stride;
    stride *= shape[d];
  }
  Dims kept, red;
  for (size_t d = 0; d < shape.size(); ++d) {
    const bool reduced =
        std::find(axes.begin(), axes.end(), int64_t(d)) != axes.end();
    (reduced ? red : kept).shape.push_back(shape[d]);
    (reduced ? red : kept).stride.push_back(strides[d]);
  }
  kept = merged(kept);
  red = merged(red);
  int64_t outN = 1, count = 1;
  for (int64_t n : kept.shape)
    outN *= n;
  for (int64_t n : red.shape)
    count *= n;
  const bool innermost = !red.stride.empty() && red.stride.back() == 1;
  return planReduce(outN, count, innermost, kWorkspace).walk;
}

// Shapes of ReduceKernels.SumMeanMaxMatchReference
// (test/unit/conformance/LookupShapeTest.cpp): together they reach every
// walk on the GPU.
TEST(ReducePlan, ConformanceCasesReachEveryWalk) {
  struct Case {
    std::vector<int64_t> shape, axes;
    ReducePlan::Walk walk;
  } cases[] = {
      {{300, 257}, {0}, ReducePlan::kColumns},
      {{2, 700, 3, 5}, {0, 1}, ReducePlan::kColumns}, // merged dims
      {{40, 3, 50, 7}, {0, 2}, ReducePlan::kColumns}, // unmerged dims
      {{5, 600}, {1}, ReducePlan::kBlocks},
      {{6, 20, 50}, {0, 2}, ReducePlan::kBlocks},
      {{2, 66000}, {1}, ReducePlan::kSlices},
      {{2, 66000}, {0, 1}, ReducePlan::kSlices},
      {{3, 5, 7}, {0}, ReducePlan::kThreads},
      {{3, 5, 7}, {2}, ReducePlan::kThreads},
  };
  for (const Case &c : cases)
    EXPECT_EQ(walkFor(c.shape, c.axes), c.walk)
        << ::testing::PrintToString(c.shape) << " over "
        << ::testing::PrintToString(c.axes);
}

} // namespace
