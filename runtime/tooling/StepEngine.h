//===- StepEngine.h - a training run stepped by its caller ------*- C++ -*-===//
//
// The core of the Python engine (dsc.initialize): a run opened in this
// process as dsrun opens it (openDsrun: the plan, the backend, the weights,
// the ranks), whose micro-steps and optimizer steps the caller drives with
// its own batches. The bookkeeping is dsrun's (StepPrograms.h): the
// schedule's lr and beta1 and Adam's step count advance with applied
// steps, fp16's loss scale follows the LossScaler, the last micro-step of
// a step runs micro_step_sync, dropout draws from the same sample offsets.
// The caller keeps the order: accumulationSteps() micro-steps, then
// apply(); anything else is one line of error.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_TOOLING_STEPENGINE_H
#define DSC_RUNTIME_TOOLING_STEPENGINE_H

#include "runtime/tooling/LossScaler.h"
#include "runtime/tooling/StepPrograms.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace dsc::rt {

struct OpenedRun;
struct TrainSetup;

class StepEngine {
public:
  /// Opens the run dsrun's flags `args` describe (the plan first; --data
  /// is not read). Null on failure, with kExitBadInput or
  /// kExitTrainingFailed in `status` and one line in `error`.
  static std::unique_ptr<StepEngine> open(const std::vector<std::string> &args,
                                          int &status, std::string &error);
  ~StepEngine();

  uint32_t microBatch() const;
  uint32_t seqLen() const;
  uint32_t accumulationSteps() const;
  uint32_t rank() const;
  uint32_t worldSize() const;
  /// The rank's data-parallel coordinates: ranks of a tensor-parallel or
  /// Ulysses group share a batch (TrainSetup::dataRank).
  uint32_t dataRank() const;
  uint32_t dataWorld() const;

  /// Micro-batches one run of the step program takes: a pipeline stage's
  /// streams the step's accumulationSteps() through its schedule at once
  /// (stepBatch()); 1 otherwise (microStep()).
  uint32_t microBatchesPerRun() const;
  /// The plan's pipeline stages (1 without a pipeline).
  uint32_t pipelineStages() const;

  /// The current step's next micro-step on `tokens` and `targets` (int32
  /// host arrays of microBatch() x seqLen()); `loss` is this rank's. Not
  /// for a pipeline (stepBatch()).
  bool microStep(const int32_t *tokens, const int32_t *targets, double &loss,
                 std::string &error);
  /// A pipeline stage's whole step of micro-batches, as DeepSpeed's
  /// PipelineEngine.train_batch takes them: `tokens` and `targets` hold
  /// accumulationSteps() micro-batches one after another; every rank
  /// calls it (the first stage reads the tokens, the last the targets).
  /// `loss` is the step's mean over its micro-batches and the data-parallel
  /// replicas, the same on every rank. apply() follows.
  bool stepBatch(const int32_t *tokens, const int32_t *targets, double &loss,
                 std::string &error);

  /// The plan's eval program (dropout off, no gradients) on one batch of
  /// evalBatch() rows; on several ranks every rank calls it (ZeRO-3
  /// gathers inside). `loss` is this rank's; in a pipeline (where only the
  /// last stage computes one) the mean over the replicas, on every rank.
  bool evalStep(const int32_t *tokens, const int32_t *targets, double &loss,
                std::string &error);
  /// The eval program's rows; 0 when the plan has none.
  uint32_t evalBatch() const;

  /// Micro-steps taken since the last apply.
  uint32_t pendingMicroSteps() const { return pending; }

  /// The optimizer step, after accumulationSteps() micro-steps.
  bool apply(ApplyOutcome &outcome, std::string &error);
  /// Steps that updated the weights, and all steps (skipped ones too).
  uint64_t appliedSteps() const { return applied; }
  uint64_t steps() const { return taken; }
  /// The lr the next apply uses.
  double nextLr() const;
  /// fp16's loss scale for the next step; 1 without one.
  double lossScale() const { return scaler ? scaler->scale() : 1.0; }

  /// The model's weights as dsrun --export-weights writes them (every rank
  /// takes part, a pipeline's stages each with their own): rank 0 writes
  /// `path`, or with `everyRank` each rank its own `path` (engine.module
  /// on every rank). Every rank returns once the files are written, and
  /// false when any rank's write failed.
  bool exportWeights(const std::string &path, bool everyRank,
                     std::string &error);

  /// DeepSpeed's save_checkpoint: the run (weights, optimizer state, the
  /// counters, the loss scale) into `dir`/step-NNNNNNNN, committed as dsrun
  /// commits its checkpoints (Checkpoint.h), with `clientState` (JSON, may
  /// be empty) as client_state.json. Between optimizer steps only;
  /// collective. `path`: the committed directory.
  bool saveCheckpoint(const std::string &dir, const std::string &clientState,
                      std::string &path, std::string &error);
  /// Loads the committed checkpoint `path` (this plan's, or one for another
  /// world size or ZeRO stage) into the run, which then continues from its
  /// step; `notes` as Checkpoint.h says. Between optimizer steps only.
  bool loadCheckpoint(const std::string &path, std::vector<std::string> &notes,
                      std::string &error);

private:
  const TrainSetup &setup() const;
  StepEngine() = default;

  std::unique_ptr<OpenedRun> run;
  ProgramIO io;
  bool evalBound = false;
  NamedTensor evalTokens, evalTargets, evalLoss;
  std::optional<LossScaler> scaler;
  bool betweenSteps(const char *what, std::string &error) const;
  /// A pipeline's loss, computed by its last stage alone: the mean over
  /// the replicas' last stages, given to every rank.
  bool agreeOnLoss(double &loss, std::string &error) const;

  uint64_t applied = 0, taken = 0, skipped = 0;
  uint32_t pending = 0;
};

} // namespace dsc::rt

#endif // DSC_RUNTIME_TOOLING_STEPENGINE_H
