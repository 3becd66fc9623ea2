//===- ElementwiseMath.cuh - per-element formulas of the CUDA kernels -*- CUDA
//-*-===//
//
// Internal to runtime/backends/cuda: what each elementwise kernel computes
// per element, shared by the one-op kernels (Elementwise.cu) and the fused
// groups (FusedElementwise.cu), so that a group computes the unfused ops'
// bits. The formulas are the CPU backend's (cpu/ElementwiseFunctors.h) in
// CUDA's float math.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_BACKENDS_CUDA_ELEMENTWISEMATH_CUH
#define DSC_RUNTIME_BACKENDS_CUDA_ELEMENTWISEMATH_CUH

#include <cmath>
#include <cstdint>

namespace dsc::rt::cuda::ew {

enum BinaryOp : int { kAdd, kSub, kMul, kDiv, kMinimum, kMaximum, kEqual };

__device__ __forceinline__ float binary(BinaryOp op, float a, float b) {
  switch (op) {
  case kAdd:
    return a + b;
  case kSub:
    return a - b;
  case kMul:
    return a * b;
  case kDiv:
    return a / b;
  case kMinimum: // NaN propagates from either side, as in numpy
    return (a < b || a != a) ? a : b;
  case kMaximum:
    return (a > b || a != a) ? a : b;
  default:
    return a == b ? 1.0f : 0.0f;
  }
}

enum UnaryOp : int {
  kNeg,
  kExp,
  kLog,
  kTanh,
  kSqrt,
  kRsqrt,
  kRelu,
  kSilu,
  kGeluErf,
  kGeluTanh,
  // (x, g) -> g * act'(x)
  kReluGrad,
  kSiluGrad,
  kGeluErfGrad,
  kGeluTanhGrad,
  // (gate, up) -> silu(gate) * up
  kSwiglu,
};

constexpr float kInvSqrt2Pi = 0.39894228040143267794f;

// exp(-2z) for tanh-GELU's z = sqrt(2/pi) (x + 0.044715 x^3), with z formed
// in double and its rounding error carried to first order: in the negative
// tail the result is ~e^(2z), and a rounded 2z would cost |2z| ulp.
__device__ __forceinline__ float expMinus2z(float x, float &dz) {
  double xd = x;
  double z = 0.79788456080286535588 * (xd + 0.044715 * xd * xd * xd);
  dz = float(0.79788456080286535588 * (1.0 + 3.0 * 0.044715 * xd * xd));
  float hi = float(-2.0 * z);
  float lo = float(-2.0 * z - double(hi));
  float e = expf(hi);
  // x = +-inf: lo is NaN; e = inf (x below about -9.7): e * lo is NaN or inf
  return lo == lo && e < INFINITY ? e + e * lo : e;
}

// e^(-x^2/2) with x^2/2 split as hi + lo, hi exact (xh keeps x's top 12
// significant bits): a rounded x^2/2 would cost x^2/2 ulp in the tails.
// |x| is capped at 20, where the result is long zero, as on the CPU.
__device__ __forceinline__ float gaussian(float x) {
  const float ax = fminf(fabsf(x), 20.0f);
  const float xh = __int_as_float(__float_as_int(ax) & int(0xFFFFF000));
  const float hi = 0.5f * xh * xh, lo = 0.5f * (ax - xh) * (ax + xh);
  const float e = expf(-hi);
  return e - e * lo;
}

__device__ __forceinline__ float sigmoid(float x) {
  return 1.0f / (1.0f + expf(-x));
}

__device__ __forceinline__ float unary(UnaryOp op, float x, float g) {
  float dz;
  switch (op) {
  case kNeg:
    return -x;
  case kExp:
    return expf(x);
  case kLog:
    return logf(x);
  case kTanh:
    return tanhf(x);
  case kSqrt:
    return sqrtf(x);
  case kRsqrt:
    return 1.0f / sqrtf(x); // not rsqrtf: its 2 ulp would differ from CPU
  case kRelu:
    return x > 0 ? x : 0.0f; // NaN maps to 0, like the reference
  case kSilu:
    return x / (1.0f + expf(-x));
  case kGeluErf: // normcdff(x), not erfcf(-x / sqrt 2): the rounded
    // quotient would cost about x^2 ulp in the negative tail
    return x * normcdff(x);
  case kGeluTanh:
    return x / (1.0f + expMinus2z(x, dz));
  case kReluGrad:
    return g * (x > 0 ? 1.0f : 0.0f);
  case kSwiglu:
    return g * (x / (1.0f + expf(-x)));
  case kSiluGrad: {
    float s = sigmoid(x);
    return g * (s * (1.0f + x * (1.0f - s)));
  }
  case kGeluErfGrad:
    return g * (normcdff(x) + x * kInvSqrt2Pi * gaussian(x));
  default: { // kGeluTanhGrad: d/dx [x s(2z)] = s + 2 x s (1 - s) z'
    float s = 1.0f / (1.0f + expMinus2z(x, dz));
    return g * (s + 2.0f * x * s * (1.0f - s) * dz);
  }
  }
}

} // namespace dsc::rt::cuda::ew

#endif // DSC_RUNTIME_BACKENDS_CUDA_ELEMENTWISEMATH_CUH
