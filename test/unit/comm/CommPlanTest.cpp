//===- CommPlanTest.cpp - plans with collectives in a Session
//---------------===//

#include "test/unit/comm/CommTestSupport.h"

using namespace dsc;
using namespace dsc::commtest;

namespace {

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

} // namespace
