//===- OptimizerFusion.cpp - flat AdamW, rounding and zeroing -------------===//
//
// Mixed precision's update and rounding become one instruction; adjacent
// per-parameter updates (and zeroings) over contiguous memory with equal
// hyper-parameters become one instruction over the flat range.
//
//===----------------------------------------------------------------------===//
#include "compiler/plan/LoweringImpl.h"

namespace dsc::lowering {

// Mixed precision's update is `ds.adamw` into a transient, a copy of it into
// the master weights and a cast of it into the 16-bit parameter: one
// `ds.adamw_round` updates the master in place and writes the parameter in
// the same pass, reading the 16-bit gradient directly. Only when nothing
// else touches the transient or the master in between, and the copy and
// the cast wait for nothing (their events are recorded by the fused
// instruction, which finishes before they would have).
void Lowering::fuseAdamWRounding(std::vector<Pending> &pend) {
  auto same = [](const Ref &a, const Ref &b) {
    return a.slot == b.slot && a.offset == b.offset && a.type == b.type;
  };
  auto touches = [](const Pending &p, int slot) {
    for (const Ref &r : llvm::concat<const Ref>(p.ins, p.outs))
      if (r.slot == slot)
        return true;
    return false;
  };
  std::vector<bool> erased(pend.size(), false);
  for (size_t i = 0; i < pend.size(); ++i) {
    Pending &adam = pend[i];
    if (adam.kernel != "ds.adamw" || slots[adam.outs[0].slot].fixed ||
        !slots[adam.ins[0].slot].fixed)
      continue;
    const Ref tmp = adam.outs[0], master = adam.ins[0];
    int copy = -1, cast = -1;
    bool clean = true;
    for (size_t j = i + 1; j < pend.size() && clean; ++j) {
      const Pending &q = pend[j];
      if (erased[j] || (!touches(q, tmp.slot) && !touches(q, master.slot)))
        continue;
      bool readsTmp = q.ins.size() == 1 && same(q.ins[0], tmp);
      if (copy < 0 && readsTmp && q.kernel == "ds.copy" &&
          same(q.outs[0], master) && q.waits.empty() && q.space == adam.space)
        copy = j;
      else if (cast < 0 && readsTmp && q.kernel == "ds.cast" &&
               q.waits.empty() && q.space == adam.space &&
               q.outs[0].type.getShape() == tmp.type.getShape() &&
               q.outs[0].type.getElementType().getIntOrFloatBitWidth() == 16)
        cast = j;
      else
        clean = false;
      if (copy >= 0 && cast >= 0)
        break;
    }
    if (!clean || copy < 0 || cast < 0)
      continue;
    // Nor may anything in between read the 16-bit parameter's old value.
    int p16 = pend[cast].outs[0].slot;
    for (int j = int(i) + 1; j < std::max(copy, cast) && clean; ++j)
      clean = erased[j] || j == copy || !touches(pend[j], p16);
    if (!clean)
      continue;
    adam.kernel = "ds.adamw_round";
    adam.outs[0] = master;
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
  auto contiguous = [&](const Ref &a, const Ref &b) {
    const Slot &x = slots[a.slot], &y = slots[b.slot];
    return x.fixed && y.fixed && x.category == y.category &&
           x.space == y.space && x.offset + x.bytes == y.offset &&
           a.type.getElementType() == b.type.getElementType();
  };
  // `elements` elements from `first` on, in its dtype (a 16-bit gradient
  // beside an fp32 master covers half the bytes).
  auto flat = [&](const Ref &first, int64_t elements) {
    const Slot &s = slots[first.slot];
    Type elt = first.type.getElementType();
    uint64_t bytes = uint64_t(elements) * dtypeSize(*ds::dtypeOfElement(elt));
    slots.push_back(
        {s.category, true, s.offset, bytes, INT_MAX, -1, s.name + "+flat"});
    slots.back().space = s.space;
    return Ref{static_cast<int>(slots.size() - 1),
               RankedTensorType::get({elements}, elt)};
  };
  auto elementsOf = [](const Ref &r) {
    return cast<RankedTensorType>(r.type).getNumElements();
  };
  std::vector<Pending> out;
  for (size_t i = 0; i < pend.size(); ++i) {
    Pending &p = pend[i];
    // Instructions that synchronize with another stream stay as they are.
    bool synced = !p.waits.empty() || !p.records.empty();
    bool isAdam = p.kernel == "ds.adamw" && !synced;
    bool isFill = p.kernel == "ds.fill" && !synced;
    if (!isAdam && !isFill) {
      out.push_back(std::move(p));
      continue;
    }
    // Extend a run of same-kind instructions over adjacent memory.
    std::vector<size_t> run{i};
    for (size_t j = i + 1; j < pend.size(); ++j) {
      Pending &q = pend[j];
      if (q.kernel == "ds.fill" && isAdam)
        continue; // zeroing of an earlier grad may sit in between
      if (q.kernel != p.kernel || q.floats != p.floats || q.space != p.space ||
          !q.waits.empty() || !q.records.empty())
        break;
      const Pending &last = pend[run.back()];
      bool adj = true;
      size_t nRefs = isAdam ? 4 : 1;
      for (size_t k = 0; k < nRefs && adj; ++k)
        adj = isAdam ? contiguous(last.ins[k], q.ins[k])
                     : contiguous(last.outs[0], q.outs[0]);
      if (isAdam) {
        for (size_t k = 4; k < 7 && adj; ++k)
          adj = last.ins[k].slot == q.ins[k].slot;
        // Only updates that were forwarded into their variables.
        adj = adj && q.outs[0].slot == q.ins[0].slot &&
              q.outs[1].slot == q.ins[2].slot &&
              q.outs[2].slot == q.ins[3].slot;
      }
      if (!adj)
        break;
      run.push_back(j);
    }
    bool forwarded = !isAdam || (p.outs[0].slot == p.ins[0].slot &&
                                 p.outs[1].slot == p.ins[2].slot &&
                                 p.outs[2].slot == p.ins[3].slot);
    if (run.size() == 1 || !forwarded) {
      out.push_back(std::move(p));
      continue;
    }
    int64_t elements = 0;
    for (size_t j : run)
      elements += elementsOf(isAdam ? pend[j].ins[0] : pend[j].outs[0]);
    Pending merged = std::move(p);
    merged.op = nullptr;
    if (isAdam) {
      for (size_t k = 0; k < 4; ++k)
        merged.ins[k] = flat(merged.ins[k], elements);
      merged.outs = {merged.ins[0], merged.ins[2], merged.ins[3]};
    } else {
      merged.outs[0] = flat(merged.outs[0], elements);
    }
    out.push_back(std::move(merged));
    // Keep fills that sat between merged updates, in order, after it.
    for (size_t j = i + 1; j <= run.back(); ++j)
      if (!llvm::is_contained(run, j))
        out.push_back(std::move(pend[j]));
    i = run.back();
  }
  pend = std::move(out);
  // Zeroing the accumulators is the last thing @apply does to them (the
  // norm and the updates read them first), so those fills can move to the
  // end of the program and merge over adjacent memory.
  bool again = llvm::count_if(pend, [](const Pending &p) {
                 return p.kernel == "ds.fill";
               }) > 1;
  if (again) {
    std::vector<Pending> fills;
    std::vector<Pending> rest;
    for (Pending &p : pend)
      (p.kernel == "ds.fill" &&
               slots[p.outs[0].slot].category == Category::Grads &&
               p.waits.empty() && p.records.empty()
           ? fills
           : rest)
          .push_back(std::move(p));
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
}

} // namespace dsc::lowering
