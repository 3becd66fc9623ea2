//===- Elementwise.cu - binary and unary ops, activation gradients --------===//
//
// One thread per output element in a grid-stride loop. Operands may be f32,
// f16 or bf16 each (loaded as float, the result rounded once). Binary ops
// broadcast through the same BroadcastLayout as the CPU backend: the merged
// dims and strides travel by value and each thread turns its flat index
// into the two input offsets (the common cases, same shape or a scalar
// side, are rank 1 and cost one multiply). The activation formulas are the
// CPU backend's (cpu/Elementwise.cpp), in CUDA's float math. An output may
// be an input buffer: each thread reads its element before writing it.
//
//===----------------------------------------------------------------------===//
#include "runtime/backends/cuda/CudaKernels.h"
#include "runtime/backends/cuda/DeviceSupport.cuh"
#include "runtime/backends/cuda/ElementwiseMath.cuh"
#include "runtime/backends/cuda/IndexMath.h"

#include <cmath>

namespace dsc::rt::cuda {
namespace {

using namespace ew;

//===--- Binary -----------------------------------------------------------===//

struct Operands {
  const void *a, *b;
  void *out;
  Storage sa, sb, so;
};

template <BinaryOp Op>
__global__ void binaryKernel(Operands o, BroadcastLayout l, int64_t n) {
  DSC_GRID_STRIDE(i, n) {
    int64_t ia = 0, ib = 0, rem = i;
    for (int d = l.rank - 1; d >= 0; --d) {
      int64_t idx = rem % l.shape[d];
      rem /= l.shape[d];
      ia += idx * l.strides[0][d];
      ib += idx * l.strides[1][d];
    }
    store(o.out, o.so, i, binary(Op, load(o.a, o.sa, ia), load(o.b, o.sb, ib)));
  }
}

// The same where every index and offset fits in 31 bits (IndexMath.h).
template <BinaryOp Op>
__global__ void binaryNarrowKernel(Operands o, NarrowLayout l, uint32_t n) {
  // n < 2^31 and the stride < 2^29: i cannot wrap.
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += gridDim.x * blockDim.x) {
    uint32_t ia, ib;
    l.offsets(i, ia, ib);
    store(o.out, o.so, i, binary(Op, load(o.a, o.sa, ia), load(o.b, o.sb, ib)));
  }
}

template <BinaryOp Op>
bool binaryBody(const KernelArgs &args, std::string &err) {
  if (!expectFloatStorage(args, err))
    return false;
  const TensorRef &a = args.inputs[0], &b = args.inputs[1];
  const TensorRef &out = args.outputs[0];
  if (!checkBroadcastBinary(err, a, b, out))
    return false;
  const int64_t n = out.numel();
  if (n == 0)
    return true;
  Operands o{a.data, b.data, out.data, storage(a), storage(b), storage(out)};
  const BroadcastLayout l = broadcastLayout(out, &a, &b);
  NarrowLayout narrow;
  if (narrowLayout(l, n, narrow))
    binaryNarrowKernel<Op>
        <<<gridFor(n), kBlock, 0, streamOf(args)>>>(o, narrow, uint32_t(n));
  else
    binaryKernel<Op><<<gridFor(n), kBlock, 0, streamOf(args)>>>(o, l, n);
  return launched(err);
}

//===--- Unary and activation gradients -----------------------------------===//

template <UnaryOp Op>
__global__ void unaryKernel(const void *x, Storage sx, const void *g,
                            Storage sg, void *out, Storage so, int64_t n) {
  DSC_GRID_STRIDE(i, n) {
    float gi = g ? load(g, sg, i) : 0.0f;
    store(out, so, i, unary(Op, load(x, sx, i), gi));
  }
}

template <UnaryOp Op> bool unaryBody(const KernelArgs &args, std::string &err) {
  if (!expectFloatStorage(args, err) || !checkSameShapes(args, err))
    return false;
  const TensorRef &x = args.inputs[0], &out = args.outputs[0];
  const TensorRef *g = args.numInputs > 1 ? &args.inputs[1] : nullptr;
  const int64_t n = out.numel();
  if (n == 0)
    return true;
  unaryKernel<Op><<<gridFor(n), kBlock, 0, streamOf(args)>>>(
      x.data, storage(x), g ? g->data : nullptr, g ? storage(*g) : kF32,
      out.data, storage(out), n);
  return launched(err);
}

// x + bias over rows, then GELU: both outputs in one pass. The sum is
// rounded to its own dtype before GELU reads it, so the fused pair gives
// exactly what ds.add and ds.gelu give unfused (as the CPU's 16-bit pair).
template <UnaryOp Op>
__global__ void biasActivationKernel(const void *x, Storage sx,
                                     const void *bias, Storage sb, void *sum,
                                     Storage ss, void *out, Storage so,
                                     int64_t cols, int64_t n) {
  DSC_GRID_STRIDE(i, n) {
    float v = load(x, sx, i) + load(bias, sb, i % cols);
    store(sum, ss, i, v);
    store(out, so, i, unary(Op, load(sum, ss, i), 0.0f));
  }
}

template <UnaryOp Op>
bool biasActivation(const KernelArgs &args, std::string &err) {
  const TensorRef &x = args.inputs[0], &bias = args.inputs[1];
  const TensorRef &sum = args.outputs[0], &out = args.outputs[1];
  int64_t rows = 0, cols = 0;
  if (!expectFloatStorage(args, err) ||
      !checkBiasRows(err, x, bias, sum, out, rows, cols))
    return false;
  const int64_t n = rows * cols;
  if (n == 0)
    return true;
  biasActivationKernel<Op><<<gridFor(n), kBlock, 0, streamOf(args)>>>(
      x.data, storage(x), bias.data, storage(bias), sum.data, storage(sum),
      out.data, storage(out), cols, n);
  return launched(err);
}

__global__ void overflowGuardKernel(const void *scale, Storage ss,
                                    const void *norm, Storage sn, void *out,
                                    Storage so) {
  float s = load(scale, ss, 0), nv = load(norm, sn, 0);
  store(out, so, 0, isfinite(nv) ? s : __int_as_float(0x7fc00000));
}

bool scalarShape(std::string &err, const TensorRef &t, const char *role) {
  if (t.numel() != 1)
    return fail(err, role, " must hold one value, got shape ", shapeStr(t));
  return true;
}

} // namespace

bool addBody(const KernelArgs &a, std::string &e) {
  return binaryBody<kAdd>(a, e);
}
bool subBody(const KernelArgs &a, std::string &e) {
  return binaryBody<kSub>(a, e);
}
bool mulBody(const KernelArgs &a, std::string &e) {
  return binaryBody<kMul>(a, e);
}
bool divBody(const KernelArgs &a, std::string &e) {
  return binaryBody<kDiv>(a, e);
}
bool minimumBody(const KernelArgs &a, std::string &e) {
  return binaryBody<kMinimum>(a, e);
}
bool maximumBody(const KernelArgs &a, std::string &e) {
  return binaryBody<kMaximum>(a, e);
}
bool equalBody(const KernelArgs &a, std::string &e) {
  return binaryBody<kEqual>(a, e);
}
bool negBody(const KernelArgs &a, std::string &e) {
  return unaryBody<kNeg>(a, e);
}
bool expBody(const KernelArgs &a, std::string &e) {
  return unaryBody<kExp>(a, e);
}
bool logBody(const KernelArgs &a, std::string &e) {
  return unaryBody<kLog>(a, e);
}
bool tanhBody(const KernelArgs &a, std::string &e) {
  return unaryBody<kTanh>(a, e);
}
bool sqrtBody(const KernelArgs &a, std::string &e) {
  return unaryBody<kSqrt>(a, e);
}
bool rsqrtBody(const KernelArgs &a, std::string &e) {
  return unaryBody<kRsqrt>(a, e);
}
bool reluBody(const KernelArgs &a, std::string &e) {
  return unaryBody<kRelu>(a, e);
}
bool siluBody(const KernelArgs &a, std::string &e) {
  return unaryBody<kSilu>(a, e);
}
bool geluBody(const KernelArgs &a, std::string &e) {
  bool tanhForm = false;
  if (!checkGeluApprox(e, a.intAttrs[0], tanhForm))
    return false;
  return tanhForm ? unaryBody<kGeluTanh>(a, e) : unaryBody<kGeluErf>(a, e);
}
bool reluGradBody(const KernelArgs &a, std::string &e) {
  return unaryBody<kReluGrad>(a, e);
}
bool siluGradBody(const KernelArgs &a, std::string &e) {
  return unaryBody<kSiluGrad>(a, e);
}
bool swigluBody(const KernelArgs &a, std::string &e) {
  return unaryBody<kSwiglu>(a, e);
}
bool geluGradBody(const KernelArgs &a, std::string &e) {
  bool tanhForm = false;
  if (!checkGeluApprox(e, a.intAttrs[0], tanhForm))
    return false;
  return tanhForm ? unaryBody<kGeluTanhGrad>(a, e)
                  : unaryBody<kGeluErfGrad>(a, e);
}
bool biasGeluBody(const KernelArgs &a, std::string &e) {
  bool tanhForm = false;
  if (!checkGeluApprox(e, a.intAttrs[0], tanhForm))
    return false;
  return tanhForm ? biasActivation<kGeluTanh>(a, e)
                  : biasActivation<kGeluErf>(a, e);
}

bool overflowGuardBody(const KernelArgs &a, std::string &e) {
  if (!expectFloatStorage(a, e) || !scalarShape(e, a.inputs[0], "scale") ||
      !scalarShape(e, a.inputs[1], "norm") ||
      !scalarShape(e, a.outputs[0], "the output"))
    return false;
  overflowGuardKernel<<<1, 1, 0, streamOf(a)>>>(
      a.inputs[0].data, storage(a.inputs[0]), a.inputs[1].data,
      storage(a.inputs[1]), a.outputs[0].data, storage(a.outputs[0]));
  return launched(e);
}

} // namespace dsc::rt::cuda
