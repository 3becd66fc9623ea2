//===- Cast.cpp - ds.cast between float formats, ds.copy, ds.fill --------===//
//
// ds.cast converts between f64, f32, f16 and bf16, rounding to nearest even
// when narrowing, exactly once: f64 goes to f16/bf16 directly rather than
// through f32 (two roundings can differ from one at a near-tie). f16 uses
// the compiler's _Float16 (F16C instructions where the CPU has them); bf16
// is the upper half of an f32.
//
//===----------------------------------------------------------------------===//

#include "runtime/backends/cpu/Convert.h"
#include "runtime/backends/cpu/CpuCommon.h"
#include "runtime/core/Half.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace dsc::rt::cpu {
namespace {

constexpr int64_t kGrain = 1 << 16;

uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

/// x rounded to the nearest value with `mant` stored mantissa bits and
/// normal exponents in [emin, emax] (ties to even; past the largest finite
/// value it is inf). The result is exact in every wider format.
double roundToFormat(double x, int mant, int emin, int emax) {
  if (x == 0 || !std::isfinite(x))
    return x;
  int e;
  std::frexp(x, &e); // |x| in [2^(e-1), 2^e)
  int quantum = std::max(e - 1, emin) - mant;
  double y = std::ldexp(std::nearbyint(std::ldexp(x, -quantum)), quantum);
  if (std::fabs(y) >= std::ldexp(1.0, emax + 1))
    y = std::copysign(HUGE_VAL, x);
  return y;
}

// Element access by dtype: every format converts exactly to double, and f32,
// f16 and bf16 exactly to float.
enum class Fmt { F32, F64, F16, BF16 };

bool formatOf(DType t, Fmt &f) {
  switch (t) {
  case DType::f32:
    f = Fmt::F32;
    return true;
  case DType::f64:
    f = Fmt::F64;
    return true;
  case DType::f16:
    f = Fmt::F16;
    return true;
  case DType::bf16:
    f = Fmt::BF16;
    return true;
  default:
    return false;
  }
}

// The loops below are written per pair so each one vectorizes.
void convert(Fmt from, const void *src, Fmt to, void *dst, int64_t b,
             int64_t e) {
  const auto *f32In = static_cast<const float *>(src);
  const auto *f64In = static_cast<const double *>(src);
  const auto *f16In = static_cast<const _Float16 *>(src);
  const auto *bf16In = static_cast<const uint16_t *>(src);
  auto *f32Out = static_cast<float *>(dst);
  auto *f64Out = static_cast<double *>(dst);
  auto *f16Out = static_cast<_Float16 *>(dst);
  auto *bf16Out = static_cast<uint16_t *>(dst);
  if (from == Fmt::F64) {
    for (int64_t i = b; i < e; ++i) {
      double v = f64In[i];
      switch (to) {
      case Fmt::F32:
        f32Out[i] = float(v);
        break;
      case Fmt::F16: // exact once rounded
        f16Out[i] = _Float16(roundToFormat(v, 10, -14, 15));
        break;
      case Fmt::BF16:
        bf16Out[i] =
            std::isnan(v)
                ? floatToBf16(float(v))
                : uint16_t(bitsOf(float(roundToFormat(v, 7, -126, 127))) >> 16);
        break;
      case Fmt::F64:
        f64Out[i] = v;
        break;
      }
    }
    return;
  }
  if (to == Fmt::F64) {
    for (int64_t i = b; i < e; ++i)
      f64Out[i] = from == Fmt::F32   ? double(f32In[i])
                  : from == Fmt::F16 ? double(f16In[i])
                                     : double(bf16ToFloat(bf16In[i]));
    return;
  }
  // Among f32, f16 and bf16: f32 is exact for all, so go through it.
  // The conversions mixed precision runs every step go through Convert.h.
  auto bits = [](const _Float16 *p) {
    return reinterpret_cast<const uint16_t *>(p);
  };
  if (from == Fmt::F32 && to == Fmt::F16) {
    f32ToF16(f32In + b, reinterpret_cast<uint16_t *>(f16Out + b), e - b);
  } else if (from == Fmt::F32 && to == Fmt::BF16) {
    f32ToBf16(f32In + b, bf16Out + b, e - b);
  } else if (from == Fmt::F16 && to == Fmt::F32) {
    f16ToF32(bits(f16In + b), f32Out + b, e - b);
  } else if (from == Fmt::BF16 && to == Fmt::F32) {
    bf16ToF32(bf16In + b, f32Out + b, e - b);
  } else if (from == Fmt::F16 && to == Fmt::BF16) {
    for (int64_t i = b; i < e; ++i)
      bf16Out[i] = floatToBf16(float(f16In[i]));
  } else if (from == Fmt::BF16 && to == Fmt::F16) {
    for (int64_t i = b; i < e; ++i)
      f16Out[i] = _Float16(bf16ToFloat(bf16In[i]));
  }
}

/// p[0, n) = value, over the kernel threads (zeroing a step's gradients
/// is 13 MB on the small GPT).
template <typename T> void fillAll(void *data, int64_t n, T value) {
  T *p = static_cast<T *>(data);
  parallelFor(n, kGrain,
              [&](int64_t b, int64_t e) { std::fill(p + b, p + e, value); });
}

} // namespace

bool castBody(const KernelArgs &args, std::string &err) {
  const TensorRef &x = args.inputs[0], &y = args.outputs[0];
  Fmt from, to;
  if (!formatOf(x.dtype, from))
    return fail(err, "unsupported dtype ", dtypeName(x.dtype),
                " for x (expected f32, f64, f16 or bf16)");
  if (!formatOf(y.dtype, to))
    return fail(err, "unsupported dtype ", dtypeName(y.dtype),
                " for the output (expected f32, f64, f16 or bf16)");
  if (!sameShape(x, y))
    return fail(err, "output has shape ", shapeStr(y), " but x has shape ",
                shapeStr(x));
  if (from == to) {
    if (x.data != y.data)
      std::memcpy(y.data, x.data, size_t(x.numel()) * dtypeSize(x.dtype));
    return true;
  }
  parallelFor(x.numel(), kGrain, [&](int64_t b, int64_t e) {
    convert(from, x.data, to, y.data, b, e);
  });
  return true;
}

bool copyBody(const KernelArgs &args, std::string &err) {
  const TensorRef &x = args.inputs[0], &y = args.outputs[0];
  if (!checkCopyBytes(err, x, y))
    return false;
  const int64_t bytes = x.numel() * int64_t(dtypeSize(x.dtype));
  if (bytes > 0 && x.data != y.data)
    std::memcpy(y.data, x.data, size_t(bytes));
  return true;
}

bool fillBody(const KernelArgs &args, std::string &err) {
  const TensorRef &y = args.outputs[0];
  const double v = args.floatAttrs[0];
  const int64_t n = y.numel();
  switch (y.dtype) {
  case DType::f32:
    fillAll(y.data, n, float(v));
    return true;
  case DType::f64:
    fillAll(y.data, n, v);
    return true;
  case DType::f16: {
    _Float16 h = _Float16(roundToFormat(v, 10, -14, 15));
    fillAll(y.data, n, h);
    return true;
  }
  case DType::bf16: {
    uint16_t h =
        std::isnan(v)
            ? floatToBf16(float(v))
            : uint16_t(bitsOf(float(roundToFormat(v, 7, -126, 127))) >> 16);
    fillAll(y.data, n, h);
    return true;
  }
  case DType::i32:
  case DType::i64: {
    const double limit = y.dtype == DType::i32 ? 2147483648.0 : 0x1p63;
    if (v != std::floor(v) || !(v >= -limit && v < limit))
      return fail(err, "value ", v, " is not an integer in the range of ",
                  dtypeName(y.dtype));
    if (y.dtype == DType::i32)
      fillAll(y.data, n, int32_t(v));
    else
      fillAll(y.data, n, int64_t(v));
    return true;
  }
  }
  return fail(err, "unsupported dtype ", dtypeName(y.dtype));
}

} // namespace dsc::rt::cpu
