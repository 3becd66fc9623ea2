//===- OptimizerFusion.cpp - flat AdamW, rounding and zeroing -------------===//
//
// Mixed precision's update and rounding become one instruction; adjacent
// per-parameter updates (and zeroings) over contiguous memory with equal
// hyper-parameters become one instruction over the flat range.
//
//===----------------------------------------------------------------------===//
#include "compiler/plan/LoweringImpl.h"

namespace dsc::lowering {

namespace {

bool same(const Ref &a, const Ref &b) {
  return a.slot == b.slot && a.offset == b.offset && a.type == b.type;
}

bool touches(const Pending &p, int slot) {
  for (const Ref &r : llvm::concat<const Ref>(p.ins, p.outs))
    if (r.slot == slot)
      return true;
  return false;
}

/// Instructions that synchronize with another stream stay as they are.
bool synced(const Pending &p) { return !p.waits.empty() || !p.records.empty(); }

int64_t elementsOf(const Ref &r) {
  return cast<RankedTensorType>(r.type).getNumElements();
}

/// An update that writes its parameter and moments in place (ds.adamw's
/// outputs: parameter, m, v; its inputs: parameter, gradient, m, v, ...).
bool forwarded(const Pending &adam) {
  return adam.outs[0].slot == adam.ins[0].slot &&
         adam.outs[1].slot == adam.ins[2].slot &&
         adam.outs[2].slot == adam.ins[3].slot;
}

// What mixed precision does with an update's result `tmp`: copies it into
// the master weights and casts it into the 16-bit parameter, in the
// update's space and waiting for nothing.
bool readsOnly(const Pending &q, const Ref &tmp) {
  return q.ins.size() == 1 && same(q.ins[0], tmp);
}

bool isMasterCopy(const Pending &q, const Pending &adam) {
  return readsOnly(q, adam.outs[0]) && q.kernel == "ds.copy" &&
         same(q.outs[0], adam.ins[0]) && q.waits.empty() &&
         q.space == adam.space;
}

bool isRoundingCast(const Pending &q, const Pending &adam) {
  const Ref &tmp = adam.outs[0];
  return readsOnly(q, tmp) && q.kernel == "ds.cast" && q.waits.empty() &&
         q.space == adam.space &&
         q.outs[0].type.getShape() == tmp.type.getShape() &&
         q.outs[0].type.getElementType().getIntOrFloatBitWidth() == 16;
}

/// The copy and the cast of update `i`'s result, when nothing else touches
/// the result or the master in between, nor reads the 16-bit parameter's
/// old value before the cast writes it.
std::optional<std::pair<int, int>>
findRounding(const std::vector<Pending> &pend, size_t i,
             const std::vector<bool> &erased) {
  const Pending &adam = pend[i];
  const Ref tmp = adam.outs[0], master = adam.ins[0];
  int copy = -1, cast = -1;
  for (size_t j = i + 1; j < pend.size(); ++j) {
    const Pending &q = pend[j];
    if (erased[j] || (!touches(q, tmp.slot) && !touches(q, master.slot)))
      continue;
    if (copy < 0 && isMasterCopy(q, adam))
      copy = j;
    else if (cast < 0 && isRoundingCast(q, adam))
      cast = j;
    else
      return std::nullopt;
    if (copy >= 0 && cast >= 0)
      break;
  }
  if (copy < 0 || cast < 0)
    return std::nullopt;
  int p16 = pend[cast].outs[0].slot;
  for (int j = int(i) + 1; j < std::max(copy, cast); ++j)
    if (!erased[j] && j != copy && touches(pend[j], p16))
      return std::nullopt;
  return std::make_pair(copy, cast);
}

/// Slots as flat ranges of an arena: runs of per-variable updates (and
/// zeroings) over back-to-back memory become one instruction over a slot
/// that spans them.
class FlatMerger {
public:
  explicit FlatMerger(std::vector<Slot> &slots) : slots(slots) {}

  /// Adjacent same-kind instructions merged into one over the flat range.
  std::vector<Pending> mergeRuns(std::vector<Pending> &pend);
  /// The gradients' zeroing moved to the end and merged over adjacent
  /// memory.
  void mergeGradientFills(std::vector<Pending> &pend);

private:
  std::vector<Slot> &slots;

  bool contiguous(const Ref &a, const Ref &b) const;
  bool adjacentUpdates(const Pending &last, const Pending &q) const;
  Ref flat(const Ref &first, int64_t elements);
  std::vector<size_t> extendRun(const std::vector<Pending> &pend, size_t i,
                                bool isAdam) const;
  Pending mergeRun(std::vector<Pending> &pend, const std::vector<size_t> &run,
                   bool isAdam);
  bool isGradientFill(const Pending &p) const;
};

bool FlatMerger::contiguous(const Ref &a, const Ref &b) const {
  const Slot &x = slots[a.slot], &y = slots[b.slot];
  return x.fixed && y.fixed && x.category == y.category && x.space == y.space &&
         x.offset + x.bytes == y.offset &&
         a.type.getElementType() == b.type.getElementType();
}

/// `q` continues the run that ends in `last`: its parameter, gradient and
/// moments follow `last`'s, it reads the same scalars (lr, step, scale)
/// and it was forwarded into its variables.
bool FlatMerger::adjacentUpdates(const Pending &last, const Pending &q) const {
  for (size_t k = 0; k < 4; ++k)
    if (!contiguous(last.ins[k], q.ins[k]))
      return false;
  for (size_t k = 4; k < 7; ++k)
    if (last.ins[k].slot != q.ins[k].slot)
      return false;
  return forwarded(q);
}

/// `elements` elements from `first` on, in its dtype (a 16-bit gradient
/// beside an fp32 master covers half the bytes).
Ref FlatMerger::flat(const Ref &first, int64_t elements) {
  // A copy: the push below may move the slots.
  const Slot s = slots[first.slot];
  Type elt = first.type.getElementType();
  uint64_t bytes = uint64_t(elements) * dtypeSize(*ds::dtypeOfElement(elt));
  slots.push_back(
      {s.category, true, s.offset, bytes, s.name + "+flat", s.space});
  return Ref{static_cast<int>(slots.size() - 1),
             RankedTensorType::get({elements}, elt)};
}

/// The instructions that can merge with `pend[i]`, from `i` on.
std::vector<size_t> FlatMerger::extendRun(const std::vector<Pending> &pend,
                                          size_t i, bool isAdam) const {
  const Pending &p = pend[i];
  std::vector<size_t> run{i};
  for (size_t j = i + 1; j < pend.size(); ++j) {
    const Pending &q = pend[j];
    if (q.kernel == "ds.fill" && isAdam)
      continue; // zeroing of an earlier grad may sit in between
    if (q.kernel != p.kernel || q.floats != p.floats || q.space != p.space ||
        synced(q))
      break;
    const Pending &last = pend[run.back()];
    if (isAdam ? !adjacentUpdates(last, q)
               : !contiguous(last.outs[0], q.outs[0]))
      break;
    run.push_back(j);
  }
  return run;
}

Pending FlatMerger::mergeRun(std::vector<Pending> &pend,
                             const std::vector<size_t> &run, bool isAdam) {
  int64_t elements = 0;
  for (size_t j : run)
    elements += elementsOf(isAdam ? pend[j].ins[0] : pend[j].outs[0]);
  Pending merged = std::move(pend[run.front()]);
  merged.op = nullptr;
  if (isAdam) {
    for (size_t k = 0; k < 4; ++k)
      merged.ins[k] = flat(merged.ins[k], elements);
    merged.outs = {merged.ins[0], merged.ins[2], merged.ins[3]};
  } else {
    merged.outs[0] = flat(merged.outs[0], elements);
  }
  return merged;
}

std::vector<Pending> FlatMerger::mergeRuns(std::vector<Pending> &pend) {
  std::vector<Pending> out;
  for (size_t i = 0; i < pend.size(); ++i) {
    Pending &p = pend[i];
    bool isAdam = p.kernel == "ds.adamw" && !synced(p);
    bool isFill = p.kernel == "ds.fill" && !synced(p);
    if (!isAdam && !isFill) {
      out.push_back(std::move(p));
      continue;
    }
    std::vector<size_t> run = extendRun(pend, i, isAdam);
    if (run.size() == 1 || (isAdam && !forwarded(p))) {
      out.push_back(std::move(p));
      continue;
    }
    out.push_back(mergeRun(pend, run, isAdam));
    // Keep fills that sat between merged updates, in order, after it.
    for (size_t j = i + 1; j <= run.back(); ++j)
      if (!llvm::is_contained(run, j))
        out.push_back(std::move(pend[j]));
    i = run.back();
  }
  return out;
}

bool FlatMerger::isGradientFill(const Pending &p) const {
  return p.kernel == "ds.fill" &&
         slots[p.outs[0].slot].category == Category::Grads && !synced(p);
}

void FlatMerger::mergeGradientFills(std::vector<Pending> &pend) {
  std::vector<Pending> fills;
  std::vector<Pending> rest;
  for (Pending &p : pend)
    (isGradientFill(p) ? fills : rest).push_back(std::move(p));
  pend = std::move(rest);
  for (size_t i = 0; i < fills.size();) {
    size_t j = i + 1;
    int64_t elements = elementsOf(fills[i].outs[0]);
    while (j < fills.size() && fills[j].floats == fills[i].floats &&
           contiguous(fills[j - 1].outs[0], fills[j].outs[0])) {
      elements += elementsOf(fills[j].outs[0]);
      ++j;
    }
    Pending merged = std::move(fills[i]);
    if (j > i + 1) {
      merged.outs[0] = flat(merged.outs[0], elements);
      merged.op = nullptr;
    }
    pend.push_back(std::move(merged));
    i = j;
  }
}

} // namespace

// Mixed precision's update is `ds.adamw` into a transient, a copy of it into
// the master weights and a cast of it into the 16-bit parameter: one
// `ds.adamw_round` updates the master in place and writes the parameter in
// the same pass, reading the 16-bit gradient directly. Only when nothing
// else touches the transient or the master in between, and the copy and
// the cast wait for nothing (their events are recorded by the fused
// instruction, which finishes before they would have).
void Lowering::fuseAdamWRounding(std::vector<Pending> &pend) {
  std::vector<bool> erased(pend.size(), false);
  for (size_t i = 0; i < pend.size(); ++i) {
    Pending &adam = pend[i];
    if (adam.kernel != "ds.adamw" || slots[adam.outs[0].slot].fixed ||
        !slots[adam.ins[0].slot].fixed)
      continue;
    auto rounding = findRounding(pend, i, erased);
    if (!rounding)
      continue;
    auto [copy, cast] = *rounding;
    adam.kernel = "ds.adamw_round";
    adam.outs[0] = adam.ins[0]; // the master, updated in place
    adam.outs.push_back(pend[cast].outs[0]);
    for (int j : {copy, cast}) {
      adam.records.insert(adam.records.end(), pend[j].records.begin(),
                          pend[j].records.end());
      erased[j] = true;
    }
  }
  std::vector<Pending> kept;
  for (size_t i = 0; i < pend.size(); ++i)
    if (!erased[i])
      kept.push_back(std::move(pend[i]));
  pend = std::move(kept);
}

void Lowering::fuseOptimizer(std::vector<Pending> &pend) {
  fuseAdamWRounding(pend);
  FlatMerger merger(slots);
  pend = merger.mergeRuns(pend);
  // Zeroing the accumulators is the last thing @apply does to them (the
  // norm and the updates read them first), so those fills can move to the
  // end of the program and merge over adjacent memory.
  bool again = llvm::count_if(pend, [](const Pending &p) {
                 return p.kernel == "ds.fill";
               }) > 1;
  if (again)
    merger.mergeGradientFills(pend);
}

} // namespace dsc::lowering
