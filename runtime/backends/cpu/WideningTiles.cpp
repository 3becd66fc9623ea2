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
// softmax over the last dimension) over rows only. Any other shape mix runs
// whole, and so does a kernel whose tiles fail (its error line then names
// the real shapes).
//
//===----------------------------------------------------------------------===//

#include "runtime/backends/cpu/CpuCommon.h"
#include "runtime/backends/cpu/Widening.h"

#include <algorithm>
#include <atomic>
#include <vector>

namespace dsc::rt::cpu {
namespace {

/// ~64 KB of f32 per operand: a tile's copies stay in L2.
constexpr int64_t kTileElements = 16384;

enum class TileKind { None, Elements, Rows };

TileKind tileKindOf(std::string_view kernel) {
  static constexpr std::string_view elementwise[] = {
      "ds.add",       "ds.sub",    "ds.mul",       "ds.div",       "ds.maximum",
      "ds.minimum",   "ds.neg",    "ds.exp",       "ds.tanh",      "ds.sqrt",
      "ds.rsqrt",     "ds.relu",   "ds.silu",      "ds.silu_grad", "ds.gelu",
      "ds.gelu_grad", "ds.swiglu", "ds.bias_gelu", "ds.adamw"};
  static constexpr std::string_view rowWise[] = {
      "ds.layer_norm", "ds.add_layer_norm", "ds.rms_norm", "ds.softmax"};
  for (std::string_view k : elementwise)
    if (k == kernel)
      return TileKind::Elements;
  for (std::string_view k : rowWise)
    if (k == kernel)
      return TileKind::Rows;
  return TileKind::None;
}

enum class Role { Whole, Tiled, Row };

/// How each operand is cut, or false when the shapes do not tile: every
/// output has the first output's shape S; an input has S (tiled), has one
/// element (kept whole), or, cutting rows, is [C] with C S's last dimension
/// (kept whole: every row reads it).
bool rolesOf(TileKind kind, const KernelArgs &args, bool &byRows,
             std::vector<Role> &roles) {
  if (kind == TileKind::None || args.numOutputs == 0)
    return false;
  const TensorRef &s = args.outputs[0];
  if (s.rank == 0)
    return false;
  const int64_t C = s.shape[s.rank - 1];
  byRows = kind == TileKind::Rows;
  roles.clear();
  for (size_t i = 0; i < args.numOutputs; ++i) {
    if (!sameShape(args.outputs[i], s))
      return false;
  }
  for (size_t i = 0; i < args.numInputs; ++i) {
    const TensorRef &t = args.inputs[i];
    if (sameShape(t, s))
      roles.push_back(Role::Tiled);
    else if (t.numel() == 1)
      roles.push_back(Role::Whole);
    else if (t.rank == 1 && t.shape[0] == C && s.rank >= 2) {
      roles.push_back(Role::Row);
      byRows = true; // a bias: tiles must be whole rows
    } else
      return false;
  }
  return true;
}

} // namespace

bool runWidenedTiled(std::string_view kernel, const WidenedStep &step,
                     const KernelArgs &args, std::string &error) {
  bool byRows = false;
  std::vector<Role> roles;
  const TensorRef &s = args.outputs[0];
  const int64_t n = args.numOutputs ? s.numel() : 0;
  if (!rolesOf(tileKindOf(kernel), args, byRows, roles) || n <= kTileElements)
    return step(args, error);
  // A tile is `unit` elements times its count: a row, or one element.
  const int64_t C = s.shape[s.rank - 1];
  const int64_t unit = byRows ? C : 1;
  const int64_t units = n / std::max<int64_t>(unit, 1);
  const int64_t perTile = std::max<int64_t>(1, kTileElements / unit);
  const int64_t tiles = (units + perTile - 1) / perTile;
  if (unit == 0 || tiles <= 1)
    return step(args, error);
  std::atomic<bool> failed{false};
  parallelFor(tiles, 1, [&](int64_t t0, int64_t t1) {
    std::vector<TensorRef> ins(args.inputs, args.inputs + args.numInputs);
    std::vector<TensorRef> outs(args.outputs, args.outputs + args.numOutputs);
    int64_t shape[2];
    for (int64_t t = t0; t < t1 && !failed; ++t) {
      const int64_t first = t * perTile;
      const int64_t count = std::min(perTile, units - first);
      // Rows: [count, C]; elements: [count].
      shape[0] = count;
      shape[1] = C;
      auto cut = [&](const TensorRef &whole) {
        TensorRef part = whole;
        part.data = static_cast<char *>(whole.data) +
                    first * unit * int64_t(dtypeSize(whole.dtype));
        part.shape = shape;
        part.rank = byRows ? 2 : 1;
        return part;
      };
      for (size_t i = 0; i < args.numInputs; ++i)
        if (roles[i] == Role::Tiled)
          ins[i] = cut(args.inputs[i]);
      for (size_t i = 0; i < args.numOutputs; ++i)
        outs[i] = cut(args.outputs[i]);
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
