//===- ArenaAllocation.cpp - plan-place: liveness placement of transients -===//
//
// Everything a program computes lives in a transient arena (activations,
// comm buffers), placed by liveness with greedy-by-size first-fit (as
// TFLite's and XLA's heap simulators): bigger buffers first, each at the
// lowest offset that does not overlap a placed buffer whose lifetime
// intersects its own. The lifetimes are plan-liveness's (Liveness.cpp).
//
//===----------------------------------------------------------------------===//
#include "compiler/plan/PlanIR.h"
#include "compiler/plan/PlanPasses.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseSet.h"

#include <algorithm>
#include <array>
#include <climits>
#include <utility>
#include <vector>

namespace dsc {

#define GEN_PASS_DEF_PLANPLACE
#include "compiler/plan/PlanPasses.h.inc"

using namespace mlir;

namespace {

/// The placed slots of one category in address order ((begin, end), then
/// placement order), in chunks of at most kMax entries. The first-fit scan
/// reads what it tests from small packed arrays instead of the Slots, and
/// skips a chunk whole when no entry of it is live with the slot being
/// placed (its lifetime envelope); inserting moves at most one chunk.
/// Placement stays greedy-by-size first-fit, exactly.
class PlacedSlots {
public:
  /// The lowest offset at which `bytes` fit among the placed slots live at
  /// some point of [first, last].
  uint64_t firstFit(uint64_t bytes, int first, int last) const {
    uint64_t offset = 0;
    for (const Chunk &c : chunks) {
      if (c.maxLast < first || last < c.minFirst)
        continue; // nothing here is live at the same time
      for (size_t q = 0, n = c.begin.size(); q < n; ++q) {
        if (c.last[q] < first || last < c.first[q])
          continue;
        if (offset + bytes <= c.begin[q])
          return offset;
        offset = std::max(offset, c.end[q]);
      }
    }
    return offset;
  }

  void insert(uint64_t b, uint64_t e, int f, int l) {
    if (chunks.empty()) {
      chunks.emplace_back();
      Chunk &c = chunks.back();
      c.begin = {b};
      c.end = {e};
      c.first = {f};
      c.last = {l};
      c.envelope();
      return;
    }
    // The first chunk whose last entry sorts after (b, e).
    size_t ci = 0, hi = chunks.size();
    while (ci < hi) {
      size_t mid = (ci + hi) / 2;
      const Chunk &c = chunks[mid];
      if (std::make_pair(c.begin.back(), c.end.back()) <= std::make_pair(b, e))
        ci = mid + 1;
      else
        hi = mid;
    }
    if (ci == chunks.size())
      --ci; // after everything: the last chunk
    Chunk &c = chunks[ci];
    size_t at = 0, top = c.begin.size();
    while (at < top) {
      size_t mid = (at + top) / 2;
      if (std::make_pair(c.begin[mid], c.end[mid]) <= std::make_pair(b, e))
        at = mid + 1;
      else
        top = mid;
    }
    c.begin.insert(c.begin.begin() + at, b);
    c.end.insert(c.end.begin() + at, e);
    c.first.insert(c.first.begin() + at, f);
    c.last.insert(c.last.begin() + at, l);
    c.minFirst = std::min(c.minFirst, f);
    c.maxLast = std::max(c.maxLast, l);
    if (c.begin.size() > kMax)
      split(ci);
  }

private:
  static constexpr size_t kMax = 256;

  struct Chunk {
    std::vector<uint64_t> begin, end;
    std::vector<int> first, last;
    int minFirst = INT_MAX, maxLast = INT_MIN;

    void envelope() {
      minFirst = *std::min_element(first.begin(), first.end());
      maxLast = *std::max_element(last.begin(), last.end());
    }
  };

  void split(size_t ci) {
    Chunk upper;
    Chunk &c = chunks[ci];
    size_t half = c.begin.size() / 2;
    auto move = [&](auto &from, auto &to) {
      to.assign(from.begin() + half, from.end());
      from.resize(half);
    };
    move(c.begin, upper.begin);
    move(c.end, upper.end);
    move(c.first, upper.first);
    move(c.last, upper.last);
    c.envelope();
    upper.envelope();
    chunks.insert(chunks.begin() + ci + 1, std::move(upper));
  }

  std::vector<Chunk> chunks; ///< each non-empty, in address order
};

/// A transient's placement size and lifetime in one program, in calls.
struct Transient {
  plan::StorageOp storage;
  uint64_t bytes = 0; ///< its size rounded up to kStorageAlign
  int64_t first = 0, last = 0;
};

/// One program's transient storage in the order its calls first touch it
/// (inputs, then outputs), with the lifetimes plan-liveness wrote; failure
/// after an error on a transient without one.
FailureOr<std::vector<Transient>> transientsOf(func::FuncOp func,
                                               SymbolTable &symbols) {
  std::vector<Transient> out;
  llvm::DenseSet<Operation *> seen;
  for (auto call : func.front().getOps<plan::CallOp>())
    for (ValueRange vs : {call.getIns(), call.getOuts()})
      for (Value v : vs) {
        plan::StorageOp s = storageOf(v, symbols);
        if (!s || !s.getTransient() || !seen.insert(s).second)
          continue;
        std::optional<ArrayRef<int64_t>> live = s.getLive();
        if (!live)
          return s.emitError("plan-place: transient storage '")
                     << s.getName() << "' has no lifetime; run plan-liveness "
                     << "first",
                 failure();
        uint64_t bytes = (uint64_t(s.getSize()) + kStorageAlign - 1) /
                         kStorageAlign * kStorageAlign;
        out.push_back({s, bytes, (*live)[0], (*live)[1]});
      }
  return out;
}

/// An arena's name in plan.arenas and plan.arena_peaks: its category, and
/// "@host" for the host's.
std::string arenaName(plan::Category c, plan::Space s) {
  return (plan::stringifyCategory(c) + (s == plan::Space::host ? "@host" : ""))
      .str();
}

struct PlacePass : impl::PlanPlaceBase<PlacePass> {
  void runOnOperation() override;
};

void PlacePass::runOnOperation() {
  ModuleOp module = requirePlanModule(getOperation(), "plan-place");
  if (!module)
    return signalPassFailure();
  SymbolTable symbols(module);
  Builder b(module.getContext());
  constexpr int kActivations = static_cast<int>(plan::Category::activations);
  // Per space and category, the end of the highest transient placed over
  // every program: the arena's size.
  std::array<std::array<uint64_t, 8>, 2> peak{};
  for (auto func : module.getOps<func::FuncOp>()) {
    FailureOr<std::vector<Transient>> transients = transientsOf(func, symbols);
    if (failed(transients))
      return signalPassFailure();
    std::vector<Transient> &order = *transients;
    std::stable_sort(order.begin(), order.end(),
                     [](const Transient &a, const Transient &b) {
                       return a.bytes > b.bytes;
                     });
    std::array<std::array<PlacedSlots, 8>, 2> placed;
    uint64_t ownActivations = 0; // this program's device activation peak
    std::array<std::array<uint64_t, 8>, 2> own{}; // this program's peaks
    for (Transient &t : order) {
      int space = static_cast<int>(t.storage.getSpace());
      int category = static_cast<int>(t.storage.getCategory());
      PlacedSlots &arena = placed[space][category];
      uint64_t offset = arena.firstFit(t.bytes, int(t.first), int(t.last));
      t.storage.setOffset(offset);
      // The predicted peak is the last byte written, as the runtime
      // measures it: alignment padding after the top buffer is not counted.
      uint64_t end = offset + uint64_t(t.storage.getSize());
      peak[space][category] = std::max(peak[space][category], end);
      own[space][category] = std::max(own[space][category], end);
      if (space == static_cast<int>(plan::Space::device) &&
          category == kActivations)
        ownActivations = std::max(ownActivations, end);
      arena.insert(offset, offset + t.bytes, int(t.first), int(t.last));
    }
    func->setAttr("plan.activation_bytes", b.getI64IntegerAttr(ownActivations));
    // Its own peak in each transient arena: what a run that executes only
    // some programs (training without eval) writes there.
    NamedAttrList ownPeaks;
    for (plan::Category c :
         {plan::Category::activations, plan::Category::comm_buffers})
      for (plan::Space s : {plan::Space::device, plan::Space::host})
        if (uint64_t bytes = own[int(s)][int(c)])
          ownPeaks.set(arenaName(c, s), b.getI64IntegerAttr(bytes));
    func->setAttr("plan.arena_peaks",
                  ownPeaks.getDictionary(module.getContext()));
  }
  // The transient arenas' sizes join the persistent ones lowering wrote.
  NamedAttrList arenas;
  if (auto old = module->getAttrOfType<DictionaryAttr>("plan.arenas"))
    arenas.append(old.getValue());
  for (plan::Category c :
       {plan::Category::activations, plan::Category::comm_buffers})
    for (plan::Space s : {plan::Space::device, plan::Space::host}) {
      std::string name = arenaName(c, s);
      arenas.erase(name);
      if (uint64_t bytes = peak[int(s)][int(c)])
        arenas.set(name, b.getI64IntegerAttr(bytes));
    }
  module->setAttr("plan.arenas", arenas.getDictionary(module.getContext()));
}

} // namespace

std::unique_ptr<mlir::Pass> createPlanPlacePass() {
  return std::make_unique<PlacePass>();
}

} // namespace dsc
