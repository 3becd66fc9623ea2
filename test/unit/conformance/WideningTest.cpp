//===- WideningTest.cpp - the CPU kernels' 16-bit variants ----------------===//
//
// A 16-bit variant (runtime/backends/cpu/Widening.h) must give exactly the
// f32 kernel's result on the widened inputs, rounded once to each output's
// dtype (a fused pair: its two ops', each rounded): checked bitwise, on
// mixes of f32, f16 and bf16 operands, in place and not. And the kernels mixed
// precision trains with, in 16 bits, against the float64 reference within the
// output dtype's rounding.
//
//===----------------------------------------------------------------------===//

#include "runtime/backends/Registry.h"
#include "runtime/backends/cpu/Bf16DotProducts.h"
#include "runtime/backends/cpu/CpuKernels.h"
#include "runtime/core/Half.h"
#include "runtime/kernels/KernelContract.h"
#include "runtime/reference/RefKernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

using namespace dsc;

namespace {

using rt::DType;

struct Operand {
  std::vector<int64_t> shape;
  DType dtype = DType::f32;
  std::vector<double> values = {}; ///< inputs only; rounded to the dtype
  int sameAs = -1;                 ///< outputs: the input it updates in place
};

int64_t numel(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

/// Storage of one operand in `dtype`, 8-byte aligned.
struct Storage {
  std::vector<uint64_t> words;
  DType dtype;
  int64_t n;
  Storage(DType t, int64_t count)
      : words(size_t(count * int64_t(rt::dtypeSize(t)) / 8 + 1)), dtype(t),
        n(count) {}
  void set(int64_t i, double v) {
    switch (dtype) {
    case DType::f32:
      reinterpret_cast<float *>(words.data())[i] = float(v);
      break;
    case DType::bf16:
      reinterpret_cast<uint16_t *>(words.data())[i] = floatToBf16(float(v));
      break;
    case DType::f16:
      reinterpret_cast<uint16_t *>(words.data())[i] = floatToF16(float(v));
      break;
    case DType::i32:
      reinterpret_cast<int32_t *>(words.data())[i] = int32_t(v);
      break;
    default:
      FAIL() << "unused dtype";
    }
  }
  double get(int64_t i) const {
    switch (dtype) {
    case DType::f32:
      return reinterpret_cast<const float *>(words.data())[i];
    case DType::bf16:
      return bf16ToFloat(reinterpret_cast<const uint16_t *>(words.data())[i]);
    case DType::f16:
      return f16ToFloat(reinterpret_cast<const uint16_t *>(words.data())[i]);
    case DType::i32:
      return reinterpret_cast<const int32_t *>(words.data())[i];
    default:
      return NAN;
    }
  }
};

/// Runs `kernel` with operands in `dtypes` (the variant they select) or,
/// with `asF32`, every float operand as f32; returns each output's values.
std::vector<std::vector<double>>
run(const char *kernel, const std::vector<Operand> &ins,
    const std::vector<Operand> &outs, std::vector<int64_t> ints,
    std::vector<double> floats, bool asF32, std::string &error) {
  auto dtypeOf = [&](const Operand &o) {
    return asF32 && o.dtype != DType::i32 ? DType::f32 : o.dtype;
  };
  std::vector<Storage> inStore, outStore;
  for (const Operand &o : ins) {
    inStore.emplace_back(dtypeOf(o), numel(o.shape));
    // Rounded to the operand's own dtype first: both runs see one input.
    Storage rounded(o.dtype, numel(o.shape));
    for (int64_t i = 0; i < numel(o.shape); ++i) {
      rounded.set(i, o.values[size_t(i)]);
      inStore.back().set(i, rounded.get(i));
    }
  }
  // Outputs start as NaNs: an element a kernel leaves unwritten fails.
  for (const Operand &o : outs) {
    outStore.emplace_back(dtypeOf(o), numel(o.shape));
    std::fill(outStore.back().words.begin(), outStore.back().words.end(),
              ~uint64_t(0));
  }
  std::vector<rt::TensorRef> ti, to;
  std::vector<DType> di, dout;
  for (size_t k = 0; k < ins.size(); ++k) {
    ti.push_back({inStore[k].words.data(), inStore[k].dtype,
                  ins[k].shape.data(), int(ins[k].shape.size())});
    di.push_back(inStore[k].dtype);
  }
  for (size_t k = 0; k < outs.size(); ++k) {
    void *data = outs[k].sameAs >= 0 ? ti[size_t(outs[k].sameAs)].data
                                     : outStore[k].words.data();
    to.push_back({data, outStore[k].dtype, outs[k].shape.data(),
                  int(outs[k].shape.size())});
    dout.push_back(outStore[k].dtype);
  }
  std::string setup;
  static std::unique_ptr<rt::Backend> cpu = rt::createBackend("cpu", setup);
  const rt::KernelInfo *k = cpu->findKernel(kernel, {di.data(), di.size()},
                                            {dout.data(), dout.size()});
  if (!k) {
    error = "no variant";
    return {};
  }
  rt::KernelContext ctx;
  ctx.seed = 5;
  ctx.step = 2;
  rt::KernelArgs a = rt::makeKernelArgs(ti, to, ints, floats, &ctx);
  if (!k->fn(a, error))
    return {};
  std::vector<std::vector<double>> result;
  for (size_t o = 0; o < outs.size(); ++o) {
    const Storage &s =
        outs[o].sameAs >= 0 ? inStore[size_t(outs[o].sameAs)] : outStore[o];
    std::vector<double> v;
    Storage rounded(outs[o].dtype, s.n);
    for (int64_t i = 0; i < s.n; ++i) {
      rounded.set(i, s.get(i)); // the f32 run's rounding to the dtype
      v.push_back(rounded.get(i));
    }
    result.push_back(v);
  }
  return result;
}

std::vector<double> random(int64_t n, uint64_t seed, double lo = -2,
                           double hi = 2) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<double> v(static_cast<size_t>(n));
  for (double &x : v)
    x = u(rng);
  return v;
}

void expectExact(const char *kernel, const std::vector<Operand> &ins,
                 const std::vector<Operand> &outs, std::vector<int64_t> ints,
                 std::vector<double> floats) {
  SCOPED_TRACE(kernel);
  std::string error;
  auto wide = run(kernel, ins, outs, ints, floats, false, error);
  ASSERT_EQ(error, "");
  auto ref = run(kernel, ins, outs, ints, floats, true, error);
  ASSERT_EQ(error, "");
  ASSERT_EQ(wide.size(), ref.size());
  for (size_t o = 0; o < wide.size(); ++o)
    for (size_t i = 0; i < wide[o].size(); ++i)
      ASSERT_EQ(std::memcmp(&wide[o][i], &ref[o][i], sizeof(double)), 0)
          << "output " << o << " element " << i << ": " << wide[o][i] << " vs "
          << ref[o][i];
}

// Every kernel with a plain f32 signature (f32 and index operands) declares
// a 16-bit column in its contract, and the CPU backend registers it
// (KernelTableTest checks every declared column of every backend).
TEST(Widening, EveryF32KernelHasA16BitVariant) {
  for (const rt::KernelContract &c : rt::kKernelContracts) {
    bool plainF32 = false;
    for (std::string_view sig : c.column(rt::KernelColumn::Full))
      plainF32 |= sig.find("f32") != std::string_view::npos &&
                  sig.find_first_of("T|") == std::string_view::npos &&
                  sig.find("any") == std::string_view::npos;
    if (!plainF32)
      continue;
    EXPECT_GT(c.column(rt::KernelColumn::Half).size, 0u)
        << c.name << " has no 16-bit variant";
    for (std::string_view sig : c.column(rt::KernelColumn::Half)) {
      bool registered = false;
      for (const rt::KernelInfo &v : rt::cpuKernelVariants(c.name))
        registered |= v.dtypes == sig;
      EXPECT_TRUE(registered) << c.name << " '" << sig << "'";
    }
  }
}

TEST(Widening, ElementwiseAndBroadcasting) {
  expectExact(
      "ds.add",
      {{{3, 4}, DType::bf16, random(12, 1)}, {{4}, DType::bf16, random(4, 2)}},
      {{{3, 4}, DType::bf16}}, {}, {});
  expectExact("ds.mul",
              {{{3, 4}, DType::f16, random(12, 3)},
               {{3, 4}, DType::f32, random(12, 4)}},
              {{{3, 4}, DType::f32}}, {}, {});
  expectExact("ds.gelu", {{{16}, DType::f16, random(16, 5)}},
              {{{16}, DType::f16}}, {1}, {});
}

TEST(Widening, InPlaceUpdatesStayInPlace) {
  // softmax and AdamW write over their input: one f32 copy per buffer.
  expectExact("ds.softmax", {{{2, 8}, DType::bf16, random(16, 6)}},
              {{{2, 8}, DType::bf16, {}, 0}}, {}, {});
  Operand scalar{{}, DType::f32, {0.01}};
  expectExact("ds.adamw",
              {{{6}, DType::bf16, random(6, 7)},
               {{6}, DType::bf16, random(6, 8)},
               {{6}, DType::f32, random(6, 9)},
               {{6}, DType::f32, random(6, 10, 0.1, 1)},
               scalar,
               {{}, DType::f32, {3}},
               {{}, DType::f32, {1}}},
              {{{6}, DType::bf16, {}, 0},
               {{6}, DType::f32, {}, 2},
               {{6}, DType::f32, {}, 3}},
              {}, {0.9, 0.95, 1e-8, 0.1});
}

TEST(Widening, ContractionsNormsAndLoss) {
  expectExact("ds.matmul",
              {{{4, 8}, DType::bf16, random(32, 11)},
               {{8, 3}, DType::bf16, random(24, 12)}},
              {{{4, 3}, DType::bf16}}, {0, 0}, {});
  expectExact("ds.layer_norm",
              {{{2, 8}, DType::bf16, random(16, 13)},
               {{8}, DType::f32, random(8, 14)},
               {{8}, DType::f32, random(8, 15)}},
              {{{2, 8}, DType::bf16}}, {}, {1e-5});
  expectExact("ds.cross_entropy",
              {{{2, 3, 5}, DType::bf16, random(30, 16)},
               {{2, 3}, DType::i32, {0, 4, 2, 1, 3, 0}}},
              {{{}, DType::f32}}, {-100}, {});
}

void expectSameBits(const std::vector<double> &a, const std::vector<double> &b,
                    const char *what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i)
    ASSERT_EQ(std::memcmp(&a[i], &b[i], sizeof(double)), 0)
        << what << " element " << i << ": " << a[i] << " vs " << b[i];
}

// A fused pair in 16 bits is its two ops unfused, bit for bit: the sum is
// rounded to its dtype before the norm or GELU reads it. (ds-remat
// recomputes a norm unfused beside the forward's fused one; the two must
// agree.)
TEST(Widening, FusedPairsEqualTheirTwoOps) {
  for (DType t : {DType::bf16, DType::f16}) {
    SCOPED_TRACE(rt::dtypeName(t));
    std::string e;
    std::vector<double> x = random(24, 31), r = random(24, 32),
                        w = random(8, 33), b = random(8, 34);
    auto fused = run("ds.add_layer_norm",
                     {{{3, 8}, t, x}, {{3, 8}, t, r}, {{8}, t, w}, {{8}, t, b}},
                     {{{3, 8}, t}, {{3, 8}, t}}, {}, {1e-5}, false, e);
    ASSERT_EQ(e, "");
    auto sum = run("ds.add", {{{3, 8}, t, x}, {{3, 8}, t, r}}, {{{3, 8}, t}},
                   {}, {}, false, e);
    ASSERT_EQ(e, "");
    auto norm =
        run("ds.layer_norm", {{{3, 8}, t, sum[0]}, {{8}, t, w}, {{8}, t, b}},
            {{{3, 8}, t}}, {}, {1e-5}, false, e);
    ASSERT_EQ(e, "");
    expectSameBits(fused[0], sum[0], "add_layer_norm's sum");
    expectSameBits(fused[1], norm[0], "add_layer_norm's norm");

    std::vector<double> bias = random(8, 35);
    auto bg = run("ds.bias_gelu", {{{3, 8}, t, x}, {{8}, t, bias}},
                  {{{3, 8}, t}, {{3, 8}, t}}, {1}, {}, false, e);
    ASSERT_EQ(e, "");
    auto biased = run("ds.add", {{{3, 8}, t, x}, {{8}, t, bias}}, {{{3, 8}, t}},
                      {}, {}, false, e);
    ASSERT_EQ(e, "");
    auto gelu = run("ds.gelu", {{{3, 8}, t, biased[0]}}, {{{3, 8}, t}}, {1}, {},
                    false, e);
    ASSERT_EQ(e, "");
    expectSameBits(bg[0], biased[0], "bias_gelu's sum");
    expectSameBits(bg[1], gelu[0], "bias_gelu's GELU");

    // The matmul epilogues: the product rounded first, as ds.matmul's
    // result is, then the bias (and GELU) as above.
    std::vector<double> a = random(15, 36), wt = random(40, 37);
    auto product = run("ds.matmul", {{{3, 5}, t, a}, {{8, 5}, t, wt}},
                       {{{3, 8}, t}}, {0, 1}, {}, false, e);
    ASSERT_EQ(e, "");
    auto mb =
        run("ds.matmul_bias", {{{3, 5}, t, a}, {{8, 5}, t, wt}, {{8}, t, bias}},
            {{{3, 8}, t}}, {0, 1}, {}, false, e);
    ASSERT_EQ(e, "");
    auto mbAdd = run("ds.add", {{{3, 8}, t, product[0]}, {{8}, t, bias}},
                     {{{3, 8}, t}}, {}, {}, false, e);
    ASSERT_EQ(e, "");
    expectSameBits(mb[0], mbAdd[0], "matmul_bias");
    auto mbg = run("ds.matmul_bias_gelu",
                   {{{3, 5}, t, a}, {{8, 5}, t, wt}, {{8}, t, bias}},
                   {{{3, 8}, t}, {{3, 8}, t}}, {0, 1, 1}, {}, false, e);
    ASSERT_EQ(e, "");
    auto mbgGelu = run("ds.gelu", {{{3, 8}, t, mbAdd[0]}}, {{{3, 8}, t}}, {1},
                       {}, false, e);
    ASSERT_EQ(e, "");
    expectSameBits(mbg[0], mbAdd[0], "matmul_bias_gelu's sum");
    expectSameBits(mbg[1], mbgGelu[0], "matmul_bias_gelu's GELU");

    auto mgg = run("ds.matmul_gelu_grad",
                   {{{3, 5}, t, a}, {{8, 5}, t, wt}, {{3, 8}, t, x}},
                   {{{3, 8}, t}, {{8}, t}}, {0, 1, 1}, {}, false, e);
    ASSERT_EQ(e, "");
    auto gg = run("ds.gelu_grad", {{{3, 8}, t, x}, {{3, 8}, t, product[0]}},
                  {{{3, 8}, t}}, {1}, {}, false, e);
    ASSERT_EQ(e, "");
    auto db = run("ds.reduce_sum", {{{3, 8}, t, gg[0]}}, {{{8}, t}}, {0}, {},
                  false, e);
    ASSERT_EQ(e, "");
    expectSameBits(mgg[0], gg[0], "matmul_gelu_grad's gradient");
    expectSameBits(mgg[1], db[0], "matmul_gelu_grad's bias gradient");

    // A bad bias is named as in f32, before any product is computed.
    run("ds.matmul_bias", {{{3, 5}, t, a}, {{8, 5}, t, wt}, {{5}, t, x}},
        {{{3, 8}, t}}, {0, 1}, {}, false, e);
    EXPECT_EQ(e, "ds.matmul_bias: bias has shape [5] but needs [8] (the last "
                 "dim of the product)");
    e.clear();
    run("ds.matmul_gelu_grad",
        {{{3, 5}, t, a}, {{8, 5}, t, wt}, {{3, 8}, t, x}},
        {{{3, 8}, t}, {{5}, t}}, {0, 1, 1}, {}, false, e);
    EXPECT_EQ(e, "ds.matmul_gelu_grad: dbias has shape [5] but needs [8] "
                 "(the last dim of the product)");
    e.clear();
  }
}

/// `v` as stored in `t` and read back.
std::vector<double> roundedTo(DType t, const std::vector<double> &v) {
  Storage s(t, int64_t(v.size()));
  std::vector<double> out;
  for (size_t i = 0; i < v.size(); ++i) {
    s.set(int64_t(i), v[i]);
    out.push_back(s.get(int64_t(i)));
  }
  return out;
}

/// Each element within `unit` (relative; the output dtype's half spacing)
/// of the float64 result on the same rounded inputs, plus fp32 compute
/// noise relative to the output's largest magnitude.
void expectNear(const std::vector<double> &got,
                const ref::Result<ref::Tensor> &want, double unit,
                double atol = 0) {
  ASSERT_TRUE(want.ok()) << want.error;
  ASSERT_EQ(got.size(), want.value.data.size());
  double scale = 0;
  for (double w : want.value.data)
    scale = std::max(scale, std::abs(w));
  for (size_t i = 0; i < got.size(); ++i) {
    double w = want.value.data[i];
    EXPECT_LE(std::abs(got[i] - w), unit * std::abs(w) + 1e-5 * scale + atol)
        << "element " << i << ": " << got[i] << " vs " << w;
  }
}

// ds.add_layer_norm's contract leaves its input count open (the bias is
// optional); the 16-bit pair checks it before its steps index the inputs
// (PlanFuzzer found one input reaching them: docs/fuzzing.md).
// Elementwise and row-wise kernels widen a tile at a time (WideningTiles.cpp)
// once their output holds more than one tile (16384 elements): 37 x 1000
// is three tiles of rows (16, 16, 5) or of elements (16384, 16384, 4232),
// and each must give exactly the whole f32 kernel on the widened inputs.
TEST(Widening, TiledVariantsEqualTheWholeF32Kernel) {
  const std::vector<int64_t> s = {37, 1000}, row = {1000}, flat = {37000};
  const int64_t n = 37000;
  expectExact(
      "ds.add",
      {{s, DType::bf16, random(n, 51)}, {row, DType::bf16, random(1000, 52)}},
      {{s, DType::bf16}}, {}, {});
  expectExact("ds.mul",
              {{s, DType::f16, random(n, 53)}, {s, DType::f32, random(n, 54)}},
              {{s, DType::f32}}, {}, {});
  expectExact("ds.gelu", {{s, DType::bf16, random(n, 55)}}, {{s, DType::bf16}},
              {1}, {});
  expectExact(
      "ds.gelu_grad",
      {{s, DType::bf16, random(n, 56)}, {s, DType::bf16, random(n, 57)}},
      {{s, DType::bf16}}, {1}, {});
  expectExact("ds.layer_norm",
              {{s, DType::bf16, random(n, 58)},
               {row, DType::f32, random(1000, 59)},
               {row, DType::f32, random(1000, 60)}},
              {{s, DType::bf16}}, {}, {1e-5});
  expectExact("ds.softmax", {{s, DType::bf16, random(n, 61)}},
              {{s, DType::bf16, {}, 0}}, {}, {});
  Operand scalar{{}, DType::f32, {0.01}};
  expectExact("ds.adamw",
              {{flat, DType::bf16, random(n, 62)},
               {flat, DType::bf16, random(n, 63)},
               {flat, DType::f32, random(n, 64)},
               {flat, DType::f32, random(n, 65, 0.1, 1)},
               scalar,
               {{}, DType::f32, {3}},
               {{}, DType::f32, {1}}},
              {{flat, DType::bf16, {}, 0},
               {flat, DType::f32, {}, 2},
               {flat, DType::f32, {}, 3}},
              {}, {0.9, 0.95, 1e-8, 0.1});
}

// Elementwise kernels run their 16-bit columns as one-instruction programs
// over the 16-bit operands (HalfElementwise.cpp): each against the f32
// kernel on the widened inputs, over several parallel chunks and a partial
// tile, with a trailing broadcast, f16 and f32 mixed in, and in place.
TEST(Widening, ElementwiseProgramsEqualTheWholeF32Kernel) {
  const std::vector<int64_t> s = {3, 25003}, row = {25003};
  const int64_t n = 3 * 25003;
  const DType b = DType::bf16, h = DType::f16, f = DType::f32;
  for (const char *k :
       {"ds.add", "ds.sub", "ds.mul", "ds.div", "ds.maximum", "ds.minimum"}) {
    expectExact(k, {{s, b, random(n, 81)}, {row, b, random(25003, 82, 0.5)}},
                {{s, b}}, {}, {});
    expectExact(k, {{s, h, random(n, 83)}, {s, f, random(n, 84, 0.5)}},
                {{s, h, {}, 0}}, {}, {});
  }
  for (const char *k : {"ds.neg", "ds.exp", "ds.tanh", "ds.relu", "ds.silu"})
    expectExact(k, {{s, b, random(n, 85)}}, {{s, b}}, {}, {});
  for (const char *k : {"ds.log", "ds.sqrt", "ds.rsqrt"})
    expectExact(k, {{s, h, random(n, 86, 0.01, 9)}}, {{s, f}}, {}, {});
  for (int64_t approx : {0, 1}) {
    expectExact("ds.gelu", {{s, b, random(n, 87)}}, {{s, b, {}, 0}}, {approx},
                {});
    expectExact("ds.gelu_grad", {{s, b, random(n, 88)}, {s, b, random(n, 89)}},
                {{s, b, {}, 1}}, {approx}, {});
  }
  for (const char *k : {"ds.relu_grad", "ds.silu_grad", "ds.swiglu"})
    expectExact(k, {{s, b, random(n, 90)}, {s, h, random(n, 91)}}, {{s, b}}, {},
                {});
}

/// Every bf16 value but the NaNs (a double NaN cannot name a payload): the
/// 65536 bit patterns in order.
std::vector<double> everyBf16Value() {
  std::vector<double> v;
  for (uint32_t i = 0; i < (1u << 16); ++i) {
    const uint32_t bits = i << 16;
    float x;
    std::memcpy(&x, &bits, sizeof x);
    if (!std::isnan(x))
      v.push_back(x);
  }
  return v;
}

// GELU, SiLU, their gradients and SwiGLU's gate read bf16 operands through
// tables of their formulas' results (FusedElementwise.cpp): to the bit, in
// f32 outputs that show every bit, for every bf16 value.
TEST(Widening, ActivationTablesAreTheFormulasForEveryBf16Value) {
  const std::vector<double> x = everyBf16Value();
  const std::vector<int64_t> s = {int64_t(x.size())};
  const std::vector<double> g = random(int64_t(x.size()), 92);
  const DType b = DType::bf16, f = DType::f32;
  for (int64_t approx : {0, 1}) {
    expectExact("ds.gelu", {{s, b, x}}, {{s, f}}, {approx}, {});
    expectExact("ds.gelu_grad", {{s, b, x}, {s, f, g}}, {{s, f}}, {approx}, {});
  }
  expectExact("ds.silu", {{s, b, x}}, {{s, f}}, {}, {});
  for (const char *k : {"ds.silu_grad", "ds.swiglu"})
    expectExact(k, {{s, b, x}, {s, f, g}}, {{s, f}}, {}, {});
  // A value rounded to bf16 inside a group reads the table too: bias_gelu's
  // sum, stored as bf16, is its GELU's operand (against the widened f32
  // GELU of the stored sum).
  const std::vector<int64_t> m = {2, s[0] / 2}, row = {s[0] / 2};
  std::string e;
  auto bg = run("ds.bias_gelu", {{m, b, x}, {row, b, g}}, {{m, b}, {m, f}}, {1},
                {}, false, e);
  ASSERT_EQ(e, "");
  auto gelu = run("ds.gelu", {{m, b, bg[0]}}, {{m, f}}, {1}, {}, true, e);
  ASSERT_EQ(e, "");
  expectSameBits(bg[1], gelu[0], "bias_gelu's GELU");
}

// Attention is cut by sequences: 6 x [2, 64, 32] is two tiles (4 and 2).
// Attention widens each (batch, head) pair's rows into its scratch and
// rounds its results back from there (Attention.cpp): the f32 kernel on the
// widened values, in both layouts and with the operands' dtypes mixed.
// (All-bf16 operands take bf16 products where the CPU has them that pay:
// AttentionOnBf16Products below.)
TEST(Widening, AttentionWidensPairRowsAsTheWholeF32Kernel) {
  const std::vector<int64_t> s = {6, 2, 64, 32};
  const int64_t n = 6 * 2 * 64 * 32;
  const DType t = DType::bf16, h = DType::f16, f = DType::f32;
  const DType q = rt::cpu::bf16Products() ? h : t;
  for (int64_t seqMajor : {0, 1}) {
    SCOPED_TRACE(seqMajor ? "seq_major" : "heads-major");
    expectExact(
        "ds.attention",
        {{s, q, random(n, 81)}, {s, t, random(n, 82)}, {s, t, random(n, 83)}},
        {{s, t}}, {1, seqMajor}, {0.125});
    expectExact("ds.attention_grad",
                {{s, q, random(n, 84)},
                 {s, t, random(n, 85)},
                 {s, t, random(n, 86)},
                 {s, t, random(n, 87)}},
                {{s, t}, {s, t}, {s, t}}, {1, seqMajor}, {0.125});
    expectExact("ds.attention_grad",
                {{s, h, random(n, 88)},
                 {s, f, random(n, 89)},
                 {s, t, random(n, 90)},
                 {s, t, random(n, 91)}},
                {{s, f}, {s, h}, {s, t}}, {0, seqMajor}, {0.125});
  }
  // The rotary embedding by batch entries too, in both layouts (a row's
  // position is within its entry).
  for (int seqMajor : {0, 1})
    for (int inverse : {0, 1})
      expectExact("ds.rotary", {{s, t, random(n, 88 + seqMajor + 2 * inverse)}},
                  {{s, t}}, {inverse, seqMajor}, {10000.0});
}

/// [B, H, T, D] values as [B, T, H, D] (seq_major).
std::vector<double> seqMajorOf(const std::vector<double> &x,
                               const std::vector<int64_t> &s) {
  std::vector<double> y(x.size());
  for (int64_t b = 0; b < s[0]; ++b)
    for (int64_t h = 0; h < s[1]; ++h)
      for (int64_t t = 0; t < s[2]; ++t)
        for (int64_t d = 0; d < s[3]; ++d)
          y[size_t(((b * s[2] + t) * s[1] + h) * s[3] + d)] =
              x[size_t(((b * s[1] + h) * s[2] + t) * s[3] + d)];
  return y;
}

/// Each element of `got` within a bf16 rounding of the f32 kernel's
/// `want` relative to its own size and to the output's largest magnitude.
void expectWithinBf16(const std::vector<double> &got,
                      const std::vector<double> &want, double relative,
                      const char *what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double scale = 0;
  for (double w : want)
    scale = std::max(scale, std::abs(w));
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_LE(std::abs(got[i] - want[i]),
              0x1p-8 * std::abs(want[i]) + relative * scale)
        << what << " element " << i << ": " << got[i] << " vs " << want[i];
}

// bf16 attention on AMX tiles or AVX512-BF16's dot products (AttentionBf16.cpp,
// Bf16DotProducts.h) over shapes that pad every
// dim (T 200: blocks of 64 and a tail of 8; head dims 40 and 24), causal
// with Tq < Tk and Tq > Tk (rows that see no key), in both layouts: the
// layouts give the same bits (the same products on the same rows), and
// every result is within a bf16 rounding of the f32 kernel on the widened
// operands (the weights and dS rounded to bf16: 2^-8 of the largest
// result; the outputs' own rounding: 2^-8 of each).
TEST(Widening, AttentionOnBf16ProductsIsTheF32KernelWithinBf16Roundings) {
  if (!rt::cpu::bf16Products())
    GTEST_SKIP() << "no bf16 products that pay on this CPU";
  const DType t = DType::bf16;
  struct Case {
    int64_t B, H, Tq, Tk, D, Dv;
  };
  for (Case c : {Case{2, 3, 200, 200, 40, 24}, Case{1, 2, 70, 130, 64, 64},
                 Case{1, 2, 100, 40, 32, 48}})
    for (int64_t causal : {0, 1}) {
      SCOPED_TRACE(std::to_string(c.Tq) + "x" + std::to_string(c.Tk) +
                   (causal ? " causal" : ""));
      const std::vector<int64_t> sq = {c.B, c.H, c.Tq, c.D},
                                 sk = {c.B, c.H, c.Tk, c.D},
                                 sv = {c.B, c.H, c.Tk, c.Dv},
                                 so = {c.B, c.H, c.Tq, c.Dv};
      const auto q = random(numel(sq), 201), k = random(numel(sk), 202),
                 v = random(numel(sv), 203), g = random(numel(so), 204);
      std::string e;
      std::vector<std::vector<double>> byLayout[2];
      for (int64_t seqMajor : {0, 1}) {
        auto lay = [&](const std::vector<double> &x,
                       std::vector<int64_t> shape) -> Operand {
          if (!seqMajor)
            return {shape, t, x};
          std::vector<double> y = seqMajorOf(x, shape);
          std::swap(shape[1], shape[2]);
          return {shape, t, y};
        };
        auto outOf = [&](std::vector<int64_t> shape) -> Operand {
          if (seqMajor)
            std::swap(shape[1], shape[2]);
          return {shape, t};
        };
        std::vector<Operand> in = {lay(q, sq), lay(k, sk), lay(v, sv)};
        auto fwd = run("ds.attention", in, {outOf(so)}, {causal, seqMajor},
                       {0.125}, false, e);
        ASSERT_EQ(e, "");
        in.push_back(lay(g, so));
        auto grad =
            run("ds.attention_grad", in, {outOf(sq), outOf(sk), outOf(sv)},
                {causal, seqMajor}, {0.125}, false, e);
        ASSERT_EQ(e, "");
        byLayout[seqMajor] = {fwd[0], grad[0], grad[1], grad[2]};
        if (seqMajor)
          continue;
        auto wideFwd = run("ds.attention", {in[0], in[1], in[2]}, {outOf(so)},
                           {causal, 0}, {0.125}, true, e);
        auto wideGrad =
            run("ds.attention_grad", in, {outOf(sq), outOf(sk), outOf(sv)},
                {causal, 0}, {0.125}, true, e);
        ASSERT_EQ(e, "");
        expectWithinBf16(fwd[0], wideFwd[0], 0x1p-8, "out");
        for (size_t o = 0; o < 3; ++o)
          expectWithinBf16(grad[o], wideGrad[o], 0x1p-7,
                           o == 0   ? "dq"
                           : o == 1 ? "dk"
                                    : "dv");
      }
      const std::vector<int64_t> shapes[] = {so, sq, sk, sv};
      for (size_t o = 0; o < 4; ++o)
        expectSameBits(seqMajorOf(byLayout[0][o], shapes[o]), byLayout[1][o],
                       "seq_major");
    }
}

// Reductions over rows (bias gradients) read the 16-bit operand without a
// copy (Reduce.cpp): still exactly the f32 kernel on the widened values.
TEST(Widening, RowReductionsReadSixteenBitsAsTheWidenedKernel) {
  const std::vector<int64_t> s = {37, 1000}, s3 = {4, 37, 100};
  expectExact("ds.reduce_sum", {{s, DType::bf16, random(37000, 91)}},
              {{{1000}, DType::bf16}}, {0}, {});
  expectExact("ds.reduce_sum", {{s, DType::bf16, random(37000, 92)}},
              {{{1000}, DType::f32}}, {0}, {});
  expectExact("ds.reduce_mean", {{s3, DType::f16, random(14800, 93)}},
              {{{4, 100}, DType::f32}}, {1}, {});
  expectExact("ds.reduce_max", {{s3, DType::bf16, random(14800, 94)}},
              {{{4, 100}, DType::bf16}}, {1}, {});
  // Not over rows: widened whole, as before.
  expectExact("ds.reduce_sum", {{s, DType::bf16, random(37000, 95)}},
              {{{37}, DType::bf16}}, {1}, {});
}

// Layer norm's and RMS norm's gradients widen their 16-bit operands a row
// at a time (Norms.cpp): exactly the f32 kernels on whole widened copies,
// with mixed types.
TEST(Widening, NormGradsWidenRowsAsTheWholeF32Kernel) {
  const std::vector<int64_t> s = {37, 1000}, row = {1000};
  const int64_t n = 37000;
  expectExact("ds.layer_norm_grad",
              {{s, DType::bf16, random(n, 101)},
               {row, DType::f32, random(1000, 102)},
               {s, DType::bf16, random(n, 103)}},
              {{s, DType::bf16}, {row, DType::f32}, {row, DType::bf16}}, {},
              {1e-5});
  expectExact("ds.layer_norm_grad",
              {{s, DType::f16, random(n, 104)},
               {row, DType::f16, random(1000, 105)},
               {s, DType::f16, random(n, 106)}},
              {{s, DType::f16}, {row, DType::f16}, {row, DType::f32}}, {},
              {1e-5});
  // ds.rms_norm_grad too (a Llama's norms).
  expectExact("ds.rms_norm_grad",
              {{s, DType::bf16, random(n, 107)},
               {row, DType::bf16, random(1000, 108)},
               {s, DType::bf16, random(n, 109)}},
              {{s, DType::bf16}, {row, DType::bf16}}, {}, {1e-5});
  expectExact("ds.rms_norm_grad",
              {{s, DType::f16, random(n, 110)},
               {row, DType::f32, random(1000, 111)},
               {s, DType::bf16, random(n, 112)}},
              {{s, DType::f32}, {row, DType::f16}}, {}, {1e-5});
}

// Embedding, its gradient and the loss read 16-bit rows as they go
// (Lookup.cpp): exactly the f32 kernels on whole widened copies, in every
// mix of dtypes, over rows enough for both threads, with repeated indices
// (the gradient's sums) and ignored targets.
TEST(Widening, LookupsAndLossReadSixteenBitRowsAsTheWidenedKernel) {
  const int64_t V = 300, C = 70, n = 111;
  std::vector<double> ids(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    ids[size_t(i)] = double((i * 37) % 50); // rows 0..49, each several times
  const std::vector<int64_t> tokens = {3, 37}, rows = {3, 37, C},
                             table = {V, C};
  for (auto [in, out] : {std::pair{DType::bf16, DType::bf16},
                         {DType::f16, DType::f16},
                         {DType::f32, DType::bf16},
                         {DType::bf16, DType::f32}}) {
    expectExact("ds.embedding",
                {{table, in, random(V * C, 111)}, {tokens, DType::i32, ids}},
                {{rows, out}}, {1}, {});
    expectExact("ds.embedding_grad",
                {{tokens, DType::i32, ids}, {rows, in, random(n * C, 112)}},
                {{table, out}}, {1}, {});
  }
  std::vector<double> targets(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    targets[size_t(i)] = i % 7 == 3 ? -100.0 : double((i * 53) % V);
  const std::vector<int64_t> logits = {3, 37, V};
  for (auto [in, out] : {std::pair{DType::bf16, DType::f32},
                         {DType::f16, DType::bf16},
                         {DType::f32, DType::f16}}) {
    expectExact("ds.cross_entropy",
                {{logits, in, random(n * V, 113, -6, 6)},
                 {tokens, DType::i32, targets}},
                {{{}, out}}, {-100}, {});
    expectExact("ds.cross_entropy_grad",
                {{logits, in, random(n * V, 114, -6, 6)},
                 {tokens, DType::i32, targets},
                 {{}, out, {0.75}}},
                {{logits, out}}, {-100}, {});
  }
  // The vocabulary-parallel loss (2 parts; this rank holds the first 300
  // of 600 columns): row maxima and statistics of any float type too.
  std::vector<double> partTargets(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    partTargets[size_t(i)] = i % 7 == 3 ? -100.0 : double((i * 53) % (2 * V));
  const std::vector<int64_t> rowShape = {3, 37}, statShape = {2, 3, 37};
  for (auto [in, small] : {std::pair{DType::bf16, DType::f32},
                           {DType::f16, DType::bf16},
                           {DType::bf16, DType::bf16}}) {
    const Operand rowMax{rowShape, small, random(n, 116, 5, 6)};
    expectExact("ds.cross_entropy_part",
                {{logits, in, random(n * V, 117, -6, 6)},
                 {tokens, DType::i32, partTargets},
                 rowMax},
                {{statShape, small}}, {-100, 2}, {});
    expectExact("ds.cross_entropy_part_grad",
                {{logits, in, random(n * V, 118, -6, 6)},
                 {tokens, DType::i32, partTargets},
                 rowMax,
                 {statShape, small, random(2 * n, 119, 50, 400)},
                 {{}, small, {0.5}}},
                {{logits, in}}, {-100, 2}, {});
  }
  // In place over bf16 logits.
  expectExact("ds.cross_entropy_grad",
              {{logits, DType::bf16, random(n * V, 115, -6, 6)},
               {tokens, DType::i32, targets},
               {{}, DType::f32, {1.0}}},
              {{logits, DType::bf16, {}, 0}}, {-100}, {});
}

// Dropout widens its 16-bit operands a batch at a time (Random.cpp): the
// f32 kernel's masks and values, in place and not, with the batched draw
// (rows of 4k elements) and the per-element one (sample offset 1 of 35
// elements puts the first at index 35), and at rate 0 between dtypes.
TEST(Widening, DropoutWidensBatchesAsTheWholeF32Kernel) {
  const std::vector<int64_t> s = {3, 7, 5};
  const int64_t n = 3 * 7 * 5;
  const DType t = DType::bf16, h = DType::f16, f = DType::f32;
  for (int64_t sampleOffset : {0, 1}) {
    SCOPED_TRACE("sample offset " + std::to_string(sampleOffset));
    expectExact("ds.dropout", {{s, t, random(n, 121)}}, {{s, t}},
                {3, 1, 0, sampleOffset}, {0.3});
    expectExact("ds.dropout", {{s, h, random(n, 122)}}, {{s, h, {}, 0}},
                {3, 1, 0, sampleOffset}, {0.5});
    expectExact("ds.dropout", {{s, f, random(n, 123)}}, {{s, t}},
                {4, 1, 0, sampleOffset}, {0.1});
  }
  expectExact("ds.dropout", {{s, t, random(n, 124)}}, {{s, f}}, {3, 1, 0, 0},
              {0.0});
  expectExact("ds.dropout", {{{4096}, t, random(4096, 125)}}, {{{4096}, t}},
              {5, 1, 0, 0}, {0.25});
}

// The fused pairs over many tiles are still their two ops, each rounded.
TEST(Widening, TiledFusedPairsEqualTheirTwoOps) {
  const std::vector<int64_t> s = {37, 1000}, row = {1000};
  const DType t = DType::bf16;
  std::string e;
  std::vector<double> x = random(37000, 71), r = random(37000, 72),
                      w = random(1000, 73), b = random(1000, 74);
  auto fused =
      run("ds.add_layer_norm", {{s, t, x}, {s, t, r}, {row, t, w}, {row, t, b}},
          {{s, t}, {s, t}}, {}, {1e-5}, false, e);
  ASSERT_EQ(e, "");
  auto sum = run("ds.add", {{s, t, x}, {s, t, r}}, {{s, t}}, {}, {}, false, e);
  ASSERT_EQ(e, "");
  auto norm = run("ds.layer_norm", {{s, t, sum[0]}, {row, t, w}, {row, t, b}},
                  {{s, t}}, {}, {1e-5}, false, e);
  ASSERT_EQ(e, "");
  expectSameBits(fused[0], sum[0], "add_layer_norm's sum");
  expectSameBits(fused[1], norm[0], "add_layer_norm's norm");

  std::vector<double> a = random(37 * 24, 75), wt = random(24000, 76);
  auto mbg = run("ds.matmul_bias_gelu",
                 {{{37, 24}, t, a}, {{1000, 24}, t, wt}, {row, t, b}},
                 {{s, t}, {s, t}}, {0, 1, 1}, {}, false, e);
  ASSERT_EQ(e, "");
  auto product = run("ds.matmul", {{{37, 24}, t, a}, {{1000, 24}, t, wt}},
                     {{s, t}}, {0, 1}, {}, false, e);
  ASSERT_EQ(e, "");
  auto biased = run("ds.add", {{s, t, product[0]}, {row, t, b}}, {{s, t}}, {},
                    {}, false, e);
  ASSERT_EQ(e, "");
  auto gelu = run("ds.gelu", {{s, t, biased[0]}}, {{s, t}}, {1}, {}, false, e);
  ASSERT_EQ(e, "");
  expectSameBits(mbg[0], biased[0], "matmul_bias_gelu's sum");
  expectSameBits(mbg[1], gelu[0], "matmul_bias_gelu's GELU");
}

TEST(Widening, FusedPairCountsItsInputsFirst) {
  std::string e;
  run("ds.add_layer_norm", {{{3, 8}, DType::bf16, random(24, 41)}},
      {{{3, 8}, DType::bf16}, {{3, 8}, DType::bf16}}, {}, {1e-5}, false, e);
  EXPECT_EQ(e, "ds.add_layer_norm: expects 3 or 4 inputs (x, residual, w[, "
               "b]), got 1");
}

TEST(Widening, SixteenBitKernelsMatchTheFloat64Reference) {
  for (DType t : {DType::bf16, DType::f16}) {
    SCOPED_TRACE(t == DType::bf16 ? "bf16" : "f16");
    // Round to nearest: half the spacing, 2^-8 (bf16) or 2^-11 (f16).
    const double unit = t == DType::bf16 ? 0x1p-8 : 0x1p-11;
    std::string error;
    auto a = roundedTo(t, random(32, 21)), b = roundedTo(t, random(24, 22));
    auto mm = run("ds.matmul", {{{4, 8}, t, a}, {{8, 3}, t, b}}, {{{4, 3}, t}},
                  {0, 0}, {}, false, error);
    ASSERT_EQ(error, "");
    expectNear(mm[0],
               ref::matmul(ref::Tensor({4, 8}, a), ref::Tensor({8, 3}, b),
                           false, false),
               unit);

    auto x = roundedTo(t, random(32, 23)), w = roundedTo(t, random(8, 24)),
         bias = roundedTo(t, random(8, 25));
    auto ln =
        run("ds.layer_norm", {{{4, 8}, t, x}, {{8}, t, w}, {{8}, t, bias}},
            {{{4, 8}, t}}, {}, {1e-5}, false, error);
    ASSERT_EQ(error, "");
    ref::Tensor wt({8}, w), bt({8}, bias);
    expectNear(ln[0], ref::layer_norm(ref::Tensor({4, 8}, x), &wt, &bt, 1e-5),
               unit);

    auto sm = run("ds.softmax", {{{4, 8}, t, x}}, {{{4, 8}, t}}, {}, {}, false,
                  error);
    ASSERT_EQ(error, "");
    expectNear(sm[0], ref::softmax(ref::Tensor({4, 8}, x)), unit);

    auto ge =
        run("ds.gelu", {{{4, 8}, t, x}}, {{{4, 8}, t}}, {1}, {}, false, error);
    ASSERT_EQ(error, "");
    expectNear(ge[0],
               ref::unary(ref::UnaryKind::GeluTanh, ref::Tensor({4, 8}, x)),
               unit);

    auto q = roundedTo(t, random(64, 26)), k = roundedTo(t, random(64, 27)),
         v = roundedTo(t, random(64, 28));
    auto at =
        run("ds.attention",
            {{{1, 2, 4, 8}, t, q}, {{1, 2, 4, 8}, t, k}, {{1, 2, 4, 8}, t, v}},
            {{{1, 2, 4, 8}, t}}, {1, 0}, {0.35}, false, error);
    ASSERT_EQ(error, "");
    // On bf16 products attention rounds its weights too (AttentionBf16.cpp):
    // each by u moves a mean of v by at most 2 u max |v| (max |v| = 2).
    const bool tiles = t == DType::bf16 && rt::cpu::bf16Products();
    expectNear(at[0],
               ref::attention(ref::Tensor({1, 2, 4, 8}, q),
                              ref::Tensor({1, 2, 4, 8}, k),
                              ref::Tensor({1, 2, 4, 8}, v), true, 0.35),
               unit, tiles ? 2 * unit * 2 : 0);

    // The loss stays fp32: only fp32's rounding.
    std::vector<double> targets = {0, 4, 2, 1, 3, 0};
    auto logits = roundedTo(t, random(30, 29));
    auto ce = run("ds.cross_entropy",
                  {{{2, 3, 5}, t, logits}, {{2, 3}, DType::i32, targets}},
                  {{{}, DType::f32}}, {-100}, {}, false, error);
    ASSERT_EQ(error, "");
    expectNear(ce[0],
               ref::cross_entropy(ref::Tensor({2, 3, 5}, logits),
                                  ref::Tensor({2, 3}, targets), -100),
               1e-6);
  }
}

} // namespace
