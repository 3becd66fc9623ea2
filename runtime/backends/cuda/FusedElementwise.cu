//===- FusedElementwise.cu - a fused elementwise group as one kernel ------===//
//
// ds.fused_elementwise's program (runtime/kernels/FusedProgram.h) travels
// to the GPU by value in the launch's parameters; each thread of a
// grid-stride loop evaluates it for one element: inputs loaded as float
// (an input smaller than the group is broadcast along the leading dims,
// index i % count), each instruction with the one-op kernels' formulas
// (ElementwiseMath.cuh), each value rounded to its unfused storage, the
// outputs stored in their dtypes. The values live in a per-thread array
// indexed at run time, i.e. local memory: one pass over HBM at the cost of
// L1 traffic; a group specialised at plan load (NVRTC) would keep them in
// registers. A program with a ReduceSum runs as a reduction walk
// (ReduceWalk.cuh) whose source evaluates the program at each element,
// stores its other outputs and hands the walk the summed value: the
// unfused ds.reduce_sum's walk, so its order and bits.
//
//===----------------------------------------------------------------------===//
#include "runtime/backends/cuda/CudaKernels.h"
#include "runtime/backends/cuda/DeviceSupport.cuh"
#include "runtime/backends/cuda/ElementwiseMath.cuh"
#include "runtime/backends/cuda/ReduceWalk.cuh"
#include "runtime/kernels/FusedProgram.h"

namespace dsc::rt::cuda {
namespace {

using namespace ew;
namespace fp = dsc::rt::fused;
constexpr int kMax = fp::kMaxValues;

/// How an instruction runs on the device: binary(code, a, b),
/// unary(code, a, b) (b is g for the gradients and up for SwiGLU), or a
/// copy (a ds.cast: only its rounding), or the operand of the sum (not
/// rounded: the walk adds it, and the store rounds the total).
enum Kind : int8_t { kBinary, kUnary, kCopy, kSumOperand };

struct DeviceProgram {
  int numInputs = 0, numCode = 0, numOutputs = 0;
  int8_t kind[kMax], code[kMax], a[kMax], b[kMax], rounding[kMax];
  int8_t outValue[kMax];
  int8_t sumValue = -1; ///< the ReduceSum's value, -1 without one
  Storage inStorage[kMax], outStorage[kMax];
  const void *in[kMax];
  int64_t count[kMax];
  void *out[kMax];
};

bool deviceInstruction(fp::Opcode op, int8_t &kind, int8_t &code) {
  using O = fp::Opcode;
  static const struct {
    O op;
    Kind kind;
    int code;
  } kTable[] = {
      {O::Add, kBinary, kAdd},
      {O::Sub, kBinary, kSub},
      {O::Mul, kBinary, kMul},
      {O::Div, kBinary, kDiv},
      {O::Minimum, kBinary, kMinimum},
      {O::Maximum, kBinary, kMaximum},
      {O::Neg, kUnary, kNeg},
      {O::Exp, kUnary, kExp},
      {O::Log, kUnary, kLog},
      {O::Tanh, kUnary, kTanh},
      {O::Sqrt, kUnary, kSqrt},
      {O::Rsqrt, kUnary, kRsqrt},
      {O::Relu, kUnary, kRelu},
      {O::Silu, kUnary, kSilu},
      {O::GeluErf, kUnary, kGeluErf},
      {O::GeluTanh, kUnary, kGeluTanh},
      {O::ReluGrad, kUnary, kReluGrad},
      {O::SiluGrad, kUnary, kSiluGrad},
      {O::GeluErfGrad, kUnary, kGeluErfGrad},
      {O::GeluTanhGrad, kUnary, kGeluTanhGrad},
      {O::Swiglu, kUnary, kSwiglu},
      {O::Round, kCopy, 0},
      {O::ReduceSum, kSumOperand, 0},
  };
  for (const auto &row : kTable)
    if (row.op == op) {
      kind = row.kind;
      code = int8_t(row.code);
      return true;
    }
  return false;
}

__device__ __forceinline__ float roundTo(int8_t rounding, float v) {
  if (rounding == int8_t(fp::Rounding::BF16))
    return __bfloat162float(__float2bfloat16_rn(v));
  if (rounding == int8_t(fp::Rounding::F16))
    return __half2float(__float2half_rn(v));
  return v;
}

/// Evaluates the program at element i into `value` and stores every output
/// but the sum's.
__device__ __forceinline__ void evaluateAt(const DeviceProgram &p, int64_t i,
                                           float *value) {
  for (int k = 0; k < p.numInputs; ++k)
    value[k] = load(p.in[k], p.inStorage[k], i % p.count[k]);
  for (int k = 0; k < p.numCode; ++k) {
    const float a = value[p.a[k]];
    const float b = p.b[k] < 0 ? 0.0f : value[p.b[k]];
    float v = a;
    if (p.kind[k] == kBinary)
      v = binary(BinaryOp(p.code[k]), a, b);
    else if (p.kind[k] == kUnary)
      v = unary(UnaryOp(p.code[k]), a, b);
    value[p.numInputs + k] =
        p.kind[k] == kSumOperand ? v : roundTo(p.rounding[k], v);
  }
  for (int o = 0; o < p.numOutputs; ++o)
    if (p.outValue[o] != p.sumValue)
      store(p.out[o], p.outStorage[o], i, value[p.outValue[o]]);
}

__global__ void fusedElementwiseKernel(const DeviceProgram p, int64_t n) {
  DSC_GRID_STRIDE(i, n) {
    float value[kMax];
    evaluateAt(p, i, value);
  }
}

/// The group's elements for a reduction walk: element i's summed value,
/// its other outputs stored on the way (the walk reads each element once).
struct ProgramSource {
  DeviceProgram p;
  __device__ float operator()(int64_t i) const {
    float value[kMax];
    evaluateAt(p, i, value);
    return value[p.sumValue];
  }
};

/// The sum's walk: the group reduced over its leading dims down to the
/// sum's output, as ds.reduce_sum walks the stored value.
bool launchSum(const KernelArgs &args, const fp::Program &program,
               const DeviceProgram &p, std::string &err) {
  const TensorRef &group = fusedGroupOf(args, program);
  const TensorRef *sum = nullptr;
  for (int o = 0; o < p.numOutputs; ++o)
    if (program.outputs[o] == p.sumValue)
      sum = &args.outputs[o];
  bool reduced[kMaxRank] = {};
  for (int d = 0; d < group.rank - sum->rank; ++d)
    reduced[d] = true;
  const int64_t outN = sum->numel();
  if (outN == 0)
    return true;
  return reduce::launchReduce(
      args, reduce::kSum, reduce::walkOf(group, reduced), outN,
      group.numel() / outN, ProgramSource{p}, sum->data, storage(*sum), err);
}

} // namespace

bool fusedElementwiseBody(const KernelArgs &args, std::string &err) {
  fp::Program program;
  if (!checkFusedElementwise(args, program, err))
    return false;
  DeviceProgram p;
  p.numInputs = program.numInputs;
  p.numCode = int(program.code.size());
  p.numOutputs = int(program.outputs.size());
  for (int k = 0; k < p.numCode; ++k) {
    const fp::Instruction &instr = program.code[k];
    if (!deviceInstruction(instr.op, p.kind[k], p.code[k]))
      return fail(err,
                  "no device instruction for "
                  "opcode ",
                  std::to_string(int64_t(instr.op)));
    p.a[k] = int8_t(instr.a);
    p.b[k] = int8_t(instr.b);
    p.rounding[k] = int8_t(instr.rounding);
  }
  for (int i = 0; i < p.numInputs; ++i) {
    p.in[i] = args.inputs[i].data;
    p.inStorage[i] = storage(args.inputs[i]);
    p.count[i] = std::max<int64_t>(args.inputs[i].numel(), 1);
  }
  for (int o = 0; o < p.numOutputs; ++o) {
    p.out[o] = args.outputs[o].data;
    p.outStorage[o] = storage(args.outputs[o]);
    p.outValue[o] = int8_t(program.outputs[o]);
  }
  p.sumValue = int8_t(fp::reductionOf(program));
  if (p.sumValue >= 0)
    return launchSum(args, program, p, err);
  const int64_t n = args.outputs[0].numel();
  if (n == 0)
    return true;
  fusedElementwiseKernel<<<gridFor(n), kBlock, 0, streamOf(args)>>>(p, n);
  return launched(err);
}

} // namespace dsc::rt::cuda
