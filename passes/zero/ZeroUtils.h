//===- ZeroUtils.h - what the ZeRO stages share ------------------*- C++
//-*-===//
//
// Phase `dist` (the ds-zero pass, ZeroPass.cpp) is one file per stage over
// these utilities:
//   stage 0  AllReduceGradients.cpp   buckets all-reduced under backward
//   stage 1  ShardOptimizer.cpp       Adam's moments sharded per group
//   stage 2  ShardGradients.cpp       buckets reduce-scattered into shards
//   stage 3  GatherParameters.cpp     parameters sharded, gathered per window
// Every stage reads the gradient accumulations through the
// ds.grad_accumulation contract and @apply's norm through
// ds.global_grad_norm (dialects/ds/Contracts.h).
//
//===----------------------------------------------------------------------===//
#ifndef DSC_PASSES_ZERO_ZEROUTILS_H
#define DSC_PASSES_ZERO_ZEROUTILS_H

#include "dialects/dist/DistOps.h"
#include "dialects/ds/Contracts.h"
#include "passes/Passes.h"

#include "mlir/IR/BuiltinOps.h"

namespace mlir::ds::zero {

/// The pass options (passes/Passes.td, DsZero; defaults in
/// ZeroDefaults.h), checked by the pass.
using Options = DsZeroOptions;

/// A gradient accumulation and where its gradient %d is complete.
struct Accumulation : GradAccumulation {
  int64_t position = -1; ///< index in the block of %d's defining op
};

/// `func`'s gradient accumulations by round, each in the order its
/// gradients complete: round k holds every variable's k-th accumulation
/// (a pipeline stage's step accumulates each gradient once per micro-
/// batch; other programs have one round). An error when the variables
/// are accumulated different numbers of times.
FailureOr<SmallVector<SmallVector<Accumulation>>>
findAccumulationRounds(func::FuncOp func);

/// The last round: of a variable accumulated several times, the last.
FailureOr<SmallVector<Accumulation>> findAccumulations(func::FuncOp func);

int64_t elementsOf(ArrayRef<Accumulation> accs);

/// Consecutive gradients, at most bucket-size elements a bucket (a bigger
/// gradient gets a bucket of its own). At stage 3 a bucket is also the
/// unit of gathering, so it holds at most prefetch-bucket-size elements
/// too: DeepSpeed gathers module by module, with at most that many
/// elements in flight.
SmallVector<SmallVector<Accumulation>> buckets(ArrayRef<Accumulation> accs,
                                               const Options &opts);

/// Where to wait for each of `collectives`: after the next one in program
/// order (null: at the end of the program). The comm stream then always
/// has the next bucket queued, and at most two buckets' results are live.
SmallVector<Operation *> waitPoints(ArrayRef<Operation *> collectives);

void eraseUnusedLoads(func::FuncOp func);

using Update = OptimizerUpdateOpInterface;

/// What one optimizer update of @apply updates. Under mixed precision
/// (ds-precision) it reads the fp32 `master` of a 16-bit parameter and the
/// parameter receives the rounded result; otherwise it reads the parameter
/// itself.
struct UpdateTarget {
  VariableOp param;
  VariableOp master; ///< null for fp32 training
};
FailureOr<UpdateTarget> updateTarget(Update op, SymbolTable &symbols);

/// Appends the ops that consume `op`'s results to `dead`, users first: the
/// stores of p and the states, and the rounding of p with its store.
void collectUpdateUsers(Update op, SmallVectorImpl<Operation *> &dead);

/// Stages 1-3 under mixed precision: a group's fp32 master shard, stored
/// like stage 3's parameter shards (the plan expands it into one entry per
/// member, so each draws its parameter's initial values).
VariableOp createMasterShard(OpBuilder &mb, SymbolTable &symbols,
                             dist::GroupOp group, RankedTensorType shard);

/// What a sharded update gives: the new parameter shard (fp32, or the
/// master's) and the new state shards, in getStateSuffixes order.
struct ShardUpdate {
  Value newParam;
  SmallVector<Value> newStates;
};
/// The update of `group` (`updates`: its members', in order, which share
/// their hyper-parameters) over this rank's shard: ps, gs and the state
/// shards. A Lamb update first computes its shard's part of each member's
/// norms (ds.lamb_norms) and sums them over the ranks (an all-reduce
/// waited for at once), so every element takes its whole parameter's
/// trust ratio. Muon: muonOverShard.
ShardUpdate updateOverShard(OpBuilder &b, Location loc,
                            ArrayRef<Update> updates, dist::GroupOp group,
                            SymbolTable &symbols, IntegerAttr ranks, Value ps,
                            Value gs, ValueRange states);
/// Muon over a shard (MuonOverShard.cpp): moves the momentum of this
/// rank's shard (ds.muon_momentum), all-gathers the direction, divides
/// the members' Newton-Schulz iterations among the ranks and applies this
/// rank's shard of the result (ds.muon_apply).
ShardUpdate muonOverShard(OpBuilder &b, Location loc, ArrayRef<Update> updates,
                          ArrayRef<RankedTensorType> types, IntegerAttr ranks,
                          Value ps, Value gs, ValueRange states);
/// The update of a shard under mixed precision: stores the new master and
/// returns it rounded to `paramShard`'s type; fp32: returns it as is.
Value newParamShard(OpBuilder &b, Location loc, Value newParam,
                    VariableOp master, RankedTensorType paramShard);
/// The stages; each reports its errors at the op concerned.
/// Stages 0-1: all-reduces each bucket of `func`'s gradients.
LogicalResult allReduceGradients(func::FuncOp func, const Options &opts,
                                 bool accumulated);
/// Stage 1: shards the optimizer's state and the update over the ranks.
LogicalResult shardOptimizer(ModuleOp module, const Options &opts);
/// Stages 2-3: reduce-scatters the buckets into sharded groups (and at
/// stage 3 shards the parameters, then calls gatherParameters).
LogicalResult shardGradients(ModuleOp module, func::FuncOp micro,
                             const Options &opts);

/// A stage-3 group stored as one shard per rank.
struct ShardedGroup {
  dist::GroupOp op;
  VariableOp param;
  RankedTensorType shard, flat;
};
/// Stage 3: @micro_step reads the members of `groups` from all-gathers.
void gatherParameters(ModuleOp module, func::FuncOp micro,
                      MutableArrayRef<ShardedGroup> groups,
                      const Options &opts);

} // namespace mlir::ds::zero

#endif // DSC_PASSES_ZERO_ZEROUTILS_H
