//===- ShardOptimizer.cpp - ZeRO stage 1: optimizer state sharded
//-----------===//
//
// Parameters with gradients form two flat groups (with and without weight
// decay, the plan's packing order), padded to a multiple of the world
// size. Each rank keeps the optimizer's state (Adam's moments, SGD's
// momentum) for its slice only, updates that slice of the parameters and
// all-gathers the group. Muon's matrices form groups of their own.
//
//===----------------------------------------------------------------------===//

#include "passes/zero/ZeroUtils.h"

#include "dialects/ds/Contracts.h"
#include "dialects/ds/DsUtils.h"
#include "runtime/plan/ProgramNames.h"
#include "runtime/plan/VariableNames.h"

#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mlir::ds::zero {
namespace {

/// Replaces the updates of `group` by one update of this rank's slice.
LogicalResult shardGroup(ModuleOp module, SymbolTable &symbols, OpBuilder &mb,
                         ArrayRef<Update> group, func::ReturnOp ret,
                         const Options &opts, StringRef name) {
  SmallVector<Attribute> members;
  SmallVector<Operation *> dead;
  SmallVector<VariableOp> deadVars;
  int64_t total = 0;
  Type paramElt, stateElt, gradElt;
  bool mixed = false;
  for (Update op : group) {
    FailureOr<UpdateTarget> target = updateTarget(op, symbols);
    if (failed(target))
      return failure();
    members.push_back(FlatSymbolRefAttr::get(target->param));
    if (target->master) {
      mixed = true;
      deadVars.push_back(target->master);
    }
    auto t = cast<RankedTensorType>(op.getParam().getType());
    total += t.getNumElements();
    stateElt = t.getElementType();
    paramElt = target->param.getTensorType().getElementType();
    gradElt = cast<ShapedType>(op.getGrad().getType()).getElementType();
    collectUpdateUsers(op, dead); // the stores of p and the states
    dead.push_back(op);
    for (Value state : op.getStates()) {
      auto load = state.getDefiningOp<LoadOp>();
      if (!load)
        return op.emitError("ds-zero: an optimizer state is not a variable");
      dead.push_back(load);
      deadVars.push_back(symbols.lookup<VariableOp>(load.getName()));
    }
  }
  int64_t shard = (total + opts.worldSize - 1) / opts.worldSize;
  int64_t size = shard * opts.worldSize;
  auto groupOp = mb.create<dist::GroupOp>(
      module.getLoc(), mb.getStringAttr(name), mb.getArrayAttr(members),
      mb.getI64IntegerAttr(size), UnitAttr());
  // The states (and masters) in the optimizer's fp32, the gathered
  // parameters and the gradients in theirs.
  auto stateShard = RankedTensorType::get({shard}, stateElt);
  auto paramShard = RankedTensorType::get({shard}, paramElt);
  auto paramFlat = RankedTensorType::get({size}, paramElt);
  auto gradShard = RankedTensorType::get({shard}, gradElt);
  auto gradFlat = RankedTensorType::get({size}, gradElt);
  auto stateVar = [&](StringRef suffix) {
    auto var = mb.create<VariableOp>(module.getLoc(), VariableKind::opt_state,
                                     (name + suffix).str(),
                                     FlatSymbolRefAttr::get(groupOp),
                                     stateShard, InitKind::zeros, FloatAttr());
    symbols.insert(var);
    return var;
  };
  Update first = group.front();
  SmallVector<VariableOp> states;
  for (StringRef suffix : first.getStateSuffixes())
    states.push_back(stateVar(suffix));
  VariableOp master =
      mixed ? createMasterShard(mb, symbols, groupOp, stateShard) : nullptr;

  OpBuilder b(first);
  Location loc = NameLoc::get(b.getStringAttr(name), first.getLoc());
  auto sym = FlatSymbolRefAttr::get(groupOp);
  Value grads = b.create<dist::FlatGradsOp>(loc, gradFlat, sym);
  auto ranks = b.getI64IntegerAttr(opts.worldSize);
  // fp32: this rank's slice of the parameters; mixed: of the masters.
  Value params =
      master ? Value() : b.create<dist::FlatParamsOp>(loc, paramFlat, sym);
  Value gs = b.create<dist::ShardOp>(loc, gradShard, grads, ranks);
  Value ps =
      master
          ? b.create<LoadOp>(loc, stateShard, master.getSymName()).getResult()
          : b.create<dist::ShardOp>(loc, stateShard, params, ranks).getResult();
  SmallVector<Value> stateValues;
  for (VariableOp var : states)
    stateValues.push_back(b.create<LoadOp>(loc, stateShard, var.getSymName()));
  ShardUpdate update = updateOverShard(b, loc, group, groupOp, symbols, ranks,
                                       ps, gs, stateValues);
  for (auto [value, var] : llvm::zip(update.newStates, states))
    b.create<StoreOp>(loc, value, var.getSymName());
  Value newShard = newParamShard(b, loc, update.newParam, master, paramShard);
  Value full = b.create<dist::AllGatherOp>(loc, paramFlat, newShard, ranks);
  b.setInsertionPoint(ret);
  Value done = b.create<dist::WaitOp>(loc, full);
  b.create<dist::StoreParamsOp>(loc, done, sym);

  // The per-parameter updates (users first), then their states.
  for (Operation *op : dead)
    op->erase();
  for (VariableOp var : deadVars)
    symbols.erase(var);
  eraseUnusedLoads(ret->getParentOfType<func::FuncOp>());
  return success();
}

} // namespace

/// Whether `op`'s parameter (the one its param operand loads, or the one of
/// the master it loads) is in the weight-decay group.
static bool decayGroupOf(Update op, SymbolTable &symbols) {
  auto load = op.getParam().getDefiningOp<LoadOp>();
  auto var = load ? symbols.lookup<VariableOp>(load.getName()) : VariableOp();
  if (var && var.getKind() == VariableKind::master)
    var = symbols.lookup<VariableOp>(var.getOfAttr().getAttr());
  if (!var)
    return takesWeightDecay(cast<ShapedType>(op.getParam().getType()));
  return inDecayGroup(var);
}

/// Stage 1: parameters with gradients form two flat groups (with and
/// without weight decay, the plan's packing order), padded to a multiple
/// of the world size. Each rank keeps the optimizer's state for its slice,
/// updates that slice of the parameters and all-gathers the group.
LogicalResult shardOptimizer(ModuleOp module, const Options &opts) {
  auto apply = module.lookupSymbol<func::FuncOp>(dsc::plan::kApplyProgram);
  if (!apply)
    return module.emitError("ds-zero: no @apply; run ds-adamw first");
  SymbolTable symbols(module);
  MLIRContext *ctx = module.getContext();
  OpBuilder mb(ctx);
  mb.setInsertionPointToEnd(module.getBody());

  // The updates, grouped by hyper-parameters in program order.
  SmallVector<Update> updates;
  apply.walk([&](Update op) { updates.push_back(op); });
  auto ret = cast<func::ReturnOp>(apply.front().getTerminator());
  // Partition first: sharding a group erases its updates. Muon's
  // matrices form groups of their own (one update rule per group).
  SmallVector<Update> groups[4];
  for (Update op : updates)
    groups[(decayGroupOf(op, symbols) ? 0 : 1) +
           (isa<MuonOp>(op.getOperation()) ? 2 : 0)]
        .push_back(op);
  const char *names[] = {"zero.decay", "zero.no_decay", "zero.muon",
                         "zero.muon_no_decay"};
  for (int g = 0; g < 4; ++g)
    if (!groups[g].empty() &&
        failed(shardGroup(module, symbols, mb, groups[g], ret, opts, names[g])))
      return failure();
  return success();
}

} // namespace mlir::ds::zero
