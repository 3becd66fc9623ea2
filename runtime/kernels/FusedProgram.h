//===- FusedProgram.h - ds.fused_elementwise's program in a plan -*- C++
//-*-===//
//
// Phase `fused` groups chains of elementwise ops into one
// ds.fused_elementwise (passes/FuseElementwise.cpp). Its body travels in
// the plan as the instruction's int attributes, a small SSA program that a
// backend evaluates a tile of elements at a time:
//
//   ints = [K, (opcode, a, b, rounding) x K, out_0 ... out_{M-1}]
//
// Values are numbered: 0 .. N-1 the N inputs (read as f32, an input whose
// element count divides the group's is broadcast along the leading dims),
// then N + k the result of instruction k. Operands name only earlier
// values (b = -1 for a unary op); `rounding` is the instruction result's
// storage type in the unfused graph, to which the value is rounded as the
// unfused kernel's result would be, so a group computes the unfused ops'
// bits. The M outputs name instruction results in the instruction's output
// order. One instruction may be a ReduceSum: its value is the sum of its
// operand over the group's leading dims, down to the shape of the output
// that names it (the group's trailing dims, a scalar for a whole sum), as
// ds.reduce_sum sums it on that backend; only an output reads it.
// Header-only, standard library and DType only: the compiler writes
// programs with it, the plan verifier and each backend read them.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_KERNELS_FUSEDPROGRAM_H
#define DSC_RUNTIME_KERNELS_FUSEDPROGRAM_H

#include "runtime/core/DType.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dsc::rt::fused {

/// What one instruction computes, per element, exactly as the named ds
/// op's kernel does. Binary ops read (a, b); activation gradients read
/// (x = a, g = b) and give g * act'(x); Swiglu reads (gate = a, up = b).
/// Round is a ds.cast: the value itself, rounded to the instruction's
/// storage. ReduceSum is a ds.reduce_sum over the leading dims (see the
/// file comment); it is not an elementwise value.
enum class Opcode : int64_t {
  Add,
  Sub,
  Mul,
  Div,
  Minimum,
  Maximum,
  Neg,
  Exp,
  Log,
  Tanh,
  Sqrt,
  Rsqrt,
  Relu,
  Silu,
  GeluErf,
  GeluTanh,
  ReluGrad,
  SiluGrad,
  GeluErfGrad,
  GeluTanhGrad,
  Swiglu,
  Round,
  ReduceSum,
  Count
};

/// Which ds kernel's per-element formula each opcode is, by name (the IR
/// op's and the plan kernel's): one table for phase fused's grouping
/// (dialects/ds/FusedElementwise.cpp) and the CPU's one-instruction
/// programs (HalfElementwise.cpp). ds.gelu and ds.gelu_grad name two
/// opcodes each, by their approximation. `broadcasts`: a binary op whose
/// inputs may be smaller than its result.
struct KernelOpcode {
  std::string_view kernel;
  Opcode op, tanhOp;
  bool broadcasts;
};
inline constexpr KernelOpcode kKernelOpcodes[] = {
    {"ds.add", Opcode::Add, Opcode::Add, true},
    {"ds.sub", Opcode::Sub, Opcode::Sub, true},
    {"ds.mul", Opcode::Mul, Opcode::Mul, true},
    {"ds.div", Opcode::Div, Opcode::Div, true},
    {"ds.minimum", Opcode::Minimum, Opcode::Minimum, true},
    {"ds.maximum", Opcode::Maximum, Opcode::Maximum, true},
    {"ds.neg", Opcode::Neg, Opcode::Neg, false},
    {"ds.exp", Opcode::Exp, Opcode::Exp, false},
    {"ds.log", Opcode::Log, Opcode::Log, false},
    {"ds.tanh", Opcode::Tanh, Opcode::Tanh, false},
    {"ds.sqrt", Opcode::Sqrt, Opcode::Sqrt, false},
    {"ds.rsqrt", Opcode::Rsqrt, Opcode::Rsqrt, false},
    {"ds.relu", Opcode::Relu, Opcode::Relu, false},
    {"ds.silu", Opcode::Silu, Opcode::Silu, false},
    {"ds.gelu", Opcode::GeluErf, Opcode::GeluTanh, false},
    {"ds.relu_grad", Opcode::ReluGrad, Opcode::ReluGrad, false},
    {"ds.silu_grad", Opcode::SiluGrad, Opcode::SiluGrad, false},
    {"ds.gelu_grad", Opcode::GeluErfGrad, Opcode::GeluTanhGrad, false},
    {"ds.swiglu", Opcode::Swiglu, Opcode::Swiglu, false},
    {"ds.cast", Opcode::Round, Opcode::Round, false},
};

/// The table's row for `kernel`, or null for a kernel no opcode computes.
inline const KernelOpcode *kernelOpcodeOf(std::string_view kernel) {
  for (const KernelOpcode &row : kKernelOpcodes)
    if (row.kernel == kernel)
      return &row;
  return nullptr;
}

/// The storage a value is rounded to after its instruction.
enum class Rounding : int64_t { F32, BF16, F16, Count };

/// The rounding of a value stored as `t`; false for a dtype a program
/// does not hold (f64, the integers).
inline bool roundingOf(DType t, Rounding &r) {
  switch (t) {
  case DType::f32:
    r = Rounding::F32;
    return true;
  case DType::bf16:
    r = Rounding::BF16;
    return true;
  case DType::f16:
    r = Rounding::F16;
    return true;
  default:
    return false;
  }
}

/// The dtype a value of rounding `r` is stored as.
inline DType storageOf(Rounding r) {
  return r == Rounding::BF16  ? DType::bf16
         : r == Rounding::F16 ? DType::f16
                              : DType::f32;
}

/// At most this many values (inputs and instruction results) in a program:
/// a tile-at-a-time evaluator holds one tile per value.
constexpr int kMaxValues = 32;

inline int arityOf(Opcode op) {
  switch (op) {
  case Opcode::Add:
  case Opcode::Sub:
  case Opcode::Mul:
  case Opcode::Div:
  case Opcode::Minimum:
  case Opcode::Maximum:
  case Opcode::ReluGrad:
  case Opcode::SiluGrad:
  case Opcode::GeluErfGrad:
  case Opcode::GeluTanhGrad:
  case Opcode::Swiglu:
    return 2;
  default:
    return 1;
  }
}

struct Instruction {
  Opcode op;
  int a, b;
  Rounding rounding;
};

struct Program {
  int numInputs = 0;
  std::vector<Instruction> code;
  std::vector<int> outputs; // value numbers
};

/// The value number of the program's ReduceSum, or -1 without one.
inline int reductionOf(const Program &p) {
  for (size_t k = 0; k < p.code.size(); ++k)
    if (p.code[k].op == Opcode::ReduceSum)
      return p.numInputs + int(k);
  return -1;
}

/// The int attributes of a program (the encoding above).
inline std::vector<int64_t> encode(const Program &p) {
  std::vector<int64_t> ints{int64_t(p.code.size())};
  for (const Instruction &i : p.code) {
    ints.push_back(int64_t(i.op));
    ints.push_back(i.a);
    ints.push_back(i.b);
    ints.push_back(int64_t(i.rounding));
  }
  for (int o : p.outputs)
    ints.push_back(o);
  return ints;
}

/// Reads and checks a program for an instruction with `numInputs` inputs
/// and `numOutputs` outputs; false with `err` saying what is wrong.
inline bool decode(const int64_t *ints, size_t n, int numInputs, int numOutputs,
                   Program &p, std::string &err) {
  auto fail = [&](const std::string &what) {
    err = "program " + what;
    return false;
  };
  if (n < 1 || ints[0] < 1)
    return fail("has no instructions");
  const int64_t k = ints[0];
  if (numInputs < 1 || numOutputs < 1 || numInputs + k > kMaxValues)
    return fail("has " + std::to_string(numInputs) + " inputs and " +
                std::to_string(k) + " instructions (at most " +
                std::to_string(kMaxValues) + " values, one output or more)");
  if (n != size_t(1 + 4 * k + numOutputs))
    return fail("has " + std::to_string(n) + " ints, expected " +
                std::to_string(1 + 4 * k + numOutputs) + " for " +
                std::to_string(k) + " instructions and " +
                std::to_string(numOutputs) + " outputs");
  p.numInputs = numInputs;
  p.code.clear();
  p.outputs.clear();
  for (int64_t i = 0; i < k; ++i) {
    const int64_t *w = ints + 1 + 4 * i;
    const int64_t defined = numInputs + i;
    const std::string at = "instruction " + std::to_string(i);
    if (w[0] < 0 || w[0] >= int64_t(Opcode::Count))
      return fail(at + " has unknown opcode " + std::to_string(w[0]));
    if (w[3] < 0 || w[3] >= int64_t(Rounding::Count))
      return fail(at + " has unknown rounding " + std::to_string(w[3]));
    const int arity = arityOf(Opcode(w[0]));
    if (w[1] < 0 || w[1] >= defined ||
        (arity == 2 ? (w[2] < 0 || w[2] >= defined) : w[2] != -1))
      return fail(at + " reads an operand that is not an earlier value");
    const auto isReduction = [&](int64_t v) {
      return v >= numInputs &&
             p.code[size_t(v - numInputs)].op == Opcode::ReduceSum;
    };
    if (isReduction(w[1]) || (arity == 2 && isReduction(w[2])))
      return fail(at + " reads a ReduceSum's result (only an output may)");
    if (Opcode(w[0]) == Opcode::ReduceSum && reductionOf(p) >= 0)
      return fail(at + " is a second ReduceSum (at most one)");
    p.code.push_back(
        Instruction{Opcode(w[0]), int(w[1]), int(w[2]), Rounding(w[3])});
  }
  for (int64_t o = 0; o < numOutputs; ++o) {
    int64_t v = ints[1 + 4 * k + o];
    if (v < numInputs || v >= numInputs + k)
      return fail("output " + std::to_string(o) +
                  " is not an instruction's result");
    p.outputs.push_back(int(v));
  }
  const int sum = reductionOf(p);
  bool sumStored = sum < 0;
  for (int v : p.outputs)
    sumStored |= v == sum;
  if (!sumStored)
    return fail("instruction " + std::to_string(sum - numInputs) +
                " is a ReduceSum no output stores");
  return true;
}

} // namespace dsc::rt::fused

#endif // DSC_RUNTIME_KERNELS_FUSEDPROGRAM_H
