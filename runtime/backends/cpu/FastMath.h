//===- FastMath.h - vectorizable float transcendentals ----------*- C++ -*-===//
//
// exp, tanh, sigmoid and the normal CDF in float, written without branches
// or library calls so that GCC vectorizes the loops that inline them. Each
// is accurate to a few ulp over the float range (the kernel tests compare
// them with the float64 reference).
//
// The polynomial coefficients were fitted for dsc with mpmath (Chebyshev
// interpolation at 40 digits, mpmath.chebyfit) on the intervals named in
// each comment; the fitted relative errors are quoted there.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_BACKENDS_CPU_FASTMATH_H
#define DSC_RUNTIME_BACKENDS_CPU_FASTMATH_H

#include <cmath>
#include <cstdint>
#include <cstring>

// Two builds of these functions, in inline namespaces of their own so that
// a program may link both: by default the polynomials' a * b + c are left
// to the compiler's contraction (as in every kernel but the elementwise
// ones); with DSC_FM_EXPLICIT_FMA, set for the elementwise kernels (built
// with -ffp-contract=off, runtime/backends/cpu/CMakeLists.txt) they and
// exp's argument reduction are explicit FMAs, which round alike in vector loops
// and scalar remainders.
#ifdef DSC_FM_EXPLICIT_FMA
#define DSC_FM_VARIANT explicit_fma
#else
#define DSC_FM_VARIANT contracted
#endif

namespace dsc::rt::cpu::fm {
inline namespace DSC_FM_VARIANT {

/// a * b + c: one FMA in the explicit build where the CPU has FMA, else
/// the expression as written.
inline float madd(float a, float b, float c) {
#if defined(DSC_FM_EXPLICIT_FMA) && defined(__FMA__)
  return __builtin_fmaf(a, b, c);
#else
  return a * b + c;
#endif
}

inline int32_t bitsOf(float x) {
  int32_t i;
  std::memcpy(&i, &x, sizeof i);
  return i;
}
inline float floatOf(int32_t i) {
  float x;
  std::memcpy(&x, &i, sizeof x);
  return x;
}

/// e^(a + b) for a small correction b (|b| << 1 or 0): the reduction
/// subtracts n ln2 from a exactly before b is added, so a's magnitude does
/// not cost b its precision.
inline float expSum(float a, float b) {
  float s = a + b;
  // Adding 1.5 * 2^23 rounds to an integer; the low bits of the sum are n.
  // Outside [-104, 89] the integer arithmetic wraps (unsigned, so defined)
  // and the result is replaced at the end, like NaN: no clamping branch,
  // which GCC would thread into control flow that blocks vectorization.
  const float kShift = 12582912.0f;
  float t = madd(s, 1.44269504088896341f, kShift);
  float n = t - kShift;
  uint32_t ni = uint32_t(bitsOf(t)) - uint32_t(bitsOf(kShift));
  // ln 2 = kLn2Hi + kLn2Lo with kLn2Hi's low 12 bits zero, so n * kLn2Hi is
  // exact for |n| < 2^12.
  const float kLn2Hi = 0.693145751953125f;
  const float kLn2Lo = 1.42860676533018e-06f;
#ifdef DSC_FM_EXPLICIT_FMA
  float r = madd(-n, kLn2Lo, madd(-n, kLn2Hi, a)) + b;
#else
  float r = (a - n * kLn2Hi - n * kLn2Lo) + b;
#endif
  // e^r on [-ln2/2, ln2/2], relative error 2.5e-9.
  float p = 1.394110843e-03f;
  p = madd(p, r, 8.375126398e-03f);
  p = madd(p, r, 4.166635290e-02f);
  p = madd(p, r, 1.666641551e-01f);
  p = madd(p, r, 5.000000047e-01f);
  p = madd(p, r, 1.000000038e+00f);
  p = madd(p, r, 1.0f);
  // 2^n as two factors so that both stay normal for n in [-150, 128]; the
  // product overflows to inf or underflows through the subnormals.
  uint32_t n1 = uint32_t(int32_t(ni) >> 1), n2 = ni - n1;
  float y = p * floatOf(int32_t((n1 + 127u) << 23)) *
            floatOf(int32_t((n2 + 127u) << 23));
  y = s > 89.0f ? HUGE_VALF : y;
  y = s < -104.0f ? 0.0f : y;
  return s != s ? s : y;
}

inline float exp(float x) { return expSum(x, 0.0f); }

/// 1 / (1 + e^-x).
inline float sigmoid(float x) { return 1.0f / (1.0f + exp(-x)); }

inline float tanh(float x) {
  float ax = std::fabs(x);
  // tanh(x)/x as a polynomial in x^2 on [0, 0.625^2], relative error 1.5e-10.
  float u = x * x;
  float p = 2.127435363e-03f;
  p = madd(p, u, -8.157853372e-03f);
  p = madd(p, u, 2.169126532e-02f);
  p = madd(p, u, -5.394458468e-02f);
  p = madd(p, u, 1.333318175e-01f);
  p = madd(p, u, -3.333332966e-01f);
  p = madd(p, u, 9.999999999e-01f);
  float small = x * p;
  // 1 - 2 / (e^2|x| + 1) loses at most a bit to cancellation above 0.625.
  float big = 1.0f - 2.0f / (exp(2.0f * ax) + 1.0f);
  big = x < 0 ? -big : big;
  return ax < 0.625f ? small : big;
}

/// Phi(x) = P(N(0,1) <= x), and `gauss` = e^(-x^2/2).
inline float normalCdf(float x, float &gauss) {
  float ax = std::fabs(x);
  ax = ax > 20.0f ? 20.0f : ax; // Phi(-20) is far below the float range
  // x^2/2 = hi + lo with hi exact: xh keeps the top 12 significant bits.
  float xh = floatOf(bitsOf(ax) & int32_t(0xFFFFF000));
  float hi = 0.5f * xh * xh;
  float lo = 0.5f * (ax - xh) * (ax + xh);
  gauss = expSum(-hi, -lo);
  // |x| <= 1: Phi(x) = 1/2 + x P(x^2), P fitted on [0, 1] (7.5e-10).
  float u = x * x;
  float p = -7.660538171e-06f;
  p = madd(p, u, 1.135022962e-04f);
  p = madd(p, u, -1.186343989e-03f);
  p = madd(p, u, 9.973328481e-03f);
  p = madd(p, u, -6.649036057e-02f);
  p = madd(p, u, 3.989422801e-01f);
  float center = madd(x, p, 0.5f);
  // |x| > 1: Phi(-|x|) = e^(-x^2/2) t S(t) with t = 1 / (1 + |x|/2) and S
  // fitted on [0, 2/3] (9e-9).
  float t = 1.0f / madd(0.5f, ax, 1.0f);
  float q = -7.703975210e-02f;
  q = madd(q, t, 4.398607019e-01f);
  q = madd(q, t, -9.512239947e-01f);
  q = madd(q, t, 9.549006937e-01f);
  q = madd(q, t, -3.562960719e-01f);
  q = madd(q, t, -3.579496554e-02f);
  q = madd(q, t, -7.336031407e-02f);
  q = madd(q, t, 5.078679717e-02f);
  q = madd(q, t, 1.495641829e-01f);
  q = madd(q, t, 1.994717917e-01f);
  q = madd(q, t, 1.994711384e-01f);
  float tail = gauss * t * q;
  float outer = x < 0 ? tail : 1.0f - tail;
  return ax <= 1.0f ? center : outer;
}

/// y[j] = e^(x[j] - shift) for j in [0, n) (y may be x), returning their
/// sum accumulated in double over 16 lanes; the order depends on n only.
inline double expShifted(const float *x, float *y, int64_t n, float shift) {
  double acc[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  int64_t j = 0;
  for (; j + 16 <= n; j += 16)
    for (int k = 0; k < 16; ++k) {
      float e = exp(x[j + k] - shift);
      y[j + k] = e;
      acc[k] += e;
    }
  for (int k = 0; j < n; ++j, ++k) {
    float e = exp(x[j] - shift);
    y[j] = e;
    acc[k] += e;
  }
  double sum = 0;
  for (int k = 0; k < 16; ++k)
    sum += acc[k];
  return sum;
}

/// 1 / sqrt(2 pi).
constexpr float kInvSqrt2Pi = 0.398942280401432678f;
/// sqrt(2 / pi), for GELU's tanh form.
constexpr float kSqrt2OverPi = 0.797884560802865356f;

} // namespace DSC_FM_VARIANT
} // namespace dsc::rt::cpu::fm

#endif // DSC_RUNTIME_BACKENDS_CPU_FASTMATH_H
