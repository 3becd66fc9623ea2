//===- StepTimeline.h - plan streams played on a machine model -*- C++ -*-===//
//
// dsc --report predicts how much of a program's collective time runs under
// its compute: the plan's instructions are played in program order on
// their streams, each waiting for the events it names, with durations from
// a machine model (a roofline for kernels: the larger of FLOPs over the
// compute rate and bytes touched over the memory bandwidth; latency plus a
// ring's bus bytes over the link for collectives). What the compute stream
// waits beyond its own work is the collective (and copy) time not hidden.
// The prediction is only as good as the model; bench/tensor_parallel.sh
// measures the same quantity from traces.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_COMPILER_STEPTIMELINE_H
#define DSC_COMPILER_STEPTIMELINE_H

#include "llvm/ADT/StringRef.h"

#include <string>
#include <vector>

namespace dsc {

struct PlanModel;
struct PlanProgram;

/// Rates of one rank's device and its links (SI units: FLOP/s, bytes/s, s).
struct MachineModel {
  std::string name;
  double flops = 0;    ///< sustained compute
  double memory = 0;   ///< device memory bandwidth
  double link = 0;     ///< collective bus bandwidth between ranks
  double hostLink = 0; ///< host <-> device copies (offload)
  double latency = 0;  ///< per collective
};

/// "h100" or "cpu", optionally followed by ",key=value" overrides (tflops,
/// mem_gbps, link_gbps, host_gbps, latency_us). False and one line in
/// `error` for anything else.
bool parseMachine(llvm::StringRef text, MachineModel &machine,
                  std::string &error);

/// "h100: 400 TFLOP/s, 3350 GB/s memory, 400 GB/s link, 10 us latency".
std::string describe(const MachineModel &machine);

/// One program played on the model (seconds).
struct ProgramTimeline {
  double makespan = 0;
  double compute = 0;     ///< the compute stream's own work
  double collectives = 0; ///< the comm stream's
  /// What the compute stream waits for beyond its own work: collectives
  /// and copies not hidden under compute.
  double exposed() const { return makespan - compute; }
};

ProgramTimeline playProgram(const PlanModel &plan, const PlanProgram &program,
                            const MachineModel &machine);

/// A pipeline's stages' step programs (micro_step_sync where there is one,
/// else micro_step) played together: a stage's
/// receive waits for its message, which arrives when the peer's send
/// (latency plus bytes over the link) ends. The stages are played again
/// until the messages' times settle.
struct PipelineTimeline {
  std::vector<ProgramTimeline> stages;
  double makespan = 0; ///< the step: when the last stage's work ends
  /// The share of the stages' time they do not compute: 1 - (sum of the
  /// stages' compute) / (stages x makespan).
  double bubble() const;
};

PipelineTimeline playPipeline(const std::vector<PlanModel> &stages,
                              const MachineModel &machine);

} // namespace dsc

#endif // DSC_COMPILER_STEPTIMELINE_H
