//===- KernelTestSupport.h - the kernel conformance suite's harness -*- C++
//-*-===//
//
// One suite for every backend (IREE's hal/cts is the model): each case runs
// a kernel from the current backend's table on fresh random inputs (the
// seed is printed on failure; DSC_TEST_SEED=N reruns one) and compares it
// with the matching dsc::ref kernel. Every buffer is staged through the
// backend's memory (run() below), and output buffers start as NaN so an
// element a kernel does not write fails the comparison. Tolerances are
// relative: |got - want| <= rtol * (|want| + mean |want|), 1e-5 unless a
// long reduction needs 1e-4. The cases are instantiated once per registered
// backend (Conformance); KernelTableTest.cpp checks every registered kernel
// has one.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_TEST_UNIT_CONFORMANCE_KERNELTESTSUPPORT_H
#define DSC_TEST_UNIT_CONFORMANCE_KERNELTESTSUPPORT_H

#include "runtime/backends/AllBackends.h"
#include "runtime/backends/Registry.h"
#include "runtime/backends/cpu/CpuKernels.h"
#include "runtime/reference/RefKernels.h"
#include "test/support/TestSeed.h"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace dsc::conformance {

using rt::DType;
using Shape = std::vector<int64_t>;

// The registry the suite is instantiated from (dsrun registers at start).
inline const bool kBackendsRegistered = [] {
  rt::registerAvailableBackends();
  return true;
}();

inline const double kNaN = std::numeric_limits<double>::quiet_NaN();
inline const double kInf = std::numeric_limits<double>::infinity();

// Declares `rng`, seeded freshly, and prints the seed with any failure.
#define SEEDED_RNG(rng)                                                        \
  const uint64_t rng##Seed = dsc::test::testSeed();                            \
  SCOPED_TRACE(dsc::test::seedNote(rng##Seed));                                \
  std::mt19937_64 rng(rng##Seed)

//===--- Buffers ----------------------------------------------------------===//

/// An owned tensor of any dtype, viewable as a TensorRef.
struct Buf {
  Shape shape;
  DType dtype = DType::f32;
  std::vector<uint64_t> words;

  Buf() = default;
  explicit Buf(Shape s, DType t = DType::f32) : shape(std::move(s)), dtype(t) {
    words.assign(bytes() / 8 + 1, 0);
  }
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    return n;
  }
  size_t bytes() const { return size_t(numel()) * rt::dtypeSize(dtype); }
  float *f32() { return reinterpret_cast<float *>(words.data()); }
  const float *f32() const {
    return reinterpret_cast<const float *>(words.data());
  }
  rt::TensorRef ref() {
    return {words.data(), dtype, shape.data(), int(shape.size())};
  }
  double get(int64_t i) const {
    const void *p = words.data();
    switch (dtype) {
    case DType::f32:
      return static_cast<const float *>(p)[i];
    case DType::f64:
      return static_cast<const double *>(p)[i];
    case DType::f16:
      return double(static_cast<const _Float16 *>(p)[i]);
    case DType::bf16: {
      uint32_t u = uint32_t(static_cast<const uint16_t *>(p)[i]) << 16;
      float f;
      std::memcpy(&f, &u, 4);
      return f;
    }
    case DType::i32:
      return static_cast<const int32_t *>(p)[i];
    case DType::i64:
      return double(static_cast<const int64_t *>(p)[i]);
    }
    return kNaN;
  }
  // Stores v (exactly representable in the dtype, for the 16-bit ones).
  void set(int64_t i, double v) {
    void *p = words.data();
    switch (dtype) {
    case DType::f32:
      static_cast<float *>(p)[i] = float(v);
      break;
    case DType::f64:
      static_cast<double *>(p)[i] = v;
      break;
    case DType::f16:
      static_cast<_Float16 *>(p)[i] = _Float16(float(v));
      break;
    case DType::bf16: {
      float f = float(v);
      uint32_t u;
      std::memcpy(&u, &f, 4);
      static_cast<uint16_t *>(p)[i] = uint16_t(u >> 16);
      break;
    }
    case DType::i32:
      static_cast<int32_t *>(p)[i] = int32_t(v);
      break;
    case DType::i64:
      static_cast<int64_t *>(p)[i] = int64_t(v);
      break;
    }
  }
  ref::Tensor toRef() const {
    ref::Tensor t(shape, std::vector<double>(size_t(numel())));
    for (int64_t i = 0; i < numel(); ++i)
      t.data[size_t(i)] = get(i);
    return t;
  }
};

inline Buf uniform(std::mt19937_64 &rng, Shape shape, double lo = -2,
                   double hi = 2, DType t = DType::f32) {
  Buf b(std::move(shape), t);
  std::uniform_real_distribution<double> dist(lo, hi);
  for (int64_t i = 0; i < b.numel(); ++i)
    b.set(i, dist(rng));
  return b;
}

inline Buf indices(std::mt19937_64 &rng, Shape shape, int64_t V, DType t) {
  Buf b(std::move(shape), t);
  std::uniform_int_distribution<int64_t> dist(0, V - 1);
  for (int64_t i = 0; i < b.numel(); ++i)
    b.set(i, double(dist(rng)));
  return b;
}

inline Buf filled(Shape shape, double v, DType t = DType::f32) {
  Buf b(std::move(shape), t);
  for (int64_t i = 0; i < b.numel(); ++i)
    b.set(i, v);
  return b;
}

/// An output buffer full of NaN, so unwritten elements show.
inline Buf poisoned(Shape shape, DType t = DType::f32) {
  if (t == DType::i32 || t == DType::i64)
    return filled(std::move(shape), -12345, t);
  return filled(std::move(shape), kNaN, t);
}

inline Buf scalarBuf(double v) { return filled({}, v); }

/// x [d0, d1, d2, d3] as [d0, d2, d1, d3]: attention's [B, H, T, D] <->
/// [B, T, H, D] (seq_major).
inline Buf swapDims12(const Buf &x) {
  const int64_t n1 = x.shape[1], n2 = x.shape[2];
  Buf y({x.shape[0], n2, n1, x.shape[3]}, x.dtype);
  const size_t row = size_t(x.shape[3]) * rt::dtypeSize(x.dtype);
  const auto *src = reinterpret_cast<const char *>(x.words.data());
  auto *dst = reinterpret_cast<char *>(y.words.data());
  for (int64_t b = 0; b < x.shape[0]; ++b)
    for (int64_t i = 0; i < n1; ++i)
      for (int64_t j = 0; j < n2; ++j)
        std::memcpy(dst + size_t((b * n2 + j) * n1 + i) * row,
                    src + size_t((b * n1 + i) * n2 + j) * row, row);
  return y;
}

//===--- Running kernels --------------------------------------------------===//

inline rt::KernelContext defaultContext() {
  rt::KernelContext c;
  c.seed = 1234;
  c.step = 7;
  return c;
}

/// The backend the kernels run on: the CPU backend, or the one a
/// conformance instance selected (Conformance::SetUp).
inline rt::Backend *cpuBackend() {
  static std::unique_ptr<rt::Backend> cpu = [] {
    std::string error;
    return rt::createBackend("cpu", error);
  }();
  return cpu.get();
}
inline rt::Backend *currentBackend = nullptr;
inline rt::Backend &backend() {
  return currentBackend ? *currentBackend : *cpuBackend();
}

/// Kernels a backend does not have yet (docs/cuda.md lists them), by
/// backend. Their cases skip on that backend; KernelTableTest fails when a
/// CPU kernel is missing from a backend without being listed here, and when
/// a listed one appears in the backend's table (so the list only shrinks).
inline const std::map<std::string, std::set<std::string>> kPendingKernels = {
    // None now: the CUDA backend has every CPU kernel.
};
inline bool isPending(std::string_view backend, const std::string &kernel) {
  auto it = kPendingKernels.find(std::string(backend));
  return it != kPendingKernels.end() && it->second.count(kernel) > 0;
}
/// How run() starts its answer for a pending kernel.
inline const std::string kPendingPrefix = "pending: ";

/// Runs `name` from the current backend's table; returns "" on success,
/// else the kernel's error. Every buffer is staged through the backend:
/// allocated in its device space, copied in, and the outputs copied back,
/// so the same cases check a backend whose memory is not the host's. A
/// buffer passed twice (in place) is one allocation.
inline std::string run(const std::string &name, std::vector<Buf *> ins,
                       std::vector<Buf *> outs, std::vector<int64_t> ints = {},
                       std::vector<double> floats = {},
                       const rt::KernelContext *ctx = nullptr) {
  rt::Backend &be = backend();
  // The variant the operands' dtypes select, as the Session picks it; with
  // none (a case that checks the body's own dtype errors), the first.
  std::vector<DType> dIn, dOut;
  for (Buf *b : ins)
    dIn.push_back(b->dtype);
  for (Buf *b : outs)
    dOut.push_back(b->dtype);
  const rt::KernelInfo *k =
      be.findKernel(name, {dIn.data(), dIn.size()}, {dOut.data(), dOut.size()});
  if (!k)
    k = be.findKernel(name);
  if (!k)
    return (isPending(be.name(), name) ? kPendingPrefix : "") + "no " +
           std::string(be.name()) + " kernel " + name;
  static const rt::KernelContext def = defaultContext();
  std::map<Buf *, void *> staged;
  std::string error;
  auto stage = [&](Buf *b) -> rt::TensorRef {
    void *&block = staged[b];
    if (!block) {
      block = be.allocate(rt::MemorySpace::device, b->words.size() * 8, error);
      if (block)
        be.copyToArena(block, b->words.data(), b->words.size() * 8);
    }
    return {block, b->dtype, b->shape.data(), int(b->shape.size())};
  };
  std::vector<rt::TensorRef> ti, to;
  for (Buf *b : ins)
    ti.push_back(stage(b));
  for (Buf *b : outs)
    to.push_back(stage(b));
  auto releaseAll = [&] {
    for (auto &[b, block] : staged)
      be.release(block);
  };
  if (!error.empty()) {
    releaseAll();
    return "staging failed: " + error;
  }
  // As the executor runs it: on the compute stream's queue and handles,
  // with the run's values where the backend's kernels read them.
  rt::KernelContext c = ctx ? *ctx : def;
  rt::StreamResources res = be.streamResources(rt::MemorySpace::device, 0);
  c.stream = res.stream;
  c.handles = res.handles;
  if (!be.setRunContext(c, error)) {
    releaseAll();
    return "setRunContext failed: " + error;
  }
  rt::KernelArgs a = rt::makeKernelArgs(ti, to, ints, floats, &c);
  std::string err;
  bool ok = k->fn(a, err);
  for (Buf *b : outs)
    be.copyFromArena(b->words.data(), staged[b], b->words.size() * 8);
  releaseAll();
  if (ok && !err.empty())
    return "succeeded but set error: " + err;
  if (ok) // bad data a device kernel flagged, as the CPU's would fail
    return be.takeKernelError();
  return err.empty() ? "failed with an empty error" : err;
}

/// One instance of the conformance cases per registered backend; an
/// instance whose backend cannot run here is skipped with the reason.
class Conformance : public testing::TestWithParam<std::string> {
protected:
  void SetUp() override {
    std::string error;
    backend_ = rt::createBackend(GetParam(), error);
    if (!backend_)
      GTEST_SKIP() << "backend " << GetParam()
                   << " is not available here: " << error;
    currentBackend = backend_.get();
  }
  void TearDown() override { currentBackend = nullptr; }

private:
  std::unique_ptr<rt::Backend> backend_;
};

#define RUN_OK(...)                                                            \
  do {                                                                         \
    std::string runError = run(__VA_ARGS__);                                   \
    if (runError.rfind(kPendingPrefix, 0) == 0)                                \
      GTEST_SKIP() << runError;                                                \
    ASSERT_EQ(runError, "");                                                   \
  } while (0)

// The error line of a run() call that must fail.
#define EXPECT_RUN_ERROR(call, expected)                                       \
  do {                                                                         \
    std::string runError = (call);                                             \
    if (runError.rfind(kPendingPrefix, 0) == 0)                                \
      GTEST_SKIP() << runError;                                                \
    EXPECT_EQ(runError, expected);                                             \
  } while (0)

// Binds the value of a reference Result.
#define REF_OK(var, expr)                                                      \
  auto var##Result = (expr);                                                   \
  ASSERT_TRUE(var##Result.ok()) << var##Result.error;                          \
  auto var = std::move(var##Result.value)

inline std::string shapeString(const Shape &s) { return ref::shapeToString(s); }

/// got matches want within rtol of |want| + mean |want|, plus atol (NaN
/// matches NaN, inf matches the same inf).
inline ::testing::AssertionResult close(const Buf &got, const ref::Tensor &want,
                                        double rtol = 1e-5, double atol = 0) {
  if (got.shape != want.shape)
    return ::testing::AssertionFailure()
           << "shape " << shapeString(got.shape) << " vs reference "
           << shapeString(want.shape);
  double meanAbs = 0;
  int64_t finite = 0;
  for (double w : want.data)
    if (std::isfinite(w)) {
      meanAbs += std::fabs(w);
      ++finite;
    }
  meanAbs = finite ? meanAbs / double(finite) : 0;
  int bad = 0;
  std::ostringstream os;
  for (int64_t i = 0; i < got.numel(); ++i) {
    double g = got.get(i), w = want.data[size_t(i)];
    bool ok;
    if (std::isnan(w))
      ok = std::isnan(g);
    else if (std::isinf(w))
      ok = g == w;
    else
      ok = std::fabs(g - w) <= rtol * (std::fabs(w) + meanAbs) + atol + 1e-30;
    if (!ok && bad++ < 5)
      os << " [" << i << "] got " << g << " want " << w << ";";
  }
  if (bad)
    return ::testing::AssertionFailure()
           << bad << " of " << got.numel() << " elements differ:" << os.str();
  return ::testing::AssertionSuccess();
}

inline bool bitwiseEqual(const Buf &a, const Buf &b) {
  return a.shape == b.shape && a.dtype == b.dtype &&
         std::memcmp(a.words.data(), b.words.data(), a.bytes()) == 0;
}

/// Names an instance after its backend: Backends/ShapeKernels.X/cpu.
inline std::string
backendName(const testing::TestParamInfo<std::string> &info) {
  return info.param;
}

} // namespace dsc::conformance

#endif // DSC_TEST_UNIT_CONFORMANCE_KERNELTESTSUPPORT_H
