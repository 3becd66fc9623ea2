//===- StepTimings.h - wall_clock_breakdown and comms_logger ----*- C++ -*-===//
//
// DeepSpeed times its engine's forward, backward and optimizer step with
// host timers (wall_clock_breakdown) and every collective it issues
// (comms_logger). dsrun has the same facts per instruction: the executor's
// trace records (what --trace writes), from which these are sums. The plan
// says which instruction ends the forward (the one that writes the
// micro-step's loss: the backward, recomputation included, comes after
// it, as it does in DeepSpeed's backward) and which are collectives, with
// their sizes.
//
//   forward  = the micro-step's start .. the loss instruction's end
//   backward = the loss instruction's end .. the micro-step's end
//   step     = the apply program, start to end (the optimizer, clipping,
//              ZeRO's gathers)
//   comm     = the collectives' own durations, wherever they ran; they
//              overlap compute on their stream, so they are not a share of
//              the three spans
// each summed over the optimizer step's micro-steps.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_TOOLING_STEPTIMINGS_H
#define DSC_RUNTIME_TOOLING_STEPTIMINGS_H

#include "runtime/backends/StreamExecutor.h"
#include "runtime/plan/PlanFormat.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

namespace dsc::rt {

/// A collective instruction: its operation ("all_reduce", ...), the
/// bytes of its whole tensor (the larger of its input and output), and its
/// group: the tensor-parallel group's, or the data-parallel one's (the
/// world without tensor parallelism).
struct CollectiveInstr {
  std::string op;
  uint64_t bytes = 0;
  bool tensorGroup = false;
};

/// What the timings need from the plan.
struct TimingPlan {
  bool breakdown = false; ///< wall_clock_breakdown
  bool logComms = false;  ///< comms_logger
  bool verboseComms = false;
  bool allOps = true; ///< log every operation, else those in `ops`
  std::set<std::string> ops;
  uint32_t worldSize = 1;
  uint32_t tensorParallel = 1;   ///< ranks of a tensor-parallel group
  uint32_t sequenceParallel = 1; ///< ranks of a Ulysses group
  /// The ranks of a collective's group: the tensor (or Ulysses) group's,
  /// or the data group's (the world / tensorParallel: Ulysses' data
  /// parallelism spans the world).
  uint32_t groupRanks(bool tensorGroup) const {
    return tensorGroup ? std::max(tensorParallel, sequenceParallel)
                       : std::max<uint32_t>(1, worldSize / tensorParallel);
  }
  /// Per micro-step program: the index of the instruction writing its loss.
  std::map<std::string, uint32_t, std::less<>> lossInstr;
  /// Per program: its collectives by instruction index.
  std::map<std::string, std::map<uint32_t, CollectiveInstr>, std::less<>>
      collectives;
};

/// The plan's wall_clock_breakdown and comms_logger settings and the facts
/// above (read from a verified plan).
TimingPlan timingPlanOf(const plan::Plan &plan);

/// One optimizer step's times, in milliseconds.
struct StepBreakdown {
  double forwardMs = 0, backwardMs = 0, optimizerMs = 0, commMs = 0;
};

/// "time (ms) | fwd: 12.30 | bwd: 25.10 | step: 2.00 | comm: 0.41".
std::string breakdownLine(const StepBreakdown &b);

class StepTimings {
public:
  explicit StepTimings(TimingPlan plan) : plan_(std::move(plan)) {}

  const TimingPlan &plan() const { return plan_; }
  /// Whether every step must be timed (the comms logger), not only those
  /// with a breakdown line.
  bool timesEveryStep() const { return plan_.logComms; }

  /// Adds the records of program runs (of one micro-step's or apply's run;
  /// a program with no loss instruction other than apply, such as eval,
  /// adds only its collectives). With
  /// the verbose comms logger, a line per logged collective goes to
  /// `verbose` (when not null).
  void add(const std::vector<TraceRecord> &records, std::FILE *verbose);
  /// The breakdown of what was added since the last call.
  StepBreakdown takeBreakdown();
  /// The milliseconds of the instructions added before the last
  /// takeBreakdown, by module name (Instr.loc): the flops profile's times.
  const std::map<std::string, double> &moduleMs() const { return modules_; }
  /// The comms logger's table over the run: per operation (and group, on
  /// a tensor-parallel plan) and message size, the count, total and mean
  /// latency and the mean algorithm and bus bandwidths; "" without a logger or
  /// collectives.
  std::string commsSummary() const;

private:
  struct Sizes {
    uint64_t count = 0;
    double totalMs = 0;
  };
  bool logged(const std::string &op) const;
  void addRun(std::string_view program, const std::vector<TraceRecord> &run,
              std::FILE *verbose);

  TimingPlan plan_;
  StepBreakdown current_;
  std::map<std::string, double> currentModules_, modules_;
  /// (operation, tensor group, message bytes) -> what ran.
  std::map<std::tuple<std::string, bool, uint64_t>, Sizes> comms_;
};

/// Bus bandwidth over algorithm bandwidth for `op` on `ranks` ranks (the
/// NCCL tests' convention): 2(n-1)/n for all_reduce, (n-1)/n for gathers
/// and scatters, 1 for broadcast.
double busFactor(const std::string &op, uint32_t ranks);

} // namespace dsc::rt

#endif // DSC_RUNTIME_TOOLING_STEPTIMINGS_H
