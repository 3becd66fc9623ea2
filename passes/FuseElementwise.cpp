//===- FuseElementwise.cpp - phase `fused`: elementwise groups by bytes ---===//
//
// After ds-fuse's patterns, chains of elementwise ops become one
// ds.fused_elementwise each, which a backend runs in one pass over memory.
// Groups are grown greedily in program order: an elementwise op joins the
// group of one of its operands' producers, or of an earlier reader of one
// of its operands, when that lowers the bytes the step moves, and among
// several such groups the one it lowers most. An op
// that joins a group reads the group's value from the tile in registers
// instead of memory (one tensor read saved), and a group value every one
// of whose readers is in the group is never written (one write and that
// read saved); an input the group reads already is read once. Nothing is
// duplicated, so every join saves bytes: the model decides between
// groups, and the limits decide where a group stops:
//
//   - the op's result has the group's shape, and each operand from outside
//     is that shape or its trailing dims (a bias, a position table);
//   - the fused op stands where the group's last op stood, so a group
//     value read outside the group must be read after the joining op, and
//     nothing in between may write memory (a store to a variable the
//     group reads through a load, a collective into a bucket it views);
//   - no join raises the bytes live where ops in between allocate: moving
//     the group down holds its inputs longer, which its values read at or
//     after the joining op must make up (holdsNoMore), so the plan's
//     memory does not grow for bytes moved;
//   - ops group only with ops of the same marks: a recomputation
//     (ds.recompute) with recomputations, host work (offload) with host
//     work;
//   - at most fused::kMaxValues inputs and results (the tile evaluator
//     holds one tile per value).
//
// A ds.reduce_sum of a group value over all its dims joins that value's
// group on the same terms (the sum then reads the value from the tile: a
// gradient's square summed for the norm is never written): at most one sum
// a group, read only outside it.
//
// A group of one op stays that op.
//
//===----------------------------------------------------------------------===//

#include "dialects/ds/Contracts.h"
#include "dialects/ds/FusedElementwise.h"
#include "passes/Functions.h"
#include "passes/Passes.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::ds {
#define GEN_PASS_DEF_DSFUSEELEMENTWISE
#include "passes/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

namespace {

ArrayRef<int64_t> shapeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}

double bytesOf(Value v) {
  auto t = cast<RankedTensorType>(v.getType());
  return double(t.getNumElements()) * t.getElementTypeBitWidth() / 8;
}

/// An elementwise op a group can hold: one result of a type a program
/// holds, each operand the result's shape or its trailing dims.
bool isCandidate(Operation &op) {
  if (!fusedOpcodeOf(&op) || op.getNumResults() != 1 ||
      !fusedRoundingOf(op.getResult(0).getType()))
    return false;
  ArrayRef<int64_t> shape = shapeOf(op.getResult(0));
  for (Value v : op.getOperands())
    if (!isa<RankedTensorType>(v.getType()) ||
        !isFusedInputShape(shapeOf(v), shape) || !fusedRoundingOf(v.getType()))
      return false;
  return true;
}

struct Group {
  SmallVector<Operation *> ops;
  /// The marks every member carries alike (ds.recompute, offload's host
  /// placement, ...); the fused op carries them on.
  DictionaryAttr marks;
};

class Grouping {
public:
  explicit Grouping(Block &block) {
    unsigned i = 0;
    for (Operation &op : block)
      position[&op] = i++;
  }

  /// Puts the sum `op` into its operand's group where the join may be
  /// made; a sum never starts a group. Only whole sums (one element) join:
  /// a column sum must add each column's rows in order (reduce_sum's
  /// order), so a thread of a fused group walks every row of its columns
  /// in tiles as narrow as its share of them, which measured slower than
  /// the two unfused kernels on the CPU (docs/performance.md).
  void placeSum(Operation *op) {
    if (cast<RankedTensorType>(op->getResult(0).getType()).getNumElements() !=
        1)
      return;
    Operation *def = op->getOperand(0).getDefiningOp();
    auto it = def ? groupOf.find(def) : groupOf.end();
    if (it == groupOf.end())
      return;
    const int g = it->second;
    if (!isFusedSum(op, groupShape(g)) || hasSum(g) ||
        savingOfJoin(g, op) <= 0 || !canJoin(g, op))
      return;
    groups[g].ops.push_back(op);
    groupOf[op] = g;
  }

  /// Puts `op` into the group whose join saves the most bytes, or a new
  /// group of its own.
  void place(Operation *op) {
    int best = -1;
    double bestSaving = 0;
    auto consider = [&](Operation *member) {
      auto it = groupOf.find(member);
      if (it == groupOf.end() || it->second == best)
        return;
      double saving = savingOfJoin(it->second, op);
      if (saving > bestSaving && canJoin(it->second, op)) {
        best = it->second;
        bestSaving = saving;
      }
    };
    // The groups of its operands' producers, and of their earlier readers
    // (a group that reads the same input).
    for (Value v : op->getOperands()) {
      if (Operation *def = v.getDefiningOp())
        consider(def);
      for (Operation *reader : v.getUsers())
        if (position.count(reader) &&
            position.lookup(reader) < position.lookup(op))
          consider(reader);
    }
    if (best < 0) {
      best = int(groups.size());
      groups.push_back(Group{{}, op->getDiscardableAttrDictionary()});
    }
    groups[best].ops.push_back(op);
    groupOf[op] = best;
  }

  std::vector<Group> groups;

private:
  ArrayRef<int64_t> groupShape(int g) const {
    return shapeOf(groups[g].ops.front()->getResult(0));
  }

  bool hasSum(int g) const {
    return llvm::any_of(groups[g].ops,
                        [](Operation *m) { return isa<ReduceSumOp>(m); });
  }

  bool inGroup(Operation *op, int g) const {
    auto it = groupOf.find(op);
    return it != groupOf.end() && it->second == g;
  }

  /// The bytes `op` joining group g saves (see the file comment).
  double savingOfJoin(int g, Operation *op) const {
    double saving = 0;
    llvm::SmallPtrSet<Value, 4> seen;
    for (Value v : op->getOperands()) {
      if (!seen.insert(v).second)
        continue;
      Operation *def = v.getDefiningOp();
      if (def && inGroup(def, g)) {
        saving += bytesOf(v);
        bool readOnlyInside = llvm::all_of(v.getUsers(), [&](Operation *u) {
          return u == op || inGroup(u, g);
        });
        if (readOnlyInside)
          saving += bytesOf(v);
        continue;
      }
      bool groupReadsIt = llvm::any_of(
          v.getUsers(), [&](Operation *u) { return inGroup(u, g); });
      if (groupReadsIt)
        saving += bytesOf(v);
    }
    return saving;
  }

  bool canJoin(int g, Operation *op) const {
    const Group &group = groups[g];
    const bool sum = isa<ReduceSumOp>(op);
    if (group.marks != op->getDiscardableAttrDictionary() ||
        (!sum && groupShape(g) != shapeOf(op->getResult(0))))
      return false;
    // A group's sum is complete only after its last tile: nothing in the
    // group reads it.
    for (Value v : op->getOperands())
      if (Operation *def = v.getDefiningOp();
          def && inGroup(def, g) && isa<ReduceSumOp>(def))
        return false;
    // The fused op will stand at `op`: every reader outside the group of a
    // group value must come after it.
    unsigned at = position.lookup(op);
    for (Operation *member : group.ops)
      for (Operation *user : member->getResult(0).getUsers())
        if (user != op && !inGroup(user, g) && position.lookup(user) < at)
          return false;
    return valuesWith(g, op) <= size_t(dsc::rt::fused::kMaxValues) &&
           noWriteBetween(g, op) && holdsNoMore(g, op);
  }

  /// Whether nothing between the group's first op and `op` may write
  /// memory: the group's reads move down to `op`, and an input that is a
  /// view of storage (a variable's load, a flat view of ZeRO's buckets)
  /// must not be overwritten in between (a ds.store, a collective).
  bool noWriteBetween(int g, Operation *op) const {
    for (Operation *o = groups[g].ops.front()->getNextNode(); o && o != op;
         o = o->getNextNode())
      if (!isa<LoadOp>(o) && !isMemoryEffectFree(o))
        return false;
    return true;
  }

  /// Whether moving the group down to `op` keeps at most the bytes live
  /// that the unfused ops keep while the ops in between allocate: the
  /// group's inputs are then read at `op` (held longer when their last
  /// reader was a member), while its values read at or after `op` are no
  /// longer held from their member to `op`.
  bool holdsNoMore(int g, Operation *op) const {
    const Group &group = groups[g];
    const unsigned at = position.lookup(op);
    bool allocates = false;
    for (Operation *o = group.ops.back()->getNextNode(); o && o != op;
         o = o->getNextNode())
      allocates |= o->getNumResults() > 0 && !isa<LoadOp, ReshapeOp>(o);
    if (!allocates)
      return true;
    double held = 0, released = 0;
    llvm::SmallPtrSet<Value, 8> seen;
    for (Operation *member : group.ops) {
      for (Value v : member->getOperands()) {
        Operation *def = v.getDefiningOp();
        if ((def && inGroup(def, g)) || !seen.insert(v).second)
          continue;
        bool readLater = llvm::any_of(v.getUsers(), [&](Operation *u) {
          return position.lookup(u) >= at;
        });
        if (!readLater)
          held += bytesOf(v);
      }
      Value r = member->getResult(0);
      if (llvm::any_of(r.getUsers(),
                       [&](Operation *u) { return position.lookup(u) >= at; }))
        released += bytesOf(r);
    }
    return held <= released;
  }

  /// The inputs and results the group would hold with `op` in it.
  size_t valuesWith(int g, Operation *op) const {
    llvm::SmallSetVector<Value, 8> inputs;
    auto addInputs = [&](Operation *member) {
      for (Value v : member->getOperands()) {
        Operation *def = v.getDefiningOp();
        if (!(def && (def == op || inGroup(def, g))))
          inputs.insert(v);
      }
    };
    for (Operation *member : groups[g].ops)
      addInputs(member);
    addInputs(op);
    return inputs.size() + groups[g].ops.size() + 1;
  }

  llvm::DenseMap<Operation *, unsigned> position;
  llvm::DenseMap<Operation *, int> groupOf;
};

/// Replaces the group's ops by one ds.fused_elementwise at its last op.
void fuse(const Group &group) {
  llvm::SmallPtrSet<Operation *, 8> members(group.ops.begin(), group.ops.end());
  llvm::SmallSetVector<Value, 8> inputs;
  SmallVector<Value> outputs;
  for (Operation *op : group.ops) {
    for (Value v : op->getOperands())
      if (!members.contains(v.getDefiningOp()))
        inputs.insert(v);
    Value r = op->getResult(0);
    if (llvm::any_of(r.getUsers(),
                     [&](Operation *u) { return !members.contains(u); }))
      outputs.push_back(r);
  }
  Operation *last = group.ops.back();
  OpBuilder b(last);
  auto fused = b.create<FusedElementwiseOp>(
      last->getLoc(), ValueRange(outputs).getTypes(), inputs.getArrayRef());
  for (NamedAttribute mark : group.marks)
    fused->setDiscardableAttr(mark.getName(), mark.getValue());
  Block *body = b.createBlock(&fused.getBody());
  IRMapping map;
  for (Value in : inputs)
    map.map(in, body->addArgument(in.getType(), in.getLoc()));
  for (Operation *op : group.ops) {
    Operation *inner = b.clone(*op, map);
    for (NamedAttribute mark : group.marks)
      inner->removeDiscardableAttr(mark.getName());
  }
  SmallVector<Value> yielded;
  for (Value v : outputs)
    yielded.push_back(map.lookup(v));
  b.create<YieldOp>(last->getLoc(), yielded);
  for (auto [v, r] : llvm::zip(outputs, fused.getResults()))
    v.replaceAllUsesWith(r);
  for (Operation *op : llvm::reverse(group.ops))
    op->erase();
}

struct FuseElementwisePass
    : ds::impl::DsFuseElementwiseBase<FuseElementwisePass> {
  using DsFuseElementwiseBase::DsFuseElementwiseBase;

  void runOnOperation() override {
    if (!enabled)
      return;
    for (func::FuncOp func : fusedFunctions(getOperation())) {
      Block &block = func.front();
      Grouping grouping(block);
      for (Operation &op : block)
        if (isCandidate(op))
          grouping.place(&op);
        else if (isa<ReduceSumOp>(op))
          grouping.placeSum(&op);
      for (const Group &group : grouping.groups)
        if (group.ops.size() > 1)
          fuse(group);
    }
  }
};

} // namespace
