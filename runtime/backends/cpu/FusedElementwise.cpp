//===- FusedElementwise.cpp - a fused elementwise group, a tile at a time -===//
//
// ds.fused_elementwise's program (runtime/kernels/FusedProgram.h) runs over
// tiles of kTile elements: each value of the program is one tile of
// floats, each instruction one vectorized loop over the tile with the
// unfused kernel's formula (ElementwiseFunctors.h), and a value whose
// unfused type is f16 or bf16 is rounded to it, so the group's results are
// the unfused ops' bits. Inputs and outputs are read and written in their
// own dtype (no widened copies of whole tensors); a full-size f32 input is
// read in place. A tile's values stay in L1/L2 (at most 32 x 4 KiB).
//
//===----------------------------------------------------------------------===//

#include "runtime/backends/cpu/Convert.h"
#include "runtime/backends/cpu/CpuCommon.h"
#include "runtime/backends/cpu/ElementwiseFunctors.h"
#include "runtime/kernels/FusedProgram.h"

#include <cstring>
#include <mutex>
#include <vector>

namespace dsc::rt::cpu {
namespace {

using namespace ew;
namespace fp = dsc::rt::fused;

constexpr int64_t kTile = 1024;
/// Elements per parallel chunk, a multiple of the tile.
constexpr int64_t kGrain = 32 * kTile;

template <class Op>
void binaryTile(const float *a, const float *b, float *out, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    out[i] = Op::f(a[i], b[i]);
}
template <class Op> void unaryTile(const float *x, float *out, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    out[i] = Op::f(x[i]);
}
// (x, g) -> g * act'(x), as activationGradBody.
template <class Op>
void gradTile(const float *x, const float *g, float *out, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    out[i] = g[i] * Op::d(x[i]);
}

void runInstruction(fp::Opcode op, const float *a, const float *b, float *out,
                    int64_t n) {
  using O = fp::Opcode;
  switch (op) {
  case O::Add:
    return binaryTile<AddOp>(a, b, out, n);
  case O::Sub:
    return binaryTile<SubOp>(a, b, out, n);
  case O::Mul:
    return binaryTile<MulOp>(a, b, out, n);
  case O::Div:
    return binaryTile<DivOp>(a, b, out, n);
  case O::Minimum:
    return binaryTile<MinimumOp>(a, b, out, n);
  case O::Maximum:
    return binaryTile<MaximumOp>(a, b, out, n);
  case O::Neg:
    return unaryTile<NegOp>(a, out, n);
  case O::Exp:
    return unaryTile<ExpOp>(a, out, n);
  case O::Log:
    return unaryTile<LogOp>(a, out, n);
  case O::Tanh:
    return unaryTile<TanhOp>(a, out, n);
  case O::Sqrt:
    return unaryTile<SqrtOp>(a, out, n);
  case O::Rsqrt:
    return unaryTile<RsqrtOp>(a, out, n);
  case O::Relu:
    return unaryTile<ReluOp>(a, out, n);
  case O::Silu:
    return unaryTile<SiluOp>(a, out, n);
  case O::GeluErf:
    return unaryTile<GeluErfOp>(a, out, n);
  case O::GeluTanh:
    return unaryTile<GeluTanhOp>(a, out, n);
  case O::ReluGrad:
    return gradTile<ReluGradOp>(a, b, out, n);
  case O::SiluGrad:
    return gradTile<SiluGradOp>(a, b, out, n);
  case O::GeluErfGrad:
    return gradTile<GeluErfGradOp>(a, b, out, n);
  case O::GeluTanhGrad:
    return gradTile<GeluTanhGradOp>(a, b, out, n);
  case O::Swiglu: // silu(gate) * up: up is g, silu the "derivative"
    return gradTile<SwigluGate>(a, b, out, n);
  case O::Round: // a copy: roundTile after it rounds
    std::memcpy(out, a, size_t(n) * sizeof(float));
    return;
  case O::ReduceSum: // summed over tiles by the caller, not per element
  case O::Count:     // not an opcode (fused::decode refuses it)
    return;
  }
}

/// Whether the activation `op` (GELU, SiLU, their gradients, SwiGLU's
/// gate) reads its first operand through a table of bf16 inputs.
bool tabulated(fp::Opcode op) {
  using O = fp::Opcode;
  switch (op) {
  case O::GeluErf:
  case O::GeluTanh:
  case O::Silu:
  case O::GeluErfGrad:
  case O::GeluTanhGrad:
  case O::SiluGrad:
  case O::Swiglu:
    return true;
  default:
    return false;
  }
}

/// What instruction `op` gives for each of the 65536 bf16 values of its
/// first operand (the second, where it has one, 1.0f: g * 1 is exact),
/// computed by runInstruction itself, so a lookup is the formula's bits.
std::vector<float> tabulate(fp::Opcode op) {
  constexpr int64_t kValues = 1 << 16;
  std::vector<float> x(kValues), ones(kValues, 1.0f), table(kValues);
  for (int64_t i = 0; i < kValues; ++i) {
    const uint32_t bits = uint32_t(i) << 16;
    std::memcpy(&x[size_t(i)], &bits, sizeof bits);
  }
  runInstruction(op, x.data(), fp::arityOf(op) == 2 ? ones.data() : nullptr,
                 table.data(), kValues);
  return table;
}

/// The table of a tabulated op, made at first use (256 KiB each).
const float *bf16Table(fp::Opcode op) {
  static std::once_flag made[size_t(fp::Opcode::Count)];
  static std::vector<float> tables[size_t(fp::Opcode::Count)];
  const size_t i = size_t(op);
  std::call_once(made[i], [&] { tables[i] = tabulate(op); });
  return tables[i].data();
}

/// A tabulated op over a tile whose first operand holds bf16 values: one
/// load per element where the formula (GELU's exp and division: ~1 ns an
/// element a core) would run.
void lookupTile(const float *table, const float *x, const float *g, float *out,
                int64_t n) {
  auto index = [&](int64_t i) {
    uint32_t bits;
    std::memcpy(&bits, &x[i], sizeof bits);
    return bits >> 16;
  };
  if (!g) {
    for (int64_t i = 0; i < n; ++i)
      out[i] = table[index(i)];
    return;
  }
  for (int64_t i = 0; i < n; ++i)
    out[i] = g[i] * table[index(i)];
}

/// x rounded to bf16 and widened again: runtime/core/Half.h's
/// floatToBf16 (nearest even; a NaN stays NaN, quieted) without leaving
/// the float lane, so the loop over a tile vectorizes.
inline float roundedToBf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;
  uint32_t quietNan = (u | 0x00400000u) & 0xFFFF0000u;
  uint32_t r = (u & 0x7FFFFFFFu) > 0x7F800000u ? quietNan : rounded;
  float y;
  std::memcpy(&y, &r, sizeof y);
  return y;
}

/// Rounds a tile to f16 or bf16 and back, as storing the unfused result
/// and reading it again would.
void roundTile(fp::Rounding r, float *x, int64_t n) {
  if (r == fp::Rounding::BF16) {
    for (int64_t i = 0; i < n; ++i)
      x[i] = roundedToBf16(x[i]);
  } else if (r == fp::Rounding::F16) {
    uint16_t narrow[kTile];
    f32ToF16(x, narrow, n);
    f16ToF32(narrow, x, n);
  }
}

/// Elements [at, at + n) of an input of `count` elements (count divides the
/// group's, the input broadcast along the leading dims), as floats in
/// `tile`; a full-size f32 input is returned in place.
const float *loadInput(const TensorRef &in, int64_t count, int64_t at,
                       int64_t n, float *tile) {
  if (count == 0)
    return tile;
  int64_t pos = 0;
  int64_t i = at % count;
  if (in.dtype == DType::f32 && i + n <= count)
    return in.f32() + i;
  while (pos < n) {
    int64_t run = std::min(n - pos, count - i);
    if (in.dtype == DType::f32)
      std::memcpy(tile + pos, in.f32() + i, size_t(run) * sizeof(float));
    else
      chunkAsF32(in.dtype, in.data, i, run, tile + pos);
    pos += run;
    i = 0;
  }
  return tile;
}

void storeOutput(const TensorRef &out, const float *tile, int64_t at,
                 int64_t n) {
  if (out.dtype == DType::f32)
    std::memcpy(out.f32() + at, tile, size_t(n) * sizeof(float));
  else if (out.dtype == DType::bf16)
    f32ToBf16(tile, static_cast<uint16_t *>(out.data) + at, n);
  else
    f32ToF16(tile, static_cast<uint16_t *>(out.data) + at, n);
}

} // namespace

namespace {

/// A program ready to run a tile at a time: its inputs' element counts,
/// which values are rounded in the tile, and its sum (if any).
struct Evaluator {
  const fp::Program &program;
  const KernelArgs &args;
  int64_t counts[fp::kMaxValues]; // the check bounds the inputs so
  bool roundInTile[fp::kMaxValues];
  /// Per instruction: the bf16 table it reads its first operand through
  /// (that operand a bf16 input or a value rounded to bf16 in the tile, so
  /// every element is one of the table's), or null.
  const float *table[fp::kMaxValues];
  int reduction; // the ReduceSum's value, -1 without one

  Evaluator(const fp::Program &p, const KernelArgs &a)
      : program(p), args(a), reduction(fp::reductionOf(p)) {
    const int numInputs = p.numInputs;
    const size_t numCode = p.code.size();
    for (int i = 0; i < numInputs; ++i)
      counts[i] = a.inputs[i].numel();
    // A result only stored, into outputs of its own rounding's dtype, is
    // not rounded in the tile: the store rounds it the same way (rounding to
    // nearest even twice gives the once-rounded bits, NaNs quieted alike).
    // The sum reads its operand as rounded, as reduce_sum reads it stored.
    for (size_t k = 0; k < numCode; ++k) {
      const int value = numInputs + int(k);
      bool read = false;
      for (size_t j = k + 1; j < numCode; ++j)
        read |= p.code[j].a == value || p.code[j].b == value;
      const DType stored = fp::storageOf(p.code[k].rounding);
      for (size_t o = 0; o < p.outputs.size(); ++o)
        read |= p.outputs[o] == value && a.outputs[o].dtype != stored;
      roundInTile[k] = read;
    }
    for (size_t k = 0; k < numCode; ++k) {
      const fp::Instruction &instr = p.code[k];
      const int operand = instr.a, producer = operand - numInputs;
      const bool bf16Values =
          operand < numInputs
              ? operand >= 0 && a.inputs[operand].dtype == DType::bf16
              : p.code[size_t(producer)].rounding == fp::Rounding::BF16 &&
                    roundInTile[producer];
      table[k] =
          bf16Values && tabulated(instr.op) ? bf16Table(instr.op) : nullptr;
    }
  }

  /// Evaluates elements [at, at + n) (n <= kTile) into `tiles` and stores
  /// every output but the sum's; returns the tile the sum adds up (null
  /// without a sum).
  const float *run(int64_t at, int64_t n, float (*tiles)[kTile]) const {
    const float *value[fp::kMaxValues];
    const int numInputs = program.numInputs;
    for (int i = 0; i < numInputs; ++i)
      value[i] = loadInput(args.inputs[i], counts[i], at, n, tiles[i]);
    for (size_t k = 0; k < program.code.size(); ++k) {
      const fp::Instruction &instr = program.code[k];
      if (instr.op == fp::Opcode::ReduceSum) { // summed by the caller
        value[numInputs + k] = value[instr.a];
        continue;
      }
      float *out = tiles[numInputs + k];
      const float *b = instr.b < 0 ? nullptr : value[instr.b];
      if (table[k])
        lookupTile(table[k], value[instr.a], b, out, n);
      else
        runInstruction(instr.op, value[instr.a], b, out, n);
      if (roundInTile[k])
        roundTile(instr.rounding, out, n);
      value[numInputs + k] = out;
    }
    for (size_t o = 0; o < program.outputs.size(); ++o)
      if (program.outputs[o] != reduction)
        storeOutput(args.outputs[o], value[program.outputs[o]], at, n);
    return reduction < 0 ? nullptr : value[reduction];
  }

  const TensorRef &sumOutput() const {
    size_t o = 0;
    while (program.outputs[o] != reduction)
      ++o;
    return args.outputs[o];
  }
};

/// A whole-group sum: blocks of kSumBlock elements, each summed in eight
/// double lanes (element j into lane j % 8, combined as sumOf combines
/// them), the blocks' sums added in order: the order of reduce_sum's
/// blockedSumOf (Reduce.cpp), blocks spread over the threads.
void runWholeSum(const Evaluator &e, int64_t total) {
  const int64_t blocks = (total + kSumBlock - 1) / kSumBlock;
  std::vector<double> part(size_t(blocks), 0.0);
  parallelFor(blocks, 1, [&](int64_t b0, int64_t b1) {
    alignas(64) float tiles[fp::kMaxValues][kTile];
    for (int64_t b = b0; b < b1; ++b) {
      double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      const int64_t end = std::min(total, (b + 1) * kSumBlock);
      // Tiles start at multiples of 8 from the block's start.
      for (int64_t at = b * kSumBlock; at < end; at += kTile) {
        const int64_t n = std::min(kTile, end - at);
        const float *x = e.run(at, n, tiles);
        int64_t i = 0;
        for (; i + 8 <= n; i += 8) // sumOf's loop: vectorized
          for (int k = 0; k < 8; ++k)
            acc[k] += x[i + k];
        for (int k = 0; i < n; ++i, ++k)
          acc[k] += x[i];
      }
      part[size_t(b)] = ((acc[0] + acc[1]) + (acc[2] + acc[3])) +
                        ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    }
  });
  double sum = 0;
  for (double p : part)
    sum += p;
  const float result = float(sum);
  storeOutput(e.sumOutput(), &result, 0, 1);
}

/// Column sums over the group's leading dims, [R, inner] -> [inner]: each
/// thread owns a range of columns and walks every row, adding each
/// element to its column's double sum in row order, as reduce_sum's
/// reduceColumns does (a single row is the value itself, as reduce_sum
/// copies it).
void runColumnSums(const Evaluator &e, int64_t rows, int64_t inner) {
  const TensorRef &out = e.sumOutput();
  parallelFor(inner, columnReductionGrain(rows), [&](int64_t c0, int64_t c1) {
    alignas(64) float tiles[fp::kMaxValues][kTile];
    std::vector<double> acc(size_t(c1 - c0), 0.0);
    std::vector<float> sums(size_t(c1 - c0));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = c0; c < c1; c += kTile) {
        const int64_t n = std::min(kTile, c1 - c);
        const float *x = e.run(r * inner + c, n, tiles);
        if (rows == 1)
          std::copy(x, x + n, sums.begin() + (c - c0));
        for (int64_t i = 0; i < n; ++i)
          acc[size_t(c - c0 + i)] += x[i];
      }
    if (rows != 1)
      for (size_t i = 0; i < acc.size(); ++i)
        sums[i] = float(acc[i]);
    storeOutput(out, sums.data(), c0, c1 - c0);
  });
}

} // namespace

void runFusedProgram(const fp::Program &program, const KernelArgs &args) {
  const Evaluator e(program, args);
  const int64_t total = fusedGroupOf(args, program).numel();
  if (e.reduction >= 0) {
    const int64_t inner = e.sumOutput().numel();
    if (inner == 1 && total != 1) // one element is copied, -0 and all
      return runWholeSum(e, total);
    if (inner > 0)
      runColumnSums(e, total / inner, inner);
    return;
  }
  parallelFor(total, kGrain, [&](int64_t begin, int64_t end) {
    alignas(64) float tiles[fp::kMaxValues][kTile];
    for (int64_t at = begin; at < end; at += kTile)
      e.run(at, std::min(kTile, end - at), tiles);
  });
}

bool fusedElementwiseBody(const KernelArgs &args, std::string &err) {
  fp::Program program;
  if (!checkFusedElementwise(args, program, err))
    return false;
  runFusedProgram(program, args);
  return true;
}

} // namespace dsc::rt::cpu
