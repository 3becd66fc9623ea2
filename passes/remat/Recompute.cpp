//===- Recompute.cpp - @micro_step's forward graph and the remat rewrite --===//
#include "passes/remat/Remat.h"

#include "dialects/ds/Contracts.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

namespace mlir::ds::remat {

namespace {

/// Read again at no cost: inputs, parameters, constants and their views.
bool isFree(Value v) {
  Operation *def = v.getDefiningOp();
  if (!def)
    return true;
  if (isa<LoadOp, ConstantOp>(def))
    return true;
  if (auto reshape = dyn_cast<ReshapeOp>(def))
    return isFree(reshape.getOperand());
  return false;
}

} // namespace

FailureOr<ForwardGraph> ForwardGraph::build(func::FuncOp micro) {
  FailureOr<ConstantOp> seed = findLossSeed(micro, "ds-remat");
  if (failed(seed))
    return failure();
  ForwardGraph g;
  g.func = micro;
  g.seed = *seed;
  Block &body = micro.front();
  for (Operation &op : body) {
    if (&op == g.seed)
      break;
    bool any = false;
    for (Value r : op.getResults()) {
      if (isFree(r))
        continue;
      g.id[r] = g.values.size();
      g.values.push_back(r);
      g.opOf.push_back(g.ops.size());
      any = true;
    }
    if (any)
      g.ops.push_back(&op);
  }
  g.needed.resize(g.values.size());
  for (Operation *op = g.seed; op; op = op->getNextNode())
    for (Value v : op->getOperands())
      if (auto it = g.id.find(v); it != g.id.end())
        g.needed.set(it->second);
  return g;
}

uint64_t ForwardGraph::bytes(unsigned i) const {
  Value v = values[i];
  if (isa<ReshapeOp>(v.getDefiningOp()))
    return 0;
  auto type = cast<RankedTensorType>(v.getType());
  uint64_t width = (type.getElementTypeBitWidth() + 7) / 8;
  return width * static_cast<uint64_t>(type.getNumElements());
}

double ForwardGraph::flops(unsigned i) const {
  if (auto kernel = dyn_cast<KernelOpInterface>(ops[opOf[i]]))
    return kernel.getFlops();
  return 0;
}

SmallVector<unsigned> ForwardGraph::operands(unsigned i) const {
  SmallVector<unsigned> out;
  for (Value v : ops[opOf[i]]->getOperands())
    if (auto it = id.find(v); it != id.end())
      out.push_back(it->second);
  return out;
}

unsigned recompute(const ForwardGraph &g, const llvm::BitVector &kept) {
  OpBuilder b(g.func.getContext());
  // Forward op -> its clone; one clone serves every later use.
  llvm::DenseMap<Operation *, Operation *> clones;
  IRMapping mapping;
  unsigned count = 0;
  // The clone of value v's op (and of its unkept operands first), placed
  // before `at`. Iterative: a recomputed chain can be as deep as the model.
  auto materialize = [&](Value v, Operation *at) -> Value {
    SmallVector<std::pair<Operation *, bool>> stack{
        {g.ops[g.opOf[g.id.lookup(v)]], false}};
    while (!stack.empty()) {
      auto [op, ready] = stack.pop_back_val();
      if (clones.count(op))
        continue;
      if (!ready) {
        stack.push_back({op, true});
        for (Value in : op->getOperands()) {
          auto it = g.id.find(in);
          if (it != g.id.end() && !kept.test(it->second))
            stack.push_back({g.ops[g.opOf[it->second]], false});
        }
        continue;
      }
      b.setInsertionPoint(at);
      Operation *copy = b.clone(*op, mapping);
      copy->setAttr(kRecomputeAttr, b.getUnitAttr());
      clones[op] = copy;
      ++count;
    }
    return mapping.lookup(v);
  };
  SmallVector<Operation *> backward;
  for (Operation *op = g.seed; op; op = op->getNextNode())
    backward.push_back(op);
  for (Operation *op : backward)
    for (OpOperand &use : op->getOpOperands()) {
      auto it = g.id.find(use.get());
      if (it == g.id.end() || kept.test(it->second))
        continue;
      use.set(materialize(use.get(), op));
    }
  return count;
}

} // namespace mlir::ds::remat
