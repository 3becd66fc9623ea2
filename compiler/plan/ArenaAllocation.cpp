//===- ArenaAllocation.cpp - plan-place: liveness placement of transients -===//
//
// Everything a program computes lives in a transient arena (activations,
// comm buffers), placed by liveness with greedy-by-size first-fit (as
// TFLite's and XLA's heap simulators): bigger buffers first, each at the
// lowest offset that does not overlap a placed buffer whose lifetime
// intersects its own. The pass reads the lifetimes off the plan dialect's
// calls in program order.
//
//===----------------------------------------------------------------------===//
#include "compiler/plan/PlanPasses.h"

#include "dialects/plan/PlanOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"

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

constexpr uint64_t kAlign = 64; // transient storage starts at multiples

/// A transient's placement size and lifetime in one program, in calls.
struct Transient {
  plan::StorageOp storage;
  uint64_t bytes = 0; ///< its size rounded up to kAlign
  int first = INT_MAX, last = -1;
};

/// One program's transient storage, in the order its calls first touch
/// it, with each lifetime.
class Lifetimes {
public:
  Lifetimes(func::FuncOp func, SymbolTable &symbols) : symbols(symbols) {
    for (auto call : func.front().getOps<plan::CallOp>())
      calls.push_back(call);
    const int n = calls.size();
    for (auto [i, call] : llvm::enumerate(calls))
      for (ValueRange vs : {call.getIns(), call.getOuts()})
        for (Value v : vs)
          touch(v, i, i);
    // A returned value lives to the end of the program.
    for (auto outputs : func.front().getOps<plan::OutputsOp>())
      for (Value v : outputs.getBuffers())
        touch(v, n, n, /*add=*/false);
    // A collective's or a copy's buffers stay live until the compute call
    // that waits for the event it records (after its dist.wait), or to the
    // end when none does.
    for (auto [i, call] : llvm::enumerate(calls)) {
      if (call.getStream() == plan::Stream::compute)
        continue;
      int until = waiter(call, i);
      for (ValueRange vs : {call.getIns(), call.getOuts()})
        for (Value v : vs)
          touch(v, until, until, /*add=*/false);
    }
  }

  std::vector<Transient> transients;

private:
  SymbolTable &symbols;
  std::vector<plan::CallOp> calls;
  llvm::DenseMap<Operation *, size_t> indexOf; ///< storage -> transients

  plan::StorageOp storageOf(Value v) {
    FlatSymbolRefAttr ref;
    if (auto b = v.getDefiningOp<plan::BufferOp>())
      ref = b.getStorageAttr();
    else if (auto c = v.getDefiningOp<plan::ConstantOp>())
      ref = c.getStorageAttr();
    return ref ? symbols.lookup<plan::StorageOp>(ref.getValue())
               : plan::StorageOp();
  }

  /// Extends `v`'s storage's lifetime over [first, last] when it is
  /// transient; with `add`, a transient not seen yet joins the list.
  void touch(Value v, int first, int last, bool add = true) {
    plan::StorageOp s = storageOf(v);
    if (!s || !s.getTransient())
      return;
    auto it = indexOf.find(s);
    if (it == indexOf.end()) {
      if (!add)
        return;
      it = indexOf.insert({s, transients.size()}).first;
      uint64_t bytes = (uint64_t(s.getSize()) + kAlign - 1) / kAlign * kAlign;
      transients.push_back({s, bytes});
    }
    Transient &t = transients[it->second];
    t.first = std::min(t.first, first);
    t.last = std::max(t.last, last);
  }

  /// The first compute call after `calls[i]` that waits for its last
  /// recorded event, or the number of calls.
  int waiter(plan::CallOp async, size_t i) {
    std::optional<ArrayRef<int32_t>> records = async.getRecord();
    if (records && !records->empty())
      for (size_t j = i + 1; j < calls.size(); ++j) {
        std::optional<ArrayRef<int32_t>> waits = calls[j].getWait();
        if (calls[j].getStream() == plan::Stream::compute && waits &&
            llvm::is_contained(*waits, records->back()))
          return j;
      }
    return calls.size();
  }
};

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
    std::vector<Transient> order = Lifetimes(func, symbols).transients;
    std::stable_sort(order.begin(), order.end(),
                     [](const Transient &a, const Transient &b) {
                       return a.bytes > b.bytes;
                     });
    std::array<std::array<PlacedSlots, 8>, 2> placed;
    uint64_t ownActivations = 0; // this program's device activation peak
    for (Transient &t : order) {
      int space = static_cast<int>(t.storage.getSpace());
      int category = static_cast<int>(t.storage.getCategory());
      PlacedSlots &arena = placed[space][category];
      uint64_t offset = arena.firstFit(t.bytes, t.first, t.last);
      t.storage.setOffset(offset);
      // The predicted peak is the last byte written, as the runtime
      // measures it: alignment padding after the top buffer is not counted.
      uint64_t end = offset + uint64_t(t.storage.getSize());
      peak[space][category] = std::max(peak[space][category], end);
      if (space == static_cast<int>(plan::Space::device) &&
          category == kActivations)
        ownActivations = std::max(ownActivations, end);
      arena.insert(offset, offset + t.bytes, t.first, t.last);
    }
    func->setAttr("plan.activation_bytes", b.getI64IntegerAttr(ownActivations));
  }
  // The transient arenas' sizes join the persistent ones lowering wrote.
  NamedAttrList arenas;
  if (auto old = module->getAttrOfType<DictionaryAttr>("plan.arenas"))
    arenas.append(old.getValue());
  for (plan::Category c :
       {plan::Category::activations, plan::Category::comm_buffers})
    for (plan::Space s : {plan::Space::device, plan::Space::host}) {
      std::string name =
          (plan::stringifyCategory(c) + (s == plan::Space::host ? "@host" : ""))
              .str();
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
