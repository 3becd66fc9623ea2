//===- Trainer.h - dsrun's training loop over a Session ---------*- C++ -*-===//
//
// Per optimizer step s = 1..steps: `micro_step` once per micro-batch
// (accumulationSteps of them, each drawn by the DataLoader for (seed, s,
// micro-step, rank)), then `apply` with the scheduled learning rate. The
// step's loss is the mean of its micro-steps' losses over every rank (an
// all-reduce when there are several). A plan with `micro_step_sync` runs it
// for the last micro-batch of each step instead of `micro_step`. Program
// conventions (checked before the first step):
//   micro_step, micro_step_sync:
//               inputs (tokens i32 [B, T], targets i32 [B, T]),
//               output 0 loss f32 scalar
//   apply:      inputs (lr f32 scalar, step f32 scalar, from 1),
//               output 0 grad_norm f32 scalar
// fp16 plans add a third input to each, the loss scale (f32 scalar), which
// dsrun keeps with a LossScaler. In plans that skip overflowed steps
// (mixed precision), a non-finite gradient norm means apply changed
// nothing: the step counts as skipped, the LR schedule and Adam's step
// count stay where they were (DeepSpeed's engine), and the loss scale
// halves as the scaler says.
// Depends only on the abstract Session, so tests can drive it with a fake.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_TOOLING_TRAINER_H
#define DSC_RUNTIME_TOOLING_TRAINER_H

#include "runtime/data/DataLoader.h"
#include "runtime/exec/Session.h"
#include "runtime/tooling/Checkpoint.h"
#include "runtime/tooling/LossScaler.h"
#include "runtime/tooling/Metrics.h"
#include "runtime/tooling/Schedule.h"
#include "runtime/tooling/StepPrograms.h"

#include <csignal>
#include <cstdio>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>

namespace dsc::rt {

class Communicator;
class StepTimings;
class TraceWriter;

struct TrainSetup {
  uint32_t microBatch = 1;
  uint32_t seqLen = 1;
  uint32_t accumulationSteps = 1;
  uint32_t rank = 0;
  uint32_t worldSize = 1;
  /// Ranks of a tensor-parallel group (consecutive ranks). Batches, and
  /// the samples dropout is keyed by, are a data-parallel replica's: every
  /// rank of a group has its group's.
  uint32_t tensorParallel = 1;
  /// Ranks of a Ulysses group (consecutive ranks): they share a batch as a
  /// tensor-parallel group does, and each feeds its part of the sequences.
  uint32_t sequenceParallel = 1;
  /// Stages of a pipeline (Plan.pipeline_parallel): every stage has its
  /// pipeline's batches, micro_step takes the step's accumulationSteps
  /// micro-batches at once, and only the last stage has the loss.
  uint32_t pipelineStages = 1;
  uint32_t batchGroup() const {
    return tensorParallel * sequenceParallel * pipelineStages;
  }
  /// Micro-batches one micro_step run takes.
  uint32_t microBatchesPerRun() const {
    return pipelineStages > 1 ? accumulationSteps : 1;
  }
  /// Ranks of a data-parallel replica that report each batch's loss (the
  /// others, a pipeline's earlier stages, report 0).
  uint32_t lossCopies() const { return tensorParallel * sequenceParallel; }
  /// The step's mean loss from its sum over every rank.
  double meanLoss(double sumOverRanks) const {
    return sumOverRanks / (double(dataWorld()) * lossCopies());
  }
  uint32_t dataRank() const { return rank / batchGroup(); }
  uint32_t dataWorld() const {
    return worldSize / batchGroup() ? worldSize / batchGroup() : 1;
  }
  SequencePart sequencePart() const {
    return {sequenceParallel, rank % sequenceParallel};
  }
  /// With worldSize > 1: the step's loss is averaged over the ranks.
  Communicator *comm = nullptr;
  uint64_t seed = 0;
  uint64_t steps = 1;
  LrSchedule schedule;
  /// fp16 plans: the loss scale's settings; unset for plans without one.
  std::optional<LossScaleOptions> lossScale;
  /// The plan's apply leaves everything untouched when the gradient norm is
  /// not finite (Plan.skips_overflow).
  bool skipsOverflow = false;
  /// Held-out loss (--eval-data): every evalEvery steps and after the last
  /// one, the mean loss of `eval` over evalBatches fixed batches of
  /// evalData (EvalSetup below); null: none.
  const DataLoader *evalData = nullptr;
  uint64_t evalEvery = 0;
  uint32_t evalBatches = 20;
  uint32_t evalMicroBatch = 0; ///< eval's rows; 0: microBatch
  /// Debugging (--debug-overflow-at): before apply of these steps every
  /// rank writes NaN into one element of a gradient accumulator it holds.
  std::set<uint64_t> injectOverflowAt;

  /// Resuming: where a checkpoint left the run; training goes on with
  /// step start.step + 1 (its batches, dropout masks, learning rate and
  /// loss scale are the uninterrupted run's).
  RunState start;
  /// Checkpoints: called on every rank after each saveEvery-th step and
  /// after the last (a collective); false + error stops the run.
  std::function<bool(const RunState &, std::string &)> save;
  uint64_t saveEvery = 0;
  /// Set to a signal's number to stop (Interrupt.h): heard between
  /// micro-steps (the step in progress is dropped; the run ends after the
  /// step before it, saved with `save` unless a checkpoint holds it), after
  /// the step's micro-steps (the step is finished and saved) and between
  /// eval batches (the evaluation is cut short); train returns 128 + the
  /// signal. Null: never.
  const volatile std::sig_atomic_t *stop = nullptr;

  std::FILE *out = nullptr; ///< progress and summary; null: silent
  /// ds_config's flops_profiler: printed to `out` after step
  /// flopsProfileStep (FlopsProfile.h); 0: never.
  /// Called with the step's measured milliseconds by module when
  /// wall_clock_breakdown timed it (null: not timed).
  std::function<std::string(const std::map<std::string, double> *)>
      flopsProfile;
  uint64_t flopsProfileStep = 0;
  uint64_t printEvery = 0; ///< progress every K steps; 0: steps / 20
  /// ds_config's memory_breakdown: memoryLine after each progress line.
  bool memoryBreakdown = false;
  bool interactive = false;     ///< one live line rewritten with \r
  std::FILE *metrics = nullptr; ///< one JSON line per step, or null
  /// Called with each step's record after it is written to `metrics` (the
  /// Python API's callback); false stops the run after this step as SIGINT
  /// would (saved with `save`; train returns 128 + SIGINT). Null: none.
  std::function<bool(const StepRecord &)> onStep;
  TraceWriter *trace = nullptr; ///< instruction events, or null
  /// ds_config's wall_clock_breakdown and comms_logger (StepTimings.h):
  /// the steps with a progress line (every step for the comms logger) run
  /// traced and their records go here; null: neither.
  StepTimings *timings = nullptr;
  std::FILE *dumpBatch = nullptr; ///< every micro-batch, or null
  /// The process's resident bytes before the Session allocated its arenas.
  uint64_t rssBaselineBytes = 0;
  /// Where device memory is read after each step (Backend::deviceMemory:
  /// the device_* metrics), or null.
  const Backend *backend = nullptr;
};

/// Exit statuses, as DESIGN.md fixes them for dsrun.
enum ExitStatus { kExitOk = 0, kExitTrainingFailed = 1, kExitBadInput = 2 };

/// The mean loss of the plan's `eval` program over `batches` held-out
/// batches of `data`: batch b is BatchKey{seed, 0, b, 0, 1}'s draw (step 0
/// is never a training step), the same batches for any world size; rank r
/// evaluates b = r, r + N, ... and the ranks sum (an all-reduce). Every
/// rank runs `eval` equally often (ZeRO-3 gathers inside it). False + one
/// line on error; kExitBadInput-worthy problems (no `eval`) say "plan:".
///
/// With `stoppedBy`, a stop request (setup.stop, agreed on by every rank)
/// is heard between batches: evaluate returns true at once with
/// *stoppedBy set to the signal and no loss.
bool evaluate(Session &session, const DataLoader &data, const TrainSetup &setup,
              uint32_t batches, double &loss, std::string &error,
              int *stoppedBy = nullptr);

/// Trains for setup.steps steps. Returns kExitOk, 128 + a signal (stopped by
/// setup.stop, after saving), kExitTrainingFailed (a
/// non-finite loss in a plan that does not skip overflows: "step 7: loss is
/// nan"; an overflow at the minimum loss scale; a failing kernel) or
/// kExitBadInput
/// (programs that break the conventions above), with one line in `error`.
int train(Session &session, const DataLoader &data, const TrainSetup &setup,
          std::string &error);

} // namespace dsc::rt

#endif // DSC_RUNTIME_TOOLING_TRAINER_H
