//===- ElementwiseFunctors.h - per-element formulas of the CPU kernels -*- C++
//-*-===//
//
// Internal to runtime/backends/cpu: what each elementwise kernel computes
// per element, in float, shared by the one-op kernels (Elementwise.cpp) and
// the fused groups' evaluator (FusedElementwise.cpp), so that a group
// computes the unfused ops' bits. Binary ops are Op::f(a, b), unary ones
// Op::f(x), activation gradients g * Op::d(x). No calls or branches GCC
// cannot if-convert: the loops that inline them vectorize (FastMath.h).
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_BACKENDS_CPU_ELEMENTWISEFUNCTORS_H
#define DSC_RUNTIME_BACKENDS_CPU_ELEMENTWISEFUNCTORS_H

#include "runtime/backends/cpu/FastMath.h"

#include <cmath>

namespace dsc::rt::cpu::ew {

struct AddOp {
  static float f(float a, float b) { return a + b; }
};
struct SubOp {
  static float f(float a, float b) { return a - b; }
};
struct MulOp {
  static float f(float a, float b) { return a * b; }
};
struct DivOp {
  static float f(float a, float b) { return a / b; }
};
// NaN propagates from either side, as in numpy.
struct MinimumOp {
  static float f(float a, float b) { return ((a < b) | (a != a)) ? a : b; }
};
struct MaximumOp {
  static float f(float a, float b) { return ((a > b) | (a != a)) ? a : b; }
};
struct EqualOp {
  static float f(float a, float b) { return a == b ? 1.0f : 0.0f; }
};

struct NegOp {
  static float f(float x) { return -x; }
};
struct ExpOp {
  static float f(float x) { return fm::exp(x); }
};
struct LogOp {
  static float f(float x) { return std::log(x); }
};
struct TanhOp {
  static float f(float x) { return fm::tanh(x); }
};
struct SqrtOp {
  static float f(float x) { return std::sqrt(x); }
};
struct RsqrtOp {
  static float f(float x) { return 1.0f / std::sqrt(x); }
};
// NaN maps to 0, like the reference's x > 0 ? x : 0.
struct ReluOp {
  static float f(float x) { return x > 0 ? x : 0.0f; }
};
struct SiluOp {
  static float f(float x) { return x / (1.0f + fm::exp(-x)); }
};
// x Phi(x), Phi the standard normal CDF.
struct GeluErfOp {
  static float f(float x) {
    float gauss;
    return x * fm::normalCdf(x, gauss);
  }
};
// 0.5 x (1 + tanh(z)) = x sigmoid(2z), z = sqrt(2/pi) (x + 0.044715 x^3).
// In the negative tail the result is ~e^(2z), so -2z is handed to exp as a
// float pair hi + lo: rounding it to one float would cost |2z| ulp.
#if defined(__FMA__)
// The pair in float arithmetic, 16 lanes to a vector: products split
// exactly with FMA (a b = p + fma(a, b, -p)) and the sum with TwoSum, the
// constants as float pairs; -2z to ~2^-44 relative, which is what the
// double form gave exp (the same 2.4 ulp worst case over [-30, 30]) at
// 1.3-1.6x its speed.
inline float expOfMinus2z(float x, float &dz) {
  constexpr float kA = 0.044715f, kC = 0.797884560802865356f;
  constexpr float kALo = float(0.044715 - double(kA));
  constexpr float kCLo = float(0.79788456080286535588 - double(kC));
  const float x2 = x * x, x2Err = __builtin_fmaf(x, x, -x2);
  const float x3 = x2 * x, x3Err = __builtin_fmaf(x2, x, -x3) + x2Err * x;
  const float t = kA * x3; // a x^3 = t + tErr
  const float tErr = __builtin_fmaf(kA, x3, -t) + (kA * x3Err + kALo * x3);
  const float s = x + t; // x + a x^3 = s + sErr (TwoSum)
  const float sx = s - x;
  const float sErr = ((x - (s - sx)) + (t - sx)) + tErr;
  const float z = kC * s; // z = zHi + zErr
  const float zErr = __builtin_fmaf(kC, s, -z) + (kC * sErr + kCLo * s);
  dz = kC * __builtin_fmaf(3.0f * kA, x2, 1.0f);
  const float lo = -2.0f * zErr;
  return fm::expSum(-2.0f * z, lo == lo ? lo : 0.0f); // x = +-inf: lo NaN
}
#else
// Without FMA the products cannot be split exactly: z in double.
inline float expOfMinus2z(float x, float &dz) {
  double xd = x;
  double z = 0.79788456080286535588 * (xd + 0.044715 * xd * xd * xd);
  dz = float(0.79788456080286535588 * (1.0 + 3.0 * 0.044715 * xd * xd));
  float hi = float(-2.0 * z);
  float lo = float(-2.0 * z - double(hi));
  return fm::expSum(hi, lo == lo ? lo : 0.0f); // x = +-inf: lo is NaN
}
#endif
struct GeluTanhOp {
  static float f(float x) {
    float dz;
    return x / (1.0f + expOfMinus2z(x, dz));
  }
};

struct ReluGradOp {
  static float d(float x) { return x > 0 ? 1.0f : 0.0f; }
};
struct SiluGradOp {
  static float d(float x) {
    float s = fm::sigmoid(x);
    return s * (1.0f + x * (1.0f - s));
  }
};
struct SwigluGate {
  static float d(float x) { return SiluOp::f(x); }
};
// Phi(x) + x phi(x).
struct GeluErfGradOp {
  static float d(float x) {
    float gauss;
    float cdf = fm::normalCdf(x, gauss);
    return cdf + x * fm::kInvSqrt2Pi * gauss;
  }
};
// d/dx [x s(2z)] = s + 2 x s (1 - s) z'.
struct GeluTanhGradOp {
  static float d(float x) {
    float dz;
    float s = 1.0f / (1.0f + expOfMinus2z(x, dz));
    return s + 2.0f * x * s * (1.0f - s) * dz;
  }
};

} // namespace dsc::rt::cpu::ew

#endif // DSC_RUNTIME_BACKENDS_CPU_ELEMENTWISEFUNCTORS_H
