//===- HalfElementwise.cpp - 16-bit elementwise kernels as programs -------===//
//
// The 16-bit column of an elementwise kernel widens its operands into f32
// copies a tile at a time (WideningTiles.cpp): three passes over the tile
// besides the kernel's own, and copies of 64 KB that leave L1. A
// ds.fused_elementwise program of one instruction (two for ds.bias_gelu)
// computes the same element from the same widened inputs with the same
// formula (ElementwiseFunctors.h), rounds it to the output's dtype once, and
// reads and writes the 16-bit operands directly in 4 KB tiles
// (FusedElementwise.cpp): the widened kernel's bits, measured ~0.7x its
// time on a cold [8, 128, 256] bf16 add (bench/RESULTS.md). Shapes the
// program does not broadcast (a scalar, a non-trailing broadcast) keep the
// widened path, which also reports malformed operands.
//
//===----------------------------------------------------------------------===//
#include "runtime/backends/cpu/CpuCommon.h"
#include "runtime/backends/cpu/Widening.h"

namespace dsc::rt::cpu {
namespace {

namespace fp = dsc::rt::fused;
using Op = fp::Opcode;

/// A broadcast input shorter than this reads too few elements at a time for
/// the program's loads to pay (a scalar would be copied element by element).
constexpr int64_t kMinBroadcast = 16;

/// The rounding of an operand the caller has found to be f32, f16 or bf16.
fp::Rounding roundingOf(DType t) {
  fp::Rounding r = fp::Rounding::F32;
  fp::roundingOf(t, r);
  return r;
}

/// Whether `in` has `out`'s shape or, where `broadcastAllowed`, its
/// trailing dims (the program's broadcast along leading dims) with at least
/// kMinBroadcast elements.
bool readsAsProgramInput(const TensorRef &in, const TensorRef &out,
                         bool broadcastAllowed) {
  if (sameShape(in, out))
    return true;
  return broadcastAllowed && in.numel() >= kMinBroadcast &&
         isTrailingShapeOf(in, out);
}

/// The opcode of a one-instruction kernel (FusedProgram.h's table), and
/// whether its inputs may broadcast (binary arithmetic) or must match the
/// output (activations and their gradients). False for a kernel without
/// one, and for ds.cast, which has its own kernel (Cast.cpp).
bool opcodeOf(std::string_view kernel, const KernelArgs &args, Op &op,
              bool &broadcasts) {
  const fp::KernelOpcode *row = fp::kernelOpcodeOf(kernel);
  if (!row || row->op == Op::Round)
    return false;
  bool tanhForm = false;
  if (row->op != row->tanhOp) { // the GELU pair: its approximation attribute
    std::string ignored;
    if (args.numIntAttrs < 1 ||
        !checkGeluApprox(ignored, args.intAttrs[0], tanhForm))
      return false;
  }
  op = tanhForm ? row->tanhOp : row->op;
  broadcasts = row->broadcasts;
  return true;
}

/// ds.bias_gelu (x, bias) -> (x + bias, gelu(x + bias)) as two
/// instructions, the sum rounded to its output's dtype before the GELU
/// reads it, as runWidenedPair's two steps round it.
bool biasGeluProgram(const KernelArgs &args, fp::Program &program) {
  std::string ignored;
  bool tanhForm = false;
  if (args.numInputs != 2 || args.numOutputs != 2 || args.numIntAttrs < 1 ||
      !checkGeluApprox(ignored, args.intAttrs[0], tanhForm))
    return false;
  const TensorRef &sum = args.outputs[0];
  if (!sameShape(args.outputs[1], sum) ||
      !readsAsProgramInput(args.inputs[0], sum, false) ||
      !readsAsProgramInput(args.inputs[1], sum, true))
    return false;
  program.numInputs = 2;
  program.code = {{Op::Add, 0, 1, roundingOf(sum.dtype)},
                  {tanhForm ? Op::GeluTanh : Op::GeluErf, 2, -1,
                   roundingOf(args.outputs[1].dtype)}};
  program.outputs = {2, 3};
  return true;
}

/// The program computing `kernel` on `args`, when there is one.
bool programOf(std::string_view kernel, const KernelArgs &args,
               fp::Program &program) {
  if (kernel == "ds.bias_gelu")
    return biasGeluProgram(args, program);
  Op op;
  bool broadcasts = false;
  if (!opcodeOf(kernel, args, op, broadcasts) || args.numOutputs != 1)
    return false;
  const int arity = fp::arityOf(op);
  const TensorRef &out = args.outputs[0];
  if (int(args.numInputs) != arity || out.numel() == 0)
    return false;
  for (int i = 0; i < arity; ++i)
    if (!readsAsProgramInput(args.inputs[i], out, broadcasts))
      return false;
  program.numInputs = arity;
  program.code = {{op, 0, arity == 2 ? 1 : -1, roundingOf(out.dtype)}};
  program.outputs = {arity};
  return true;
}

} // namespace

bool runHalfElementwise(std::string_view kernel, const KernelArgs &args) {
  fused::Program program;
  if (!programOf(kernel, args, program))
    return false;
  runFusedProgram(program, args);
  return true;
}

} // namespace dsc::rt::cpu
