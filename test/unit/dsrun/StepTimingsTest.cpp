//===- StepTimingsTest.cpp - wall_clock_breakdown and comms_logger sums ---===//
//
// StepTimings over hand-made trace records: the forward ends where the
// loss instruction ends, the backward runs from there to the micro-step's
// end, the update is apply's span, collectives add their own durations;
// micro-steps of one optimizer step add up; records of another program
// waiting in the trace (an evaluation) change none of the spans. The comms
// table's counts, sizes and bandwidths, and prof_ops' filter.
//
//===----------------------------------------------------------------------===//
#include "runtime/tooling/StepTimings.h"

#include <gtest/gtest.h>

namespace dsc::rt {
namespace {

constexpr int64_t kMs = 1000000; // nanoseconds

TraceRecord rec(std::string_view program, uint32_t instr, int64_t beginMs,
                int64_t endMs, std::string_view stream = "compute") {
  return {program, "k", "", stream, instr, beginMs * kMs, endMs * kMs};
}

TimingPlan twoRankPlan() {
  TimingPlan p;
  p.breakdown = true;
  p.logComms = true;
  p.worldSize = 2;
  p.lossInstr["micro_step"] = 2;
  p.collectives["micro_step"][3] = {"reduce_scatter", 1000000, false};
  p.collectives["apply"][1] = {"all_gather", 1000000, false};
  p.collectives["eval"][0] = {"all_reduce", 4, false};
  return p;
}

TEST(StepTimings, SpansSplitAtTheLossInstruction) {
  StepTimings t(twoRankPlan());
  // Micro-step 1: 10..14 ms, the loss instruction ends at 12, the
  // reduce-scatter on the comm stream takes 12.5..13.5.
  t.add({rec("micro_step", 0, 10, 11), rec("micro_step", 1, 11, 11),
         rec("micro_step", 2, 11, 12), rec("micro_step", 3, 12, 13, "comm"),
         rec("micro_step", 4, 13, 14)},
        nullptr);
  // Micro-step 2 of the same step, with an evaluation's records beside it.
  t.add({rec("eval", 0, 15, 16, "comm"), rec("micro_step", 0, 20, 22),
         rec("micro_step", 2, 22, 23), rec("micro_step", 4, 23, 27)},
        nullptr);
  t.add({rec("apply", 0, 30, 31), rec("apply", 1, 31, 33, "comm")}, nullptr);
  StepBreakdown b = t.takeBreakdown();
  EXPECT_DOUBLE_EQ(b.forwardMs, (12 - 10) + (23 - 20));
  EXPECT_DOUBLE_EQ(b.backwardMs, (14 - 12) + (27 - 23));
  EXPECT_DOUBLE_EQ(b.optimizerMs, 33 - 30);
  EXPECT_DOUBLE_EQ(b.commMs, 1 + 1 + 2);
  EXPECT_EQ(breakdownLine(b),
            "time (ms) | fwd: 5.00 | bwd: 6.00 | step: 3.00 | comm: 4.00");
  // Taken: the next step starts from nothing.
  b = t.takeBreakdown();
  EXPECT_EQ(b.forwardMs + b.backwardMs + b.optimizerMs + b.commMs, 0);
}

TEST(StepTimings, CommsTableByOperationAndSize) {
  StepTimings t(twoRankPlan());
  for (int step = 0; step < 2; ++step) {
    t.add({rec("micro_step", 2, 0, 1), rec("micro_step", 3, 1, 3, "comm")},
          nullptr);
    t.add({rec("apply", 1, 4, 5, "comm")}, nullptr);
  }
  t.add({rec("eval", 0, 6, 8, "comm")}, nullptr);
  // 1e6 bytes in 2 ms: 4 Gbps; all-gather's 1 ms: 8 Gbps; bus factors
  // (n-1)/n for both at n = 2, 2(n-1)/n for the all-reduce.
  EXPECT_EQ(
      t.commsSummary(),
      "comms (each collective this rank ran, by operation and message "
      "size):\n"
      "  op                       message    count     total ms     avg ms "
      "  algbw Gbps   busbw Gbps\n"
      "  all_gather            976.56 KiB        2        2.000      1.000 "
      "        8.00         4.00\n"
      "  all_reduce                   4 B        1        2.000      2.000 "
      "        0.00         0.00\n"
      "  reduce_scatter        976.56 KiB        2        4.000      2.000 "
      "        4.00         2.00\n");
}

TEST(StepTimings, CommsTableNamesTheGroupOnAMesh) {
  // 4 ranks as 2 data x 2 tensor: an all-reduce of each group, 1e6 bytes
  // in 2 ms (4 Gbps); both groups have 2 ranks, so the bus factor is 1.
  TimingPlan p;
  p.logComms = true;
  p.worldSize = 4;
  p.tensorParallel = 2;
  p.collectives["micro_step"][0] = {"all_reduce", 1000000, true};
  p.collectives["micro_step"][1] = {"all_reduce", 1000000, false};
  StepTimings t(p);
  t.add(
      {rec("micro_step", 0, 0, 2, "comm"), rec("micro_step", 1, 2, 4, "comm")},
      nullptr);
  EXPECT_EQ(
      t.commsSummary(),
      "comms (each collective this rank ran, by operation and message "
      "size):\n"
      "  op                       message    count     total ms     avg ms "
      "  algbw Gbps   busbw Gbps\n"
      "  all_reduce data       976.56 KiB        1        2.000      2.000 "
      "        4.00         4.00\n"
      "  all_reduce tensor     976.56 KiB        1        2.000      2.000 "
      "        4.00         4.00\n");
}

TEST(StepTimings, ProfOpsChooseWhatIsLogged) {
  TimingPlan p = twoRankPlan();
  p.allOps = false;
  p.ops = {"all_gather"};
  p.verboseComms = true;
  StepTimings t(p);
  std::FILE *out = std::tmpfile();
  ASSERT_NE(out, nullptr);
  t.add({rec("micro_step", 3, 1, 3, "comm")}, out);
  t.add({rec("apply", 1, 4, 5, "comm")}, out);
  std::rewind(out);
  char line[256] = {};
  ASSERT_NE(std::fgets(line, sizeof(line), out), nullptr);
  EXPECT_STREQ(line, "comm op: all_gather | time (ms): 1.000 | msg size: "
                     "976.56 KiB | algbw (Gbps): 8.00 | busbw (Gbps): 4.00\n");
  EXPECT_EQ(std::fgets(line, sizeof(line), out), nullptr) << line;
  std::fclose(out);
  const std::string table = t.commsSummary();
  EXPECT_NE(table.find("all_gather"), std::string::npos);
  EXPECT_EQ(table.find("reduce_scatter"), std::string::npos);
  // Collectives not logged still count in the step's comm time.
  EXPECT_DOUBLE_EQ(t.takeBreakdown().commMs, 3);
}

TEST(StepTimings, BusFactors) {
  EXPECT_DOUBLE_EQ(busFactor("all_reduce", 4), 1.5);
  EXPECT_DOUBLE_EQ(busFactor("all_gather", 4), 0.75);
  EXPECT_DOUBLE_EQ(busFactor("reduce_scatter", 4), 0.75);
  EXPECT_DOUBLE_EQ(busFactor("broadcast", 4), 1.0);
  EXPECT_DOUBLE_EQ(busFactor("all_reduce", 1), 0.0);
}

} // namespace
} // namespace dsc::rt
