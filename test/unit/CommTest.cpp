//===- CommTest.cpp - communicators, comm.* kernels and plans on N ranks --===//
//
// One binary for every world size: ctest runs it alone (LocalCommunicator)
// and under `mpirun -np N` for N = 1..4 (MpiCommunicator). Every rank runs
// every test in the same order, so the collectives line up; values are
// small integers, so sums are exact in float whatever order MPI adds in.
// Ranks other than 0 print only their failures, prefixed with their rank.
//
//===----------------------------------------------------------------------===//

#include "runtime/backends/AllBackends.h"
#include "runtime/backends/cpu/CpuKernels.h"
#include "runtime/checkpoint/Safetensors.h"
#include "runtime/comm/Communicator.h"
#include "runtime/data/DataLoader.h"
#include "runtime/exec/Session.h"
#include "runtime/rng/Philox.h"
#include "runtime/tooling/DsrunMain.h"
#include "runtime/tooling/Schedule.h"
#include "runtime/tooling/Trainer.h"
#include "runtime/tooling/Weights.h"
#include "test/unit/PlanSpec.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>

using namespace dsc;
namespace fb = dsc::plan;
using rt::Communicator;
using test::floatBytes;
using test::PlanSpec;

namespace {

Communicator *gWorld = nullptr;

/// The job's communicator, shared by the tests (MPI allows one init).
Communicator &world() { return *gWorld; }

/// Element counts every collective is tried with: odd, and one large.
const size_t kCounts[] = {1, 7, 1000};

float value(int rank, size_t i) { return float(rank * 1000 + int(i % 1000)); }

std::vector<float> filled(int rank, size_t count) {
  std::vector<float> v(count);
  for (size_t i = 0; i < count; ++i)
    v[i] = value(rank, i);
  return v;
}

double seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since)
      .count();
}

//===----------------------------------------------------------------------===//
// Communicator collectives
//===----------------------------------------------------------------------===//

TEST(Communicator, RankAndSize) {
  Communicator &c = world();
  EXPECT_GE(c.rank(), 0);
  EXPECT_LT(c.rank(), c.size());
  if (const char *size = std::getenv("OMPI_COMM_WORLD_SIZE")) {
    EXPECT_STREQ(c.kind(), "mpi");
    EXPECT_EQ(c.size(), std::atoi(size));
    EXPECT_EQ(c.rank(), std::atoi(std::getenv("OMPI_COMM_WORLD_RANK")));
  } else {
    EXPECT_STREQ(c.kind(), "local");
    EXPECT_EQ(c.size(), 1);
  }
  std::string error;
  EXPECT_TRUE(c.barrier(error)) << error;
}

TEST(Communicator, AllReduceSum) {
  Communicator &c = world();
  const int n = c.size();
  std::string error;
  for (size_t count : {size_t(0), size_t(1), size_t(7), size_t(1000)}) {
    std::vector<float> in = filled(c.rank(), count), out(count, -1);
    ASSERT_TRUE(c.allReduceSum(in.data(), out.data(), count, error)) << error;
    for (size_t i = 0; i < count; ++i) {
      float want = 0;
      for (int r = 0; r < n; ++r)
        want += value(r, i);
      ASSERT_EQ(out[i], want) << "count " << count << " element " << i;
    }
    // In place.
    ASSERT_TRUE(c.allReduceSum(in.data(), in.data(), count, error)) << error;
    EXPECT_EQ(in, out) << "count " << count;
  }
}

TEST(Communicator, AllReduceSumDouble) {
  Communicator &c = world();
  std::string error;
  for (size_t count : kCounts) {
    std::vector<double> in(count);
    for (size_t i = 0; i < count; ++i)
      in[i] = 0.25 * (c.rank() + 1) + double(i);
    ASSERT_TRUE(c.allReduceSum(in.data(), in.data(), count, error)) << error;
    const int n = c.size();
    for (size_t i = 0; i < count; ++i)
      ASSERT_EQ(in[i], 0.125 * n * (n + 1) + double(n) * double(i)) << i;
  }
}

TEST(Communicator, ReduceScatterSum) {
  Communicator &c = world();
  const int n = c.size();
  std::string error;
  for (size_t count : kCounts) {
    // Block b of rank r's input: value(r, b * count + i).
    std::vector<float> in = filled(c.rank(), n * count), out(count, -1);
    ASSERT_TRUE(c.reduceScatterSum(in.data(), out.data(), count, error))
        << error;
    for (size_t i = 0; i < count; ++i) {
      float want = 0;
      for (int r = 0; r < n; ++r)
        want += value(r, c.rank() * count + i);
      ASSERT_EQ(out[i], want) << "count " << count << " element " << i;
    }
  }
}

TEST(Communicator, AllGather) {
  Communicator &c = world();
  const int n = c.size();
  std::string error;
  for (size_t count : kCounts) {
    std::vector<float> in = filled(c.rank(), count), out(n * count, -1);
    ASSERT_TRUE(c.allGather(in.data(), out.data(), count, error)) << error;
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < count; ++i)
        ASSERT_EQ(out[r * count + i], value(r, i))
            << "count " << count << " block " << r << " element " << i;
    // In place: this rank's block already sits in the output.
    std::vector<float> inPlace(n * count, -1);
    std::copy(in.begin(), in.end(), inPlace.begin() + c.rank() * count);
    const float *mine = inPlace.data() + c.rank() * count;
    ASSERT_TRUE(c.allGather(mine, inPlace.data(), count, error)) << error;
    EXPECT_EQ(inPlace, out) << "count " << count;
  }
}

TEST(Communicator, Broadcast) {
  Communicator &c = world();
  std::string error;
  for (size_t count : kCounts)
    for (int root = 0; root < c.size(); ++root) {
      std::vector<float> data = filled(c.rank(), count);
      ASSERT_TRUE(c.broadcast(data.data(), count, root, error)) << error;
      EXPECT_EQ(data, filled(root, count))
          << "count " << count << " root " << root;
    }
}

TEST(Communicator, LargeAllReduce) {
  Communicator &c = world();
  const size_t count = size_t(1) << 20;
  std::vector<float> data(count);
  for (size_t i = 0; i < count; ++i)
    data[i] = float((i + size_t(c.rank())) % 4096);
  std::string error;
  ASSERT_TRUE(c.allReduceSum(data.data(), data.data(), count, error)) << error;
  for (size_t i = 0; i < count; i += 4097) {
    float want = 0;
    for (int r = 0; r < c.size(); ++r)
      want += float((i + size_t(r)) % 4096);
    ASSERT_EQ(data[i], want) << i;
  }
}

TEST(Communicator, BadArgumentsFailOnEveryRankAlike) {
  Communicator &c = world();
  std::string error;
  std::vector<float> data(4, 1);
  uint64_t before = c.sequence();
  EXPECT_FALSE(c.broadcast(data.data(), 4, c.size(), error));
  std::string me = "rank " + std::to_string(c.rank()) + ": ";
  EXPECT_EQ(error, me + "broadcast #" + std::to_string(before + 1) + ": root " +
                       std::to_string(c.size()) + " is outside world size " +
                       std::to_string(c.size()));
  EXPECT_FALSE(
      c.allReduceSum(static_cast<const float *>(nullptr), nullptr, 3, error));
  EXPECT_EQ(error, me + "all_reduce #" + std::to_string(before + 2) +
                       ": null buffer for 3 elements");
  // Nothing was sent, and the communicator still works.
  EXPECT_TRUE(c.barrier(error)) << error;
  EXPECT_EQ(c.sequence(), before + 3);
}

TEST(Communicator, LocalCopies) {
  rt::LocalCommunicator local;
  std::string error;
  std::vector<float> in = {1, 2, 3}, out(3);
  ASSERT_TRUE(local.allReduceSum(in.data(), out.data(), 3, error));
  EXPECT_EQ(out, in);
  std::fill(out.begin(), out.end(), 0);
  ASSERT_TRUE(local.reduceScatterSum(in.data(), out.data(), 3, error));
  EXPECT_EQ(out, in);
  std::fill(out.begin(), out.end(), 0);
  ASSERT_TRUE(local.allGather(in.data(), out.data(), 3, error));
  EXPECT_EQ(out, in);
  ASSERT_TRUE(local.broadcast(in.data(), 3, 0, error));
  EXPECT_EQ(in, (std::vector<float>{1, 2, 3}));
  ASSERT_TRUE(local.barrier(error));
  EXPECT_EQ(local.sequence(), 5u);
  EXPECT_EQ(local.timeout(), 300);
  local.setTimeout(-1); // ignored
  EXPECT_EQ(local.timeout(), 300);
  local.setTimeout(2.5);
  EXPECT_EQ(local.timeout(), 2.5);
}

TEST(Communicator, TimeoutFromEnvironment) {
  std::string error;
  double s = 0;
  EXPECT_TRUE(rt::parseCommTimeout("30", s, error));
  EXPECT_EQ(s, 30);
  EXPECT_TRUE(rt::parseCommTimeout("0.5", s, error));
  EXPECT_EQ(s, 0.5);
  for (const char *bad : {"", "soon", "0", "-3", "inf", "nan", "5s"}) {
    EXPECT_FALSE(rt::parseCommTimeout(bad, s, error)) << bad;
    EXPECT_EQ(error, std::string("DSC_COMM_TIMEOUT: expected a positive "
                                 "number of seconds, got '") +
                         bad + "'");
  }
  // Every rank does the same, so the MPI communicator's creation (a
  // collective) lines up.
  setenv("DSC_COMM_TIMEOUT", "soon", 1);
  EXPECT_EQ(rt::createCommunicator(error), nullptr);
  EXPECT_EQ(error, "DSC_COMM_TIMEOUT: expected a positive number of seconds, "
                   "got 'soon'");
  setenv("DSC_COMM_TIMEOUT", "7.5", 1);
  std::unique_ptr<Communicator> c = rt::createCommunicator(error);
  unsetenv("DSC_COMM_TIMEOUT");
  ASSERT_TRUE(c) << error;
  EXPECT_EQ(c->timeout(), 7.5);
  EXPECT_EQ(c->size(), world().size());
  float one = 1, sum = 0;
  ASSERT_TRUE(c->allReduceSum(&one, &sum, 1, error)) << error;
  EXPECT_EQ(sum, float(c->size()));
}

TEST(Communicator, SilentRankTimesOut) {
  if (world().size() < 2)
    GTEST_SKIP() << "needs two or more ranks";
  std::string error;
  std::unique_ptr<Communicator> c = rt::createCommunicator(error);
  ASSERT_TRUE(c) << error;
  c->setTimeout(2);
  const int n = c->size(), silent = n - 1;
  float x = 1, y = 0;
  ASSERT_TRUE(c->allReduceSum(&x, &y, 1, error)) << error; // #1
  EXPECT_EQ(y, float(n));
  std::string me = "rank " + std::to_string(c->rank()) + ": ";
  if (c->rank() != silent) {
    // The last rank skips all_reduce #2: the others give up after 2 s.
    auto start = std::chrono::steady_clock::now();
    EXPECT_FALSE(c->allReduceSum(&x, &y, 1, error));
    double took = seconds(start);
    EXPECT_EQ(error, me + "all_reduce #2 timed out after 2 s (a rank stopped "
                          "answering)");
    EXPECT_GE(took, 2.0);
    EXPECT_LT(took, 5.0);
    // Failed for good: nothing more is sent on it.
    start = std::chrono::steady_clock::now();
    EXPECT_FALSE(c->barrier(error));
    EXPECT_LT(seconds(start), 0.5);
    EXPECT_EQ(error, me + "barrier #3 not started: all_reduce #2 failed "
                          "earlier, so the ranks no longer agree on what "
                          "comes next");
  }
  // Once the others gave up, the silent rank catches up on all_reduce #2,
  // so that no request stays pending at MPI_Finalize.
  ASSERT_TRUE(world().barrier(error)) << error;
  if (c->rank() == silent) {
    ASSERT_TRUE(c->allReduceSum(&x, &y, 1, error)) << error;
    EXPECT_EQ(y, float(n));
  }
  ASSERT_TRUE(world().barrier(error)) << error;
}

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
    rt::KernelArgs args;
    args.inputs = ins.data();
    args.numInputs = ins.size();
    args.outputs = outs.data();
    args.numOutputs = outs.size();
    args.intAttrs = ints.data();
    args.numIntAttrs = ints.size();
    args.floatAttrs = floats.data();
    args.numFloatAttrs = floats.size();
    args.ctx = ctx;
    const rt::KernelInfo *k = rt::findCpuKernel(name);
    if (!k) {
      error = std::string("no kernel ") + name;
      return false;
    }
    return k->fn(args, error);
  }
};

TEST(CommKernels, Registered) {
  for (const char *name : {"comm.all_reduce", "comm.reduce_scatter",
                           "comm.all_gather", "comm.broadcast"})
    EXPECT_NE(rt::findCpuKernel(name), nullptr) << name;
  const rt::KernelInfo *k = rt::findCpuKernel("comm.broadcast");
  EXPECT_EQ(k->numInputs, 1);
  EXPECT_EQ(k->numOutputs, 1);
  EXPECT_EQ(k->numIntAttrs, 1);
  EXPECT_EQ(rt::findCpuKernel("comm.all_reduce")->numFloatAttrs, 1);
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

//===----------------------------------------------------------------------===//
// Plans with collectives, run by a Session on every rank
//===----------------------------------------------------------------------===//

constexpr int64_t kK = 6; ///< elements per rank in commPlan

// Buffer ids of commPlan().
enum : uint32_t { kX, kTwo, kOne, kH, kZ, kS, kY, kG, kR, kB, kOut };

/// micro_step on N ranks, x = this rank's input:
///   compute  h = x * 2                          record 0
///   compute  z = x + 1                          (overlaps the all-reduce)
///   comm     s = all_reduce(h) / N   wait 0     record 1
///   compute  y = s + z               wait 1     record 2
///   comm     g = all_gather(y)       wait 2
///   comm     r = reduce_scatter(g)              (= N * y of this rank)
///   comm     b = broadcast(r, root N-1)         record 3
///   compute  out = b + y             wait 3
/// Outputs y and out.
PlanSpec commPlan(int n) {
  using S = fb::Space;
  using C = fb::Category;
  PlanSpec p;
  p.worldSize = uint32_t(n);
  const uint64_t row = kK * 4;
  uint32_t in = p.arena(S::host, C::inputs, row);
  uint32_t consts = p.arena(S::host, C::constants, 8);
  uint32_t acts = p.arena(S::device, C::activations, row * (6 + n));
  uint32_t comm = p.arena(S::device, C::comm_buffers, row * n);
  p.buffer(in, 0, {2, 3}, "x");
  p.buffer(consts, 0, {}, "two");
  p.buffer(consts, 4, {}, "one");
  const char *names[] = {"h", "z", "s", "y"};
  for (int k = 0; k < 4; ++k)
    p.buffer(acts, row * k, {2, 3}, names[k]);
  p.buffer(comm, 0, {n * kK}, "g");
  p.buffer(acts, row * 4, {2, 3}, "r");
  p.buffer(acts, row * 5, {2, 3}, "b");
  p.buffer(acts, row * 6, {2, 3}, "out");
  p.constants.push_back({kTwo, floatBytes({2.0f})});
  p.constants.push_back({kOne, floatBytes({1.0f})});
  using St = fb::Stream;
  PlanSpec::Program micro{"micro_step",
                          {{"ds.mul", {kX, kTwo}, {kH}, St::compute, {}, {0}},
                           {"ds.add", {kX, kOne}, {kZ}, St::compute},
                           {"comm.all_reduce", {kH}, {kS}, St::comm, {0}, {1}},
                           {"ds.add", {kS, kZ}, {kY}, St::compute, {1}, {2}},
                           {"comm.all_gather", {kY}, {kG}, St::comm, {2}},
                           {"comm.reduce_scatter", {kG}, {kR}, St::comm},
                           {"comm.broadcast", {kR}, {kB}, St::comm, {}, {3}},
                           {"ds.add", {kB, kY}, {kOut}, St::compute, {3}}},
                          {kX},
                          {kY, kOut},
                          4};
  micro.instrs[2].floats = {1.0 / n};
  micro.instrs[2].loc = "model.py:3";
  micro.instrs[5].floats = {1.0};
  micro.instrs[6].ints = {n - 1};
  p.programs.push_back(micro);
  p.programs.push_back({"apply", {}});
  return p;
}

float xValue(int rank, int64_t i, int run) {
  return float(rank * 10 + i + run);
}

/// Runs commPlan on this rank through `options` and checks every output.
void runCommPlan(const rt::SessionOptions &options, int n) {
  std::string error;
  auto plan = rt::LoadedPlan::fromBytes(commPlan(n).build(), "c.dsplan", error,
                                        test::cpuBackend());
  ASSERT_TRUE(plan) << error;
  auto session = rt::Session::create(*plan, options, error);
  ASSERT_TRUE(session) << error;
  session->setTracing(true);
  rt::NamedTensor x = session->programInputs("micro_step")[0];
  std::vector<rt::NamedTensor> outs = session->programOutputs("micro_step");
  const int me = options.rank;
  for (int run = 0; run < 5; ++run) {
    for (int64_t i = 0; i < kK; ++i)
      x.ref.f32()[i] = xValue(me, i, run);
    ASSERT_TRUE(session->run("micro_step", 0, error)) << error;
    for (int64_t i = 0; i < kK; ++i) {
      // y_r = mean over ranks of 2 x + x_r + 1; out = N y_{N-1} + y_r.
      auto y = [&](int r) {
        double mean = 0;
        for (int q = 0; q < n; ++q)
          mean += 2.0 * xValue(q, i, run);
        return mean / n + xValue(r, i, run) + 1;
      };
      EXPECT_NEAR(outs[0].ref.f32()[i], y(me), 1e-4) << run << " " << i;
      EXPECT_NEAR(outs[1].ref.f32()[i], n * y(n - 1) + y(me), 1e-3)
          << run << " " << i;
    }
  }
  std::vector<rt::TraceRecord> trace = session->takeTrace();
  ASSERT_EQ(trace.size(), 5u * 8);
  for (const rt::TraceRecord &t : trace)
    EXPECT_EQ(t.stream, t.kernel.substr(0, 5) == "comm." ? "comm" : "compute")
        << t.kernel;
}

TEST(CommPlan, CollectivesBetweenComputeKernels) {
  rt::SessionOptions options;
  options.rank = world().rank();
  options.worldSize = world().size();
  options.comm = &world();
  runCommPlan(options, world().size());
}

TEST(CommPlan, DefaultCommunicatorIsLocal) {
  runCommPlan(rt::SessionOptions(), 1);
}

TEST(CommPlan, CommunicatorMustMatchTheRun) {
  std::string error;
  auto plan = rt::LoadedPlan::fromBytes(commPlan(2).build(), "c.dsplan", error,
                                        test::cpuBackend());
  ASSERT_TRUE(plan) << error;
  rt::LocalCommunicator local;
  rt::SessionOptions options;
  options.worldSize = 2;
  options.rank = 1;
  options.comm = &local;
  EXPECT_EQ(rt::Session::create(*plan, options, error), nullptr);
  EXPECT_EQ(error, "c.dsplan: the run is rank 1 of 2 but its communicator is "
                   "rank 0 of 1");
  // Without a communicator the Session's own Local one fails the first
  // collective, naming it.
  options.comm = nullptr;
  auto session = rt::Session::create(*plan, options, error);
  ASSERT_TRUE(session) << error;
  EXPECT_FALSE(session->run("micro_step", 0, error));
  EXPECT_EQ(error, "c.dsplan: program 'micro_step' instruction 2 "
                   "(comm.all_reduce at model.py:3) failed: comm.all_reduce: "
                   "the communicator has 1 rank but the run has 2");
}

TEST(CommPlan, VerifierWantsCollectivesOnTheCommStream) {
  PlanSpec p = commPlan(1);
  p.programs[0].instrs[2].stream = fb::Stream::compute;
  std::string error;
  EXPECT_EQ(rt::LoadedPlan::fromBytes(p.build(), "c.dsplan", error,
                                      test::cpuBackend()),
            nullptr);
  EXPECT_EQ(error, "c.dsplan: program 'micro_step' instruction 2 "
                   "(comm.all_reduce) runs on the compute stream; collectives "
                   "run on the comm stream");
}

//===----------------------------------------------------------------------===//
// dsrun on every rank: data parallelism on a bigram model
//===----------------------------------------------------------------------===//

/// Vocabulary, sequence length and rows per rank of bigramPlan.
constexpr int64_t kVocab = 8, kSeq = 4, kRows = 2;

// Buffer ids of bigramPlan().
enum : uint32_t {
  kTable,
  kGrad,
  kLogits,
  kDLogits,
  kLoss,
  kSquare,
  kSum,
  kNorm,
  kUpdate,
  kTokens,
  kTargets,
  kLr,
  kStep,
  kOneConst
};

/// A bigram model trained with SGD, data parallel over `n` ranks of `batch`
/// rows each: the gradient is all-reduced into its mean on the comm stream
/// right after the compute stream produced it.
PlanSpec bigramPlan(int n, int64_t batch) {
  using S = fb::Space;
  using C = fb::Category;
  PlanSpec p;
  p.worldSize = uint32_t(n);
  p.microBatch = uint32_t(batch);
  p.seqLen = kSeq;
  p.vocabSize = kVocab;
  p.lr = 0.5;
  const uint64_t square = kVocab * kVocab * 4, act = batch * kSeq * kVocab * 4;
  uint32_t params = p.arena(S::device, C::params, square);
  uint32_t grads = p.arena(S::device, C::grads, square);
  uint32_t acts = p.arena(S::device, C::activations, 2 * act + 2 * square + 12);
  uint32_t in = p.arena(S::host, C::inputs, 2 * batch * kSeq * 4 + 8);
  uint32_t consts = p.arena(S::host, C::constants, 4);
  p.buffer(params, 0, {kVocab, kVocab}, "table");
  p.buffer(grads, 0, {kVocab, kVocab}, "table.grad");
  p.buffer(acts, 0, {batch, kSeq, kVocab}, "logits");
  p.buffer(acts, act, {batch, kSeq, kVocab}, "dlogits");
  p.buffer(acts, 2 * act, {}, "loss");
  p.buffer(acts, 2 * act + 4, {kVocab, kVocab}, "square");
  p.buffer(acts, 2 * act + 4 + square, {}, "sum");
  p.buffer(acts, 2 * act + 8 + square, {}, "grad_norm");
  p.buffer(acts, 2 * act + 12 + square, {kVocab, kVocab}, "update");
  const fb::DType i32 = fb::DType::i32;
  p.buffer(in, 0, {batch, kSeq}, "tokens", i32);
  p.buffer(in, batch * kSeq * 4, {batch, kSeq}, "targets", i32);
  p.buffer(in, 2 * batch * kSeq * 4, {}, "lr");
  p.buffer(in, 2 * batch * kSeq * 4 + 4, {}, "step");
  p.buffer(consts, 0, {}, "one");
  p.variables.push_back(
      {"table", fb::VarKind::param, "", kTable, fb::InitKind::normal, 0.1, 7});
  p.variables.push_back(
      {"table.grad", fb::VarKind::grad, "table", kGrad, fb::InitKind::zeros});
  p.constants.push_back({kOneConst, floatBytes({1.0f})});
  using St = fb::Stream;
  PlanSpec::Program micro{
      "micro_step",
      {{"ds.embedding", {kTable, kTokens}, {kLogits}},
       {"ds.cross_entropy", {kLogits, kTargets}, {kLoss}},
       {"ds.cross_entropy_grad", {kLogits, kTargets, kOneConst}, {kDLogits}},
       {"ds.embedding_grad",
        {kTokens, kDLogits},
        {kGrad},
        St::compute,
        {},
        {0}},
       {"comm.all_reduce", {kGrad}, {kGrad}, St::comm, {0}}},
      {kTokens, kTargets},
      {kLoss},
      1};
  micro.instrs[1].ints = {-1};
  micro.instrs[2].ints = {-1};
  micro.instrs[4].floats = {1.0 / n};
  p.programs.push_back(micro);
  p.programs.push_back({"apply",
                        {{"ds.mul", {kGrad, kGrad}, {kSquare}},
                         {"ds.reduce_sum", {kSquare}, {kSum}},
                         {"ds.sqrt", {kSum}, {kNorm}},
                         {"ds.mul", {kGrad, kLr}, {kUpdate}},
                         {"ds.sub", {kTable, kUpdate}, {kTable}}},
                        {kLr, kStep},
                        {kNorm}});
  p.programs.back().instrs[1].ints = {0, 1};
  return p;
}

std::string tempPath(const std::string &name) {
  return testing::TempDir() + "comm_test_" + name;
}

std::string writePlan(const PlanSpec &spec, const std::string &name) {
  std::vector<uint8_t> bytes = spec.build();
  std::string path = tempPath(name);
  std::FILE *f = std::fopen(path.c_str(), "wb");
  EXPECT_TRUE(f) << path;
  if (f) {
    std::fwrite(bytes.data(), 1, bytes.size(), f);
    std::fclose(f);
  }
  return path;
}

int dsrun(std::vector<std::string> args) {
  args.insert(args.begin(), "dsrun");
  std::vector<char *> argv;
  for (std::string &a : args)
    argv.push_back(a.data());
  return rt::runDsrunMain(int(argv.size()), argv.data());
}

std::vector<double> lossesIn(const std::string &metricsPath) {
  std::vector<double> losses;
  std::FILE *f = std::fopen(metricsPath.c_str(), "r");
  if (!f)
    return losses;
  char line[4096];
  while (std::fgets(line, sizeof line, f)) {
    const char *at = std::strstr(line, "\"loss\":");
    if (at)
      losses.push_back(std::strtod(at + 7, nullptr));
  }
  std::fclose(f);
  return losses;
}

/// `got` and `want` hold `steps` losses, equal within 1e-5 (relative).
void expectLosses(const std::vector<double> &got,
                  const std::vector<double> &want, int steps) {
  ASSERT_EQ(got.size(), size_t(steps));
  ASSERT_EQ(want.size(), size_t(steps));
  for (int s = 0; s < steps; ++s)
    EXPECT_NEAR(got[s], want[s], 1e-5 * std::abs(want[s])) << "step " << s;
}

/// Trains bigramPlan on one rank with all N * B rows for `steps` steps
/// (seed 3, constant lr 0.5), writing the metrics to `metricsPath`: the
/// reference for N ranks of B rows. `loaded` must outlive `session`.
void trainOneRank(int n, int steps, const std::string &metricsPath,
                  std::unique_ptr<rt::LoadedPlan> &loaded,
                  std::unique_ptr<rt::Session> &session) {
  std::string error;
  loaded = rt::LoadedPlan::fromBytes(bigramPlan(1, n * kRows).build(),
                                     "ref.dsplan", error, test::cpuBackend());
  ASSERT_TRUE(loaded) << error;
  rt::SessionOptions options;
  options.seed = 3;
  session = rt::Session::create(*loaded, options, error);
  ASSERT_TRUE(session) << error;
  session->initVariables();
  auto data = rt::DataLoader::synthetic(kVocab, uint32_t(n * kRows), kSeq);
  rt::TrainSetup setup;
  setup.microBatch = uint32_t(n * kRows);
  setup.seqLen = kSeq;
  setup.seed = 3;
  setup.steps = steps;
  rt::ScheduleParams constant;
  constant.lr = 0.5;
  ASSERT_TRUE(rt::LrSchedule::create(constant, setup.schedule, error));
  setup.metrics = std::fopen(metricsPath.c_str(), "w");
  ASSERT_TRUE(setup.metrics);
  int status = rt::train(*session, *data, setup, error);
  std::fclose(setup.metrics);
  ASSERT_EQ(status, 0) << error;
}

TEST(DsrunRanks, MatchOneRankWithTheGlobalBatch) {
  const int n = world().size(), steps = 6;
  // Every rank writes the plan to its own path: ranks may share /tmp.
  std::string rankTag = std::to_string(world().rank());
  std::string plan =
      writePlan(bigramPlan(n, kRows), "dp" + rankTag + ".dsplan");
  std::string metrics = tempPath("dp.jsonl"),
              weights = tempPath("dp.safetensors");
  std::string error;
  if (world().rank() == 0) {
    std::remove(metrics.c_str());
    std::remove(weights.c_str());
  }
  ASSERT_TRUE(world().barrier(error)) << error;
  ASSERT_EQ(dsrun({plan, "--steps", std::to_string(steps), "--seed", "3",
                   "--metrics", metrics, "--export-weights", weights}),
            0);
  ASSERT_TRUE(world().barrier(error)) << error;
  if (world().rank() != 0)
    return; // rank 0 alone wrote the metrics and weights

  // One rank with all N * B rows draws the same samples (DataLoader.h).
  std::unique_ptr<rt::LoadedPlan> loaded;
  std::unique_ptr<rt::Session> session;
  std::string refMetrics = tempPath("ref.jsonl");
  trainOneRank(n, steps, refMetrics, loaded, session);
  ASSERT_FALSE(testing::Test::HasFatalFailure());

  std::vector<double> got = lossesIn(metrics);
  expectLosses(got, lossesIn(refMetrics), steps);
  EXPECT_LT(got.back(), got.front()); // it learns

  auto file = rt::SafetensorsFile::read(weights, error);
  ASSERT_TRUE(file) << error;
  ASSERT_EQ(file->tensors().size(), 1u);
  const float *trained =
      reinterpret_cast<const float *>(file->data(file->tensors()[0]));
  const float *ref = session->findVariable("table")->ref.f32();
  for (int64_t i = 0; i < kVocab * kVocab; ++i)
    EXPECT_NEAR(trained[i], ref[i], 1e-5 * (1 + std::abs(ref[i]))) << i;
}

/// bigramPlan with ZeRO stage 3: the table and an untrained parameter
/// `extra` [3] share one group, sharded over the `n` ranks (padded to n x S
/// elements). micro_step all-gathers the group before the embedding and
/// reduce-scatters the gradient's mean into this rank's shard; apply updates
/// the shard, with the gradient norm all-reduced from the shards.
PlanSpec shardedBigramPlan(int n, int64_t batch) {
  using S = fb::Space;
  using C = fb::Category;
  using St = fb::Stream;
  PlanSpec p;
  p.worldSize = uint32_t(n);
  p.microBatch = uint32_t(batch);
  p.seqLen = kSeq;
  p.vocabSize = kVocab;
  p.lr = 0.5;
  const int64_t members = kVocab * kVocab + 3, shard = (members + n - 1) / n;
  const uint64_t act = batch * kSeq * kVocab * 4, rows = batch * kSeq * 4;
  uint32_t params = p.arena(S::device, C::params, shard * 4);
  uint32_t full = p.arena(S::device, C::comm_buffers, n * shard * 4);
  uint32_t grads = p.arena(S::device, C::grads, (n + 1) * shard * 4);
  uint32_t acts =
      p.arena(S::device, C::activations, 2 * act + 2 * shard * 4 + 12);
  uint32_t in = p.arena(S::host, C::inputs, 2 * rows + 8);
  uint32_t consts = p.arena(S::host, C::constants, 4);
  uint32_t pShard = p.buffer(params, 0, {shard}, "params.shard");
  uint32_t pFull = p.buffer(full, 0, {n * shard}, "params.full");
  uint32_t table = p.buffer(full, 0, {kVocab, kVocab}, "table");
  uint32_t gFull = p.buffer(grads, 0, {n * shard}, "grads.full");
  uint32_t gTable = p.buffer(grads, 0, {kVocab, kVocab}, "table.grad");
  uint32_t gShard = p.buffer(grads, n * shard * 4, {shard}, "grads.shard");
  uint32_t logits = p.buffer(acts, 0, {batch, kSeq, kVocab}, "logits");
  uint32_t dlogits = p.buffer(acts, act, {batch, kSeq, kVocab}, "dlogits");
  uint32_t loss = p.buffer(acts, 2 * act, {}, "loss");
  uint32_t square = p.buffer(acts, 2 * act + 4, {shard}, "square");
  uint32_t sum = p.buffer(acts, 2 * act + 4 + shard * 4, {}, "sum");
  uint32_t norm = p.buffer(acts, 2 * act + 8 + shard * 4, {}, "grad_norm");
  uint32_t update = p.buffer(acts, 2 * act + 12 + shard * 4, {shard}, "update");
  uint32_t tokens = p.buffer(in, 0, {batch, kSeq}, "tokens", fb::DType::i32);
  uint32_t targets =
      p.buffer(in, rows, {batch, kSeq}, "targets", fb::DType::i32);
  uint32_t lr = p.buffer(in, 2 * rows, {}, "lr");
  uint32_t step = p.buffer(in, 2 * rows + 4, {}, "step");
  uint32_t one = p.buffer(consts, 0, {}, "one");
  // The table draws as bigramPlan's does, whatever the world size.
  p.variables.push_back({"table", fb::VarKind::param, "", pShard,
                         fb::InitKind::normal, 0.1, 7, true, 0,
                         std::vector<int64_t>{kVocab, kVocab}});
  p.variables.push_back({"extra", fb::VarKind::param, "", pShard,
                         fb::InitKind::normal, 0.1, 11, true,
                         uint64_t(kVocab * kVocab), std::vector<int64_t>{3}});
  p.constants.push_back({one, floatBytes({1.0f})});
  PlanSpec::Program micro{
      "micro_step",
      {{"comm.all_gather", {pShard}, {pFull}, St::comm, {}, {0}},
       {"ds.embedding", {table, tokens}, {logits}, St::compute, {0}},
       {"ds.cross_entropy", {logits, targets}, {loss}},
       {"ds.cross_entropy_grad", {logits, targets, one}, {dlogits}},
       {"ds.embedding_grad", {tokens, dlogits}, {gTable}, St::compute, {}, {1}},
       {"comm.reduce_scatter", {gFull}, {gShard}, St::comm, {1}}},
      {tokens, targets},
      {loss},
      2};
  micro.instrs[2].ints = {-1};
  micro.instrs[3].ints = {-1};
  micro.instrs[5].floats = {1.0 / n};
  p.programs.push_back(micro);
  PlanSpec::Program apply{
      "apply",
      {{"ds.mul", {gShard, gShard}, {square}},
       {"ds.reduce_sum", {square}, {sum}, St::compute, {}, {0}},
       {"comm.all_reduce", {sum}, {sum}, St::comm, {0}, {1}},
       {"ds.sqrt", {sum}, {norm}, St::compute, {1}},
       {"ds.mul", {gShard, lr}, {update}},
       {"ds.sub", {pShard, update}, {pShard}}},
      {lr, step},
      {norm},
      2};
  apply.instrs[1].ints = {0};
  apply.instrs[2].floats = {1.0};
  p.programs.push_back(apply);
  return p;
}

/// The tensors of a safetensors file by name, as floats.
std::map<std::string, std::vector<float>> tensorsIn(const std::string &path) {
  std::map<std::string, std::vector<float>> out;
  std::string error;
  auto file = rt::SafetensorsFile::read(path, error);
  EXPECT_TRUE(file) << error;
  if (!file)
    return out;
  for (const rt::SafetensorsEntry &e : file->tensors()) {
    int64_t n = 1;
    for (int64_t d : e.shape)
      n *= d;
    std::vector<float> values(static_cast<size_t>(n));
    EXPECT_TRUE(file->readF32(e, values.data(), error)) << error;
    out[e.name] = values;
  }
  return out;
}

TEST(DsrunRanks, ShardedParametersTrainAndExportAsOneRank) {
  const int n = world().size(), steps = 6;
  std::string rankTag = std::to_string(world().rank());
  PlanSpec spec = shardedBigramPlan(n, kRows);
  std::string plan = writePlan(spec, "z3" + rankTag + ".dsplan");
  std::string metrics = tempPath("z3.jsonl"),
              weights = tempPath("z3.safetensors"),
              again = tempPath("z3again.safetensors");
  std::string error;
  if (world().rank() == 0) {
    std::remove(metrics.c_str());
    std::remove(weights.c_str());
    std::remove(again.c_str());
  }
  ASSERT_TRUE(world().barrier(error)) << error;
  ASSERT_EQ(dsrun({plan, "--steps", std::to_string(steps), "--seed", "3",
                   "--metrics", metrics, "--export-weights", weights}),
            0);
  ASSERT_TRUE(world().barrier(error)) << error;

  // Every rank loads the file into its shard (a different seed first, so
  // that the weights come from the file) and exports again.
  auto loaded = rt::LoadedPlan::fromBytes(spec.build(), "z3.dsplan", error,
                                          test::cpuBackend());
  ASSERT_TRUE(loaded) << error;
  rt::SessionOptions options;
  options.seed = 9;
  options.rank = world().rank();
  options.worldSize = n;
  options.comm = &world();
  auto session = rt::Session::create(*loaded, options, error);
  ASSERT_TRUE(session) << error;
  session->initVariables();
  rt::WeightsLayout layout =
      rt::WeightsLayout::forModel("test", {"table", "extra"});
  ASSERT_TRUE(rt::importWeights(*session, layout, weights, error)) << error;
  ASSERT_TRUE(rt::exportWeights(*session, layout, again, {},
                                world().rank() == 0, error))
      << error;
  ASSERT_TRUE(world().barrier(error)) << error;
  if (world().rank() != 0)
    return; // rank 0 alone wrote the metrics and weights

  // One rank, whole parameters, all N * B rows (DataLoader.h).
  std::unique_ptr<rt::LoadedPlan> ref;
  std::unique_ptr<rt::Session> refSession;
  std::string refMetrics = tempPath("z3ref.jsonl");
  trainOneRank(n, steps, refMetrics, ref, refSession);
  ASSERT_FALSE(testing::Test::HasFatalFailure());

  std::vector<double> got = lossesIn(metrics);
  expectLosses(got, lossesIn(refMetrics), steps);

  std::map<std::string, std::vector<float>> trained = tensorsIn(weights);
  ASSERT_EQ(trained.size(), 2u);
  ASSERT_EQ(trained["table"].size(), size_t(kVocab * kVocab));
  const float *refTable = refSession->findVariable("table")->ref.f32();
  for (int64_t i = 0; i < kVocab * kVocab; ++i)
    EXPECT_NEAR(trained["table"][i], refTable[i],
                1e-5 * (1 + std::abs(refTable[i])))
        << i;
  // extra has no gradient: it keeps its initial draw.
  ASSERT_EQ(trained["extra"].size(), 3u);
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(trained["extra"][i],
              float(rng::normalAt(3, 11, fb::kInitRngStep, i) * 0.1))
        << i;
  EXPECT_EQ(tensorsIn(again), trained);
}

TEST(DsrunRanks, WrongWorldSizeStopsEveryRankWithoutAHang) {
  const int n = world().size();
  std::string tag = std::to_string(world().rank());
  std::string plan =
      writePlan(bigramPlan(n + 1, kRows), "ws" + tag + ".dsplan");
  auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(dsrun({plan, "--steps", "2"}), 2);
  if (n > 1) {
    EXPECT_EQ(dsrun({plan, "--steps", "2", "--np", std::to_string(n + 1)}), 2);
  }
  EXPECT_LT(seconds(start), 30.0);
  std::string error;
  ASSERT_TRUE(world().barrier(error)) << error;
}

TEST(DsrunRanks, OneRankWithBadInputStopsTheOthers) {
  if (world().size() < 2)
    GTEST_SKIP() << "needs two or more ranks";
  std::string tag = std::to_string(world().rank());
  std::string plan =
      writePlan(bigramPlan(world().size(), kRows), "bad" + tag + ".dsplan");
  // Only the last rank's data file is missing.
  std::string data = tempPath("tokens" + tag + ".bin");
  std::vector<uint16_t> tokens(64);
  for (size_t i = 0; i < tokens.size(); ++i)
    tokens[i] = uint16_t(i % kVocab);
  std::FILE *f = std::fopen(data.c_str(), "wb");
  ASSERT_TRUE(f);
  std::fwrite(tokens.data(), 2, tokens.size(), f);
  std::fclose(f);
  if (world().rank() + 1 == world().size())
    std::remove(data.c_str());
  auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(dsrun({plan, "--steps", "2", "--data", data}), 2);
  EXPECT_LT(seconds(start), 30.0);
  std::string error;
  ASSERT_TRUE(world().barrier(error)) << error;
}

/// On ranks other than 0: only failures, each line prefixed with the rank.
class RankFailurePrinter : public testing::EmptyTestEventListener {
public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const testing::TestPartResult &result) override {
    if (result.failed())
      std::fprintf(stderr, "[rank %d] %s:%d: %s\n", rank_,
                   result.file_name() ? result.file_name() : "?",
                   result.line_number(), result.message());
  }

private:
  int rank_;
};

} // namespace

int main(int argc, char **argv) {
  // `CommTest --write-plan PATH N`: writes bigramPlan for N ranks (the fault
  // tests in comm_faults.py train it with dsrun) and exits.
  if (argc == 4 && std::string(argv[1]) == "--write-plan") {
    std::vector<uint8_t> bytes = bigramPlan(std::atoi(argv[3]), kRows).build();
    std::FILE *f = std::fopen(argv[2], "wb");
    bool ok =
        f && std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
    ok = f && std::fclose(f) == 0 && ok;
    return ok ? 0 : 1;
  }
  testing::InitGoogleTest(&argc, argv);
  dsc::rt::registerAvailableBackends(); // the in-process dsrun runs need it
  std::string error;
  std::unique_ptr<Communicator> comm = rt::createCommunicator(error);
  if (!comm) {
    std::fprintf(stderr, "CommTest: %s\n", error.c_str());
    return 1;
  }
  comm->setTimeout(60); // a failing test costs a minute, not a hang
  gWorld = comm.get();
  if (comm->rank() != 0) {
    testing::TestEventListeners &listeners =
        testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailurePrinter(comm->rank()));
  }
  int status = RUN_ALL_TESTS();
  gWorld = nullptr;
  comm.reset();
  return status;
}
