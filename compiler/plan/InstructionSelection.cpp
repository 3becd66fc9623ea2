//===- InstructionSelection.cpp - ops to kernel calls over buffers --------===//
//
// Each op of a program becomes one kernel call (views become buffers over
// their operand's bytes); a store whose value can be computed in place is
// forwarded into the variable. Kernel names, attributes, FLOP counts and
// in-place safety come from each op's KernelOpInterface (DsOps.td).
//
//===----------------------------------------------------------------------===//
#include "compiler/plan/LoweringImpl.h"

#include "dialects/dist/DistOps.h"
#include "dialects/ds/Contracts.h"

#include "llvm/ADT/StringSet.h"

#include <algorithm>

namespace dsc::lowering {

bool Lowering::canForward(StoreOp store,
                          const DenseMap<Operation *, int> &position,
                          ArrayRef<LoadOp> loadsOfVar) {
  Value v = store.getValue();
  Operation *producer = v.getDefiningOp();
  if (!producer || isa<LoadOp, ConstantOp>(producer) || isView(producer) ||
      !v.hasOneUse())
    return false;
  int at = position.lookup(producer);
  for (Operation *user : readersOf(loadsOfVar)) {
    if (user == producer) {
      // Every operand of the producer that reads the variable must be
      // element-for-element the output it overwrites.
      for (Value operand : producer->getOperands())
        if (readsVariable(operand, loadsOfVar) &&
            (!isInPlaceSafe(producer) || operand.getType() != v.getType()))
          return false;
    } else if (position.lookup(user) > at) {
      return false;
    }
  }
  return true;
}

SmallVector<Operation *> Lowering::readersOf(ArrayRef<LoadOp> loads) {
  SmallVector<Operation *> readers;
  SmallVector<Value> views;
  for (LoadOp load : loads)
    views.push_back(load.getResult());
  while (!views.empty())
    for (Operation *user : views.pop_back_val().getUsers()) {
      if (auto reshape = dyn_cast<ReshapeOp>(user))
        views.push_back(reshape);
      else
        readers.push_back(user);
    }
  return readers;
}

bool Lowering::readsVariable(Value v, ArrayRef<LoadOp> loads) {
  while (auto reshape = v.getDefiningOp<ReshapeOp>())
    v = reshape.getX();
  auto load = v.getDefiningOp<LoadOp>();
  return load && llvm::is_contained(loads, load);
}

void Lowering::issueAsync(std::vector<Pending> &pend, PlanProgram &prog,
                          Pending p) {
  if (lastCompute >= 0) {
    uint32_t ready = prog.numEvents++;
    pend[lastCompute].records.push_back(ready);
    p.waits.push_back(ready);
  }
  // The waits since the last compute instruction on other streams: a
  // collective of a copy's result (or a copy of a collective's) starts
  // after that copy (collective).
  for (size_t k = 0; k < waited.size(); ++k)
    if (pend[waited[k]].stream != p.stream)
      p.waits.push_back(waitsForNext[k]);
  uint32_t done = prog.numEvents++;
  p.records.push_back(done);
  commOf[p.op->getResult(0)] = {pend.size(), done};
  pend.push_back(std::move(p));
}

LogicalResult Lowering::lowerProgram(func::FuncOp func) {
  PlanProgram prog;
  prog.name = func.getSymName().str();
  std::vector<Pending> pend;
  DenseMap<Value, int> slotOf;
  DenseMap<Value, uint64_t> viewOffset; // bytes into the slot, for views
  Block &body = func.front();

  DenseMap<Operation *, int> position;
  llvm::StringMap<SmallVector<LoadOp>> loads;
  for (auto [i, op] : llvm::enumerate(body))
    position[&op] = i;
  func.walk([&](LoadOp l) { loads[l.getName()].push_back(l); });

  for (BlockArgument arg : func.getArguments()) {
    auto type = cast<RankedTensorType>(arg.getType());
    unsigned i = arg.getArgNumber();
    bool eval = prog.name == "eval";
    bool shared =
        eval && i < microInputs.size() && microInputs[i].first == type;
    int slot = eval && i < evalInputs.size() ? evalInputs[i]
               : shared                      ? microInputs[i].second
                        : fixedSlot(Category::Inputs, bytesOf(type),
                                    prog.name + ".arg" + std::to_string(i));
    if (prog.name == "micro_step")
      microInputs.push_back({type, slot});
    slotOf[arg] = slot;
    prog.inputs.push_back(buffer(slot, type));
  }

  auto ref = [&](Value v) {
    return Ref{slotOf.lookup(v), cast<RankedTensorType>(v.getType()),
               viewOffset.lookup(v)};
  };
  auto alias = [&](Value view, Value of, uint64_t offset = 0) {
    slotOf[view] = slotOf.lookup(of);
    viewOffset[view] = viewOffset.lookup(of) + offset;
  };
  // ds-offload: what an op computes lies where it runs (dist.host), a
  // copy's result where it copies to.
  auto spaceOf = [](Operation *op) {
    return op->hasAttr("dist.host") || isa<dist::CopyToHostOp>(op)
               ? Space::Host
               : Space::Device;
  };
  auto newSlot = [&](Value v, Operation *op,
                     Category category = Category::Activations) {
    auto type = cast<RankedTensorType>(v.getType());
    slots.push_back({category, false, 0, alignUp(bytesOf(type)), INT_MAX, -1,
                     op->getName().stripDialect().str() + "." +
                         std::to_string(position.lookup(op)),
                     bytesOf(type)});
    slots.back().space = spaceOf(op);
    slotOf[v] = slots.size() - 1;
    return Ref{static_cast<int>(slots.size() - 1), type};
  };

  for (Operation &op : body) {
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      for (Value v : ret.getOperands())
        returned.push_back(ref(v));
      continue;
    }
    if (auto load = dyn_cast<LoadOp>(op)) {
      slotOf[load] = varSlot.lookup(load.getName());
      continue;
    }
    if (auto c = dyn_cast<ConstantOp>(op)) {
      bool onlyStored = llvm::all_of(
          c->getUsers(), [](Operation *u) { return isa<StoreOp>(u); });
      auto dense = dyn_cast<DenseElementsAttr>(c.getValue());
      if (!dense)
        return c.emitError("plan: constant is not dense");
      if (!(onlyStored && dense.isSplat()))
        slotOf[c] = constantSlot(c, spaceOf(c));
      continue;
    }
    if (auto reshape = dyn_cast<ReshapeOp>(op)) {
      alias(reshape, reshape.getX()); // a view, no copy
      continue;
    }
    if (auto slice = dyn_cast<SliceOp>(op); slice && isView(slice)) {
      auto type = cast<RankedTensorType>(slice.getType());
      alias(slice, slice.getX(),
            static_cast<uint64_t>(slice.getOffsets()[0]) *
                dtypeSize(*dtypeOfElement(type.getElementType())));
      continue;
    }
    if (auto store = dyn_cast<StoreOp>(op)) {
      int target = varSlot.lookup(store.getName());
      auto type = cast<RankedTensorType>(store.getValue().getType());
      Value v = store.getValue();
      if (auto c = v.getDefiningOp<ConstantOp>(); c && !slotOf.count(v)) {
        auto dense = cast<DenseElementsAttr>(c.getValue());
        double value = isa<FloatType>(dense.getElementType())
                           ? dense.getSplatValue<APFloat>().convertToDouble()
                           : static_cast<double>(
                                 dense.getSplatValue<APInt>().getSExtValue());
        Pending fill{"ds.fill", {}, {Ref{target, type}}, {}, {value}, &op};
        fill.space = slots[target].space;
        pushCompute(pend, std::move(fill));
        continue;
      }
      // A copy between the spaces that only this store reads writes the
      // variable directly, when no op after the copy in program order reads
      // the variable; what other streams do meanwhile is left to the plan
      // verifier's hazard check, which refuses a plan that races.
      if (auto wait = v.getDefiningOp<dist::WaitOp>()) {
        Operation *copy = wait.getX().getDefiningOp();
        bool forward =
            copy && isa<dist::CopyToHostOp, dist::CopyToDeviceOp>(copy) &&
            wait.getX().hasOneUse() && v.hasOneUse() &&
            commOf.count(wait.getX()) &&
            llvm::all_of(readersOf(loads.lookup(store.getName())),
                         [&](Operation *user) {
                           return position.lookup(user) < position.lookup(copy);
                         });
        if (forward) {
          pend[commOf.lookup(wait.getX()).first].outs[0].slot = target;
          slotOf[wait.getX()] = slotOf[v] = target;
          continue;
        }
      }
      // Only a compute instruction's output can be pointed at the
      // variable (a collective's result, after its wait, is copied).
      if (producerIndex.count(v) &&
          canForward(store, position, loads.lookup(store.getName()))) {
        // The producer writes the variable directly; its own transient
        // slot is never referenced again and is not placed.
        slotOf[v] = target;
        retarget(pend, v, target);
        continue;
      }
      for (Operation *user : readersOf(loads.lookup(store.getName())))
        if (position.lookup(user) > position.lookup(store))
          return store.emitError(
              "plan: a variable is read after being overwritten in the "
              "same program; not supported yet");
      Pending copy{"ds.copy", {ref(v)}, {Ref{target, type}}, {}, {}, &op};
      copy.space = slots[target].space;
      pushCompute(pend, std::move(copy));
      continue;
    }
    if (isa<dist::CopyToHostOp, dist::CopyToDeviceOp>(op)) {
      // On the d2h or h2d stream, after everything compute has issued so
      // far and the waits before it (its operand may be another stream's).
      bool toHost = isa<dist::CopyToHostOp>(op);
      Pending p{
          "ds.copy",
          {ref(op.getOperand(0))},
          {newSlot(op.getResult(0), &op,
                   op.hasAttr("dist.activation") ? Category::Activations
                                                 : Category::CommBuffers)},
          {},
          {},
          &op};
      p.stream = toHost ? 3 : 2;
      issueAsync(pend, prog, std::move(p));
      continue;
    }
    if (isa<dist::AllReduceOp, dist::ReduceScatterOp, dist::AllGatherOp>(op)) {
      // On the comm stream, after everything compute has issued so far;
      // the result is a comm buffer.
      std::vector<double> floats;
      if (auto scale = op.getAttrOfType<FloatAttr>("scale"))
        floats.push_back(scale.getValueAsDouble());
      std::string kernel = "comm." + op.getName().stripDialect().str();
      Pending p{kernel,
                {ref(op.getOperand(0))},
                {newSlot(op.getResult(0), &op, Category::CommBuffers)},
                {},
                std::move(floats),
                &op};
      p.stream = 1;
      prog.commBytes += bytesOf(p.ins[0].type);
      issueAsync(pend, prog, std::move(p));
      continue;
    }
    if (auto flat = dyn_cast<dist::FlatParamsOp>(op)) {
      slotOf[flat] = groupParams.lookup(flat.getGroup());
      continue;
    }
    if (auto flat = dyn_cast<dist::FlatGradsOp>(op)) {
      slotOf[flat] = groupGrads.lookup(flat.getGroup());
      continue;
    }
    if (auto shard = dyn_cast<dist::ShardOp>(op)) {
      Pending p{"dist.shard",
                {ref(shard.getX())},
                {newSlot(shard, &op)},
                {static_cast<int64_t>(shard.getWorldSize())},
                {},
                &op};
      p.space = spaceOf(&op);
      pushCompute(pend, std::move(p));
      continue;
    }
    if (auto store = dyn_cast<dist::StoreParamsOp>(op)) {
      int target = groupParams.lookup(store.getGroup());
      auto type = cast<RankedTensorType>(store.getValue().getType());
      // The all-gather writes the parameters in place.
      auto wait = store.getValue().getDefiningOp<dist::WaitOp>();
      auto gather = wait ? wait.getX().getDefiningOp<dist::AllGatherOp>()
                         : dist::AllGatherOp();
      if (gather && gather->hasOneUse() && commOf.count(gather)) {
        pend[commOf.lookup(gather).first].outs[0].slot = target;
        slotOf[gather] = slotOf[wait] = target;
        continue;
      }
      pushCompute(pend, {"ds.copy",
                         {ref(store.getValue())},
                         {Ref{target, type}},
                         {},
                         {},
                         &op});
      continue;
    }
    if (auto wait = dyn_cast<dist::WaitOp>(op)) {
      alias(wait, wait.getX());
      auto [index, event] = commOf.lookup(wait.getX());
      waitsForNext.push_back(event);
      waited.push_back(index);
      continue;
    }
    // Every other op is one kernel call whose facts the op declares.
    auto kernel = dyn_cast<KernelOpInterface>(op);
    if (!kernel)
      return op.emitError("plan: no kernel for '") << op.getName() << "'";
    Pending p;
    p.op = &op;
    p.space = spaceOf(&op);
    p.kernel = kernel.getKernelName().str();
    for (Value in : op.getOperands())
      p.ins.push_back(ref(in));
    for (Value out : op.getResults())
      p.outs.push_back(newSlot(out, &op));
    SmallVector<int64_t> ints;
    SmallVector<double> floats;
    kernel.getKernelAttributes(ints, floats);
    p.ints.assign(ints.begin(), ints.end());
    p.floats.assign(floats.begin(), floats.end());
    prog.flops += kernel.getFlops();
    if (isRecompute(&op))
      prog.recomputedFlops += kernel.getFlops();
    pushCompute(pend, std::move(p));
    for (Value out : op.getResults())
      producerIndex[out] = pend.size() - 1;
  }

  for (size_t c : waited)
    pend[c].liveUntil = pend.size();

  if (prog.name == "apply")
    fuseOptimizer(pend);

  // Liveness and placement of this program's transients.
  std::vector<int> transients;
  for (auto [i, p] : llvm::enumerate(pend))
    for (const Ref &r : llvm::concat<Ref>(p.ins, p.outs)) {
      Slot &s = slots[r.slot];
      if (s.fixed)
        continue;
      if (s.last < 0)
        transients.push_back(r.slot);
      s.first = std::min<int>(s.first, i);
      s.last = std::max<int>(s.last, i);
    }
  for (const Ref &r : returned)
    slots[r.slot].last = pend.size();
  for (const Pending &p : pend)
    if (p.liveUntil >= 0)
      for (const Ref &r : llvm::concat<const Ref>(p.ins, p.outs))
        if (!slots[r.slot].fixed)
          slots[r.slot].last = std::max(slots[r.slot].last, p.liveUntil);
  prog.activationBytes =
      placeTransients(transients)[static_cast<int>(Category::Activations)];

  for (Pending &p : pend) {
    PlanInstr instr;
    instr.kernel = p.kernel;
    for (Ref &r : p.ins)
      instr.inputs.push_back(buffer(r.slot, r.type, r.offset));
    for (Ref &r : p.outs)
      instr.outputs.push_back(buffer(r.slot, r.type, r.offset));
    instr.intAttrs = std::move(p.ints);
    instr.floatAttrs = std::move(p.floats);
    instr.op = p.op;
    instr.stream = p.stream;
    instr.space = static_cast<uint8_t>(p.space);
    instr.wait = std::move(p.waits);
    instr.record = std::move(p.records);
    instr.loc = p.op ? locString(p.op->getLoc()) : "";
    prog.instrs.push_back(std::move(instr));
  }
  for (Ref &r : returned)
    prog.outputs.push_back(buffer(r.slot, r.type, r.offset));
  returned.clear();
  producerIndex.clear();
  lastCompute = -1;
  commOf.clear();
  waitsForNext.clear();
  waited.clear();
  plan.programs.push_back(std::move(prog));
  return success();
}

} // namespace dsc::lowering
