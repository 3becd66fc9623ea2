//===- CpuKernelsTest.cpp - CPU kernels against the float64 reference -----===//
//
// Every CPU kernel runs on fresh random inputs (the seed is printed on
// failure; DSC_TEST_SEED=N reruns one) and is compared with the matching
// dsc::ref kernel. Output buffers start as NaN so an element a kernel does
// not write fails the comparison. Tolerances are relative: |got - want| <=
// rtol * (|want| + mean |want|), 1e-5 unless a long reduction needs 1e-4.
//
//===----------------------------------------------------------------------===//

#include "runtime/backends/cpu/CpuKernels.h"
#include "runtime/backends/AllBackends.h"
#include "runtime/backends/Registry.h"
#include "runtime/reference/RefKernels.h"
#include "test/support/TestSeed.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <regex>
#include <set>
#include <sstream>

using namespace dsc;
using rt::DType;
using Shape = std::vector<int64_t>;

// The registry this suite is instantiated from (dsrun registers at start).
static const bool kBackendsRegistered = [] {
  dsc::rt::registerAvailableBackends();
  return true;
}();

namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

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

Buf uniform(std::mt19937_64 &rng, Shape shape, double lo = -2, double hi = 2,
            DType t = DType::f32) {
  Buf b(std::move(shape), t);
  std::uniform_real_distribution<double> dist(lo, hi);
  for (int64_t i = 0; i < b.numel(); ++i)
    b.set(i, dist(rng));
  return b;
}

Buf indices(std::mt19937_64 &rng, Shape shape, int64_t V, DType t) {
  Buf b(std::move(shape), t);
  std::uniform_int_distribution<int64_t> dist(0, V - 1);
  for (int64_t i = 0; i < b.numel(); ++i)
    b.set(i, double(dist(rng)));
  return b;
}

Buf filled(Shape shape, double v, DType t = DType::f32) {
  Buf b(std::move(shape), t);
  for (int64_t i = 0; i < b.numel(); ++i)
    b.set(i, v);
  return b;
}

/// An output buffer full of NaN, so unwritten elements show.
Buf poisoned(Shape shape, DType t = DType::f32) {
  if (t == DType::i32 || t == DType::i64)
    return filled(std::move(shape), -12345, t);
  return filled(std::move(shape), kNaN, t);
}

Buf scalarBuf(double v) { return filled({}, v); }

//===--- Running kernels --------------------------------------------------===//

rt::KernelContext defaultContext() {
  rt::KernelContext c;
  c.seed = 1234;
  c.step = 7;
  return c;
}

/// The backend the kernels run on: the CPU backend, or the one a
/// conformance instance selected (Conformance::SetUp).
rt::Backend *cpuBackend() {
  static std::unique_ptr<rt::Backend> cpu = [] {
    std::string error;
    return rt::createBackend("cpu", error);
  }();
  return cpu.get();
}
rt::Backend *currentBackend = nullptr;
rt::Backend &backend() {
  return currentBackend ? *currentBackend : *cpuBackend();
}

/// Runs `name` from the current backend's table; returns "" on success,
/// else the kernel's error. Every buffer is staged through the backend:
/// allocated in its device space, copied in, and the outputs copied back,
/// so the same cases check a backend whose memory is not the host's. A
/// buffer passed twice (in place) is one allocation.
std::string run(const std::string &name, std::vector<Buf *> ins,
                std::vector<Buf *> outs, std::vector<int64_t> ints = {},
                std::vector<double> floats = {},
                const rt::KernelContext *ctx = nullptr) {
  rt::Backend &be = backend();
  const rt::KernelInfo *k = be.findKernel(name);
  if (!k)
    return "no " + std::string(be.name()) + " kernel " + name;
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
  rt::KernelArgs a;
  a.inputs = ti.data();
  a.numInputs = ti.size();
  a.outputs = to.data();
  a.numOutputs = to.size();
  a.intAttrs = ints.data();
  a.numIntAttrs = ints.size();
  a.floatAttrs = floats.data();
  a.numFloatAttrs = floats.size();
  a.ctx = ctx ? ctx : &def;
  std::string err;
  bool ok = k->fn(a, err);
  for (Buf *b : outs)
    be.copyFromArena(b->words.data(), staged[b], b->words.size() * 8);
  releaseAll();
  if (ok)
    return err.empty() ? "" : "succeeded but set error: " + err;
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
    ASSERT_EQ(runError, "");                                                   \
  } while (0)

// Binds the value of a reference Result.
#define REF_OK(var, expr)                                                      \
  auto var##Result = (expr);                                                   \
  ASSERT_TRUE(var##Result.ok()) << var##Result.error;                          \
  auto var = std::move(var##Result.value)

std::string shapeString(const Shape &s) { return ref::shapeToString(s); }

/// got matches want within rtol of |want| + mean |want|, plus atol (NaN
/// matches NaN, inf matches the same inf).
::testing::AssertionResult close(const Buf &got, const ref::Tensor &want,
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

bool bitwiseEqual(const Buf &a, const Buf &b) {
  return a.shape == b.shape && a.dtype == b.dtype &&
         std::memcmp(a.words.data(), b.words.data(), a.bytes()) == 0;
}

//===--- The kernel table -------------------------------------------------===//

struct Arity {
  int in, out, ints, floats;
};

// Kernel.h's declared arity; -1 = any.
const std::map<std::string, Arity> kDeclared = {
    {"ds.add", {2, 1, 0, 0}},
    {"ds.sub", {2, 1, 0, 0}},
    {"ds.mul", {2, 1, 0, 0}},
    {"ds.div", {2, 1, 0, 0}},
    {"ds.minimum", {2, 1, 0, 0}},
    {"ds.maximum", {2, 1, 0, 0}},
    {"ds.equal", {2, 1, 0, 0}},
    {"ds.neg", {1, 1, 0, 0}},
    {"ds.exp", {1, 1, 0, 0}},
    {"ds.log", {1, 1, 0, 0}},
    {"ds.tanh", {1, 1, 0, 0}},
    {"ds.sqrt", {1, 1, 0, 0}},
    {"ds.rsqrt", {1, 1, 0, 0}},
    {"ds.relu", {1, 1, 0, 0}},
    {"ds.silu", {1, 1, 0, 0}},
    {"ds.gelu", {1, 1, 1, 0}},
    {"ds.relu_grad", {2, 1, 0, 0}},
    {"ds.silu_grad", {2, 1, 0, 0}},
    {"ds.gelu_grad", {2, 1, 1, 0}},
    {"ds.cast", {1, 1, 0, 0}},
    {"ds.dropout", {1, 1, 1, 1}},
    {"ds.matmul", {2, 1, 2, 0}},
    {"ds.layer_norm", {-1, 1, 0, 1}},
    {"ds.layer_norm_grad", {3, 3, 0, 1}},
    {"ds.rms_norm", {2, 1, 0, 1}},
    {"ds.rms_norm_grad", {3, 2, 0, 1}},
    {"ds.softmax", {1, 1, 0, 0}},
    {"ds.softmax_grad", {2, 1, 0, 0}},
    {"ds.attention", {3, 1, 1, 1}},
    {"ds.attention_grad", {4, 3, 1, 1}},
    {"ds.rotary", {1, 1, 1, 1}},
    {"ds.embedding", {2, 1, 0, 0}},
    {"ds.embedding_grad", {2, 1, 0, 0}},
    {"ds.cross_entropy", {2, 1, 1, 0}},
    {"ds.cross_entropy_grad", {3, 1, 1, 0}},
    {"ds.transpose", {1, 1, -1, 0}},
    {"ds.slice", {1, 1, -1, 0}},
    {"ds.pad", {1, 1, -1, 0}},
    {"ds.concat", {-1, 1, 1, 0}},
    {"ds.split", {1, -1, 1, 0}},
    {"ds.broadcast", {1, 1, 0, 0}},
    {"ds.reduce_sum", {1, 1, -1, 0}},
    {"ds.reduce_mean", {1, 1, -1, 0}},
    {"ds.reduce_max", {1, 1, -1, 0}},
    {"ds.iota", {0, 1, 1, 0}},
    {"ds.adamw", {7, 3, 0, 4}},
    {"ds.copy", {1, 1, 0, 0}},
    {"ds.fill", {0, 1, 0, 1}},
    {"ds.bias_gelu", {2, 2, 1, 0}},
    {"ds.add_layer_norm", {-1, 2, 0, 1}},
    {"comm.all_reduce", {1, 1, 0, 1}},
    {"comm.reduce_scatter", {1, 1, 0, 1}},
    {"comm.all_gather", {1, 1, 0, 0}},
    {"comm.broadcast", {1, 1, 1, 0}},
    {"dist.shard", {1, 1, 1, 0}},
};

// The kernel names in Kernel.h's header comment.
std::set<std::string> namesInKernelHeader(std::string &error) {
  std::string path = __FILE__;
  size_t at = path.rfind("test/unit/");
  if (at == std::string::npos) {
    error = "cannot locate the source tree from " + path;
    return {};
  }
  path = path.substr(0, at) + "runtime/kernels/Kernel.h";
  std::ifstream in(path);
  if (!in) {
    error = "cannot read " + path;
    return {};
  }
  std::set<std::string> names;
  std::regex name(R"((ds|comm|dist)\.[a-z_]+)");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("//", 0) != 0)
      continue;
    for (std::sregex_iterator it(line.begin(), line.end(), name), end;
         it != end; ++it)
      names.insert(it->str());
  }
  return names;
}

TEST(CpuKernelTable, EveryContractKernelIsRegisteredWithItsArity) {
  std::string error;
  std::set<std::string> names = namesInKernelHeader(error);
  ASSERT_EQ(error, "");
  ASSERT_FALSE(names.empty());
  for (const std::string &n : names) {
    EXPECT_TRUE(kDeclared.count(n)) << n << " is new in Kernel.h";
    const rt::KernelInfo *k = rt::findCpuKernel(n);
    ASSERT_NE(k, nullptr) << n << " is not registered";
    EXPECT_EQ(k->name, n);
    EXPECT_NE(k->fn, nullptr) << n;
  }
  for (const auto &[n, arity] : kDeclared) {
    EXPECT_TRUE(names.count(n)) << n << " is not in Kernel.h any more";
    const rt::KernelInfo *k = rt::findCpuKernel(n);
    ASSERT_NE(k, nullptr) << n;
    EXPECT_EQ(k->numInputs, arity.in) << n;
    EXPECT_EQ(k->numOutputs, arity.out) << n;
    EXPECT_EQ(k->numIntAttrs, arity.ints) << n;
    EXPECT_EQ(k->numFloatAttrs, arity.floats) << n;
  }
  EXPECT_EQ(rt::cpuKernels().size(), kDeclared.size());
  EXPECT_EQ(rt::findCpuKernel("ds.nonexistent"), nullptr);
  EXPECT_EQ(rt::findCpuKernel(""), nullptr);
}

// Junk arguments never crash a kernel: each call fails with a line that
// starts with the kernel's name, or succeeds.
TEST(CpuKernelTable, BadArgumentsGiveOneLineErrorsNamingTheKernel) {
  for (const rt::KernelInfo &k : rt::cpuKernels()) {
    std::string prefix = std::string(k.name) + ": ";
    int nIn = k.numInputs < 0 ? 2 : k.numInputs;
    int nOut = k.numOutputs < 0 ? 2 : k.numOutputs;
    int nInts = k.numIntAttrs < 0 ? 1 : k.numIntAttrs;
    int nFloats = k.numFloatAttrs;
    // Too many inputs (when fixed): an arity error.
    if (k.numInputs >= 0) {
      std::vector<Buf> bufs(size_t(nIn + 1), Buf({2, 3}));
      std::vector<Buf> outs(size_t(nOut), Buf({2, 3}));
      std::vector<Buf *> in, out;
      for (Buf &b : bufs)
        in.push_back(&b);
      for (Buf &b : outs)
        out.push_back(&b);
      std::string e = run(std::string(k.name), in, out,
                          std::vector<int64_t>(size_t(nInts), 0),
                          std::vector<double>(size_t(nFloats), 0.5));
      EXPECT_EQ(e.rfind(prefix + "expects", 0), 0u) << e;
    }
    // Several ill-matched shapes with the right arity.
    std::vector<Shape> shapes = {{}, {0}, {3}, {2, 3}, {4, 1, 5}, {2, 3, 4, 5}};
    for (size_t s = 0; s < shapes.size(); ++s) {
      std::vector<Buf> bufs, outs;
      for (int i = 0; i < nIn; ++i)
        bufs.push_back(filled(shapes[(s + size_t(i)) % shapes.size()], 1.0));
      for (int i = 0; i < nOut; ++i)
        outs.push_back(poisoned(shapes[(s + 2 + size_t(i)) % shapes.size()]));
      std::vector<Buf *> in, out;
      for (Buf &b : bufs)
        in.push_back(&b);
      for (Buf &b : outs)
        out.push_back(&b);
      std::string e = run(std::string(k.name), in, out,
                          std::vector<int64_t>(size_t(nInts), 1),
                          std::vector<double>(size_t(nFloats), 0.5));
      if (!e.empty()) {
        EXPECT_EQ(e.rfind(prefix, 0), 0u) << e;
        EXPECT_EQ(e.find('\n'), std::string::npos) << e;
      }
    }
  }
  // A negative dim, a null shape, and missing data are refused up front.
  Buf x({2, 3}), y({2, 3});
  std::vector<int64_t> bad = {2, -3};
  rt::TensorRef refs[2] = {x.ref(), y.ref()};
  refs[0].shape = bad.data();
  rt::KernelArgs a;
  a.inputs = refs;
  a.numInputs = 1;
  a.outputs = refs + 1;
  a.numOutputs = 1;
  std::string err;
  EXPECT_FALSE(rt::findCpuKernel("ds.neg")->fn(a, err));
  EXPECT_EQ(err, "ds.neg: input 0 has a negative dim in [2, -3]");
  refs[0] = x.ref();
  refs[0].data = nullptr;
  EXPECT_FALSE(rt::findCpuKernel("ds.neg")->fn(a, err));
  EXPECT_EQ(err, "ds.neg: input 0 of shape [2, 3] has no data");
}

TEST(CpuKernelTable, UnsupportedDtypesAreNamed) {
  Buf a({3}, DType::f16), b({3}, DType::f16), out({3}, DType::f16);
  EXPECT_EQ(run("ds.add", {&a, &b}, {&out}),
            "ds.add: unsupported dtype f16 for input 0 (expected f32)");
  Buf x({2, 4}, DType::bf16), w({4}), y({2, 4});
  EXPECT_EQ(run("ds.layer_norm", {&x, &w}, {&y}, {}, {1e-5}),
            "ds.layer_norm: unsupported dtype bf16 for input 0 (expected "
            "f32)");
}

TEST(CpuKernelTable, PartialOverlapIsRefused) {
  Buf big({8}), x({4});
  rt::TensorRef in = big.ref(), out = big.ref();
  int64_t four = 4;
  in.shape = &four;
  out.shape = &four;
  out.data = big.f32() + 2; // overlaps the input's second half
  in.rank = out.rank = 1;
  rt::KernelArgs a;
  a.inputs = &in;
  a.numInputs = 1;
  a.outputs = &out;
  a.numOutputs = 1;
  std::string err;
  EXPECT_FALSE(rt::findCpuKernel("ds.neg")->fn(a, err));
  EXPECT_EQ(err, "ds.neg: output 0 overlaps input 0 (only an exact in-place "
                 "update is allowed)");
  Buf m({4, 4});
  EXPECT_EQ(run("ds.matmul", {&m, &m}, {&m}, {0, 0}),
            "ds.matmul: output 0 overlaps input 0 (this kernel cannot run in "
            "place)");
}

// The kernel families of the conformance suite (CpuKernelTable above is
// about the CPU backend's own table and stays a plain test).
class AdamWKernels : public Conformance {};
class AttentionKernels : public Conformance {};
class CastKernels : public Conformance {};
class CopyKernels : public Conformance {};
class DropoutKernels : public Conformance {};
class ElementwiseKernels : public Conformance {};
class LookupKernels : public Conformance {};
class MatmulKernels : public Conformance {};
class NormsKernels : public Conformance {};
class ReduceKernels : public Conformance {};
class ShapeKernels : public Conformance {};

//===--- Elementwise ------------------------------------------------------===//

struct BinaryCase {
  const char *name;
  ref::BinaryKind kind;
};
const BinaryCase kBinary[] = {
    {"ds.add", ref::BinaryKind::Add},
    {"ds.sub", ref::BinaryKind::Sub},
    {"ds.mul", ref::BinaryKind::Mul},
    {"ds.div", ref::BinaryKind::Div},
    {"ds.minimum", ref::BinaryKind::Minimum},
    {"ds.maximum", ref::BinaryKind::Maximum},
    {"ds.equal", ref::BinaryKind::Equal},
};

// (a, b, out) shapes covering same-shape, bias, scalar and general
// broadcasts.
const std::vector<std::array<Shape, 3>> kBroadcasts = {
    {Shape{3, 5, 7}, Shape{3, 5, 7}, Shape{3, 5, 7}},
    {Shape{4, 13}, Shape{13}, Shape{4, 13}},
    {Shape{13}, Shape{4, 13}, Shape{4, 13}},
    {Shape{2, 3, 5}, Shape{3, 1}, Shape{2, 3, 5}},
    {Shape{}, Shape{5, 7}, Shape{5, 7}},
    {Shape{5, 7}, Shape{}, Shape{5, 7}},
    {Shape{5, 1, 7}, Shape{1, 3, 1}, Shape{5, 3, 7}},
    {Shape{7, 1}, Shape{1, 5}, Shape{7, 5}},
    {Shape{1}, Shape{13}, Shape{13}},
    {Shape{2, 1, 3, 1}, Shape{5, 1, 4}, Shape{2, 5, 3, 4}},
    {Shape{40000}, Shape{40000}, Shape{40000}},
    {Shape{300, 257}, Shape{257}, Shape{300, 257}},
    {Shape{0, 3}, Shape{3}, Shape{0, 3}},
};

TEST_P(ElementwiseKernels, BinaryOpsMatchReferenceUnderBroadcasting) {
  SEEDED_RNG(rng);
  for (const BinaryCase &op : kBinary)
    for (const auto &[sa, sb, so] : kBroadcasts) {
      SCOPED_TRACE(std::string(op.name) + " " + shapeString(sa) + " " +
                   shapeString(sb));
      Buf a = uniform(rng, sa), b = uniform(rng, sb, 0.5, 2);
      if (op.kind == ref::BinaryKind::Equal) // small integers: ties happen
        for (Buf *t : {&a, &b})
          for (int64_t i = 0; i < t->numel(); ++i)
            t->set(i, std::round(t->get(i)));
      Buf out = poisoned(so);
      RUN_OK(op.name, {&a, &b}, {&out});
      REF_OK(want, ref::binary(op.kind, a.toRef(), b.toRef()));
      EXPECT_TRUE(close(out, want));
    }
}

TEST_P(ElementwiseKernels, BinaryOpsInPlaceMatchOutOfPlace) {
  SEEDED_RNG(rng);
  for (const BinaryCase &op : kBinary)
    for (const auto &[sa, sb] : {std::pair<Shape, Shape>{{3, 5, 7}, {3, 5, 7}},
                                 {{300, 257}, {257}},
                                 {{40013}, {40013}}}) {
      Buf a = uniform(rng, sa), b = uniform(rng, sb, 0.5, 2);
      Buf out = poisoned(sa);
      RUN_OK(op.name, {&a, &b}, {&out});
      RUN_OK(op.name, {&a, &b}, {&a}); // a updated in place
      EXPECT_TRUE(bitwiseEqual(a, out)) << op.name;
    }
  Buf a({4, 5}), b({5}); // the broadcast operand cannot be the output
  EXPECT_EQ(run("ds.add", {&a, &b}, {&b}),
            "ds.add: output has shape [5] but [4, 5] and [5] broadcast to a "
            "different shape");
}

TEST_P(ElementwiseKernels, BinaryShapeErrors) {
  Buf a({3, 4}), b({5}), out({3, 4}), wrong({4, 3});
  EXPECT_EQ(run("ds.mul", {&a, &b}, {&out}),
            "ds.mul: cannot broadcast shapes [3, 4] and [5]");
  Buf c({4});
  EXPECT_EQ(run("ds.mul", {&a, &c}, {&wrong}),
            "ds.mul: output has shape [4, 3] but [3, 4] and [4] broadcast to "
            "a different shape");
}

TEST_P(ElementwiseKernels, NanPropagatesThroughMinimumAndMaximum) {
  Buf a = filled({4}, 1.0), b = filled({4}, 2.0), out = poisoned({4});
  a.set(1, kNaN);
  b.set(2, kNaN);
  for (const char *name : {"ds.minimum", "ds.maximum"}) {
    RUN_OK(name, {&a, &b}, {&out});
    REF_OK(want, ref::binary(std::string(name) == "ds.minimum"
                                 ? ref::BinaryKind::Minimum
                                 : ref::BinaryKind::Maximum,
                             a.toRef(), b.toRef()));
    EXPECT_TRUE(close(out, want)) << name;
  }
}

struct UnaryCase {
  const char *name;
  ref::UnaryKind kind;
  double lo, hi;
  int64_t approx; // ds.gelu's attribute, -1 for none
};
const UnaryCase kUnary[] = {
    {"ds.neg", ref::UnaryKind::Neg, -3, 3, -1},
    {"ds.exp", ref::UnaryKind::Exp, -30, 30, -1},
    {"ds.log", ref::UnaryKind::Log, 1e-3, 100, -1},
    {"ds.tanh", ref::UnaryKind::Tanh, -5, 5, -1},
    {"ds.sqrt", ref::UnaryKind::Sqrt, 0, 100, -1},
    {"ds.rsqrt", ref::UnaryKind::Rsqrt, 1e-3, 100, -1},
    {"ds.relu", ref::UnaryKind::Relu, -3, 3, -1},
    {"ds.silu", ref::UnaryKind::Silu, -12, 12, -1},
    {"ds.gelu", ref::UnaryKind::GeluErf, -8, 8, 0},
    {"ds.gelu", ref::UnaryKind::GeluTanh, -8, 8, 1},
};

std::vector<int64_t> approxAttr(int64_t approx) {
  return approx < 0 ? std::vector<int64_t>{} : std::vector<int64_t>{approx};
}

TEST_P(ElementwiseKernels, UnaryOpsMatchReference) {
  SEEDED_RNG(rng);
  for (const UnaryCase &op : kUnary)
    for (const Shape &s : {Shape{3, 5, 7}, Shape{13}, Shape{}, Shape{40001}}) {
      SCOPED_TRACE(std::string(op.name) + " " + shapeString(s));
      Buf x = uniform(rng, s, op.lo, op.hi), y = poisoned(s);
      RUN_OK(op.name, {&x}, {&y}, approxAttr(op.approx));
      REF_OK(want, ref::unary(op.kind, x.toRef()));
      // The reference's 1 + erf(x) in double is off by ~1e-16 absolute.
      EXPECT_TRUE(close(y, want, 1e-5, 1e-14));
      // Element by element: the transcendental ones are accurate everywhere,
      // not just on average (down to the reference's own absolute error:
      // 1 + erf(x) in double has ~1e-16 of it).
      for (int64_t i = 0; i < y.numel(); ++i) {
        double w = want.data[size_t(i)];
        ASSERT_NEAR(y.get(i), w, 2e-6 * std::fabs(w) + 1e-14)
            << op.name << " at x = " << x.get(i);
      }
    }
}

TEST_P(ElementwiseKernels, UnaryOpsAtSpecialValues) {
  std::vector<double> v = {0.0,    -0.0,   1e-30, -1e-30, 0.5,  -0.5,
                           0.625,  1.0,    -1.0,  1.5,    -1.5, 10.0,
                           -10.0,  20.0,   -20.0, 88.7,   88.8, -87.0,
                           -103.0, -110.0, kInf,  -kInf,  kNaN};
  Buf x({int64_t(v.size())});
  for (size_t i = 0; i < v.size(); ++i)
    x.set(int64_t(i), v[i]);
  for (const UnaryCase &op : kUnary) {
    if (op.kind == ref::UnaryKind::Log || op.kind == ref::UnaryKind::Sqrt ||
        op.kind == ref::UnaryKind::Rsqrt)
      continue; // libm's, and NaN below 0 either way
    Buf y = poisoned(x.shape);
    RUN_OK(op.name, {&x}, {&y}, approxAttr(op.approx));
    REF_OK(want, ref::unary(op.kind, x.toRef()));
    for (size_t i = 0; i < v.size(); ++i) {
      double w = ref::roundToDType(want.data[i], ref::DType::f32);
      double g = y.get(int64_t(i));
      if (std::isnan(w) || std::isinf(w)) {
        EXPECT_TRUE(std::isnan(w) ? std::isnan(g) : g == w)
            << op.name << "(" << v[i] << ") = " << g << ", want " << w;
      } else { // subnormal results may flush; see above for 1e-14
        EXPECT_NEAR(g, w, 2e-6 * std::fabs(w) + 1e-14)
            << op.name << "(" << v[i] << ")";
      }
    }
  }
}

TEST_P(ElementwiseKernels, UnaryOpsInPlaceMatchOutOfPlace) {
  SEEDED_RNG(rng);
  for (const UnaryCase &op : kUnary) {
    Buf x = uniform(rng, {40013}, op.lo, op.hi), y = poisoned({40013});
    RUN_OK(op.name, {&x}, {&y}, approxAttr(op.approx));
    RUN_OK(op.name, {&x}, {&x}, approxAttr(op.approx));
    EXPECT_TRUE(bitwiseEqual(x, y)) << op.name;
  }
}

TEST_P(ElementwiseKernels, ActivationGradientsMatchReference) {
  SEEDED_RNG(rng);
  for (const Shape &s : {Shape{3, 5, 7}, Shape{13}, Shape{40001}}) {
    Buf x = uniform(rng, s, -8, 8), g = uniform(rng, s), out = poisoned(s);
    RUN_OK("ds.relu_grad", {&x, &g}, {&out});
    REF_OK(relu, ref::relu_grad(x.toRef(), g.toRef()));
    EXPECT_TRUE(close(out, relu));
    RUN_OK("ds.silu_grad", {&x, &g}, {&out});
    REF_OK(silu, ref::silu_grad(x.toRef(), g.toRef()));
    EXPECT_TRUE(close(out, silu));
    for (int64_t approx : {0, 1}) {
      RUN_OK("ds.gelu_grad", {&x, &g}, {&out}, {approx});
      REF_OK(gelu, ref::gelu_grad(x.toRef(), g.toRef(), approx == 1));
      EXPECT_TRUE(close(out, gelu)) << "approx " << approx;
    }
    Buf gi = g; // in place over g
    RUN_OK("ds.gelu_grad", {&x, &gi}, {&gi}, {0});
    RUN_OK("ds.gelu_grad", {&x, &g}, {&out}, {0});
    EXPECT_TRUE(bitwiseEqual(gi, out));
  }
  Buf x({3}), g({3}), out({3});
  EXPECT_EQ(run("ds.gelu_grad", {&x, &g}, {&out}, {2}),
            "ds.gelu_grad: approximate must be 0 (erf) or 1 (tanh), got 2");
}

TEST_P(ElementwiseKernels, BiasGeluMatchesAddThenGelu) {
  SEEDED_RNG(rng);
  for (const Shape &s : {Shape{3, 5, 7}, Shape{13}, Shape{300, 257}})
    for (int64_t approx : {0, 1}) {
      SCOPED_TRACE(shapeString(s) + " approx " + std::to_string(approx));
      Buf x = uniform(rng, s, -4, 4), b = uniform(rng, {s.back()});
      Buf sum = poisoned(s), y = poisoned(s);
      RUN_OK("ds.bias_gelu", {&x, &b}, {&sum, &y}, {approx});
      REF_OK(wantSum, ref::binary(ref::BinaryKind::Add, x.toRef(), b.toRef()));
      EXPECT_TRUE(close(sum, ref::cast(wantSum, ref::DType::f32).value, 0));
      REF_OK(want, ref::unary(approx ? ref::UnaryKind::GeluTanh
                                     : ref::UnaryKind::GeluErf,
                              sum.toRef()));
      EXPECT_TRUE(close(y, want, 1e-5, 1e-14));
      RUN_OK("ds.bias_gelu", {&x, &b}, {&x, &sum}, {approx}); // sum over x
      EXPECT_TRUE(bitwiseEqual(sum, y));
    }
  Buf x({2, 4}), b({3}), s({2, 4}), y({2, 4});
  EXPECT_EQ(run("ds.bias_gelu", {&x, &b}, {&s, &y}, {0}),
            "ds.bias_gelu: bias has shape [3] but needs [4] (the last dim of "
            "x)");
}

//===--- Cast, copy, dropout ----------------------------------------------===//

ref::DType refDType(DType t) {
  switch (t) {
  case DType::f16:
    return ref::DType::f16;
  case DType::bf16:
    return ref::DType::bf16;
  case DType::f32:
    return ref::DType::f32;
  default:
    return ref::DType::f64;
  }
}

TEST_P(CastKernels, RoundsToNearestEvenBetweenFloatFormats) {
  SEEDED_RNG(rng);
  // Random values over many binades plus ties, overflow, subnormals, NaN.
  std::vector<double> v;
  std::uniform_real_distribution<double> mant(-1, 1);
  std::uniform_int_distribution<int> expo(-30, 20);
  for (int i = 0; i < 3000; ++i)
    v.push_back(std::ldexp(mant(rng), expo(rng)));
  for (double s : {1.0, -1.0})
    for (double e : {0.0, 0x1p-11, 0x1p-11 + 0x1p-40, 3 * 0x1p-11, 0x1p-8,
                     3 * 0x1p-8, 0x1p-9 + 0x1p-40})
      v.push_back(s * (1 + e));
  for (double x :
       {65504.0, 65519.0, 65520.0, 70000.0, 3.4e38, 3.5e38, 1e39, 6e-8, 3e-8,
        2.9e-8, 1e-40, 1e-46, 0.0, -0.0, kInf, -kInf, kNaN})
    v.push_back(x);
  const DType floats[] = {DType::f32, DType::f64, DType::f16, DType::bf16};
  for (DType from : floats)
    for (DType to : floats) {
      SCOPED_TRACE(std::string(rt::dtypeName(from)) + " -> " +
                   rt::dtypeName(to));
      Buf x({int64_t(v.size())}, from);
      for (size_t i = 0; i < v.size(); ++i) // the source's own rounding
        x.set(int64_t(i),
              ref::roundToDType(
                  v[i], refDType(from == DType::f64 ? DType::f64 : from)));
      if (from == DType::f16 || from == DType::bf16) // set() goes via float
        for (size_t i = 0; i < v.size(); ++i)
          x.set(int64_t(i), ref::roundToDType(float(v[i]), refDType(from)));
      Buf y = poisoned(x.shape, to);
      RUN_OK("ds.cast", {&x}, {&y});
      int bad = 0;
      for (int64_t i = 0; i < x.numel(); ++i) {
        double want = ref::roundToDType(x.get(i), refDType(to));
        double got = y.get(i);
        bool ok = std::isnan(want)
                      ? std::isnan(got)
                      : got == want && std::signbit(got) == std::signbit(want);
        if (!ok && bad++ < 5)
          ADD_FAILURE() << x.get(i) << " -> " << got << ", want " << want;
      }
    }
}

TEST_P(CastKernels, ShapeAndDtypeErrors) {
  Buf x({3}), y({4}, DType::f16), i({3}, DType::i32), z({3}, DType::f16);
  EXPECT_EQ(run("ds.cast", {&x}, {&y}),
            "ds.cast: output has shape [4] but x has shape [3]");
  EXPECT_EQ(run("ds.cast", {&i}, {&z}),
            "ds.cast: unsupported dtype i32 for x (expected f32, f64, f16 or "
            "bf16)");
}

TEST_P(CopyKernels, CopiesBytesAcrossShapes) {
  SEEDED_RNG(rng);
  Buf x = uniform(rng, {3, 5, 7}), y = poisoned({105}), z = poisoned({7, 15});
  RUN_OK("ds.copy", {&x}, {&y});
  EXPECT_EQ(std::memcmp(x.words.data(), y.words.data(), x.bytes()), 0);
  RUN_OK("ds.copy", {&x}, {&x}); // in place: nothing to do
  Buf idx = indices(rng, {5, 3}, 100, DType::i64), w({5, 3}, DType::i64);
  RUN_OK("ds.copy", {&idx}, {&w});
  EXPECT_TRUE(bitwiseEqual(idx, w));
  Buf small({104});
  EXPECT_EQ(run("ds.copy", {&x}, {&small}),
            "ds.copy: x holds 420 bytes (f32 [3, 5, 7]) but the output holds "
            "416 (f32 [104])");
  (void)z;
}

TEST_P(CopyKernels, FillWritesTheValueInTheOutputDtype) {
  for (DType t : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32,
                  DType::i64}) {
    Buf y = poisoned({3, 5}, t);
    double v = t == DType::i32 || t == DType::i64 ? -7 : 0.1;
    RUN_OK("ds.fill", {}, {&y}, {}, {v});
    double want = t == DType::i32 || t == DType::i64
                      ? v
                      : ref::roundToDType(v, refDType(t));
    for (int64_t i = 0; i < y.numel(); ++i)
      ASSERT_EQ(y.get(i), want) << rt::dtypeName(t);
  }
  Buf i({2}, DType::i32), empty({0});
  EXPECT_EQ(run("ds.fill", {}, {&i}, {}, {0.5}),
            "ds.fill: value 0.5 is not an integer in the range of i32");
  RUN_OK("ds.fill", {}, {&empty}, {}, {1.0});
}

TEST_P(DropoutKernels, MatchesReferenceMask) {
  SEEDED_RNG(rng);
  for (double rate : {0.0, 0.1, 0.5, 0.9, 1.0})
    for (const Shape &s : {Shape{3, 5, 7}, Shape{1013}, Shape{64}, Shape{}}) {
      SCOPED_TRACE("rate " + std::to_string(rate) + " " + shapeString(s));
      rt::KernelContext ctx;
      ctx.seed = rng();
      ctx.step = uint32_t(rng());
      uint32_t id = uint32_t(rng());
      Buf x = uniform(rng, s), y = poisoned(s);
      RUN_OK("ds.dropout", {&x}, {&y}, {int64_t(id)}, {rate}, &ctx);
      REF_OK(want, ref::dropout(x.toRef(), rate, ctx.seed, id, ctx.step));
      EXPECT_TRUE(close(y, want));
      for (int64_t i = 0; i < y.numel(); ++i) // the very same mask
        ASSERT_EQ(y.get(i) == 0, want.data[size_t(i)] == 0) << i;
      RUN_OK("ds.dropout", {&x}, {&x}, {int64_t(id)}, {rate}, &ctx);
      EXPECT_TRUE(bitwiseEqual(x, y));
    }
  Buf x({4}), y({4});
  EXPECT_EQ(run("ds.dropout", {&x}, {&y}, {1}, {1.5}),
            "ds.dropout: rate must be in [0, 1], got 1.5");
}

// A micro-batch's rows get the masks they would get as rows of a bigger
// batch: element keys are global sample indices, whatever the split.
TEST_P(DropoutKernels, MasksFollowTheGlobalSample) {
  SEEDED_RNG(rng);
  // 12 elements a row keeps the batched draw; 7 takes the per-element path.
  for (int64_t row : {12, 7}) {
    SCOPED_TRACE("row " + std::to_string(row));
    rt::KernelContext ctx;
    ctx.seed = rng();
    ctx.step = uint32_t(rng());
    Buf whole = uniform(rng, Shape{5, row}), all = poisoned(Shape{5, row});
    RUN_OK("ds.dropout", {&whole}, {&all}, {3}, {0.5}, &ctx);
    for (int64_t first : {1, 3}) {
      Buf part = uniform(rng, Shape{2, row}), out = poisoned(Shape{2, row});
      for (int64_t i = 0; i < 2 * row; ++i)
        part.set(i, whole.get(first * row + i));
      ctx.sampleOffset = uint64_t(first);
      RUN_OK("ds.dropout", {&part}, {&out}, {3}, {0.5}, &ctx);
      REF_OK(want, ref::dropout(part.toRef(), 0.5, ctx.seed, 3, ctx.step,
                                uint64_t(first)));
      EXPECT_TRUE(close(out, want));
      for (int64_t i = 0; i < 2 * row; ++i)
        ASSERT_EQ(out.get(i), all.get(first * row + i)) << i;
      ctx.sampleOffset = 0;
    }
  }
}

//===--- Matmul -----------------------------------------------------------===//

TEST_P(MatmulKernels, AllTransposesBatchesAndBroadcasts) {
  SEEDED_RNG(rng);
  struct Case {
    Shape a, b; // untransposed: a [..., M, K], b [..., K, N]
  };
  const Case cases[] = {
      {{5, 7}, {7, 3}},
      {{13, 1}, {1, 5}},
      {{2, 3, 5, 7}, {2, 3, 7, 4}},
      {{2, 1, 5, 7}, {3, 7, 4}},
      {{5, 7}, {3, 7, 13}},
      {{2, 13, 7}, {7, 5}}, // the linear layer: one sgemm
      {{2, 3, 13, 7}, {1, 7, 5}},
      {{4, 65, 129}, {129, 33}},
      {{3, 0, 5}, {5, 4}},
      {{3, 5, 0}, {0, 4}}, // K = 0: zeros
  };
  for (const Case &c : cases)
    for (int ta : {0, 1})
      for (int tb : {0, 1}) {
        Shape sa = c.a, sb = c.b;
        if (ta)
          std::swap(sa[sa.size() - 1], sa[sa.size() - 2]);
        if (tb)
          std::swap(sb[sb.size() - 1], sb[sb.size() - 2]);
        SCOPED_TRACE(shapeString(sa) + (ta ? "^T" : "") + " x " +
                     shapeString(sb) + (tb ? "^T" : ""));
        Buf a = uniform(rng, sa), b = uniform(rng, sb);
        REF_OK(want, ref::matmul(a.toRef(), b.toRef(), ta, tb));
        Buf out = poisoned(want.shape);
        RUN_OK("ds.matmul", {&a, &b}, {&out}, {ta, tb});
        EXPECT_TRUE(close(out, want));
      }
}

TEST_P(MatmulKernels, ShapeErrors) {
  Buf a({3, 4}), b({5, 6}), out({3, 6}), v({4});
  EXPECT_EQ(run("ds.matmul", {&a, &b}, {&out}, {0, 0}),
            "ds.matmul: contraction dims differ: a [3, 4] vs b [5, 6]");
  EXPECT_EQ(run("ds.matmul", {&a, &v}, {&out}, {0, 0}),
            "ds.matmul: operands need rank >= 2, got [3, 4] and [4]");
  Buf b2({4, 6}), wrong({6, 3});
  EXPECT_EQ(run("ds.matmul", {&a, &b2}, {&wrong}, {0, 0}),
            "ds.matmul: output has shape [6, 3] but [3, 4] x [4, 6] gives "
            "[3, 6]");
  Buf c({2, 3, 4}), d({3, 4, 6}), o({3, 3, 6});
  EXPECT_EQ(run("ds.matmul", {&c, &d}, {&o}, {0, 0}),
            "ds.matmul: batch dims of [2, 3, 4] and [3, 4, 6] do not "
            "broadcast");
}

//===--- Norms and softmax ------------------------------------------------===//

const Shape kRowShapes[] = {{3, 5, 7}, {13}, {2, 3, 257}, {1, 1}, {300, 64}};

TEST_P(NormsKernels, LayerNormMatchesReference) {
  SEEDED_RNG(rng);
  for (const Shape &s : kRowShapes)
    for (bool bias : {true, false}) {
      SCOPED_TRACE(shapeString(s) + (bias ? " with bias" : ""));
      int64_t C = s.back();
      Buf x = uniform(rng, s, -3, 5), w = uniform(rng, {C}),
          b = uniform(rng, {C}), y = poisoned(s);
      std::vector<Buf *> ins = {&x, &w};
      if (bias)
        ins.push_back(&b);
      RUN_OK("ds.layer_norm", ins, {&y}, {}, {1e-5});
      ref::Tensor wr = w.toRef(), br = b.toRef();
      REF_OK(want, ref::layer_norm(x.toRef(), &wr, bias ? &br : nullptr, 1e-5));
      EXPECT_TRUE(close(y, want));
      RUN_OK("ds.layer_norm", ins, {&x}, {}, {1e-5}); // in place over x
      EXPECT_TRUE(bitwiseEqual(x, y));
    }
  Buf x({2, 4}), w({3}), y({2, 4});
  EXPECT_EQ(run("ds.layer_norm", {&x, &w}, {&y}, {}, {1e-5}),
            "ds.layer_norm: w has shape [3] but needs [4] (the last dim of x)");
  EXPECT_EQ(run("ds.layer_norm", {&x}, {&y}, {}, {1e-5}),
            "ds.layer_norm: expects 2 or 3 inputs (x, w[, b]), got 1");
}

TEST_P(NormsKernels, AddLayerNormMatchesAddThenLayerNorm) {
  SEEDED_RNG(rng);
  for (const Shape &s : kRowShapes)
    for (bool bias : {true, false}) {
      SCOPED_TRACE(shapeString(s) + (bias ? " with bias" : ""));
      int64_t C = s.back();
      Buf x = uniform(rng, s, -3, 5), r = uniform(rng, s),
          w = uniform(rng, {C}), b = uniform(rng, {C});
      Buf sum = poisoned(s), y = poisoned(s);
      std::vector<Buf *> ins = {&x, &r, &w};
      if (bias)
        ins.push_back(&b);
      RUN_OK("ds.add_layer_norm", ins, {&sum, &y}, {}, {1e-5});
      REF_OK(wantSum, ref::binary(ref::BinaryKind::Add, x.toRef(), r.toRef()));
      EXPECT_TRUE(close(sum, ref::cast(wantSum, ref::DType::f32).value, 0));
      ref::Tensor wr = w.toRef(), br = b.toRef();
      REF_OK(want,
             ref::layer_norm(sum.toRef(), &wr, bias ? &br : nullptr, 1e-5));
      EXPECT_TRUE(close(y, want));
      // The residual stream updated in place, the output over x.
      RUN_OK("ds.add_layer_norm", ins, {&r, &x}, {}, {1e-5});
      EXPECT_TRUE(bitwiseEqual(r, sum));
      EXPECT_TRUE(bitwiseEqual(x, y));
    }
}

TEST_P(NormsKernels, LayerNormGradMatchesReference) {
  SEEDED_RNG(rng);
  for (const Shape &s : kRowShapes) {
    SCOPED_TRACE(shapeString(s));
    int64_t C = s.back();
    Buf x = uniform(rng, s, -3, 5), w = uniform(rng, {C}), g = uniform(rng, s);
    Buf dx = poisoned(s), dw = poisoned({C}), db = poisoned({C});
    RUN_OK("ds.layer_norm_grad", {&x, &w, &g}, {&dx, &dw, &db}, {}, {1e-5});
    ref::Tensor wr = w.toRef();
    REF_OK(want, ref::layer_norm_grad(x.toRef(), &wr, g.toRef(), 1e-5));
    EXPECT_TRUE(close(dx, want.dx, 1e-4));
    EXPECT_TRUE(close(dw, want.dw, 1e-4));
    EXPECT_TRUE(close(db, want.db, 1e-4));
  }
}

TEST_P(NormsKernels, RmsNormAndGradMatchReference) {
  SEEDED_RNG(rng);
  for (const Shape &s : kRowShapes) {
    SCOPED_TRACE(shapeString(s));
    int64_t C = s.back();
    Buf x = uniform(rng, s), w = uniform(rng, {C}), g = uniform(rng, s);
    ref::Tensor wr = w.toRef();
    Buf y = poisoned(s);
    RUN_OK("ds.rms_norm", {&x, &w}, {&y}, {}, {1e-6});
    REF_OK(want, ref::rms_norm(x.toRef(), &wr, 1e-6));
    EXPECT_TRUE(close(y, want));
    Buf dx = poisoned(s), dw = poisoned({C});
    RUN_OK("ds.rms_norm_grad", {&x, &w, &g}, {&dx, &dw}, {}, {1e-6});
    REF_OK(grads, ref::rms_norm_grad(x.toRef(), &wr, g.toRef(), 1e-6));
    EXPECT_TRUE(close(dx, grads.dx, 1e-4));
    EXPECT_TRUE(close(dw, grads.dw, 1e-4));
    RUN_OK("ds.rms_norm", {&x, &w}, {&x}, {}, {1e-6});
    EXPECT_TRUE(bitwiseEqual(x, y));
  }
}

TEST_P(NormsKernels, SoftmaxAndGradMatchReference) {
  SEEDED_RNG(rng);
  for (const Shape &s : kRowShapes) {
    SCOPED_TRACE(shapeString(s));
    Buf x = uniform(rng, s, -10, 10), g = uniform(rng, s), y = poisoned(s);
    RUN_OK("ds.softmax", {&x}, {&y});
    REF_OK(want, ref::softmax(x.toRef()));
    EXPECT_TRUE(close(y, want));
    Buf dx = poisoned(s);
    RUN_OK("ds.softmax_grad", {&y, &g}, {&dx});
    REF_OK(grad, ref::softmax_grad(y.toRef(), g.toRef()));
    EXPECT_TRUE(close(dx, grad));
    RUN_OK("ds.softmax", {&x}, {&x});
    EXPECT_TRUE(bitwiseEqual(x, y));
  }
}

//===--- Attention and rotary ---------------------------------------------===//

struct AttentionCase {
  int64_t B, H, Tq, Tk, D, Dv;
};
const AttentionCase kAttention[] = {
    {2, 3, 5, 5, 7, 7},     {1, 2, 13, 13, 8, 5},   {2, 3, 5, 13, 7, 5},
    {1, 1, 7, 3, 4, 4},     {2, 4, 33, 33, 16, 16}, {1, 1, 1, 1, 1, 1},
    {1, 2, 150, 150, 5, 3}, {1, 1, 100, 131, 4, 6}, {1, 1, 131, 70, 3, 4},
    {1, 1, 0, 5, 3, 4},     {1, 1, 4, 0, 3, 4},
};

TEST_P(AttentionKernels, ForwardMatchesReference) {
  SEEDED_RNG(rng);
  for (const AttentionCase &c : kAttention)
    for (int causal : {0, 1}) {
      SCOPED_TRACE("B H Tq Tk D Dv " +
                   shapeString({c.B, c.H, c.Tq, c.Tk, c.D, c.Dv}) +
                   (causal ? " causal" : ""));
      Buf q = uniform(rng, {c.B, c.H, c.Tq, c.D}),
          k = uniform(rng, {c.B, c.H, c.Tk, c.D}),
          v = uniform(rng, {c.B, c.H, c.Tk, c.Dv});
      double scale = 1.0 / std::sqrt(double(c.D));
      Buf out = poisoned({c.B, c.H, c.Tq, c.Dv});
      RUN_OK("ds.attention", {&q, &k, &v}, {&out}, {causal}, {scale});
      REF_OK(want,
             ref::attention(q.toRef(), k.toRef(), v.toRef(), causal, scale));
      EXPECT_TRUE(close(out, want));
    }
}

TEST_P(AttentionKernels, GradMatchesReference) {
  SEEDED_RNG(rng);
  for (const AttentionCase &c : kAttention)
    for (int causal : {0, 1}) {
      SCOPED_TRACE("B H Tq Tk D Dv " +
                   shapeString({c.B, c.H, c.Tq, c.Tk, c.D, c.Dv}) +
                   (causal ? " causal" : ""));
      Buf q = uniform(rng, {c.B, c.H, c.Tq, c.D}),
          k = uniform(rng, {c.B, c.H, c.Tk, c.D}),
          v = uniform(rng, {c.B, c.H, c.Tk, c.Dv}),
          g = uniform(rng, {c.B, c.H, c.Tq, c.Dv});
      double scale = 1.0 / std::sqrt(double(c.D));
      Buf dq = poisoned(q.shape), dk = poisoned(k.shape),
          dv = poisoned(v.shape);
      RUN_OK("ds.attention_grad", {&q, &k, &v, &g}, {&dq, &dk, &dv}, {causal},
             {scale});
      REF_OK(want, ref::attention_grad(q.toRef(), k.toRef(), v.toRef(),
                                       g.toRef(), causal, scale));
      EXPECT_TRUE(close(dq, want.dq, 1e-4));
      EXPECT_TRUE(close(dk, want.dk, 1e-4));
      EXPECT_TRUE(close(dv, want.dv, 1e-4));
    }
  Buf q({1, 2, 3, 4}), k({1, 2, 5, 4}), v({1, 2, 5, 6}), out({1, 2, 3, 4});
  EXPECT_EQ(run("ds.attention", {&q, &k, &v}, {&out}, {1}, {0.5}),
            "ds.attention: the output has shape [1, 2, 3, 4] but needs "
            "[1, 2, 3, 6]");
  Buf k2({1, 2, 5, 3});
  EXPECT_EQ(run("ds.attention", {&q, &k2, &v}, {&out}, {1}, {0.5}),
            "ds.attention: incompatible shapes q [1, 2, 3, 4], k [1, 2, 5, 3], "
            "v [1, 2, 5, 6] (need k [B, H, Tk, D] and v [B, H, Tk, Dv])");
}

TEST_P(AttentionKernels, RotaryMatchesReference) {
  SEEDED_RNG(rng);
  for (const Shape &s : {Shape{2, 3, 5, 8}, Shape{7, 6}, Shape{1, 13, 2}})
    for (int inverse : {0, 1}) {
      SCOPED_TRACE(shapeString(s));
      Buf x = uniform(rng, s), y = poisoned(s);
      RUN_OK("ds.rotary", {&x}, {&y}, {inverse}, {10000.0});
      REF_OK(want, ref::rotary(x.toRef(), 10000.0, inverse));
      EXPECT_TRUE(close(y, want));
      RUN_OK("ds.rotary", {&x}, {&x}, {inverse}, {10000.0});
      EXPECT_TRUE(bitwiseEqual(x, y));
    }
  Buf x({3, 5}), y({3, 5});
  EXPECT_EQ(run("ds.rotary", {&x}, {&y}, {0}, {10000.0}),
            "ds.rotary: x must be [..., T, D] with D even, got [3, 5]");
}

//===--- Embedding and cross-entropy --------------------------------------===//

TEST_P(LookupKernels, EmbeddingAndGradMatchReference) {
  SEEDED_RNG(rng);
  for (DType it : {DType::i32, DType::i64})
    for (const auto &[V, C, idxShape] :
         {std::tuple<int64_t, int64_t, Shape>{7, 5, {3, 13}},
          {13, 3, {5}},
          {3, 257, {2, 5, 7}},
          {5, 4, {}}}) {
      SCOPED_TRACE(std::string(rt::dtypeName(it)) + " V " + std::to_string(V));
      Buf table = uniform(rng, {V, C}), idx = indices(rng, idxShape, V, it);
      Shape outShape = idxShape;
      outShape.push_back(C);
      Buf out = poisoned(outShape);
      RUN_OK("ds.embedding", {&table, &idx}, {&out});
      REF_OK(want, ref::embedding(table.toRef(), idx.toRef()));
      EXPECT_TRUE(close(out, want));
      Buf g = uniform(rng, outShape), dt = poisoned({V, C});
      RUN_OK("ds.embedding_grad", {&idx, &g}, {&dt});
      REF_OK(grad, ref::embedding_grad(idx.toRef(), g.toRef(), V));
      EXPECT_TRUE(close(dt, grad));
    }
}

TEST_P(LookupKernels, EmbeddingIndexErrorsNameTheValue) {
  Buf table({5, 3}), out({2, 3}), idx({2}, DType::i32);
  idx.set(0, 1);
  idx.set(1, 5);
  EXPECT_EQ(run("ds.embedding", {&table, &idx}, {&out}),
            "ds.embedding: index 5 at position 1 is outside [0, 5): the "
            "table has V = 5 rows");
  idx.set(1, -2);
  EXPECT_EQ(run("ds.embedding", {&table, &idx}, {&out}),
            "ds.embedding: index -2 at position 1 is outside [0, 5): the "
            "table has V = 5 rows");
  Buf g({2, 3}), dt({4, 3});
  idx.set(1, 4);
  EXPECT_EQ(run("ds.embedding_grad", {&idx, &g}, {&dt}),
            "ds.embedding_grad: index 4 at position 1 is outside [0, 4): the "
            "table has V = 4 rows");
  Buf fidx({2});
  EXPECT_EQ(run("ds.embedding", {&table, &fidx}, {&out}),
            "ds.embedding: unsupported dtype f32 for indices (expected i32 or "
            "i64)");
}

TEST_P(LookupKernels, CrossEntropyAndGradMatchReference) {
  SEEDED_RNG(rng);
  for (DType it : {DType::i32, DType::i64})
    for (const auto &[V, tShape] : {std::pair<int64_t, Shape>{7, {3, 13}},
                                    {257, {5}},
                                    {5, {2, 3, 7}},
                                    {13, {}}})
      for (int64_t ignore : {int64_t(-1), int64_t(2), int64_t(-100)}) {
        SCOPED_TRACE(std::string(rt::dtypeName(it)) + " V " +
                     std::to_string(V) + " ignore " + std::to_string(ignore));
        Shape lShape = tShape;
        lShape.push_back(V);
        Buf logits = uniform(rng, lShape, -4, 4),
            targets = indices(rng, tShape, V, it);
        for (int64_t i = 0; i < targets.numel(); i += 3) // some ignored
          targets.set(i, double(ignore));
        Buf loss = poisoned({});
        RUN_OK("ds.cross_entropy", {&logits, &targets}, {&loss}, {ignore});
        REF_OK(want,
               ref::cross_entropy(logits.toRef(), targets.toRef(), ignore));
        EXPECT_TRUE(close(loss, want));
        Buf g = scalarBuf(0.75), dx = poisoned(lShape);
        RUN_OK("ds.cross_entropy_grad", {&logits, &targets, &g}, {&dx},
               {ignore});
        REF_OK(grad, ref::cross_entropy_grad(logits.toRef(), targets.toRef(),
                                             0.75, ignore));
        EXPECT_TRUE(close(dx, grad));
        RUN_OK("ds.cross_entropy_grad", {&logits, &targets, &g}, {&logits},
               {ignore}); // in place over the logits
        EXPECT_TRUE(bitwiseEqual(logits, dx));
      }
}

TEST_P(LookupKernels, CrossEntropyEdgeCasesAndErrors) {
  Buf logits = filled({2, 3}, 0.5), targets({2}, DType::i64), loss(Shape{});
  targets.set(0, -1);
  targets.set(1, -1);
  RUN_OK("ds.cross_entropy", {&logits, &targets}, {&loss}, {-1});
  EXPECT_EQ(loss.get(0), 0.0); // every position ignored
  Buf g = scalarBuf(1), dx = poisoned({2, 3});
  RUN_OK("ds.cross_entropy_grad", {&logits, &targets, &g}, {&dx}, {-1});
  for (int64_t i = 0; i < 6; ++i)
    EXPECT_EQ(dx.get(i), 0.0);
  targets.set(1, 3);
  EXPECT_EQ(run("ds.cross_entropy", {&logits, &targets}, {&loss}, {-1}),
            "ds.cross_entropy: target 3 at position 1 is outside [0, 3) and "
            "is not the ignore index -1");
  EXPECT_EQ(run("ds.cross_entropy_grad", {&logits, &targets, &g}, {&dx}, {-1}),
            "ds.cross_entropy_grad: target 3 at position 1 is outside [0, 3) "
            "and is not the ignore index -1");
  Buf t3({3}, DType::i32);
  EXPECT_EQ(run("ds.cross_entropy", {&logits, &t3}, {&loss}, {-1}),
            "ds.cross_entropy: targets of shape [3] do not match logits of "
            "shape [2, 3] (need logits [..., V] and targets [...])");
}

//===--- Shapes and data movement -----------------------------------------===//

TEST_P(ShapeKernels, TransposeMatchesReferenceForAnyDtype) {
  SEEDED_RNG(rng);
  const std::pair<Shape, std::vector<int64_t>> cases[] = {
      {{2, 3, 5, 7}, {0, 2, 1, 3}},
      {{2, 3, 5, 7}, {3, 2, 1, 0}},
      {{13, 5}, {1, 0}},
      {{2, 3, 5, 7}, {0, 1, 2, 3}},
      {{1, 5, 1, 7}, {3, 1, 2, 0}},
      {{4, 1, 65, 33}, {0, 2, 3, 1}},
      {{7}, {0}},
      {{}, {}},
  };
  for (DType t : {DType::f32, DType::i32, DType::f64, DType::f16})
    for (const auto &[s, perm] : cases) {
      SCOPED_TRACE(shapeString(s) + " by " + shapeString(perm));
      Buf x = uniform(rng, s, -100, 100, t);
      REF_OK(want, ref::transpose(x.toRef(), perm));
      Buf y = poisoned(want.shape, t);
      RUN_OK("ds.transpose", {&x}, {&y}, perm);
      EXPECT_TRUE(close(y, want, 0));
    }
  Buf x({2, 3}), y({3, 2});
  EXPECT_EQ(run("ds.transpose", {&x}, {&y}, {0, 0}),
            "ds.transpose: [0, 0] is not a permutation of the dims of a "
            "tensor of shape [2, 3]");
}

TEST_P(ShapeKernels, SlicePadBroadcastMatchReference) {
  SEEDED_RNG(rng);
  Buf x = uniform(rng, {5, 7, 13});
  for (const auto &[off, size] :
       {std::pair<Shape, Shape>{{0, 0, 0}, {5, 7, 13}},
        {{1, 2, 3}, {3, 4, 5}},
        {{4, 0, 12}, {1, 7, 1}},
        {{2, 3, 0}, {0, 2, 13}}}) {
    SCOPED_TRACE("slice " + shapeString(off) + " " + shapeString(size));
    Buf y = poisoned(size);
    RUN_OK("ds.slice", {&x}, {&y}, off);
    REF_OK(want, ref::slice(x.toRef(), off, size));
    EXPECT_TRUE(close(y, want, 0));
  }
  Buf tooBig({3, 8, 1});
  EXPECT_EQ(run("ds.slice", {&x}, {&tooBig}, {0, 0, 0}),
            "ds.slice: offset 0 size 8 is out of range for dim 1 of shape "
            "[5, 7, 13]");
  for (const auto &[low, high] : {std::pair<Shape, Shape>{{0, 0, 0}, {0, 0, 0}},
                                  {{1, 2, 3}, {3, 0, 5}},
                                  {{0, 1, 0}, {2, 0, 1}}}) {
    SCOPED_TRACE("pad " + shapeString(low) + " " + shapeString(high));
    REF_OK(want, ref::pad(x.toRef(), low, high));
    Buf y = poisoned(want.shape);
    RUN_OK("ds.pad", {&x}, {&y}, low);
    EXPECT_TRUE(close(y, want, 0));
  }
  Buf small({5, 7, 14});
  EXPECT_EQ(run("ds.pad", {&x}, {&small}, {0, 0, 2}),
            "ds.pad: low padding 2 of dim 2 does not fit [5, 7, 13] into "
            "[5, 7, 14] (padding must be non-negative)");
  for (const auto &[from, to] : {std::pair<Shape, Shape>{{13}, {5, 7, 13}},
                                 {{7, 1}, {5, 7, 13}},
                                 {{}, {3, 4}},
                                 {{1, 7, 13}, {5, 7, 13}},
                                 {{5, 1, 1}, {5, 7, 13}},
                                 {{3, 4}, {3, 4}}}) {
    SCOPED_TRACE("broadcast " + shapeString(from) + " " + shapeString(to));
    Buf b = uniform(rng, from), y = poisoned(to);
    RUN_OK("ds.broadcast", {&b}, {&y});
    REF_OK(want, ref::broadcast_to(b.toRef(), to));
    EXPECT_TRUE(close(y, want, 0));
  }
  Buf b({3}), y({4, 5});
  EXPECT_EQ(run("ds.broadcast", {&b}, {&y}),
            "ds.broadcast: cannot broadcast [3] to [4, 5]");
}

TEST_P(ShapeKernels, ConcatAndSplitMatchReference) {
  SEEDED_RNG(rng);
  for (int64_t axis : {0, 1, 2}) {
    SCOPED_TRACE("axis " + std::to_string(axis));
    std::vector<Buf> parts;
    std::vector<ref::Tensor> refs;
    std::vector<int64_t> sizes = {3, 1, 5, 0};
    for (int64_t s : sizes) {
      Shape shape = {2, 3, 7};
      shape[size_t(axis)] = s;
      parts.push_back(uniform(rng, shape));
      refs.push_back(parts.back().toRef());
    }
    REF_OK(want, ref::concat(refs, axis));
    Buf y = poisoned(want.shape);
    std::vector<Buf *> ins;
    for (Buf &p : parts)
      ins.push_back(&p);
    RUN_OK("ds.concat", ins, {&y}, {axis});
    EXPECT_TRUE(close(y, want, 0));
    REF_OK(pieces, ref::split(y.toRef(), axis, sizes));
    std::vector<Buf> outs;
    for (const ref::Tensor &p : pieces)
      outs.push_back(poisoned(p.shape));
    std::vector<Buf *> outPtrs;
    for (Buf &o : outs)
      outPtrs.push_back(&o);
    RUN_OK("ds.split", {&y}, outPtrs, {axis});
    for (size_t i = 0; i < outs.size(); ++i)
      EXPECT_TRUE(close(outs[i], pieces[i], 0)) << "piece " << i;
  }
  Buf a({2, 3}), b({3, 3}), y({5, 3}), z({2, 6}), a2({2, 3});
  EXPECT_EQ(run("ds.concat", {&a, &b}, {&z}, {1}),
            "ds.concat: input 1 has shape [3, 3], incompatible with input 0's "
            "[2, 3] along axis 1");
  EXPECT_EQ(run("ds.split", {&y}, {&a, &a2}, {0}),
            "ds.split: outputs sum to 4 along axis 0 but x [5, 3] has 5");
}

TEST_P(ShapeKernels, IotaMatchesReference) {
  for (DType t : {DType::f32, DType::i32, DType::i64, DType::f64})
    for (const auto &[s, dim] : {std::pair<Shape, int64_t>{{4}, 0},
                                 {{3, 5, 7}, 1},
                                 {{3, 5, 7}, 2},
                                 {{3, 5, 7}, 0}}) {
      Buf y = poisoned(s, t);
      RUN_OK("ds.iota", {}, {&y}, {dim});
      REF_OK(want, ref::iota(s, dim));
      EXPECT_TRUE(close(y, want, 0)) << rt::dtypeName(t);
    }
  Buf y({3});
  EXPECT_EQ(run("ds.iota", {}, {&y}, {1}),
            "ds.iota: dim 1 is out of range for shape [3]");
}

TEST_P(ReduceKernels, SumMeanMaxMatchReference) {
  SEEDED_RNG(rng);
  const std::pair<Shape, std::vector<int64_t>> cases[] = {
      {{3, 5, 7}, {0}},        {{3, 5, 7}, {2}},       {{3, 5, 7}, {0, 1}},
      {{3, 5, 7}, {1}},        {{3, 5, 7}, {0, 2}},    {{3, 5, 7}, {0, 1, 2}},
      {{3, 5, 7}, {}},         {{1, 5, 1}, {0, 2}},    {{300, 257}, {0}},
      {{4, 1, 13, 5}, {1, 2}}, {{2, 3, 4, 5}, {1, 3}}, {{13}, {0}},
      {{3, 0, 2}, {1}},
  };
  const std::pair<const char *, ref::ReduceKind> kinds[] = {
      {"ds.reduce_sum", ref::ReduceKind::Sum},
      {"ds.reduce_mean", ref::ReduceKind::Mean},
      {"ds.reduce_max", ref::ReduceKind::Max}};
  for (const auto &[name, kind] : kinds)
    for (const auto &[s, axes] : cases)
      for (bool keepdim : {false, true}) {
        SCOPED_TRACE(std::string(name) + " " + shapeString(s) + " over " +
                     shapeString(axes) + (keepdim ? " keepdim" : ""));
        Buf x = uniform(rng, s);
        REF_OK(want, ref::reduce(kind, x.toRef(), axes, keepdim));
        Buf y = poisoned(want.shape);
        RUN_OK(name, {&x}, {&y}, axes);
        EXPECT_TRUE(close(y, want, 1e-5));
      }
  Buf x = filled({2, 3}, 1.0), y = poisoned({2});
  x.set(4, kNaN);
  RUN_OK("ds.reduce_max", {&x}, {&y}, {1});
  EXPECT_EQ(y.get(0), 1.0);
  EXPECT_TRUE(std::isnan(y.get(1)));
  Buf wrong({3});
  EXPECT_EQ(run("ds.reduce_sum", {&x}, {&wrong}, {1}),
            "ds.reduce_sum: output has shape [3] but reducing [2, 3] over [1] "
            "gives [2] (or with kept dims)");
  EXPECT_EQ(run("ds.reduce_sum", {&x}, {&y}, {1, 0}),
            "ds.reduce_sum: axes [1, 0] must be strictly increasing and "
            "within rank 2");
}

//===--- AdamW ------------------------------------------------------------===//

TEST_P(AdamWKernels, MatchesReferenceAndRunsInPlace) {
  SEEDED_RNG(rng);
  for (const Shape &s : {Shape{3, 5, 7}, Shape{13}, Shape{40013}})
    for (int64_t step : {1, 2, 1000}) {
      SCOPED_TRACE(shapeString(s) + " step " + std::to_string(step));
      Buf p = uniform(rng, s), g = uniform(rng, s),
          m = uniform(rng, s, -0.1, 0.1), v = uniform(rng, s, 0, 0.01);
      Buf lr = scalarBuf(3e-4), stepB = scalarBuf(double(step)),
          scale = scalarBuf(0.5);
      Buf p2 = poisoned(s), m2 = poisoned(s), v2 = poisoned(s);
      const std::vector<double> hyper = {0.9, 0.95, 1e-8, 0.1};
      RUN_OK("ds.adamw", {&p, &g, &m, &v, &lr, &stepB, &scale}, {&p2, &m2, &v2},
             {}, hyper);
      REF_OK(want, ref::adamw(p.toRef(), g.toRef(), m.toRef(), v.toRef(), 3e-4,
                              step, 0.9, 0.95, 1e-8, 0.1, 0.5));
      EXPECT_TRUE(close(p2, want.p));
      EXPECT_TRUE(close(m2, want.m));
      EXPECT_TRUE(close(v2, want.v));
      RUN_OK("ds.adamw", {&p, &g, &m, &v, &lr, &stepB, &scale}, {&p, &m, &v},
             {}, hyper);
      EXPECT_TRUE(bitwiseEqual(p, p2));
      EXPECT_TRUE(bitwiseEqual(m, m2));
      EXPECT_TRUE(bitwiseEqual(v, v2));
    }
  Buf p({4}), g({4}), m({4}), v({4}), lr = scalarBuf(1e-3), st = scalarBuf(0),
                                      sc = scalarBuf(1);
  EXPECT_EQ(run("ds.adamw", {&p, &g, &m, &v, &lr, &st, &sc}, {&p, &m, &v}, {},
                {0.9, 0.95, 1e-8, 0.1}),
            "ds.adamw: step must be an integer >= 1, got 0");
  EXPECT_EQ(run("ds.adamw", {&p, &g, &m, &v, &lr, &st, &sc}, {&m, &p, &v}, {},
                {0.9, 0.95, 1e-8, 0.1}),
            "ds.adamw: output 0 overlaps input 2 (only an exact in-place "
            "update is allowed)");
}

// dist.shard: this rank's slice of a flat buffer (ZeRO stages 1-2 @apply).
TEST_P(ShapeKernels, DistShardTakesThisRanksSlice) {
  Buf x({8}), out = poisoned({4});
  for (int i = 0; i < 8; ++i)
    x.set(i, i + 0.5);
  rt::KernelContext ctx = defaultContext();
  ctx.rank = 1;
  ctx.worldSize = 2;
  RUN_OK("dist.shard", {&x}, {&out}, {2}, {}, &ctx);
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(out.get(i), i + 4.5) << i;
  EXPECT_EQ(run("dist.shard", {&x}, {&out}, {4}, {}, &ctx),
            "dist.shard: compiled for 4 ranks, running on 2");
}

//===--- Coverage ---------------------------------------------------------===//

// Every kernel of every registered backend has a conformance case here: its
// name appears in the cases above (this file, after the table tests), or it
// is listed with the suite that covers it instead.
TEST(Conformance, EveryRegisteredKernelHasACase) {
  static const std::map<std::string, std::string, std::less<>> elsewhere = {
      {"comm.all_gather", "CommTest (needs ranks)"},
      {"comm.all_reduce", "CommTest (needs ranks)"},
      {"comm.broadcast", "CommTest (needs ranks)"},
      {"comm.reduce_scatter", "CommTest (needs ranks)"},
  };
  std::ifstream in(__FILE__);
  ASSERT_TRUE(in) << "cannot read " << __FILE__;
  std::string text((std::istreambuf_iterator<char>(in)),
                   std::istreambuf_iterator<char>());
  size_t cases = text.find("//===--- Elementwise ----");
  ASSERT_NE(cases, std::string::npos);
  text = text.substr(cases);
  for (const std::string &name : rt::backendNames()) {
    std::string error;
    std::unique_ptr<rt::Backend> b = rt::createBackend(name, error);
    if (!b)
      continue; // not available here: its instances skip too
    for (const rt::KernelInfo &k : rt::cpuKernels()) {
      if (b->findKernel(k.name) == nullptr || elsewhere.count(k.name))
        continue;
      EXPECT_NE(text.find("\"" + std::string(k.name) + "\""), std::string::npos)
          << name << " kernel " << k.name << " has no conformance case";
    }
  }
}

std::string backendName(const testing::TestParamInfo<std::string> &info) {
  return info.param;
}
INSTANTIATE_TEST_SUITE_P(Backends, AdamWKernels,
                         testing::ValuesIn(rt::backendNames()), backendName);
INSTANTIATE_TEST_SUITE_P(Backends, AttentionKernels,
                         testing::ValuesIn(rt::backendNames()), backendName);
INSTANTIATE_TEST_SUITE_P(Backends, CastKernels,
                         testing::ValuesIn(rt::backendNames()), backendName);
INSTANTIATE_TEST_SUITE_P(Backends, CopyKernels,
                         testing::ValuesIn(rt::backendNames()), backendName);
INSTANTIATE_TEST_SUITE_P(Backends, DropoutKernels,
                         testing::ValuesIn(rt::backendNames()), backendName);
INSTANTIATE_TEST_SUITE_P(Backends, ElementwiseKernels,
                         testing::ValuesIn(rt::backendNames()), backendName);
INSTANTIATE_TEST_SUITE_P(Backends, LookupKernels,
                         testing::ValuesIn(rt::backendNames()), backendName);
INSTANTIATE_TEST_SUITE_P(Backends, MatmulKernels,
                         testing::ValuesIn(rt::backendNames()), backendName);
INSTANTIATE_TEST_SUITE_P(Backends, NormsKernels,
                         testing::ValuesIn(rt::backendNames()), backendName);
INSTANTIATE_TEST_SUITE_P(Backends, ReduceKernels,
                         testing::ValuesIn(rt::backendNames()), backendName);
INSTANTIATE_TEST_SUITE_P(Backends, ShapeKernels,
                         testing::ValuesIn(rt::backendNames()), backendName);

} // namespace
