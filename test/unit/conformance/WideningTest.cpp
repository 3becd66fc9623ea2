//===- WideningTest.cpp - the CPU kernels' 16-bit variants ----------------===//
//
// A 16-bit variant (runtime/backends/cpu/Widening.h) must give exactly the
// f32 kernel's result on the widened inputs, rounded once to each output's
// dtype: checked bitwise, on mixes of f32, f16 and bf16 operands, in place
// and not.
//
//===----------------------------------------------------------------------===//

#include "runtime/backends/Registry.h"
#include "runtime/backends/cpu/CpuKernels.h"
#include "runtime/core/Half.h"

#include <gtest/gtest.h>

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
  for (const Operand &o : outs)
    outStore.emplace_back(dtypeOf(o), numel(o.shape));
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

TEST(Widening, EveryF32KernelHasA16BitVariant) {
  for (const rt::KernelInfo &k : rt::cpuKernels()) {
    std::string_view sig = k.dtypes;
    bool plainF32 = sig.find("f32") != std::string_view::npos &&
                    sig.find_first_of("T|") == std::string_view::npos &&
                    sig.find("any") == std::string_view::npos &&
                    k.name.substr(0, 5) != "comm." &&
                    k.name.substr(0, 5) != "dist.";
    if (!plainF32)
      continue;
    bool wide = false;
    for (const rt::KernelInfo &v : rt::cpuKernelVariants(k.name))
      wide |= v.dtypes.find("f32|f16|bf16") != std::string_view::npos;
    EXPECT_TRUE(wide) << k.name << " has no 16-bit variant";
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

} // namespace
