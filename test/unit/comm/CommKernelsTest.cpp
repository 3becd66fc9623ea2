//===- CommKernelsTest.cpp - comm.* kernels on N ranks
//----------------------===//

#include "test/unit/comm/CommTestSupport.h"

#include <array>

using namespace dsc;
using namespace dsc::commtest;

namespace {

//===----------------------------------------------------------------------===//
// comm.* kernels
//===----------------------------------------------------------------------===//

/// Calls CPU kernel `name` on f32 tensors of the given shapes.
struct KernelCall {
  std::vector<std::vector<int64_t>> inShapes, outShapes;
  std::vector<std::vector<float>> in, out;
  std::vector<int64_t> ints = {};
  std::vector<double> floats = {};

  bool run(const char *name, const rt::KernelContext *ctx, std::string &error) {
    std::vector<rt::TensorRef> ins, outs;
    auto ref = [](std::vector<float> &data, std::vector<int64_t> &shape) {
      rt::TensorRef t;
      t.data = data.data();
      t.shape = shape.data();
      t.rank = int(shape.size());
      return t;
    };
    for (size_t i = 0; i < in.size(); ++i)
      ins.push_back(ref(in[i], inShapes[i]));
    for (size_t i = 0; i < out.size(); ++i)
      outs.push_back(ref(out[i], outShapes[i]));
    rt::KernelArgs args = rt::makeKernelArgs(ins, outs, ints, floats, ctx);
    const rt::KernelInfo *k = rt::findCpuKernel(name);
    if (!k) {
      error = std::string("no kernel ") + name;
      return false;
    }
    return k->fn(args, error);
  }
};

TEST(CommKernels, Registered) {
  for (const char *name :
       {"comm.all_reduce", "comm.reduce_scatter", "comm.all_gather",
        "comm.all_to_all", "comm.broadcast"})
    EXPECT_NE(rt::findCpuKernel(name), nullptr) << name;
  const rt::KernelInfo *k = rt::findCpuKernel("comm.broadcast");
  EXPECT_EQ(k->numInputs, 1);
  EXPECT_EQ(k->numOutputs, 1);
  EXPECT_EQ(k->numIntAttrs, 1);
  EXPECT_EQ(rt::findCpuKernel("comm.all_reduce")->numFloatAttrs, 1);
}

// The kernels pass the operands' dtype to the communicator: bf16 sums with
// the scale applied in bf16, an i32 gather; the variant the dtypes select.
TEST(CommKernels, DTypesReachTheCommunicator) {
  Communicator &c = world();
  const int n = c.size(), rank = c.rank();
  rt::KernelContext ctx;
  ctx.comm = &c;
  ctx.rank = rank;
  ctx.worldSize = n;
  std::string setupError;
  std::unique_ptr<rt::Backend> cpu = rt::createBackend("cpu", setupError);
  ASSERT_NE(cpu, nullptr) << setupError;
  auto call = [&](const char *name, rt::TensorRef x, rt::TensorRef out,
                  std::vector<int64_t> ints, std::vector<double> floats,
                  std::string &error) {
    std::array<rt::TensorRef, 1> in1{x}, out1{out};
    rt::KernelArgs a = rt::makeKernelArgs(in1, out1, ints, floats, &ctx);
    rt::DType in = x.dtype, o = out.dtype;
    const rt::KernelInfo *k = cpu->findKernel(name, {&in, 1}, {&o, 1});
    if (!k) {
      error =
          std::string("no variant of ") + name + " for " + rt::dtypeName(in);
      return false;
    }
    return k->fn(a, error);
  };
  std::string error;
  int64_t four[] = {4};
  std::vector<uint16_t> x(4), out(4);
  for (int i = 0; i < 4; ++i)
    x[size_t(i)] = floatToBf16(float(rank + 1 + i));
  rt::TensorRef xr{x.data(), rt::DType::bf16, four, 1};
  rt::TensorRef outr{out.data(), rt::DType::bf16, four, 1};
  ASSERT_TRUE(call("comm.all_reduce", xr, outr, {}, {0.5}, error)) << error;
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(bf16ToFloat(out[size_t(i)]),
              0.5f * float(n * (n + 1) / 2 + n * i))
        << i;

  std::vector<int32_t> ids = {rank, -rank}, all(2 * size_t(n));
  int64_t two[] = {2}, twoN[] = {2 * n};
  ASSERT_TRUE(call("comm.all_gather", {ids.data(), rt::DType::i32, two, 1},
                   {all.data(), rt::DType::i32, twoN, 1}, {}, {}, error))
      << error;
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(all[size_t(2 * r)], r);
    EXPECT_EQ(all[size_t(2 * r + 1)], -r);
  }

  // An i32 exchange: rank r sends (r, j) to rank j, which gets (s, rank)
  // from each rank s.
  std::vector<int32_t> sent(2 * size_t(n)), got(2 * size_t(n), -9);
  for (int j = 0; j < n; ++j) {
    sent[size_t(2 * j)] = rank;
    sent[size_t(2 * j + 1)] = j;
  }
  ASSERT_TRUE(call("comm.all_to_all", {sent.data(), rt::DType::i32, twoN, 1},
                   {got.data(), rt::DType::i32, twoN, 1}, {}, {}, error))
      << error;
  for (int s = 0; s < n; ++s) {
    EXPECT_EQ(got[size_t(2 * s)], s);
    EXPECT_EQ(got[size_t(2 * s + 1)], rank);
  }

  // Sums of integers have no variant; the body refuses them too.
  EXPECT_FALSE(call("comm.all_reduce", {ids.data(), rt::DType::i32, two, 1},
                    {ids.data(), rt::DType::i32, two, 1}, {}, {1.0}, error));
  EXPECT_EQ(error, "no variant of comm.all_reduce for i32");
  const rt::KernelInfo *first = rt::findCpuKernel("comm.all_reduce");
  rt::TensorRef i32s{ids.data(), rt::DType::i32, two, 1};
  rt::KernelArgs a;
  double one = 1.0;
  a.inputs = &i32s;
  a.numInputs = 1;
  a.outputs = &i32s;
  a.numOutputs = 1;
  a.floatAttrs = &one;
  a.numFloatAttrs = 1;
  a.ctx = &ctx;
  EXPECT_FALSE(first->fn(a, error));
  EXPECT_EQ(error, "comm.all_reduce: unsupported dtype i32 for x (expected "
                   "f32, f64, f16 or bf16)");
  rt::TensorRef f32s{out.data(), rt::DType::f32, two, 1};
  a.outputs = &f32s;
  EXPECT_FALSE(first->fn(a, error));
  EXPECT_EQ(error, "comm.all_reduce: out has dtype f32 but x has i32");
  ASSERT_TRUE(c.barrier(error)) << error;
}

TEST(CommKernels, ErrorsAreOneLine) {
  rt::LocalCommunicator local;
  rt::KernelContext ctx;
  std::string error;
  KernelCall call{{{3}}, {{3}}, {{1, 2, 3}}, {{0, 0, 0}}, {}, {0.5}};
  EXPECT_FALSE(call.run("comm.all_reduce", &ctx, error));
  EXPECT_EQ(error, "comm.all_reduce: no communicator (collectives run inside "
                   "a Session)");
  ctx.comm = &local;
  ctx.worldSize = 2;
  EXPECT_FALSE(call.run("comm.all_reduce", &ctx, error));
  EXPECT_EQ(error,
            "comm.all_reduce: the communicator has 1 rank but the run has 2");
  ctx.worldSize = 1;
  ASSERT_TRUE(call.run("comm.all_reduce", &ctx, error)) << error;
  EXPECT_EQ(call.out[0], (std::vector<float>{0.5f, 1, 1.5f}));

  call.floats = {std::nan("")};
  EXPECT_FALSE(call.run("comm.all_reduce", &ctx, error));
  EXPECT_EQ(error, "comm.all_reduce: scale must be finite, got nan");

  KernelCall gather{{{3}}, {{4}}, {{1, 2, 3}}, {{0, 0, 0, 0}}};
  EXPECT_FALSE(gather.run("comm.all_gather", &ctx, error));
  EXPECT_EQ(error, "comm.all_gather: x has shape [3] and out has shape [4]; "
                   "with 1 rank out needs 1 x 3 = 3 elements");
  KernelCall exchange{{{3}}, {{2}}, {{1, 2, 3}}, {{0, 0}}};
  EXPECT_FALSE(exchange.run("comm.all_to_all", &ctx, error));
  EXPECT_EQ(error, "comm.all_to_all: x has shape [3] and out has shape [2]; "
                   "with 1 rank both need the same multiple of 1 elements "
                   "(one block a rank)");
  KernelCall scatter{{{3}}, {{2}}, {{1, 2, 3}}, {{0, 0}}, {}, {1.0}};
  EXPECT_FALSE(scatter.run("comm.reduce_scatter", &ctx, error));
  EXPECT_EQ(error, "comm.reduce_scatter: x has shape [3] and out has shape "
                   "[2]; with 1 rank x needs 1 x 2 = 2 elements");
  KernelCall reduce{{{3}}, {{2}}, {{1, 2, 3}}, {{0, 0}}, {}, {1.0}};
  EXPECT_FALSE(reduce.run("comm.all_reduce", &ctx, error));
  EXPECT_EQ(error, "comm.all_reduce: x has shape [3] but out has shape [2] "
                   "(the same element count expected)");
  KernelCall bcast{{{3}}, {{3}}, {{1, 2, 3}}, {{0, 0, 0}}, {1}};
  EXPECT_FALSE(bcast.run("comm.broadcast", &ctx, error));
  EXPECT_EQ(error, "comm.broadcast: root 1 is outside world size 1");
  bcast.ints = {0};
  ASSERT_TRUE(bcast.run("comm.broadcast", &ctx, error)) << error;
  EXPECT_EQ(bcast.out[0], (std::vector<float>{1, 2, 3}));
}

} // namespace
