//===- Offload.cpp - phase `offload`: host memory and the copies to it ----===//
//
// ZeRO-Offload and ZeRO-Infinity's CPU offload, decided at compile time.
// The pass marks what lives in host memory (`dist.host` on a ds.variable)
// and what runs there (`dist.host` on an op), then makes every operand
// reside where its user runs: a value in the other space is copied
// (dist.copy_to_host on the d2h stream, dist.copy_to_device on h2d) and the
// user waits for the copy at a dist.wait just before it.
//
// Where copies start: a copy to the host starts as early as its operand
// allows (a reduced gradient's as soon as the reduction is waited for, a
// variable's at the top of the program or after its last store), since
// host memory is what there is plenty of; a copy to the device starts
// where its operand is defined (a parameter shard's where the ZeRO pass
// placed its load, one gather window ahead), so the device never holds
// more than the windows do. With cpu_checkpointing, the forward values the
// backward reads make the round trip too (checkpointToHost).
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "dialects/ds/Contracts.h"
#include "runtime/plan/ProgramNames.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringSet.h"

namespace mlir::ds {
#define GEN_PASS_DEF_DSOFFLOAD
#include "passes/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;
namespace plan = dsc::plan;

namespace {

// The marks this pass sets (dialects/dist/DistOps.td): dist.host on what
// lives or runs on the host; dist.activation on a copy of a kept activation
// (cpu_checkpointing), whose buffers the plan counts as activations, not
// communication buffers.
bool onHost(Operation *op) { return dist::isOnHost(op); }

struct OffloadPass : ds::impl::DsOffloadBase<OffloadPass> {
  using Base::Base;

  llvm::StringSet<> hostVars;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (cpuCheckpointing)
      for (auto func : module.getOps<func::FuncOp>())
        if (func.getSymName().starts_with(plan::kMicroStepProgram) &&
            failed(checkpointToHost(func)))
          return signalPassFailure();
    if (!offloadOptimizer && !offloadParam)
      return;
    markVariables(module);
    if (offloadOptimizer)
      for (auto func : module.getOps<func::FuncOp>())
        markHostOps(func, func.getSymName() == StringRef(plan::kApplyProgram));
    for (auto func : module.getOps<func::FuncOp>())
      if (failed(placeCopies(func)))
        return signalPassFailure();
  }

  /// offload_optimizer: gradient accumulators, master weights and moments;
  /// offload_param: the
  /// parameters ZeRO-3 shards (a group's storage; with one rank, the
  /// parameters at or above the persistence threshold, which stage 3
  /// would shard).
  void markVariables(ModuleOp module) {
    bool sharded = false;
    for (auto group : module.getOps<dist::GroupOp>())
      sharded |= group.getSharded();
    for (auto var : module.getOps<VariableOp>()) {
      bool host = false;
      switch (var.getKind()) {
      case VariableKind::opt_state:
      case VariableKind::master:
      case VariableKind::grad:
        host = offloadOptimizer;
        break;
      case VariableKind::param:
        host =
            offloadParam && (sharded ? var.getOf().has_value()
                                     : var.getTensorType().getNumElements() >=
                                           persistenceThreshold);
        break;
      }
      if (host) {
        var->setAttr(dist::kHostAttr, UnitAttr::get(&getContext()));
        hostVars.insert(var.getSymName());
      }
    }
  }

  /// offload_optimizer: the accumulation of each reduced gradient into its
  /// host accumulator runs on the host (in every program), and @apply's
  /// work on host data: each optimizer update (and the parts of a sharded
  /// Lamb's or Muon's that touch the state), the rounding of its new master
  /// weights to 16 bits (so half the bytes go back), and what reads only host
  /// values (the gradients' sums of squares for the norm). Constants stay
  /// device values that host work reads through a copy: ds-fuse's rewrite
  /// driver deduplicates equal constants whatever their attributes, so a host
  /// constant could be merged into a device one.
  void markHostOps(func::FuncOp func, bool apply) {
    UnitAttr unit = UnitAttr::get(&getContext());
    for (Operation &op : func.front()) {
      bool host = false;
      // A sharded Lamb's norms and a sharded Muon's ends read and write
      // what an update does; the Muon iteration between them runs where
      // its gathered direction is.
      if (isa<OptimizerUpdateOpInterface, LambNormsOp, MuonMomentumOp,
              MuonApplyOp>(op))
        host = apply;
      else if (auto cast = dyn_cast<CastOp>(op))
        host = apply && cast.getX().getDefiningOp<OptimizerUpdateOpInterface>();
      if (isa<AddOp>(op) && op.hasOneUse())
        if (auto store = dyn_cast<StoreOp>(*op.getUsers().begin()))
          host |= hostVars.contains(store.getName()) &&
                  llvm::any_of(op.getOperands(), [&](Value v) {
                    auto load = v.getDefiningOp<LoadOp>();
                    return load && load.getName() == store.getName();
                  });
      if (apply && !host && isa<KernelOpInterface, dist::ShardOp>(op) &&
          !isa<OptimizerUpdateOpInterface, ConstantOp>(op)) {
        // Constants go where their users are (below).
        bool any = false, all = true;
        for (Value v : op.getOperands()) {
          if (v.getDefiningOp<ConstantOp>())
            continue;
          any = true;
          all &= resident(v);
        }
        host = any && all;
      }
      if (host)
        op.setAttr(dist::kHostAttr, unit);
    }
  }

  /// cpu_checkpointing: each forward value the backward reads (what the
  /// remat policy keeps) is copied to the host as soon as it is computed,
  /// waited for after the next kernel (which the copy overlaps) so its
  /// device buffer can die after its last forward use, and copied back one
  /// op ahead of its first backward use.
  LogicalResult checkpointToHost(func::FuncOp micro) {
    FailureOr<ConstantOp> seed = findLossSeed(micro, "ds-offload");
    if (failed(seed))
      return failure();
    Block &body = micro.front();
    DenseMap<Operation *, int> position;
    for (auto [i, op] : llvm::enumerate(body))
      position[&op] = int(i);
    int backward = position.lookup(*seed);
    SmallVector<Operation *> forward;
    for (Operation &op : body) {
      if (position.lookup(&op) >= backward)
        break;
      // Computed values only: not views, loads, constants or the gathered
      // parameters of stage 3 (the backward gathers its own); slices are
      // left out whole (most are views of a flat gathered group).
      if (isa<KernelOpInterface>(op) &&
          !isa<ConstantOp, ReshapeOp, SliceOp>(op) && !isRecompute(&op))
        forward.push_back(&op);
    }
    OpBuilder b(&getContext());
    for (Operation *def : forward)
      for (Value v : def->getResults()) {
        SmallVector<OpOperand *> later;
        for (OpOperand &use : v.getUses())
          if (position.lookup(use.getOwner()) > backward)
            later.push_back(&use);
        auto type = dyn_cast<RankedTensorType>(v.getType());
        if (later.empty() || !type || !isa<FloatType>(type.getElementType()))
          continue; // (integer values are positions and ids: cheap)
        Operation *first = later.front()->getOwner();
        for (OpOperand *use : later)
          if (position.lookup(use->getOwner()) < position.lookup(first))
            first = use->getOwner();
        b.setInsertionPointAfter(def);
        auto out = b.create<dist::CopyToHostOp>(v.getLoc(), v);
        out->setAttr(dist::kActivationAttr, b.getUnitAttr());
        // Past the next kernel (loads and views run nothing), which the
        // copy overlaps.
        Operation *next = out->getNextNode();
        while (next && (isa<LoadOp, ReshapeOp, ConstantOp>(next) ||
                        !position.count(next))) // (this pass's own ops)
          next = next->getNextNode();
        if (next && position.count(next) && position.lookup(next) < backward)
          b.setInsertionPointAfter(next);
        auto kept = b.create<dist::WaitOp>(v.getLoc(), out.getResult());
        Operation *ahead = first->getPrevNode();
        b.setInsertionPoint(ahead && position.lookup(ahead) > backward ? ahead
                                                                       : first);
        auto in = b.create<dist::CopyToDeviceOp>(v.getLoc(), kept.getResult());
        in->setAttr(dist::kActivationAttr, b.getUnitAttr());
        b.setInsertionPoint(first);
        auto back = b.create<dist::WaitOp>(v.getLoc(), in.getResult());
        for (OpOperand *use : later)
          use->set(back.getResult());
      }
    return success();
  }

  /// Whether `v` lies in host memory.
  bool resident(Value v) {
    Operation *def = v.getDefiningOp();
    if (!def)
      return false; // program inputs are device buffers
    if (auto load = dyn_cast<LoadOp>(def))
      return hostVars.contains(load.getName());
    // Views of their operand's bytes (the plan's, compiler/plan).
    auto slice = dyn_cast<SliceOp>(def);
    if (isa<ReshapeOp, dist::WaitOp>(def) ||
        (slice &&
         cast<RankedTensorType>(slice.getX().getType()).getRank() == 1))
      return resident(def->getOperand(0));
    if (isa<dist::CopyToHostOp>(def))
      return true;
    // Every gradient accumulator is a host variable with offload_optimizer.
    if (isa<dist::FlatGradsOp>(def))
      return offloadOptimizer;
    if (isa<dist::CopyToDeviceOp>(def))
      return false;
    return onHost(def);
  }

  LogicalResult placeCopies(func::FuncOp func) {
    Block &body = func.front();
    // (value, to host) -> the waited copy, made at its first user.
    DenseMap<std::pair<Value, int>, Value> copies;
    SmallVector<Operation *> ops;
    for (Operation &op : body)
      ops.push_back(&op);
    for (Operation *op : ops) {
      if (isa<LoadOp, ReshapeOp, dist::WaitOp, dist::CopyToHostOp,
              dist::CopyToDeviceOp, func::ReturnOp>(op))
        continue;
      bool host;
      if (auto store = dyn_cast<StoreOp>(op))
        host = hostVars.contains(store.getName());
      else
        host = onHost(op);
      for (OpOperand &use : op->getOpOperands()) {
        Value v = use.get();
        if (!isa<RankedTensorType>(v.getType()) || resident(v) == host)
          continue;
        // A constant stored whole is a fill, run where the variable is.
        if (isa<StoreOp>(op) && v.getDefiningOp<ConstantOp>())
          continue;
        // A host variable goes to the device for each reader on its own,
        // read again from the host: one copy shared by the forward and the
        // backward would hold the device copy in between.
        if (auto load = v.getDefiningOp<LoadOp>();
            load && !host && !storedBetween(load, op)) {
          OpBuilder b(op);
          auto again = b.create<LoadOp>(load.getLoc(), load.getType(),
                                        load.getNameAttr());
          use.set(makeCopy(again, host, op));
          if (load->use_empty()) // (visited already: loads come first)
            load->erase();
          continue;
        }
        Value &copy = copies[{v, host ? 1 : 0}];
        if (!copy)
          copy = makeCopy(v, host, op);
        use.set(copy);
      }
    }
    return success();
  }

  /// Whether a store to `load`'s variable lies between it and `user` (in
  /// one block), so that reading the variable again at `user` would read
  /// another value.
  static bool storedBetween(LoadOp load, Operation *user) {
    for (Operation *o = load->getNextNode(); o && o != user;
         o = o->getNextNode())
      if (auto store = dyn_cast<StoreOp>(o);
          store && store.getName() == load.getName())
        return true;
    return false;
  }

  /// The copy of `v` into the other space, started as early as allowed
  /// (see the file comment), and its wait just before `user`.
  Value makeCopy(Value v, bool toHost, Operation *user) {
    OpBuilder b(user->getContext());
    Block *block = user->getBlock();
    Operation *def = v.getDefiningOp();
    if (toHost && def && isa<LoadOp>(def)) {
      // A variable's bytes can leave as soon as its last store before the
      // load has run.
      auto load = cast<LoadOp>(def);
      Operation *after = nullptr;
      for (Operation *o = load->getPrevNode(); o && !after;
           o = o->getPrevNode())
        if (auto store = dyn_cast<StoreOp>(o);
            store && store.getName() == load.getName())
          after = o;
      if (after)
        load->moveAfter(after);
      else
        load->moveBefore(&block->front());
    }
    if (def)
      b.setInsertionPointAfter(def);
    else
      b.setInsertionPointToStart(block);
    Operation *copy =
        toHost ? b.create<dist::CopyToHostOp>(v.getLoc(), v).getOperation()
               : b.create<dist::CopyToDeviceOp>(v.getLoc(), v).getOperation();
    b.setInsertionPoint(user);
    return b.create<dist::WaitOp>(v.getLoc(), copy->getResult(0));
  }
};

} // namespace
