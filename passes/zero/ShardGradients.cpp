//===- ShardGradients.cpp - ZeRO stages 2-3: gradients sharded ------------===//
//
// The buckets become the parameter groups. Each micro-step reduce-scatters
// a bucket's gradients (padded to a multiple of the world size) right after
// its last one and adds this rank's slice into a shard-sized accumulator
// (a pipeline stage's step, which accumulates each gradient once per
// micro-batch, does so per micro-batch); @apply computes the global norm from
// the shards (an all-reduce of sums of squares, in place of the operand of the
// ds.global_grad_norm op), updates its slice and all-gathers each group. At
// stage 3 the groups of large parameters keep only their shard
// (GatherParameters.cpp).
//
//===----------------------------------------------------------------------===//

#include "passes/zero/ZeroUtils.h"

#include "dialects/ds/DsUtils.h"
#include "passes/Functions.h"
#include "runtime/plan/ProgramNames.h"
#include "runtime/plan/VariableNames.h"

#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringSet.h"

#include <array>

namespace mlir::ds::zero {
namespace {

/// A bucket's parameter group and the sharded state that replaces its
/// members'.
struct Group {
  dist::GroupOp op;
  VariableOp grad;
  SmallVector<VariableOp> states; ///< the optimizer's, sharded
  VariableOp param;            ///< stage 3: this rank's shard of the parameters
  VariableOp master;           ///< mixed precision: the fp32 master shard
  SmallVector<Update> updates; ///< the members', in order
  Update like;      ///< a member's update: the group's hyper-parameters
  bool cut = false; ///< its members are tensor-parallel parts
  /// A pipeline's tied parameter (alone in its group, laid out alike on
  /// every stage that holds it): those stages, a bit each.
  int64_t tiedStages = 0;
  SmallVector<StringRef> members; ///< the gradient accumulators, in order
  RankedTensorType shard, flat;   ///< in the gradients' (and params') type
  RankedTensorType stateShard;    ///< in the optimizer's fp32
};

/// The accumulations by class, each bucketed on its own: with weight decay
/// or without, at stage 3 whether the parameters are sharded or stay whole
/// as at stage 2, under the persistence threshold, whether Muon updates
/// them (one update rule per group), and whether they are tensor-parallel
/// parts (their squares are summed over the tensor group for the norm, the
/// whole parameters' are not: each tensor rank holds the same).
using Classes = std::array<SmallVector<Accumulation>, 16>;
unsigned classIndex(bool decays, bool persistent, bool muon, bool cut) {
  return (decays ? 0 : 1) + (persistent ? 2 : 0) + (muon ? 4 : 0) +
         (cut ? 8 : 0);
}
bool isShardedClass(unsigned index) { return (index & 2) == 0; }
bool isCutClass(unsigned index) { return (index & 8) != 0; }

/// Stages 2-3 over one module, in steps: the updates, the buckets and
/// their groups with the micro-step's reduce-scatters, the accumulation of
/// each shard, @apply's norm and sharded updates, then the per-parameter
/// state they replace is erased.
class GradientSharding {
public:
  GradientSharding(ModuleOp module, func::FuncOp micro, func::FuncOp apply,
                   const Options &opts)
      : module(module), micro(micro), apply(apply), opts(opts), symbols(module),
        mb(module.getContext()), ranks(mb.getI64IntegerAttr(opts.worldSize)) {
    mb.setInsertionPointToEnd(module.getBody());
  }

  LogicalResult run(ArrayRef<SmallVector<Accumulation>> rounds);

private:
  ModuleOp module;
  func::FuncOp micro, apply;
  const Options &opts;
  SymbolTable symbols;
  OpBuilder mb; ///< at the end of the module: groups and their variables
  IntegerAttr ranks;

  llvm::StringMap<Update> updateOf; ///< param name -> its update
  SmallVector<Update> updates;      ///< @apply's, in order
  SmallVector<VariableOp> masters;  ///< mixed precision: per parameter
  SmallVector<Group, 0> groups;
  /// The reduce-scatters: one per group and round, with the group's index.
  SmallVector<std::pair<size_t, Operation *>> scatters;
  SmallVector<Operation *> dead;
  llvm::SetVector<VariableOp> deadVars;
  /// A pipeline stage's tied gradients (PipelineApply sums them over the
  /// stages holding them at @apply's start): the stages, a bit each, and
  /// the first of those sums, where the shards' sums go instead.
  llvm::StringMap<int64_t> tiedStages;
  Operation *tiedSums = nullptr;

  LogicalResult findUpdates();
  void findTiedGradients();
  FlatSymbolRefAttr paramOf(Accumulation a) {
    return symbols.lookup<VariableOp>(a.store.getName()).getOfAttr();
  }
  FailureOr<unsigned> classOf(Accumulation a);
  LogicalResult createGroups(ArrayRef<Accumulation> accs);
  Group createGroup(ArrayRef<Accumulation> bucket, unsigned index);
  VariableOp addState(Group &g, VariableKind kind, StringRef suffix,
                      RankedTensorType type);
  Operation *scatterBucket(Group &g, ArrayRef<Accumulation> bucket);
  void accumulateShards();
  void sumTiedShards();
  LogicalResult normFromShards();
  void updateShard(OpBuilder &ub, Group &g);
  void eraseReplaced();
  void gatherShardedParameters();
};

LogicalResult
GradientSharding::run(ArrayRef<SmallVector<Accumulation>> rounds) {
  if (failed(findUpdates()))
    return failure();
  findTiedGradients();
  if (failed(createGroups(rounds.back())))
    return failure();
  // Each round's gradients reduce-scattered into the groups the last
  // round's order made: a pipeline stage's micro-batches in turn.
  for (ArrayRef<Accumulation> round : rounds) {
    llvm::StringMap<Accumulation> byName;
    for (Accumulation a : round)
      byName[a.store.getName()] = a;
    for (auto [index, g] : llvm::enumerate(groups)) {
      SmallVector<Accumulation> members;
      for (StringRef name : g.members)
        members.push_back(byName.lookup(name));
      scatters.push_back({index, scatterBucket(g, members)});
    }
  }
  accumulateShards();
  sumTiedShards();
  if (failed(normFromShards()))
    return failure();
  // One sharded update per group, where the first update was.
  OpBuilder ub(updates.front());
  for (Group &g : groups)
    updateShard(ub, g);
  eraseReplaced();
  gatherShardedParameters();
  return success();
}

/// PipelineApply's sums of tied gradients over the stages holding them:
/// an all-reduce over a pipeline group of a whole gradient's load.
void GradientSharding::findTiedGradients() {
  apply.walk([&](dist::AllReduceOp sum) {
    auto stages = sum->getAttrOfType<IntegerAttr>(dist::kPipelineGroupAttr);
    auto load = sum.getX().getDefiningOp<LoadOp>();
    auto var = load ? symbols.lookup<VariableOp>(load.getName()) : VariableOp();
    if (!stages || !var || var.getKind() != VariableKind::grad)
      return;
    tiedStages[load.getName()] = stages.getInt();
    if (!tiedSums)
      tiedSums = load;
  });
}

LogicalResult GradientSharding::findUpdates() {
  apply.walk([&](Update op) { updates.push_back(op); });
  for (Update op : updates) {
    FailureOr<UpdateTarget> target = updateTarget(op, symbols);
    if (failed(target))
      return failure();
    updateOf[target->param.getSymName()] = op;
    if (target->master)
      masters.push_back(target->master);
  }
  return success();
}

/// The class of `a`'s parameter.
FailureOr<unsigned> GradientSharding::classOf(Accumulation a) {
  Update update = updateOf.lookup(paramOf(a).getValue());
  if (!update)
    return a.store.emitError("ds-zero: no optimizer update for ") << paramOf(a);
  int64_t n = cast<RankedTensorType>(a.grad.getType()).getNumElements();
  bool persistent = opts.stage < 3 || n < opts.persistenceThreshold;
  bool cut = symbols.lookup<VariableOp>(paramOf(a).getValue())
                 ->hasAttr(dist::kTensorSplitAttr);
  return classIndex(update.decaysWeights(), persistent,
                    isa<MuonOp>(update.getOperation()), cut);
}

/// The groups: each class's accumulations bucketed in completion order,
/// then each tied gradient in a group of its own, in name order, so that
/// every stage holding it lays out and sums its shards alike.
LogicalResult GradientSharding::createGroups(ArrayRef<Accumulation> accs) {
  Classes classes;
  SmallVector<std::pair<StringRef, unsigned>> tied;
  for (Accumulation a : accs) {
    FailureOr<unsigned> index = classOf(a);
    if (failed(index))
      return failure();
    if (tiedStages.contains(a.store.getName()))
      tied.push_back({a.store.getName(), *index});
    else
      classes[*index].push_back(a);
  }
  for (auto [index, list] : llvm::enumerate(classes))
    for (SmallVector<Accumulation> &bucket : buckets(list, opts))
      groups.push_back(createGroup(bucket, index));
  llvm::sort(tied);
  for (auto [name, index] : tied) {
    const Accumulation *a = llvm::find_if(
        accs, [&](Accumulation x) { return x.store.getName() == name; });
    groups.push_back(createGroup(*a, index));
    groups.back().tiedStages = tiedStages.lookup(name);
  }
  return success();
}

/// The bucket's group (its size padded to a multiple of the world size)
/// and its state: gradient and moment shards, at stage 3 the parameters'
/// shard, under mixed precision the masters'.
Group GradientSharding::createGroup(ArrayRef<Accumulation> bucket,
                                    unsigned index) {
  int64_t total = elementsOf(bucket);
  std::string name = "zero.bucket" + std::to_string(groups.size());
  SmallVector<Attribute> members;
  for (const Accumulation &a : bucket)
    members.push_back(paramOf(a));
  int64_t shard = (total + opts.worldSize - 1) / opts.worldSize;
  Type elt = cast<RankedTensorType>(bucket[0].grad.getType()).getElementType();
  Group g;
  g.shard = RankedTensorType::get({shard}, elt);
  g.flat = RankedTensorType::get({shard * opts.worldSize}, elt);
  g.op = mb.create<dist::GroupOp>(
      module.getLoc(), mb.getStringAttr(name), mb.getArrayAttr(members),
      mb.getI64IntegerAttr(shard * opts.worldSize), UnitAttr());
  for (Accumulation a : bucket) {
    g.updates.push_back(updateOf.lookup(paramOf(a).getValue()));
    g.members.push_back(a.store.getName());
  }
  g.cut = isCutClass(index);
  g.like = g.updates.front();
  g.stateShard = RankedTensorType::get(
      {shard}, cast<ShapedType>(g.like.getParam().getType()).getElementType());
  g.grad = addState(g, VariableKind::grad, dsc::plan::kGradSuffix, g.shard);
  for (StringRef suffix : g.like.getStateSuffixes())
    g.states.push_back(
        addState(g, VariableKind::opt_state, suffix, g.stateShard));
  if (isShardedClass(index)) {
    g.op.setSharded(true);
    g.param =
        addState(g, VariableKind::param, dsc::plan::kParamShardSuffix, g.shard);
  }
  if (!masters.empty())
    g.master = createMasterShard(mb, symbols, g.op, g.stateShard);
  return g;
}

VariableOp GradientSharding::addState(Group &g, VariableKind kind,
                                      StringRef suffix, RankedTensorType type) {
  auto var = mb.create<VariableOp>(
      module.getLoc(), kind, (g.op.getSymName() + suffix).str(),
      FlatSymbolRefAttr::get(g.op), type, InitKind::zeros, FloatAttr());
  symbols.insert(var);
  return var;
}

/// Micro-step: packs the bucket's gradients (and zero padding) and
/// reduce-scatters them right after the last one completes; the
/// per-parameter accumulations it replaces are marked dead.
Operation *GradientSharding::scatterBucket(Group &g,
                                           ArrayRef<Accumulation> bucket) {
  // The bucket is in the group's order; a pipeline's earlier micro-
  // batches may complete its gradients in another.
  Accumulation last = bucket.front();
  for (const Accumulation &a : bucket)
    if (a.position > last.position)
      last = a;
  OpBuilder b(module.getContext());
  if (Operation *def = last.grad.getDefiningOp())
    b.setInsertionPointAfter(def);
  else
    b.setInsertionPointToStart(&micro.front());
  Location loc = NameLoc::get(g.op.getSymNameAttr(), last.store.getLoc());
  Type elt = g.shard.getElementType();
  SmallVector<Value> flat;
  for (Accumulation a : bucket) {
    auto t = cast<RankedTensorType>(a.grad.getType());
    flat.push_back(b.create<ReshapeOp>(
        loc, RankedTensorType::get({t.getNumElements()}, elt), a.grad));
    dead.push_back(a.store);
    dead.push_back(a.add);
    dead.push_back(a.load);
    deadVars.insert(symbols.lookup<VariableOp>(a.store.getName()));
  }
  int64_t total = elementsOf(bucket), size = g.flat.getNumElements();
  if (size > total)
    flat.push_back(
        splat(b, loc, RankedTensorType::get({size - total}, elt), 0.0));
  Value packed =
      flat.size() == 1 ? flat[0] : b.create<ConcatOp>(loc, flat, 0).getResult();
  return b.create<dist::ReduceScatterOp>(loc, g.shard, packed,
                                         b.getF64FloatAttr(1.0), ranks);
}

/// Each group's slice is added into its accumulator once the next
/// bucket's reduce-scatter has started.
void GradientSharding::accumulateShards() {
  auto microRet = cast<func::ReturnOp>(micro.front().getTerminator());
  SmallVector<Operation *> ops;
  for (auto [index, scatter] : scatters)
    ops.push_back(scatter);
  for (auto [entry, after] : llvm::zip(scatters, waitPoints(ops))) {
    auto [index, scatter] = entry;
    Group &g = groups[index];
    OpBuilder b(module.getContext());
    if (after)
      b.setInsertionPointAfter(after);
    else
      b.setInsertionPoint(microRet);
    Location loc = scatter->getLoc();
    Value done = b.create<dist::WaitOp>(loc, scatter->getResult(0));
    Value acc = b.create<LoadOp>(loc, g.shard, g.grad.getSymName());
    Value sum = b.create<AddOp>(loc, acc, done);
    markGradAccumulation(b.create<StoreOp>(loc, sum, g.grad.getSymName()));
  }
}

/// Apply: each tied gradient's shard summed over the stages holding it,
/// in place of PipelineApply's sum of the whole gradient (which dies with
/// the whole gradient). Each holder's group has the same members, so its
/// shards line up.
void GradientSharding::sumTiedShards() {
  for (Group &g : groups) {
    if (!g.tiedStages)
      continue;
    OpBuilder b(tiedSums);
    Location loc = NameLoc::get(g.op.getSymNameAttr(), tiedSums->getLoc());
    Value shard = b.create<LoadOp>(loc, g.shard, g.grad.getSymName());
    auto sum = b.create<dist::AllReduceOp>(loc, shard, b.getF64FloatAttr(1.0));
    sum->setAttr(dist::kPipelineGroupAttr, b.getI64IntegerAttr(g.tiedStages));
    b.create<StoreOp>(loc, b.create<dist::WaitOp>(loc, sum),
                      g.grad.getSymName());
  }
}

/// Apply: the global norm from the shards, an all-reduce of this rank's
/// sums of squares in place of the norm op's operand. On a data x tensor
/// mesh the tensor-parallel parts' sum is first all-reduced over the
/// tensor group: each rank's shards then stand for the whole parameters.
/// On a pipeline stage the sum is then summed over all stages, a tied
/// gradient's term counted on the first stage holding it (as
/// PipelineApply counts the whole gradients').
LogicalResult GradientSharding::normFromShards() {
  FailureOr<SqrtOp> norm = findGlobalGradNorm(apply, "ds-zero");
  if (failed(norm))
    return failure();
  SqrtOp sqrt = *norm;
  OpBuilder b(sqrt);
  Location loc = NameLoc::get(b.getStringAttr("zero.norm"), sqrt.getLoc());
  auto stages = module->getAttrOfType<IntegerAttr>(dist::kPipelineStagesAttr);
  auto stage = module->getAttrOfType<IntegerAttr>(dist::kStageAttr);
  Value whole, cut;
  for (Group &g : groups) {
    if (g.tiedStages && stage &&
        llvm::countr_zero(uint64_t(g.tiedStages)) != stage.getInt())
      continue;
    Value acc = b.create<LoadOp>(loc, g.shard, g.grad.getSymName());
    if (g.shard != g.stateShard) // 16-bit squares overflow early
      acc = b.create<CastOp>(loc, g.stateShard, acc);
    Value sq = b.create<MulOp>(loc, acc, acc);
    Value s = b.create<ReduceSumOp>(loc, sq, ArrayRef<int64_t>{0});
    Value &total = g.cut ? cut : whole;
    total = total ? b.create<AddOp>(loc, total, s).getResult() : s;
  }
  if (cut) {
    auto parts = b.create<dist::AllReduceOp>(loc, cut, b.getF64FloatAttr(1.0));
    parts->setAttr(dist::kTensorGroupAttr, b.getUnitAttr());
    cut = b.create<dist::WaitOp>(loc, parts);
  }
  Value total = whole && cut ? b.create<AddOp>(loc, whole, cut).getResult()
                             : (whole ? whole : cut);
  if (!total) // a stage whose every gradient another stage counts
    total = splat(b, loc, cast<RankedTensorType>(sqrt.getX().getType()), 0.0);
  Value reduced = b.create<dist::WaitOp>(
      loc, b.create<dist::AllReduceOp>(loc, total, b.getF64FloatAttr(1.0)));
  if (stages && stage) {
    auto overStages =
        b.create<dist::AllReduceOp>(loc, reduced, b.getF64FloatAttr(1.0));
    overStages->setAttr(
        dist::kPipelineGroupAttr,
        b.getI64IntegerAttr((int64_t(1) << stages.getInt()) - 1));
    reduced = b.create<dist::WaitOp>(loc, overStages);
  }
  sqrt.getXMutable().assign(reduced);
  return success();
}

/// This rank's slice of the group updated: read from the master shard,
/// the parameters' shard (stage 3) or a shard of the flat parameters;
/// written back to the shard, or all-gathered into every member.
void GradientSharding::updateShard(OpBuilder &ub, Group &g) {
  Location gl = NameLoc::get(g.op.getSymNameAttr(), g.like.getLoc());
  auto sym = FlatSymbolRefAttr::get(g.op);
  Value ps;
  if (g.master)
    ps = ub.create<LoadOp>(gl, g.stateShard, g.master.getSymName());
  else if (g.param)
    ps = ub.create<LoadOp>(gl, g.shard, g.param.getSymName());
  else
    ps = ub.create<dist::ShardOp>(
        gl, g.shard, ub.create<dist::FlatParamsOp>(gl, g.flat, sym), ranks);
  Value gs = ub.create<LoadOp>(gl, g.shard, g.grad.getSymName());
  SmallVector<Value> stateValues;
  for (VariableOp var : g.states)
    stateValues.push_back(
        ub.create<LoadOp>(gl, g.stateShard, var.getSymName()));
  ShardUpdate update = updateOverShard(ub, gl, g.updates, g.op, symbols, ranks,
                                       ps, gs, stateValues);
  for (auto [value, var] : llvm::zip(update.newStates, g.states))
    ub.create<StoreOp>(gl, value, var.getSymName());
  Value newShard = newParamShard(ub, gl, update.newParam, g.master, g.shard);
  if (g.param) { // the shard is the parameters' only copy
    ub.create<StoreOp>(gl, newShard, g.param.getSymName());
    ub.create<StoreOp>(gl, splat(ub, gl, g.shard, 0.0), g.grad.getSymName());
    return;
  }
  Value full = ub.create<dist::AllGatherOp>(gl, g.flat, newShard, ranks);
  ub.create<StoreOp>(gl, splat(ub, gl, g.shard, 0.0), g.grad.getSymName());
  OpBuilder eb(apply.front().getTerminator());
  Value done = eb.create<dist::WaitOp>(gl, full);
  eb.create<dist::StoreParamsOp>(gl, done, sym);
}

/// The per-parameter updates, moments, accumulators and their zeroing,
/// then whatever only they read.
void GradientSharding::eraseReplaced() {
  llvm::StringSet<> oldGrads;
  for (VariableOp var : deadVars)
    oldGrads.insert(var.getSymName());
  deadVars.insert(masters.begin(), masters.end());
  for (Update op : updates) {
    collectUpdateUsers(op, dead);
    dead.push_back(op);
    for (Value state : op.getStates())
      if (auto load = state.getDefiningOp<LoadOp>())
        deadVars.insert(symbols.lookup<VariableOp>(load.getName()));
  }
  apply.walk([&](StoreOp store) {
    if (oldGrads.contains(store.getName()))
      dead.push_back(store);
  });
  for (Operation *op : dead)
    op->erase();
  for (func::FuncOp f : {micro, apply})
    for (Operation &op : llvm::make_early_inc_range(llvm::reverse(f.front())))
      if (isOpTriviallyDead(&op))
        op.erase();
  for (VariableOp var : deadVars)
    symbols.erase(var);
}

/// Stage 3: the programs that run the forward read the sharded groups'
/// members from all-gathers.
void GradientSharding::gatherShardedParameters() {
  SmallVector<ShardedGroup> sharded;
  for (Group &g : groups)
    if (g.param)
      sharded.push_back({g.op, g.param, g.shard, g.flat});
  gatherParameters(module, micro, sharded, opts);
  for (func::FuncOp forwardOnly : forwardOnlyPrograms(module))
    gatherParameters(module, forwardOnly, sharded, opts);
}

} // namespace

/// Stage 2: the buckets become the parameter groups. Each micro-step
/// reduce-scatters a bucket's gradients (padded to a multiple of the
/// world size) right after its last one and adds this rank's slice into a
/// shard-sized accumulator; @apply computes the global norm from the
/// shards (an all-reduce of sums of squares), updates its slice and
/// all-gathers each group.
LogicalResult shardGradients(ModuleOp module, func::FuncOp micro,
                             const Options &opts) {
  FailureOr<SmallVector<SmallVector<Accumulation>>> rounds =
      findAccumulationRounds(micro);
  if (failed(rounds))
    return failure();
  if (rounds->empty())
    return micro.emitError("ds-zero: @micro_step accumulates no gradient");
  auto apply = module.lookupSymbol<func::FuncOp>(dsc::plan::kApplyProgram);
  if (!apply)
    return module.emitError("ds-zero: no @")
           << llvm::StringRef(dsc::plan::kApplyProgram)
           << "; run ds-adamw first";
  return GradientSharding(module, micro, apply, opts).run(*rounds);
}

} // namespace mlir::ds::zero
