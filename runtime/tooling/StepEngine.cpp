//===- StepEngine.cpp - a training run stepped by its caller --------------===//
#include "runtime/tooling/StepEngine.h"

#include "runtime/plan/ProgramNames.h"
#include "runtime/tooling/Checkpoint.h"
#include "runtime/tooling/DsrunMain.h"
#include "runtime/tooling/DsrunPrepare.h"
#include "runtime/tooling/PipelineWeights.h"
#include "runtime/tooling/Weights.h"

#include <map>

namespace dsc::rt {

std::unique_ptr<StepEngine>
StepEngine::open(const std::vector<std::string> &args, int &status,
                 std::string &error) {
  std::unique_ptr<StepEngine> engine(new StepEngine);
  engine->run = std::make_unique<OpenedRun>();
  status = openDsrun(args, *engine->run, error);
  if (status != kExitOk)
    return nullptr;
  const TrainSetup &setup = engine->run->prepared.setup;
  const StepShape shape{setup.microBatch * setup.microBatchesPerRun(),
                        setup.seqLen, setup.lossScale.has_value(),
                        setup.schedule.cyclesMomentum(), setup.sequencePart()};
  if (!bindPrograms(*engine->run->prepared.session, shape, engine->io, error)) {
    status = kExitBadInput;
    return nullptr;
  }
  if (setup.lossScale)
    engine->scaler.emplace(*setup.lossScale);
  return engine;
}

StepEngine::~StepEngine() = default;

uint32_t StepEngine::microBatch() const {
  return run->prepared.setup.microBatch;
}
uint32_t StepEngine::seqLen() const { return run->prepared.setup.seqLen; }
const TrainSetup &StepEngine::setup() const { return run->prepared.setup; }
uint32_t StepEngine::accumulationSteps() const {
  return run->prepared.setup.accumulationSteps;
}
uint32_t StepEngine::microBatchesPerRun() const {
  return setup().microBatchesPerRun();
}
uint32_t StepEngine::pipelineStages() const { return setup().pipelineStages; }
uint32_t StepEngine::rank() const { return run->prepared.setup.rank; }
uint32_t StepEngine::worldSize() const { return run->prepared.setup.worldSize; }
uint32_t StepEngine::dataRank() const { return setup().dataRank(); }
uint32_t StepEngine::dataWorld() const { return setup().dataWorld(); }

uint32_t StepEngine::evalBatch() const { return run->prepared.info.evalBatch; }

bool StepEngine::evalStep(const int32_t *tokens, const int32_t *targets,
                          double &loss, std::string &error) {
  Session &session = *run->prepared.session;
  const std::string program(plan::kEvalProgram);
  if (!evalBound) {
    if (!session.hasProgram(program) || evalBatch() == 0) {
      error = "the plan has no eval program (compile it with this dsc)";
      return false;
    }
    const Slot batch{DType::i32,
                     {evalBatch(), seqLen() / setup().sequenceParallel}};
    std::vector<NamedTensor> in;
    if (!bindProgram(session, program, {batch, batch}, "tokens, targets",
                     Slot{DType::f32, {}}, "the loss", in, evalLoss, error))
      return false;
    evalTokens = in[0];
    evalTargets = in[1];
    evalBound = true;
  }
  const size_t bytes = size_t(evalTokens.numel()) * sizeof(int32_t);
  session.setSampleOffset(0);
  const SequencePart part = setup().sequencePart();
  std::vector<int32_t> tokenPart, targetPart;
  tokens = part.take(tokens, evalBatch(), seqLen(), tokenPart);
  targets = part.take(targets, evalBatch(), seqLen(), targetPart);
  return session.writeTensor(evalTokens, tokens, bytes, error) &&
         session.writeTensor(evalTargets, targets, bytes, error) &&
         session.run(program, 0, error) &&
         readScalar(session, evalLoss, loss, error) &&
         (setup().pipelineStages <= 1 || agreeOnLoss(loss, error));
}

bool StepEngine::agreeOnLoss(double &loss, std::string &error) const {
  const TrainSetup &s = setup();
  double total = 0;
  if (!s.comm || !s.comm->allReduceSum(&loss, &total, 1, error))
    return false;
  loss = s.meanLoss(total);
  return true;
}

double StepEngine::nextLr() const {
  return run->prepared.setup.schedule.lrAt(applied + 1);
}

bool StepEngine::microStep(const int32_t *tokens, const int32_t *targets,
                           double &loss, std::string &error) {
  const TrainSetup &setup = run->prepared.setup;
  if (setup.pipelineStages > 1) {
    error = "a pipeline stage takes the step's " +
            std::to_string(setup.accumulationSteps) +
            " micro-batches at once (train_batch), not one at a time";
    return false;
  }
  if (pending == setup.accumulationSteps) {
    error = "micro-step " + std::to_string(pending + 1) + " of a step that " +
            "accumulates " + std::to_string(setup.accumulationSteps) +
            ": the optimizer step comes first";
    return false;
  }
  Session &session = *run->prepared.session;
  // The samples dsrun's micro-step `pending` of this rank would be: the
  // dropout masks are drawn per sample.
  session.setSampleOffset(
      (uint64_t(pending) * setup.dataWorld() + setup.dataRank()) *
      setup.microBatch);
  const bool last = pending + 1 == setup.accumulationSteps;
  const std::optional<double> scale =
      scaler ? std::optional(scaler->scale()) : std::nullopt;
  if (!runMicroStep(session, io, last, tokens, targets, scale,
                    uint32_t(taken + 1), loss, error))
    return false;
  ++pending;
  return true;
}

bool StepEngine::stepBatch(const int32_t *tokens, const int32_t *targets,
                           double &loss, std::string &error) {
  const TrainSetup &setup = run->prepared.setup;
  if (setup.pipelineStages <= 1) {
    error = "stepBatch is a pipeline's; this plan takes one micro-batch at "
            "a time";
    return false;
  }
  if (pending != 0) {
    error = "a step's micro-batches a second time: the optimizer step "
            "comes first";
    return false;
  }
  Session &session = *run->prepared.session;
  // The samples of dsrun's step on this replica (Trainer.cpp): the stage's
  // program adds each micro-batch's own offset.
  session.setSampleOffset(uint64_t(setup.dataRank()) * setup.microBatch);
  const std::optional<double> scale =
      scaler ? std::optional(scaler->scale()) : std::nullopt;
  if (!runMicroStep(session, io, /*last=*/true, tokens, targets, scale,
                    uint32_t(taken + 1), loss, error) ||
      !agreeOnLoss(loss, error))
    return false;
  pending = setup.accumulationSteps;
  return true;
}

bool StepEngine::apply(ApplyOutcome &outcome, std::string &error) {
  const TrainSetup &setup = run->prepared.setup;
  if (pending != setup.accumulationSteps) {
    error = "the optimizer step after " + std::to_string(pending) + " of " +
            std::to_string(setup.accumulationSteps) +
            " micro-steps: the plan accumulates " +
            std::to_string(setup.accumulationSteps);
    return false;
  }
  const std::optional<double> scale =
      scaler ? std::optional(scaler->scale()) : std::nullopt;
  if (!runApply(*run->prepared.session, io, setup.schedule, applied, scale,
                setup.skipsOverflow, uint32_t(taken + 1), outcome, error))
    return false;
  pending = 0;
  ++taken;
  if (outcome.skipped)
    ++skipped;
  else
    ++applied;
  return !scaler || scaler->update(outcome.skipped, error);
}

bool StepEngine::exportWeights(const std::string &path, bool everyRank,
                               std::string &error) {
  Prepared &p = run->prepared;
  std::map<std::string, std::string> metadata = {
      {"producer", "dsc.initialize"},
      {"model", p.info.model},
      {"step", std::to_string(taken)}};
  bool ok = p.info.pipelineStages > 1
                ? exportPipelineWeights(*p.session, p.layout, *p.setup.comm,
                                        int(p.info.pipelineStages),
                                        int(p.info.tensorParallel), path,
                                        metadata, error, everyRank)
                : rt::exportWeights(*p.session, p.layout, path, metadata,
                                    everyRank || p.setup.rank == 0, error);
  // Replicated weights need no collective to export, so without this a
  // rank could return (and read `path`) before rank 0 has written it: every
  // rank returns once the writers are done, each with their outcome.
  Communicator *comm = p.setup.comm;
  if (!comm || comm->size() == 1)
    return ok;
  double failed = ok ? 0 : 1, failures = 0;
  std::string commError;
  if (!comm->allReduceSum(&failed, &failures, 1, commError)) {
    if (ok)
      error = commError;
    return false;
  }
  if (ok && failures > 0) {
    error = "the weights were not written to '" + path +
            "': " + std::to_string(int(failures)) + " rank(s) failed (" +
            (everyRank ? "their" : "rank 0's") + " own line says why)";
    return false;
  }
  return ok;
}

bool StepEngine::betweenSteps(const char *what, std::string &error) const {
  if (pending == 0)
    return true;
  error = std::string(what) + " after " + std::to_string(pending) +
          " micro-steps of a step: checkpoints hold whole optimizer steps "
          "(call it after step())";
  return false;
}

bool StepEngine::saveCheckpoint(const std::string &dir,
                                const std::string &clientState,
                                std::string &path, std::string &error) {
  if (!betweenSteps("save_checkpoint", error))
    return false;
  RunState state{taken, applied, skipped, std::nullopt};
  if (scaler)
    state.scaler = scaler->state();
  return rt::saveCheckpoint(
      checkpointRun(run->options, *run->comm, run->prepared), dir, state,
      /*keep=*/0, path, error, clientState);
}

bool StepEngine::loadCheckpoint(const std::string &path,
                                std::vector<std::string> &notes,
                                std::string &error) {
  if (!betweenSteps("load_checkpoint", error))
    return false;
  Prepared &p = run->prepared;
  RunState state;
  if (!rt::loadCheckpoint(checkpointRun(run->options, *run->comm, p), path,
                          state, notes, error))
    return false;
  // The plan's own initialization (16-bit copies, shards) from the loaded
  // weights, as dsrun runs it after resuming.
  const std::string init(plan::kInitProgram);
  if (p.session->hasProgram(init) && !p.session->run(init, 0, error)) {
    error = init + ": " + error;
    return false;
  }
  taken = state.step;
  applied = state.applied;
  skipped = state.skipped;
  if (scaler && state.scaler)
    scaler->restore(*state.scaler);
  return true;
}

} // namespace dsc::rt
