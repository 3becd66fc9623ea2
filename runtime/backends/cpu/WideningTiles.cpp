//===- WideningTiles.cpp - 16-bit variants widened a tile at a time -------===//
//
// runWidened copies every 16-bit operand to f32 whole, runs the f32 kernel
// over the copies and rounds the outputs back: for a [8, 128, 1024] GELU
// that is three passes over 4 MB buffers, on one thread, around a kernel
// that itself takes 0.7 ms (bench/RESULTS.md: a bf16 step's epilogues cost
// 3 ms a call against the product's 0.3 ms). An elementwise or row-wise
// kernel computes each element (row) from the same element (row) of its
// operands, so the same result comes from running it on tiles: each thread
// widens a few thousand elements, runs the kernel on them while they are
// in cache, and rounds them back. Bit for bit the whole call's result (the
// kernels' per-element and per-row arithmetic does not depend on how many
// there are), which Widening.TiledVariantsEqualTheWholeWidenedKernel
// checks on shapes of many tiles.
//
// Tiled, by kernel: elementwise ones over flat ranges when every operand
// but one-element ones has the output's shape, or over rows when the rest
// are rows ([C], the last dimension: a bias); row-wise ones (norms,
// softmax over the last dimension) over rows only; the rotary embedding
// over the batch's sequences (attention widens a (batch, head) pair's rows
// itself, Attention.cpp). Any other shape mix runs whole,
// and so does a kernel whose tiles fail (its error line then names the real
// shapes).
//
//===----------------------------------------------------------------------===//

#include "runtime/backends/cpu/CpuCommon.h"
#include "runtime/backends/cpu/Widening.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <vector>

namespace dsc::rt::cpu {
namespace {

/// ~64 KB of f32 per operand: a tile's copies stay in L2.
constexpr int64_t kTileElements = 16384;

enum class TileKind { None, Elements, Rows, Batches };

TileKind tileKindOf(std::string_view kernel) {
  static constexpr std::string_view elementwise[] = {
      "ds.add",       "ds.sub",    "ds.mul",       "ds.div",       "ds.maximum",
      "ds.minimum",   "ds.neg",    "ds.exp",       "ds.tanh",      "ds.sqrt",
      "ds.rsqrt",     "ds.relu",   "ds.silu",      "ds.silu_grad", "ds.gelu",
      "ds.gelu_grad", "ds.swiglu", "ds.bias_gelu", "ds.adamw"};
  static constexpr std::string_view rowWise[] = {"ds.layer_norm", "ds.rms_norm",
                                                 "ds.softmax"};
  // Each sequence of the batch on its own: rotary's rows know their
  // position within a batch entry (cutOf keeps [T, D] whole).
  static constexpr std::string_view batchWise[] = {"ds.rotary"};
  for (std::string_view k : elementwise)
    if (k == kernel)
      return TileKind::Elements;
  for (std::string_view k : rowWise)
    if (k == kernel)
      return TileKind::Rows;
  for (std::string_view k : batchWise)
    if (k == kernel)
      return TileKind::Batches;
  return TileKind::None;
}

/// How the operands are cut: `units` slices of the tiled operands (rows,
/// elements or batch entries), operand i's slice `stride[i]` elements long
/// (0: kept whole).
struct Cut {
  bool byRows = false;
  int64_t units = 0;
  std::vector<int64_t> stride; // inputs, then outputs
};

/// The cut for `kind`, or false when the shapes do not tile. Elements and
/// rows: every output has the first output's shape S; an input has S, has
/// one element (kept whole), or is [C], C S's last dimension (kept whole:
/// a bias every row reads; the cut is then by rows). Batches: every
/// operand's first dimension is the first output's, and its rank 3 or more.
bool cutOf(TileKind kind, const KernelArgs &args, Cut &cut) {
  if (kind == TileKind::None || args.numOutputs == 0)
    return false;
  const TensorRef &s = args.outputs[0];
  if (s.rank == 0 || s.numel() == 0)
    return false;
  const size_t numOperands = args.numInputs + args.numOutputs;
  auto operand = [&](size_t i) -> const TensorRef & {
    return i < args.numInputs ? args.inputs[i]
                              : args.outputs[i - args.numInputs];
  };
  cut.stride.assign(numOperands, 0);
  if (kind == TileKind::Batches) {
    cut.units = s.shape[0];
    for (size_t i = 0; i < numOperands; ++i) {
      const TensorRef &t = operand(i);
      // Rank 3 at least: a batch entry holds whole [T, D] sequences.
      if (t.rank < 3 || t.shape[0] != cut.units)
        return false;
      cut.stride[i] = t.numel() / cut.units;
    }
    return true;
  }
  const int64_t C = s.shape[s.rank - 1];
  cut.byRows = kind == TileKind::Rows;
  for (size_t i = 0; i < numOperands; ++i) {
    const TensorRef &t = operand(i);
    if (sameShape(t, s))
      cut.stride[i] = -1; // a slice of S, set below
    else if (i >= args.numInputs)
      return false;
    else if (t.rank == 1 && t.shape[0] == C && s.rank >= 2)
      cut.byRows = true;
    else if (t.numel() != 1)
      return false;
  }
  if (C == 0)
    return false;
  const int64_t unit = cut.byRows ? C : 1;
  cut.units = s.numel() / unit;
  for (int64_t &st : cut.stride)
    st = st < 0 ? unit : 0;
  return true;
}

/// Operand `t` restricted to units [first, first + count) of `cut`, its
/// shape written to `shape`.
TensorRef slice(const TensorRef &t, int64_t stride, const Cut &cut,
                TileKind kind, int64_t first, int64_t count, int64_t *shape) {
  if (stride == 0)
    return t;
  TensorRef part = t;
  part.data = static_cast<char *>(t.data) +
              first * stride * int64_t(dtypeSize(t.dtype));
  part.shape = shape;
  shape[0] = count;
  if (kind == TileKind::Batches) { // [count, the rest of t's shape]
    std::copy(t.shape + 1, t.shape + t.rank, shape + 1);
    part.rank = t.rank;
  } else if (cut.byRows) { // [count, C]
    shape[1] = stride;
    part.rank = 2;
  } else { // [count]
    part.rank = 1;
  }
  return part;
}

} // namespace

bool runWidenedTiled(std::string_view kernel, const WidenedStep &step,
                     const KernelArgs &args, std::string &error) {
  const TileKind kind = tileKindOf(kernel);
  Cut cut;
  if (!cutOf(kind, args, cut) || args.outputs[0].numel() <= kTileElements)
    return step(args, error);
  // Units per tile: as many as fill kTileElements of the first output.
  const int64_t unitElements = args.outputs[0].numel() / cut.units;
  const int64_t perTile =
      std::max<int64_t>(1, kTileElements / std::max<int64_t>(unitElements, 1));
  const int64_t tiles = (cut.units + perTile - 1) / perTile;
  if (tiles <= 1)
    return step(args, error);
  std::atomic<bool> failed{false};
  const size_t numOperands = args.numInputs + args.numOutputs;
  parallelFor(tiles, 1, [&](int64_t t0, int64_t t1) {
    std::vector<TensorRef> ins(args.inputs, args.inputs + args.numInputs);
    std::vector<TensorRef> outs(args.outputs, args.outputs + args.numOutputs);
    std::vector<std::array<int64_t, kMaxRank>> shapes(numOperands);
    for (int64_t t = t0; t < t1 && !failed; ++t) {
      const int64_t first = t * perTile;
      const int64_t count = std::min(perTile, cut.units - first);
      for (size_t i = 0; i < numOperands; ++i) {
        const bool in = i < args.numInputs;
        const TensorRef &whole =
            in ? args.inputs[i] : args.outputs[i - args.numInputs];
        TensorRef part = slice(whole, cut.stride[i], cut, kind, first, count,
                               shapes[i].data());
        (in ? ins[i] : outs[i - args.numInputs]) = part;
      }
      KernelArgs part = args;
      part.inputs = ins.data();
      part.outputs = outs.data();
      std::string err;
      if (!step(part, err))
        failed = true;
    }
  });
  // A failing tile: run whole, for the error line with the real shapes.
  return !failed || step(args, error);
}

} // namespace dsc::rt::cpu
