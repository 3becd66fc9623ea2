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
#include "runtime/plan/ProgramNames.h"

#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringSet.h"

#include <algorithm>

namespace dsc::lowering {

Value singleUseViewRoot(Value v) {
  while (auto reshape = v.getDefiningOp<ReshapeOp>()) {
    if (!reshape.getX().hasOneUse())
      break;
    v = reshape.getX();
  }
  return v;
}

bool Lowering::canForward(StoreOp store, Value v,
                          const DenseMap<Operation *, int> &position,
                          ArrayRef<LoadOp> loadsOfVar) {
  Operation *producer = v.getDefiningOp();
  if (!producer || isa<LoadOp, ConstantOp>(producer) || isView(producer) ||
      !v.hasOneUse() || !store.getValue().hasOneUse())
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

namespace {

/// ds-offload: what an op computes lies where it runs (dist.host), a
/// copy's result where it copies to.
Space spaceOf(Operation *op) {
  return dist::isOnHost(op) || isa<dist::CopyToHostOp>(op) ? Space::Host
                                                           : Space::Device;
}

} // namespace

/// One program's lowering: its ops, in order, become kernel calls, views
/// of other buffers, or nothing; then its transients are placed by
/// liveness and its instructions written. The slots, the buffers and the
/// asynchronous instructions by result (push) are the Lowering's,
/// shared by every program.
class Lowering::ProgramLowering {
public:
  ProgramLowering(Lowering &lowering, func::FuncOp func)
      : lowering(lowering), func(func) {
    prog.name = func.getSymName().str();
    for (auto [i, op] : llvm::enumerate(func.front()))
      position[&op] = i;
    func.walk([&](LoadOp load) { loads[load.getName()].push_back(load); });
    func.walk([&](StoreOp store) { stores[store.getName()].push_back(store); });
  }

  LogicalResult run();
  PlanProgram takeProgram() { return std::move(prog); }

private:
  Lowering &lowering;
  func::FuncOp func;
  PlanProgram prog;
  std::vector<Pending> pend;
  DenseMap<Value, int> slotOf;
  DenseMap<Value, uint64_t> viewOffset; ///< bytes into the slot, for views
  DenseMap<Operation *, int> position;  ///< the body's ops in program order
  llvm::StringMap<SmallVector<LoadOp>> loads;   ///< per variable
  llvm::StringMap<SmallVector<StoreOp>> stores; ///< per variable

  /// The loads `store` overwrites the value of: its variable's loads after
  /// the variable's previous store and before this one. (A pipeline
  /// stage's step stores a gradient accumulator once per micro-batch and
  /// loads it again after each store, reading the value just stored.)
  SmallVector<LoadOp> loadsBefore(StoreOp store) {
    const int at = position.lookup(store);
    int previous = -1;
    for (StoreOp other : stores.lookup(store.getName()))
      if (int p = position.lookup(other); p < at)
        previous = std::max(previous, p);
    SmallVector<LoadOp> out;
    for (LoadOp load : loads.lookup(store.getName()))
      if (int p = position.lookup(load); p > previous && p < at)
        out.push_back(load);
    return out;
  }

  // The storage the program's values live in.
  void bindArguments();
  int inputSlot(unsigned index, RankedTensorType type);
  Ref ref(Value v);
  void alias(Value view, Value of, uint64_t offset = 0);
  Ref newSlot(Value v, Operation *op,
              Category category = Category::Activations);

  // One op each: those that name storage that exists already emit nothing.
  LogicalResult lowerOp(Operation &op);
  LogicalResult lowerConstant(ConstantOp c);
  void lowerViewSlice(SliceOp slice);
  void lowerWait(dist::WaitOp wait);
  LogicalResult lowerStore(StoreOp store);
  /// Points `view`, a chain of reshapes of `root` (or `root` itself), and
  /// every value between at `slot`.
  void pointViewsAt(Value view, Value root, int slot);
  void fillWithSplat(StoreOp store, ConstantOp c, int target);
  bool forwardCopyIntoVariable(StoreOp store, dist::WaitOp wait, int target);
  LogicalResult copyIntoVariable(StoreOp store, int target);
  void lowerCopyBetweenSpaces(Operation &op);
  void lowerCollective(Operation &op);
  void lowerMessage(Operation &op);
  void lowerShard(dist::ShardOp shard);
  void lowerStoreParams(dist::StoreParamsOp store);
  LogicalResult lowerKernelCall(Operation &op);
  Value dyingOperand(Operation &op, Value out,
                     const llvm::SmallPtrSetImpl<Value> &taken);

  // Once every op is lowered.
  PlanInstr instruction(Pending &p);
  void writeInstructions();
};

LogicalResult Lowering::lowerProgram(func::FuncOp func) {
  currentProgram = plan.programs.size();
  ProgramLowering program(*this, func);
  if (failed(program.run()))
    return failure();
  // The per-program bookkeeping starts afresh with each program.
  returned.clear();
  producerIndex.clear();
  commOf.clear();
  plan.programs.push_back(program.takeProgram());
  return success();
}

LogicalResult Lowering::ProgramLowering::run() {
  bindArguments();
  for (Operation &op : func.front())
    if (failed(lowerOp(op)))
      return failure();
  writeInstructions();
  return success();
}

void Lowering::ProgramLowering::bindArguments() {
  for (BlockArgument arg : func.getArguments()) {
    auto type = cast<RankedTensorType>(arg.getType());
    int slot = inputSlot(arg.getArgNumber(), type);
    if (prog.name == plan::kMicroStepProgram)
      lowering.microInputs.push_back({type, slot});
    slotOf[arg] = slot;
    prog.inputs.push_back(lowering.buffer(slot, type));
  }
}

/// @eval reads its batch from @micro_step's input buffers where the types
/// agree, or from its own (laid out by Lowering::run when its batch
/// differs); the sampling programs read theirs from the start of the
/// step's; every other program's inputs get slots of their own.
int Lowering::ProgramLowering::inputSlot(unsigned i, RankedTensorType type) {
  bool eval = prog.name == plan::kEvalProgram;
  bool shared = eval && i < lowering.microInputs.size() &&
                lowering.microInputs[i].first == type;
  if (eval && i < lowering.evalInputs.size())
    return lowering.evalInputs[i];
  // A sampling program's row of tokens (and its position) fit at the start
  // of the step's token (and target) buffers, which training rewrites
  // before every micro-step.
  if (plan::isSampleProgram(prog.name) && i < lowering.microInputs.size() &&
      lowering.slots[lowering.microInputs[i].second].bytes >= bytesOf(type))
    return lowering.microInputs[i].second;
  if (shared)
    return lowering.microInputs[i].second;
  return lowering.fixedSlot(Category::Inputs, bytesOf(type),
                            plan::inputBufferName(prog.name, i));
}

Ref Lowering::ProgramLowering::ref(Value v) {
  return Ref{slotOf.lookup(v), cast<RankedTensorType>(v.getType()),
             viewOffset.lookup(v)};
}

void Lowering::ProgramLowering::alias(Value view, Value of, uint64_t offset) {
  slotOf[view] = slotOf.lookup(of);
  viewOffset[view] = viewOffset.lookup(of) + offset;
}

/// A transient slot for `v`, named after its op and its position.
Ref Lowering::ProgramLowering::newSlot(Value v, Operation *op,
                                       Category category) {
  auto type = cast<RankedTensorType>(v.getType());
  std::vector<Slot> &slots = lowering.slots;
  slots.push_back({category, false, 0, bytesOf(type),
                   op->getName().stripDialect().str() + "." +
                       std::to_string(position.lookup(op)),
                   spaceOf(op)});
  slotOf[v] = slots.size() - 1;
  return Ref{static_cast<int>(slots.size() - 1), type};
}

LogicalResult Lowering::ProgramLowering::lowerOp(Operation &op) {
  // Ops that name storage that exists already (or views of it).
  if (auto ret = dyn_cast<func::ReturnOp>(op)) {
    for (Value v : ret.getOperands())
      lowering.returned.push_back(ref(v));
    return success();
  }
  if (auto load = dyn_cast<LoadOp>(op)) {
    slotOf[load] = lowering.varSlot.lookup(load.getName());
    return success();
  }
  if (auto c = dyn_cast<ConstantOp>(op))
    return lowerConstant(c);
  if (auto reshape = dyn_cast<ReshapeOp>(op)) {
    alias(reshape, reshape.getX()); // a view, no copy
    return success();
  }
  if (auto slice = dyn_cast<SliceOp>(op); slice && isView(slice)) {
    lowerViewSlice(slice);
    return success();
  }
  if (auto flat = dyn_cast<dist::FlatParamsOp>(op)) {
    slotOf[flat] = lowering.groupParams.lookup(flat.getGroup());
    return success();
  }
  if (auto flat = dyn_cast<dist::FlatGradsOp>(op)) {
    slotOf[flat] = lowering.groupGrads.lookup(flat.getGroup());
    return success();
  }
  if (auto wait = dyn_cast<dist::WaitOp>(op)) {
    lowerWait(wait);
    return success();
  }
  // Ops that become instructions.
  if (auto store = dyn_cast<StoreOp>(op))
    return lowerStore(store);
  if (isa<dist::CopyToHostOp, dist::CopyToDeviceOp>(op))
    lowerCopyBetweenSpaces(op);
  else if (isa<dist::AllReduceOp, dist::ReduceScatterOp, dist::AllGatherOp,
               dist::AllToAllOp>(op))
    lowerCollective(op);
  else if (isa<dist::SendOp, dist::RecvOp>(op))
    lowerMessage(op);
  else if (auto shard = dyn_cast<dist::ShardOp>(op))
    lowerShard(shard);
  else if (auto store = dyn_cast<dist::StoreParamsOp>(op))
    lowerStoreParams(store);
  else
    return lowerKernelCall(op);
  return success();
}

LogicalResult Lowering::ProgramLowering::lowerConstant(ConstantOp c) {
  bool onlyStored =
      llvm::all_of(c->getUsers(), [](Operation *u) { return isa<StoreOp>(u); });
  auto dense = dyn_cast<DenseElementsAttr>(c.getValue());
  if (!dense)
    return c.emitError("plan: constant is not dense");
  // A splat that only stores read needs no buffer: each store is a fill.
  if (!(onlyStored && dense.isSplat()))
    slotOf[c] = lowering.constantSlot(c, spaceOf(c));
  return success();
}

void Lowering::ProgramLowering::lowerViewSlice(SliceOp slice) {
  auto type = cast<RankedTensorType>(slice.getType());
  alias(slice, slice.getX(),
        static_cast<uint64_t>(slice.getOffsets()[0]) *
            dtypeSize(*dtypeOfElement(type.getElementType())));
}

/// A wait is its collective's (or copy's) result, and a marker where the
/// program needs it (plan.await; plan-insert-events makes it events).
void Lowering::ProgramLowering::lowerWait(dist::WaitOp wait) {
  alias(wait, wait.getX());
  Pending marker;
  marker.awaits = lowering.commOf.lookup(wait.getX());
  pend.push_back(std::move(marker));
}

LogicalResult Lowering::ProgramLowering::lowerStore(StoreOp store) {
  int target = lowering.varSlot.lookup(store.getName());
  Value v = store.getValue();
  if (auto c = v.getDefiningOp<ConstantOp>(); c && !slotOf.count(v)) {
    fillWithSplat(store, c, target);
    return success();
  }
  if (auto wait = v.getDefiningOp<dist::WaitOp>())
    if (forwardCopyIntoVariable(store, wait, target))
      return success();
  // Only a compute instruction's output can be pointed at the
  // variable (a collective's result, after its wait, is copied), also
  // through reshapes that nothing else reads (a bucket's part of a weight's
  // gradient, split flat and reshaped to the weight).
  Value root = singleUseViewRoot(v);
  if (lowering.producerIndex.count(root) &&
      lowering.canForward(store, root, position, loadsBefore(store))) {
    // The producer writes the variable directly; its own transient
    // slot is never referenced again and is not placed.
    pointViewsAt(v, root, target);
    lowering.retarget(pend, root, target);
    return success();
  }
  return copyIntoVariable(store, target);
}

void Lowering::ProgramLowering::pointViewsAt(Value view, Value root, int slot) {
  for (Value x = view;; x = x.getDefiningOp<ReshapeOp>().getX()) {
    slotOf[x] = slot;
    viewOffset[x] = 0;
    if (x == root)
      return;
  }
}

void Lowering::ProgramLowering::fillWithSplat(StoreOp store, ConstantOp c,
                                              int target) {
  auto type = cast<RankedTensorType>(store.getValue().getType());
  auto dense = cast<DenseElementsAttr>(c.getValue());
  double value =
      isa<FloatType>(dense.getElementType())
          ? dense.getSplatValue<APFloat>().convertToDouble()
          : static_cast<double>(dense.getSplatValue<APInt>().getSExtValue());
  Pending fill{"ds.fill", {},      {Ref{target, type}},
               {},        {value}, store.getOperation()};
  fill.space = lowering.slots[target].space;
  lowering.push(pend, std::move(fill));
}

/// A copy between the spaces that only this store reads writes the
/// variable directly, when no op after the copy in program order reads
/// the variable; what other streams do meanwhile is left to the plan
/// verifier's hazard check, which refuses a plan that races.
bool Lowering::ProgramLowering::forwardCopyIntoVariable(StoreOp store,
                                                        dist::WaitOp wait,
                                                        int target) {
  Value v = store.getValue();
  Value copied = wait.getX();
  Operation *copy = copied.getDefiningOp();
  bool forward =
      copy && isa<dist::CopyToHostOp, dist::CopyToDeviceOp>(copy) &&
      copied.hasOneUse() && v.hasOneUse() && lowering.commOf.count(copied) &&
      llvm::all_of(readersOf(loadsBefore(store)), [&](Operation *user) {
        return position.lookup(user) < position.lookup(copy);
      });
  if (!forward)
    return false;
  pend[lowering.commOf.lookup(copied)].outs[0].slot = target;
  slotOf[copied] = slotOf[v] = target;
  return true;
}

LogicalResult Lowering::ProgramLowering::copyIntoVariable(StoreOp store,
                                                          int target) {
  for (Operation *user : readersOf(loadsBefore(store)))
    if (position.lookup(user) > position.lookup(store))
      return store.emitError(
          "plan: a variable is read after being overwritten in the "
          "same program; not supported yet");
  Value v = store.getValue();
  auto type = cast<RankedTensorType>(v.getType());
  Pending copy{"ds.copy", {ref(v)}, {Ref{target, type}},
               {},        {},       store.getOperation()};
  copy.space = lowering.slots[target].space;
  lowering.push(pend, std::move(copy));
  return success();
}

/// Asynchronous: on the d2h or h2d stream (plan-assign-streams).
void Lowering::ProgramLowering::lowerCopyBetweenSpaces(Operation &op) {
  Pending p{
      "ds.copy",
      {ref(op.getOperand(0))},
      {newSlot(op.getResult(0), &op,
               op.hasAttr(dist::kActivationAttr) ? Category::Activations
                                                 : Category::CommBuffers)},
      {},
      {},
      &op};
  p.async = true;
  lowering.push(pend, std::move(p));
}

/// Asynchronous: on the comm stream (plan-assign-streams); the result is a
/// comm buffer.
void Lowering::ProgramLowering::lowerCollective(Operation &op) {
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
  p.async = true;
  prog.commBytes += bytesOf(p.ins[0].type);
  lowering.push(pend, std::move(p));
}

/// A pipeline stage's send or receive: asynchronous on the comm stream
/// (the stream runs them in program order, which is the schedule's); a
/// received value is a comm buffer, waited for at its dist.wait. A send
/// has no result and nothing waits for it, so what it reads stays live to
/// the end of the program (plan-liveness).
void Lowering::ProgramLowering::lowerMessage(Operation &op) {
  // The ops' I64Attrs read as unsigned; the plan's ints are signed.
  auto key = [](auto m) -> std::vector<int64_t> {
    return {int64_t(m.getPeer()), int64_t(m.getTransfer()),
            int64_t(m.getMicroBatch())};
  };
  auto recv = dyn_cast<dist::RecvOp>(op);
  std::vector<int64_t> ints = recv ? key(recv) : key(cast<dist::SendOp>(op));
  Pending p{recv ? "comm.recv" : "comm.send", {}, {}, std::move(ints), {}, &op};
  if (recv)
    p.outs.push_back(newSlot(recv.getResult(), &op, Category::CommBuffers));
  else
    p.ins.push_back(ref(op.getOperand(0)));
  p.async = true;
  prog.commBytes += bytesOf(recv ? p.outs[0].type : p.ins[0].type);
  lowering.push(pend, std::move(p));
}

void Lowering::ProgramLowering::lowerShard(dist::ShardOp shard) {
  Pending p{"dist.shard",
            {ref(shard.getX())},
            {newSlot(shard, shard)},
            {static_cast<int64_t>(shard.getWorldSize())},
            {},
            shard.getOperation()};
  p.space = spaceOf(shard);
  lowering.push(pend, std::move(p));
}

void Lowering::ProgramLowering::lowerStoreParams(dist::StoreParamsOp store) {
  int target = lowering.groupParams.lookup(store.getGroup());
  auto type = cast<RankedTensorType>(store.getValue().getType());
  // The all-gather writes the parameters in place.
  auto wait = store.getValue().getDefiningOp<dist::WaitOp>();
  auto gather = wait ? wait.getX().getDefiningOp<dist::AllGatherOp>()
                     : dist::AllGatherOp();
  if (gather && gather->hasOneUse() && lowering.commOf.count(gather)) {
    pend[lowering.commOf.lookup(gather)].outs[0].slot = target;
    slotOf[gather] = slotOf[wait] = target;
    return;
  }
  lowering.push(pend, {"ds.copy",
                       {ref(store.getValue())},
                       {Ref{target, type}},
                       {},
                       {},
                       store.getOperation()});
}

/// Every other op is one kernel call whose facts the op declares.
LogicalResult Lowering::ProgramLowering::lowerKernelCall(Operation &op) {
  auto kernel = dyn_cast<KernelOpInterface>(op);
  if (!kernel)
    return op.emitError("plan: no kernel for '") << op.getName() << "'";
  Pending p;
  p.op = &op;
  p.space = spaceOf(&op);
  p.kernel = kernel.getKernelName().str();
  for (Value in : op.getOperands())
    p.ins.push_back(ref(in));
  llvm::SmallPtrSet<Value, 4> taken;
  for (Value out : op.getResults()) {
    if (Value in = dyingOperand(op, out, taken)) {
      taken.insert(in);
      slotOf[out] = slotOf.lookup(in);
      p.outs.push_back(ref(out));
      continue;
    }
    p.outs.push_back(newSlot(out, &op));
  }
  SmallVector<int64_t> ints;
  SmallVector<double> floats;
  kernel.getKernelAttributes(ints, floats);
  p.ints.assign(ints.begin(), ints.end());
  p.floats.assign(floats.begin(), floats.end());
  p.flops = kernel.getFlops();
  prog.flops += p.flops;
  if (isRecompute(&op))
    prog.recomputedFlops += kernel.getFlops();
  lowering.push(pend, std::move(p));
  for (Value out : op.getResults())
    lowering.producerIndex[out] = pend.size() - 1;
  return success();
}

/// An operand of a fused elementwise group whose storage result `out` can
/// take, as XLA's buffer assignment shares a dying operand's: the operand
/// has `out`'s type, is read by the group alone, and is a transient a
/// kernel call of this program wrote in the group's space (no variable,
/// input, view or collective buffer). A group holds its inputs and results
/// at once where its ops one at a time could free an input first; this
/// keeps it from holding more. (Every any_input kernel could share so; on
/// GPT-2's pipeline stages that packed 10 MiB worse, so it waits for a
/// placement that weighs it.) Null when there is none.
Value Lowering::ProgramLowering::dyingOperand(
    Operation &op, Value out, const llvm::SmallPtrSetImpl<Value> &taken) {
  // ds.fused_elementwise is in place safe with alias any_input (its
  // contract, DsFusedElementwiseOps.td).
  if (!isa<FusedElementwiseOp>(op))
    return {};
  const uint64_t bytes = bytesOf(cast<RankedTensorType>(out.getType()));
  for (Value in : op.getOperands()) {
    if (in.getType() != out.getType() || taken.contains(in) ||
        !lowering.producerIndex.count(in) || viewOffset.lookup(in) != 0 ||
        !llvm::all_of(in.getUsers(), [&](Operation *u) { return u == &op; }))
      continue;
    const Slot &slot = lowering.slots[slotOf.lookup(in)];
    if (!slot.fixed && slot.category == Category::Activations &&
        slot.space == spaceOf(&op) && slot.bytes == bytes)
      return in;
  }
  return {};
}

PlanInstr Lowering::ProgramLowering::instruction(Pending &p) {
  PlanInstr instr;
  instr.kernel = p.kernel;
  for (Ref &r : p.ins)
    instr.inputs.push_back(lowering.buffer(r.slot, r.type, r.offset));
  for (Ref &r : p.outs)
    instr.outputs.push_back(lowering.buffer(r.slot, r.type, r.offset));
  instr.intAttrs = std::move(p.ints);
  instr.floatAttrs = std::move(p.floats);
  instr.op = p.op;
  instr.async = p.async;
  instr.flops = p.flops;
  instr.awaits = p.awaits;
  instr.space = static_cast<uint8_t>(p.space);
  instr.tensorGroup = p.op && p.op->hasAttr(dist::kTensorGroupAttr);
  if (p.op)
    if (auto group =
            p.op->getAttrOfType<IntegerAttr>(dist::kPipelineGroupAttr)) {
      instr.pipelineGroup = group.getValue().getZExtValue();
      if (!llvm::is_contained(lowering.plan.pipelineGroups,
                              instr.pipelineGroup))
        lowering.plan.pipelineGroups.push_back(instr.pipelineGroup);
    }
  return instr;
}

void Lowering::ProgramLowering::writeInstructions() {
  for (Pending &p : pend)
    prog.instrs.push_back(instruction(p));
  for (Ref &r : lowering.returned)
    prog.outputs.push_back(lowering.buffer(r.slot, r.type, r.offset));
}

} // namespace dsc::lowering
