//===- StepTimelineTest.cpp - a plan's streams on a machine model ---------===//
//
// playProgram against timelines worked out by hand, and --machine's
// parsing.
//
//===----------------------------------------------------------------------===//
#include "compiler/StepTimeline.h"
#include "compiler/plan/PlanModel.h"

#include <gtest/gtest.h>

using namespace dsc;

namespace {

/// 1 GFLOP/s, memory and latency out of the way, a 1 MB/s link: an
/// instruction of F MFLOP takes F ms, a two-rank all-reduce of B bytes
/// (bus factor 1) B us.
MachineModel slowLink() { return {"test", 1e9, 1e15, 1e6, 1e6, 0}; }

PlanInstr compute(double mflops, std::vector<uint32_t> wait = {},
                  std::vector<uint32_t> record = {}) {
  PlanInstr i;
  i.kernel = "ds.mul";
  i.flops = mflops * 1e6;
  i.inputs = {0};
  i.outputs = {0};
  i.wait = std::move(wait);
  i.record = std::move(record);
  return i;
}

/// An all-reduce of buffer 1 (1000 bytes: 1 ms) on the comm stream.
PlanInstr allReduce(std::vector<uint32_t> wait, std::vector<uint32_t> record) {
  PlanInstr i;
  i.kernel = "comm.all_reduce";
  i.stream = 1;
  i.inputs = {1};
  i.outputs = {1};
  i.wait = std::move(wait);
  i.record = std::move(record);
  return i;
}

PlanModel twoRanks(std::vector<PlanInstr> instrs) {
  PlanModel plan;
  plan.options.worldSize = 2;
  PlanBuffer small, message;
  small.arena = message.arena = Category::Activations;
  small.shape = {1};
  message.shape = {250}; // f32: 1000 bytes
  plan.buffers = {small, message};
  PlanProgram p;
  p.name = "micro_step";
  p.instrs = std::move(instrs);
  p.numEvents = 2;
  plan.programs.push_back(p);
  return plan;
}

// A (1 ms) records e0; the all-reduce (1 ms) waits for it and records e1;
// B (2 ms) runs under it; C (1 ms) waits for e1, long done: nothing waits.
TEST(StepTimeline, ACollectiveUnderComputeIsHidden) {
  PlanModel plan = twoRanks(
      {compute(1, {}, {0}), allReduce({0}, {1}), compute(2), compute(1, {1})});
  ProgramTimeline t = playProgram(plan, plan.programs[0], slowLink());
  EXPECT_NEAR(t.makespan, 4e-3, 1e-12);
  EXPECT_NEAR(t.compute, 4e-3, 1e-12);
  EXPECT_NEAR(t.collectives, 1e-3, 1e-12);
  EXPECT_NEAR(t.exposed(), 0, 1e-12);
}

// B takes 0.5 ms: C waits from 1.5 to 2 ms for the all-reduce.
TEST(StepTimeline, TheComputeStreamWaitsForWhatIsNotHidden) {
  PlanModel plan = twoRanks({compute(1, {}, {0}), allReduce({0}, {1}),
                             compute(0.5), compute(1, {1})});
  ProgramTimeline t = playProgram(plan, plan.programs[0], slowLink());
  EXPECT_NEAR(t.makespan, 3e-3, 1e-12);
  EXPECT_NEAR(t.compute, 2.5e-3, 1e-12);
  EXPECT_NEAR(t.exposed(), 0.5e-3, 1e-12);
}

// One rank moves nothing; a tensor-group collective counts its group.
TEST(StepTimeline, CollectivesCostTheirGroupsRing) {
  PlanModel plan = twoRanks({allReduce({}, {})});
  plan.options.worldSize = 1;
  EXPECT_EQ(playProgram(plan, plan.programs[0], slowLink()).collectives, 0);
  plan.options.worldSize = 4;
  plan.options.tensorParallel = 4;
  plan.programs[0].instrs[0].tensorGroup = true;
  // 2 (n - 1) / n = 1.5 bytes a byte over 4 ranks.
  EXPECT_NEAR(playProgram(plan, plan.programs[0], slowLink()).collectives,
              1.5e-3, 1e-12);
  plan.programs[0].instrs[0].kernel = "comm.all_gather";
  EXPECT_NEAR(playProgram(plan, plan.programs[0], slowLink()).collectives,
              0.75e-3, 1e-12);
}

// A kernel's time is the larger of its FLOPs and its bytes (a roofline).
TEST(StepTimeline, MemoryBoundKernelsTakeTheirBytes) {
  PlanModel plan = twoRanks({compute(0)});
  plan.programs[0].instrs[0].inputs = {1};
  plan.programs[0].instrs[0].outputs = {1};
  MachineModel m = slowLink();
  m.memory = 1e6; // 1000 bytes read and written once: 1 ms
  EXPECT_NEAR(playProgram(plan, plan.programs[0], m).compute, 1e-3, 1e-12);
}

TEST(StepTimeline, MachinesParse) {
  MachineModel m;
  std::string error;
  ASSERT_TRUE(parseMachine("h100", m, error)) << error;
  EXPECT_EQ(describe(m), "h100: 400 TFLOP/s, 3350 GB/s memory, 400 GB/s "
                         "link, 10 us latency");
  ASSERT_TRUE(parseMachine("cpu,link_gbps=2.5,latency_us=0", m, error))
      << error;
  EXPECT_EQ(describe(m), "cpu (modified): 0.1 TFLOP/s, 20 GB/s memory, 2.5 "
                         "GB/s link, 0 us latency");
  EXPECT_FALSE(parseMachine("tpu", m, error));
  EXPECT_EQ(error, "--machine: 'tpu' is not a machine (h100 or cpu, then "
                   ",key=value: tflops, mem_gbps, link_gbps, host_gbps, "
                   "latency_us)");
  for (const char *bad : {"h100,link_gbps=0", "h100,speed=3", "h100,tflops=-1",
                          "h100,tflops=nan", "h100,tflops"})
    EXPECT_FALSE(parseMachine(bad, m, error)) << bad;
  EXPECT_EQ(error, "--machine: 'tflops' is not key=value with a key of "
                   "tflops, mem_gbps, link_gbps, host_gbps or latency_us and "
                   "a positive number");
}

} // namespace
