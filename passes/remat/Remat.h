//===- Remat.h - ds-remat's forward graph, policies and rewrite -*- C++ -*-===//
//
// ds-remat (phase `remat`, docs/remat.md) in three parts: the forward graph
// of @micro_step (the ops before the loss seed and the values the backward
// reads), the policies (each a set of forward values to keep, everything
// else the backward needs being recomputed), and the rewrite that clones
// the recomputed ops into the backward. A kept set is a bit per value of
// the graph's numbering, so one chosen on a clone of the module applies to
// the module itself.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_PASSES_REMAT_REMAT_H
#define DSC_PASSES_REMAT_REMAT_H

#include "dialects/ds/DsOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"

#include <cstdint>
#include <string>

namespace mlir::ds::remat {

/// The forward half of @micro_step. Values are numbered in program order;
/// only values that cost memory are numbered: not block arguments,
/// parameter loads, constants, or reshapes of those (free values, read
/// again at no cost).
struct ForwardGraph {
  mutable func::FuncOp func;    // (FuncOp's accessors are not const)
  Operation *seed = nullptr;    ///< the loss seed: the backward starts here
  SmallVector<Operation *> ops; ///< forward ops with a numbered result
  SmallVector<Value> values;    ///< numbered values
  SmallVector<unsigned> opOf;   ///< value -> index in `ops`
  llvm::DenseMap<Value, unsigned> id;
  llvm::BitVector needed; ///< read by the backward

  /// The graph of `micro`; an error when it has no loss seed.
  static FailureOr<ForwardGraph> build(func::FuncOp micro);

  bool numbered(Value v) const { return id.count(v); }
  size_t size() const { return values.size(); }
  /// Bytes of value `i`'s buffer; 0 for a view (ds.reshape), which shares
  /// its operand's.
  uint64_t bytes(unsigned i) const;
  /// FLOPs of the op defining value `i`.
  double flops(unsigned i) const;
  /// The numbered operands of the op defining value `i`.
  SmallVector<unsigned> operands(unsigned i) const;
};

/// What a policy decided: which numbered values stay in memory for the
/// backward (`kept`); the backward recomputes the others it reads.
struct Choice {
  llvm::BitVector kept;
  std::string name; ///< for messages and --report: "layers (every 2)"
};

/// Keeps everything the backward reads: policy `none`.
Choice keepAll(const ForwardGraph &g);
/// Keeps the inputs of each group of `every` transformer blocks; a block is
/// the ops from the first read of a parameter named PREFIX.N.* to the next
/// block's (or the next unnumbered parameter's) first read. Fails with an
/// error when the model has no numbered blocks.
FailureOr<Choice> keepBlockInputs(const ForwardGraph &g, int64_t every);
/// Per numbered value, the ordinal of its transformer block in program
/// order (0, 1, ...), or -1 outside the blocks.
SmallVector<int> blockOrdinals(const ForwardGraph &g);
/// Keeps GEMM outputs (and what cannot be recomputed: embeddings, the
/// loss) and the norms' inputs; recomputes the rest.
Choice keepSelective(const ForwardGraph &g);
/// The exact minimum of kept bytes + weight x recomputed FLOPs over every
/// consistent kept set (a minimum s-t cut, Boost.Graph's Boykov-Kolmogorov
/// max-flow). `weight` is in bytes per FLOP.
Choice minimumCut(const ForwardGraph &g, double weight);

/// Clones every op the backward needs recomputed (marked ds.recompute)
/// right before its first use after the seed and rewires the backward to
/// the clones. Returns the number of ops cloned.
unsigned recompute(const ForwardGraph &g, const llvm::BitVector &kept);

} // namespace mlir::ds::remat

#endif // DSC_PASSES_REMAT_REMAT_H
