//===- Metrics.h - what dsrun reports per step and at the end ---*- C++ -*-===//
//
// One record per optimizer step, written three ways: a JSON line for
// --metrics, a progress line for people, and the end-of-run summary. Memory
// comes two ways: the Session's arena usage (the furthest byte the plan's
// instructions wrote next to the compiler's prediction, per category and
// space: a consistency check of the plan) and the process's resident set as
// the operating system measures it (the real cost).
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_TOOLING_METRICS_H
#define DSC_RUNTIME_TOOLING_METRICS_H

#include "runtime/exec/Session.h"

#include <cstdint>
#include <string>
#include <vector>

namespace dsc::rt {

struct StepRecord {
  uint64_t step = 0;
  double loss = 0;           ///< mean over the step's micro-steps
  double lr = 0;             ///< what the apply program was given
  bool hasBeta1 = false;     ///< the plan cycles beta1 (OneCycle)
  double beta1 = 0;          ///< what the apply program was given
  double gradNorm = 0;       ///< apply's output
  double lossScale = 1;      ///< the scale this step's loss was multiplied by
  bool skipped = false;      ///< the gradients overflowed: no update
  uint64_t skippedSteps = 0; ///< skipped steps so far, this one included
  bool hasValLoss = false;   ///< this step ended with a held-out evaluation
  double valLoss = 0;
  uint64_t tokens = 0; ///< tokens trained on so far, all ranks
  double stepS = 0;
  double tokensPerS = 0; ///< this step's tokens / stepS
  std::vector<ArenaUsage> memory;
  uint32_t rank = 0, worldSize = 1;
  uint64_t rssBaselineBytes = 0; ///< resident before the arenas existed
  uint64_t rssPeakBytes = 0;     ///< the process's peak resident set so far
  /// On a backend with device memory: its most in use after any step so
  /// far (used), what was in use before the arenas, and its size.
  bool hasDevice = false;
  DeviceMemory device;
  /// wall_clock_breakdown's steps: forward, backward, optimizer and
  /// collective milliseconds (StepTimings.h).
  bool hasTimes = false;
  double forwardMs = 0, backwardMs = 0, optimizerMs = 0, commMs = 0;
  /// A pipeline's: the share of the step's micro_step its ranks did not
  /// compute (PipelineBubble.h).
  bool hasBubble = false;
  double bubble = 0;
};

/// One JSON object (no newline):
///   {"step", "loss", "lr", "beta1" (plans that cycle it only),
///    "grad_norm", "loss_scale", "skipped", "tokens",
///    "val_loss" (steps with a held-out evaluation only),
///    "forward_ms", "backward_ms", "optimizer_ms", "comm_ms"
///    (wall_clock_breakdown's steps only), "bubble" (pipelines only),
///    "tokens_per_s", "step_s", "rank", "world_size",
///    "rss_baseline_bytes", "rss_peak_bytes",
///    "device_baseline_bytes", "device_peak_bytes", "device_total_bytes"
///    (backends with device memory only),
///    "plan_written_bytes": {category: written},
///    "predicted_bytes": {category: ...},
///    "plan_written_bytes_per_space": {space: written},
///    "predicted_bytes_per_space": {space: predicted}}
/// Arenas of one category (or space) are summed.
std::string metricsJson(const StepRecord &record);

/// "step 120/500  loss 2.4132  lr 6.0e-04  1.9k tok/s  mem 12.3 MiB" (mem:
/// the process's peak resident set), with "  gpu 62.1 GiB" (device memory
/// in use at most) on a device, "  skipped 3" once a step was
/// skipped, "  scale 2^15" in fp16 runs and "  val 2.3012" after an
/// evaluation.
std::string progressLine(const StepRecord &record, uint64_t totalSteps);

struct RunSummary {
  uint64_t steps = 0;
  uint64_t skippedSteps = 0; ///< steps whose gradients overflowed
  bool lossScaling = false;
  double finalLossScale = 1;
  double finalLoss = 0;
  double seconds = 0;
  uint64_t tokens = 0;
  std::vector<ArenaUsage> memory;
  uint64_t rssBaselineBytes = 0, rssPeakBytes = 0;
  bool hasDevice = false; ///< as in StepRecord
  DeviceMemory device;
  /// A pipeline's measured bubble, the mean over the steps after the first.
  bool hasBubble = false;
  double meanBubble = 0;
};

/// The end-of-run report: steps, final loss, throughput, a table of the
/// bytes the plan wrote and predicted per category, and the process's peak
/// resident set against its baseline plus the plan's total.
std::string summaryText(const RunSummary &summary);

/// ds_config's memory_breakdown line: "memory | params 133.5 KiB | grads
/// ... | process peak 10.8 MiB" (the bytes the plan wrote per category,
/// host arenas as "host <category>", categories that hold nothing left
/// out), with "| gpu 63.4 GiB of 139.8 GiB" on a device.
std::string memoryLine(const StepRecord &record);

/// "512 B", "12.3 MiB", "1.5 GiB".
std::string formatBytes(uint64_t bytes);
/// "950", "1.9k", "2.3M".
std::string formatRate(double perSecond);

} // namespace dsc::rt

#endif // DSC_RUNTIME_TOOLING_METRICS_H
