//===- PipelinePartition.cpp - which blocks each stage runs ---------------===//

#include "passes/pipeline/PipelinePartition.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <functional>
#include <limits>

using namespace mlir::ds::pipeline;

namespace {

/// Blocks [a, b) on stage s, with the units before and after the blocks on
/// the first and the last stage.
struct Cut {
  llvm::ArrayRef<PartitionUnit> units;
  int64_t stages;

  int64_t blocks() const { return int64_t(units.size()) - 2; }

  PartitionUnit stage(int64_t s, int64_t a, int64_t b) const {
    PartitionUnit sum;
    auto add = [&](const PartitionUnit &u) {
      sum.time += u.time;
      sum.params += u.params;
      sum.activations += u.activations;
    };
    if (s == 0)
      add(units.front());
    for (int64_t i = a; i < b; ++i)
      add(units[size_t(i + 1)]);
    if (s == stages - 1)
      add(units.back());
    return sum;
  }
};

using Weight = std::function<double(int64_t s, const PartitionUnit &)>;

/// The cut minimising the largest weight of a stage (ties: the smaller sum
/// of squared weights), every stage at least one block, no stage's weight
/// above `limit`; its stages' first blocks, or empty when none fits.
llvm::SmallVector<int64_t> minMaxCut(const Cut &cut, const Weight &weight,
                                     double limit, double &largest) {
  const int64_t n = cut.blocks(), p = cut.stages;
  constexpr double kInf = std::numeric_limits<double>::infinity();
  struct Best {
    double max = kInf, squares = kInf;
    int64_t from = -1; ///< the stage's first block
  };
  // best[s][b]: stages 0..s over blocks [0, b).
  std::vector<std::vector<Best>> best(size_t(p),
                                      std::vector<Best>(size_t(n + 1)));
  for (int64_t s = 0; s < p; ++s)
    for (int64_t b = s + 1; b <= n - (p - 1 - s); ++b)
      for (int64_t a = s; a < b; ++a) {
        const Best prev = s ? best[size_t(s - 1)][size_t(a)] : Best{0, 0, 0};
        if (s && prev.from < 0)
          continue;
        if (s == 0 && a != 0)
          break;
        const double w = weight(s, cut.stage(s, a, b));
        if (w > limit)
          continue;
        const Best here{std::max(prev.max, w), prev.squares + w * w, a};
        Best &cell = best[size_t(s)][size_t(b)];
        if (here.max < cell.max ||
            (here.max == cell.max && here.squares < cell.squares))
          cell = here;
      }
  const Best &last = best[size_t(p - 1)][size_t(n)];
  largest = last.max;
  if (last.from < 0)
    return {};
  llvm::SmallVector<int64_t> first(static_cast<size_t>(p));
  for (int64_t s = p - 1, b = n; s >= 0; --s) {
    first[size_t(s)] = best[size_t(s)][size_t(b)].from;
    b = first[size_t(s)];
  }
  return first;
}

} // namespace

llvm::SmallVector<int64_t> mlir::ds::pipeline::partitionBlocks(
    llvm::ArrayRef<PartitionUnit> units, int64_t stages, llvm::StringRef method,
    const PartitionLimits &limits, std::string &error) {
  Cut cut{units, stages};
  const int64_t n = cut.blocks();
  llvm::SmallVector<int64_t> stageOf(static_cast<size_t>(n));
  if (method == "uniform") {
    const int64_t base = n / stages, extra = n % stages;
    // The first `extra` stages take base + 1 blocks.
    const int64_t big = extra * (base + 1);
    for (int64_t i = 0; i < n; ++i)
      stageOf[size_t(i)] = i < big ? i / (base + 1) : extra + (i - big) / base;
    return stageOf;
  }
  auto memory = [&](int64_t s, const PartitionUnit &u) {
    const int64_t inFlight = limits.gpipe
                                 ? limits.microBatches
                                 : std::min(limits.microBatches, stages - s);
    return 16.0 * double(u.params) + double(inFlight) * double(u.activations);
  };
  const bool balanced = method == "balanced";
  const Weight weight = [&](int64_t s, const PartitionUnit &u) {
    if (!balanced)
      return double(u.params);
    // A stage over the memory budget is out of the running.
    if (limits.stageMemory && memory(s, u) > double(limits.stageMemory))
      return std::numeric_limits<double>::infinity();
    return u.time;
  };
  double largest = 0;
  llvm::SmallVector<int64_t> first =
      minMaxCut(cut, weight, std::numeric_limits<double>::max(), largest);
  if (first.empty()) {
    // What the budget would have to be: the least largest stage memory.
    minMaxCut(cut, memory, std::numeric_limits<double>::infinity(), largest);
    error = llvm::formatv("no cut of {0} blocks into {1} stages keeps every "
                          "stage's predicted memory within {2:F2} MiB; the "
                          "best needs {3:F2} MiB on its largest stage (16 "
                          "bytes a parameter and the in-flight micro-batches' "
                          "activations)",
                          n, stages, double(limits.stageMemory) / (1 << 20),
                          largest / (1 << 20))
                .str();
    return {};
  }
  for (int64_t s = 0; s < stages; ++s)
    for (int64_t i = first[size_t(s)];
         i < (s + 1 < stages ? first[size_t(s + 1)] : n); ++i)
      stageOf[size_t(i)] = s;
  return stageOf;
}
