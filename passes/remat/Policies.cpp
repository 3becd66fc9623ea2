//===- Policies.cpp - ds-remat's hand policies: none, layers, selective ---===//
#include "passes/BlockNames.h"
#include "passes/remat/Remat.h"
#include "passes/remat/RematPolicy.h"

#include "llvm/ADT/StringExtras.h"

#include <optional>
#include <utility>

namespace mlir::ds::remat {

Choice keepAll(const ForwardGraph &g) {
  return {llvm::BitVector(g.size(), true), kNone.str()};
}

namespace {

/// The forward in segments, in program order: a new one starts at the
/// first op that reads a parameter from another group of `every` blocks
/// (or from no block). The reader, not the load, so that a graph whose
/// loads all stand first (the PyTorch frontend's) is cut as one whose
/// loads stand next to their readers (the C++ builders'). Each op's
/// segment, and whether each segment is a block.
struct Segments {
  llvm::DenseMap<Operation *, unsigned> of;
  SmallVector<bool> block;
};
Segments segmentsOf(const ForwardGraph &g, int64_t every) {
  Segments s;
  s.block.push_back(false);
  std::optional<std::pair<std::string, int64_t>> current;
  for (Operation &op : g.func.front()) {
    if (&op == g.seed)
      break;
    // An op reading several parameters goes with its block's, if any.
    bool reads = false;
    std::optional<std::pair<std::string, int64_t>> next;
    for (Value v : op.getOperands())
      if (auto load = v.getDefiningOp<LoadOp>()) {
        auto block = blockOf(load.getName());
        if (!reads || (block && !next))
          next = block;
        reads = true;
      }
    if (next)
      next->second /= every;
    if (reads && next != current) {
      current = next;
      s.block.push_back(next.has_value());
    }
    s.of[&op] = s.block.size() - 1;
  }
  return s;
}

} // namespace

FailureOr<Choice> keepBlockInputs(const ForwardGraph &g, int64_t every) {
  Segments segments = segmentsOf(g, every);
  if (llvm::none_of(segments.block, [](bool b) { return b; }))
    return g.func.emitError(
        "ds-remat: policy layers found no transformer blocks (parameters "
        "named PREFIX.N.*, as transformer.h.0.attn.c_attn.weight)");
  Choice c{llvm::BitVector(g.size()),
           every == 1
               ? kLayers.str()
               : kLayers.str() + " (every " + std::to_string(every) + ")"};
  for (unsigned i = 0; i < g.size(); ++i) {
    unsigned s = segments.of.lookup(g.ops[g.opOf[i]]);
    bool keep = !segments.block[s];
    for (Operation *user : g.values[i].getUsers())
      if (auto it = segments.of.find(user);
          it != segments.of.end() && it->second != s)
        keep = true;
    if (keep)
      c.kept.set(i);
  }
  return c;
}

SmallVector<int> blockOrdinals(const ForwardGraph &g) {
  Segments segments = segmentsOf(g, 1);
  SmallVector<int> ordinal(segments.block.size(), -1);
  int n = 0;
  for (auto [i, block] : llvm::enumerate(segments.block))
    if (block)
      ordinal[i] = n++;
  SmallVector<int> out;
  for (unsigned v = 0; v < g.size(); ++v)
    out.push_back(ordinal[segments.of.lookup(g.ops[g.opOf[v]])]);
  return out;
}

Choice keepSelective(const ForwardGraph &g) {
  Choice c{llvm::BitVector(g.size()), kSelective.str()};
  for (unsigned i = 0; i < g.size(); ++i) {
    Operation *def = g.ops[g.opOf[i]];
    if (isa<MatmulOp, EmbeddingOp, CrossEntropyOp, CrossEntropyPartLossOp>(def))
      c.kept.set(i);
  }
  // The norms' inputs: the residual stream.
  for (Operation *op : g.ops)
    if (isa<LayerNormOp, RmsNormOp>(op))
      if (auto it = g.id.find(op->getOperand(0)); it != g.id.end())
        c.kept.set(it->second);
  return c;
}

} // namespace mlir::ds::remat
