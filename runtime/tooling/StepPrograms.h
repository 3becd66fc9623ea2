//===- StepPrograms.h - binding and running a step's programs ---*- C++ -*-===//
//
// dsrun's conventions for the programs of a training step (Trainer.h says
// them) as functions over a Session: the buffers of micro_step,
// micro_step_sync and apply checked and bound, one micro-step run on a
// host batch, one apply run with the schedule's lr (and beta1), the step
// count and the loss scale. dsrun's training loop (Trainer.cpp) and the
// Python engine (StepEngine.h) both step through these.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_TOOLING_STEPPROGRAMS_H
#define DSC_RUNTIME_TOOLING_STEPPROGRAMS_H

#include "runtime/exec/Session.h"
#include "runtime/tooling/Schedule.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace dsc::rt {

/// What dsrun puts into or reads from one program buffer.
struct Slot {
  DType dtype;
  std::vector<int64_t> shape; ///< empty: a scalar (one element, any rank)
};

/// Ulysses (Plan.sequence_parallel): the contiguous part of each sequence
/// a rank feeds, `index` of `parts` (its place in its group).
struct SequencePart {
  uint32_t parts = 1, index = 0;
  /// `whole` [rows, seqLen] cut to this rank's [rows, seqLen / parts] in
  /// `scratch`; `whole` itself when there is one part.
  const int32_t *take(const int32_t *whole, uint32_t rows, uint32_t seqLen,
                      std::vector<int32_t> &scratch) const;
};

/// Checks `program`'s signature against dsrun's convention: exactly the
/// `inputs` (named `inputNames` in errors) and at least one output, the
/// first being `output`. False + one line ("plan: ...") if not.
bool bindProgram(Session &session, const std::string &program,
                 const std::vector<Slot> &inputs, const char *inputNames,
                 const Slot &output, const char *outputName,
                 std::vector<NamedTensor> &in, NamedTensor &out,
                 std::string &error);

/// A micro-step program's buffers.
struct MicroIO {
  NamedTensor tokens, targets, lossScale, loss;
};

/// The buffers of a step's programs, after checking the conventions.
struct ProgramIO {
  MicroIO micro, sync; ///< sync: micro_step_sync's, if the plan has it
  bool hasSync = false;
  NamedTensor lr, step, beta1, lossScale, gradNorm;
  /// The batch's shape as the host holds it, and the part this rank
  /// feeds of it.
  uint32_t microBatch = 1, seqLen = 1;
  SequencePart sequence;
};

/// What the programs' signatures depend on.
struct StepShape {
  uint32_t microBatch = 1, seqLen = 1;
  bool lossScaled = false;     ///< fp16: a loss-scale input everywhere
  bool cyclesMomentum = false; ///< OneCycle's momentum: apply takes beta1
  SequencePart sequence;       ///< the programs take [B, seqLen / parts]
};

bool bindPrograms(Session &session, const StepShape &shape, ProgramIO &io,
                  std::string &error);

bool readScalar(Session &session, const NamedTensor &t, double &value,
                std::string &error);
bool writeScalar(Session &session, const NamedTensor &t, double value,
                 std::string &error);

/// One micro-batch through micro_step (micro_step_sync when `last` and the
/// plan has one): `tokens` and `targets` are host int32 [B, T]; `lossScale`
/// is written where the plan takes one. `tag` names the run in traces.
bool runMicroStep(Session &session, const ProgramIO &io, bool last,
                  const int32_t *tokens, const int32_t *targets,
                  std::optional<double> lossScale, uint32_t tag, double &loss,
                  std::string &error);

/// What one apply did.
struct ApplyOutcome {
  double lr = 0, gradNorm = 0;
  bool hasBeta1 = false;
  double beta1 = 0;
  bool skipped = false; ///< the gradients overflowed: nothing changed
};

/// apply as optimizer step `applied + 1` (the schedule and Adam's step
/// count advance only with applied steps): the schedule's lr and beta1,
/// the step count and `lossScale` written, the gradient norm read. A plan
/// that `skipsOverflow` changed nothing when the norm is not finite.
bool runApply(Session &session, const ProgramIO &io, const LrSchedule &schedule,
              uint64_t applied, std::optional<double> lossScale,
              bool skipsOverflow, uint32_t tag, ApplyOutcome &outcome,
              std::string &error);

} // namespace dsc::rt

#endif // DSC_RUNTIME_TOOLING_STEPPROGRAMS_H
