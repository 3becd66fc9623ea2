//===- Trainer.cpp - dsrun's training loop over a Session -----------------===//
#include "runtime/tooling/Trainer.h"

#include "runtime/tooling/Interrupt.h"

#include "runtime/checkpoint/Safetensors.h"
#include "runtime/comm/Communicator.h"
#include "runtime/plan/PlanFormat.h"
#include "runtime/plan/VariableNames.h"
#include "runtime/tooling/Metrics.h"
#include "runtime/tooling/PipelineBubble.h"
#include "runtime/tooling/ProcessMemory.h"
#include "runtime/tooling/StepPrograms.h"
#include "runtime/tooling/StepTimings.h"
#include "runtime/tooling/Trace.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <vector>

namespace dsc::rt {

namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// --debug-overflow-at: NaN in the first element of the smallest gradient
// accumulator this rank holds whole, so that the global norm is NaN on
// every rank (each rank injects into its own copy or shard).
bool injectOverflow(Session &session, std::string &error) {
  const NamedTensor *target = nullptr;
  for (const NamedTensor &v : session.variables()) {
    if (!v.sharded && plan::hasStateSuffix(v.name, plan::kGradSuffix) &&
        isFloat(v.ref.dtype) && (!target || v.numel() < target->numel()))
      target = &v;
  }
  if (!target) {
    error = "--debug-overflow-at: this rank holds no gradient accumulator";
    return false;
  }
  size_t bytes = size_t(target->numel()) * dtypeSize(target->ref.dtype);
  std::vector<uint8_t> data(bytes);
  if (!session.readTensor(*target, data.data(), bytes, error))
    return false;
  switch (target->ref.dtype) {
  case DType::f64: {
    double nan = std::nan("");
    std::memcpy(data.data(), &nan, sizeof(nan));
    break;
  }
  case DType::f32: {
    float nan = std::nanf("");
    std::memcpy(data.data(), &nan, sizeof(nan));
    break;
  }
  default: { // f16 and bf16: a quiet NaN of each
    uint16_t nan = target->ref.dtype == DType::f16 ? 0x7e00 : 0x7fc0;
    std::memcpy(data.data(), &nan, sizeof(nan));
    break;
  }
  }
  return session.writeTensor(*target, data.data(), bytes, error);
}

// One f32 scalar through the Session's staged access.
/// Whether a stop was requested (setup.stop), as every rank sees it: on
/// several ranks one all-reduce of the requests, so that all leave at the
/// same micro-step or eval batch. Asked between micro-steps and between
/// eval batches, so a stop waits for at most one of them rather than for
/// a whole accumulation or evaluation. False + error if the all-reduce
/// fails.
bool agreeOnStop(const TrainSetup &setup, int &signal, std::string &error) {
  signal = setup.stop ? int(*setup.stop) : 0;
  if (setup.worldSize <= 1 || !setup.stop)
    return true;
  if (!setup.comm) {
    error = "no communicator for " + std::to_string(setup.worldSize) + " ranks";
    return false;
  }
  double local[2] = {double(signal == SIGINT), double(signal == SIGTERM)};
  double sum[2] = {0, 0};
  if (!setup.comm->allReduceSum(local, sum, 2, error))
    return false;
  signal = sum[1] > 0 ? SIGTERM : sum[0] > 0 ? SIGINT : 0;
  return true;
}

} // namespace

bool evaluate(Session &session, const DataLoader &data, const TrainSetup &setup,
              uint32_t batches, double &loss, std::string &error,
              int *stoppedBy) {
  if (stoppedBy)
    *stoppedBy = 0;
  const std::string program(plan::kEvalProgram);
  const uint32_t rows =
      setup.evalMicroBatch ? setup.evalMicroBatch : setup.microBatch;
  const SequencePart part = setup.sequencePart();
  Slot batch{DType::i32, {rows, setup.seqLen / part.parts}};
  std::vector<NamedTensor> in;
  NamedTensor out;
  if (!bindProgram(session, program, {batch, batch}, "tokens, targets",
                   Slot{DType::f32, {}}, "the loss", in, out, error)) {
    if (!session.hasProgram(program))
      error = "plan: no program 'eval' (compile the plan with this dsc)";
    return false;
  }
  const size_t elems = size_t(rows) * setup.seqLen;
  std::vector<int32_t> tokens(elems), targets(elems), tokenPart, targetPart;
  const uint32_t n = std::max<uint32_t>(1, setup.dataWorld());
  const uint32_t rounds = (batches + n - 1) / n;
  double sum = 0;
  for (uint32_t i = 0; i < rounds; ++i) {
    if (stoppedBy && i > 0) {
      if (!agreeOnStop(setup, *stoppedBy, error))
        return false;
      if (*stoppedBy)
        return true; // no loss: the caller says the evaluation was cut
    }
    // Every rank runs as often as the others; a batch past the last one
    // (uneven split) runs for the collectives and is not counted.
    uint32_t b = i * n + setup.dataRank();
    data.fill(BatchKey{setup.seed, 0, b, 0, 1}, tokens.data(), targets.data());
    session.setSampleOffset(uint64_t(b) * rows);
    double l = 0;
    const size_t fed = elems / part.parts;
    if (!session.writeTensor(
            in[0], part.take(tokens.data(), rows, setup.seqLen, tokenPart),
            fed * 4, error) ||
        !session.writeTensor(
            in[1], part.take(targets.data(), rows, setup.seqLen, targetPart),
            fed * 4, error) ||
        !session.run(program, 0, error) || !readScalar(session, out, l, error))
      return false;
    if (b < batches)
      sum += l;
  }
  if (setup.worldSize > 1) {
    if (!setup.comm) {
      error =
          "no communicator for " + std::to_string(setup.worldSize) + " ranks";
      return false;
    }
    double total = 0;
    if (!setup.comm->allReduceSum(&sum, &total, 1, error))
      return false;
    // Each batch's loss, once per rank of its tensor-parallel group (a
    // pipeline's last stage alone).
    sum = total / setup.lossCopies();
  }
  loss = sum / batches;
  return true;
}

namespace {

/// One training run (train() below), split by what each part decides: the
/// micro-steps of a step, the ranks' agreement on its loss, the optimizer
/// step, what is recorded and printed, and when the run saves and stops.
/// Each returns kExitOk to go on, or train()'s status with `error` set.
class TrainLoop {
public:
  TrainLoop(Session &session, const DataLoader &data, const TrainSetup &setup,
            std::string &error)
      : session(session), data(data), setup(setup), error(error),
        tokensPerStep(uint64_t(setup.microBatch) * setup.seqLen *
                      setup.accumulationSteps * setup.dataWorld()),
        batchElems(size_t(setup.microBatch) * setup.microBatchesPerRun() *
                   setup.seqLen),
        tokens(batchElems), targets(batchElems) {}

  int run();

private:
  int fail(uint64_t step, const std::string &message) {
    if (setup.out && setup.interactive && step > 1)
      std::fputc('\n', setup.out); // end the live line before the error
    error = "step " + std::to_string(step) + ": " + message;
    return kExitTrainingFailed;
  }
  int microSteps(uint64_t step, double lossScale, double &loss);
  int stopInsideStep(uint64_t step, uint32_t micro, int signal);
  int agreeOnLoss(uint64_t step, double &loss, int &stopSignal);
  int applyStep(uint64_t step, double lossScale);
  int evaluateAfter(uint64_t step, int &cutBy);
  void recordMemory();
  int writeMetrics(uint64_t step);
  void printProgress(uint64_t step, bool last);
  void printStepLine(uint64_t step, bool last);
  uint64_t printInterval() const;
  bool hasLine(uint64_t step, bool last) const;
  bool breakdownStep(uint64_t step) const;
  bool tracedStep(uint64_t step) const;
  void takeTrace(uint64_t step);
  int measureBubble(uint64_t step);
  int save(uint64_t step);
  void printSummary();

  Session &session;
  const DataLoader &data;
  const TrainSetup &setup;
  std::string &error;
  ProgramIO io;
  std::optional<LossScaler> scaler;
  uint64_t applied = 0;   ///< steps that updated the weights
  uint64_t savedStep = 0; ///< the newest step a checkpoint holds
  PipelineBubble bubble;
  double bubbleSum = 0; ///< the measured bubbles of the steps after the first
  uint64_t bubbleSteps = 0;
  const uint64_t tokensPerStep;
  // The micro-batch is drawn into host memory and staged into the plan's
  // input buffers, which need not be host memory.
  const size_t batchElems;
  std::vector<int32_t> tokens, targets;
  StepRecord record;
  Clock::time_point runStart = Clock::now();
  Clock::time_point lastDraw;
};

// A stop request between micro-steps drops the step: its partial gradients
// are never applied (the optimizer runs in `apply`), and the run is as it
// was after step - 1, which is saved unless a checkpoint already holds it.
int TrainLoop::microSteps(uint64_t step, double lossScale, double &loss) {
  double lossSum = 0;
  // A pipeline's micro_step takes the step's micro-batches at once.
  const uint32_t perRun = setup.microBatchesPerRun();
  const uint32_t runs = setup.accumulationSteps / perRun;
  const size_t microElems = size_t(setup.microBatch) * setup.seqLen;
  for (uint32_t r = 0; r < runs; ++r) {
    int midStep = 0;
    if (r > 0 && !agreeOnStop(setup, midStep, error))
      return fail(step, error);
    if (midStep)
      return stopInsideStep(step, r, midStep);
    bool last = r + 1 == runs;
    for (uint32_t k = 0; k < perRun; ++k) {
      BatchKey key{setup.seed, uint32_t(step), r * perRun + k, setup.dataRank(),
                   setup.dataWorld()};
      data.fill(key, tokens.data() + k * microElems,
                targets.data() + k * microElems);
    }
    session.setSampleOffset(
        (uint64_t(r) * perRun * setup.dataWorld() + setup.dataRank()) *
        setup.microBatch);
    if (setup.dumpBatch) {
      size_t n = batchElems;
      if (std::fwrite(tokens.data(), sizeof(int32_t), n, setup.dumpBatch) !=
              n ||
          std::fwrite(targets.data(), sizeof(int32_t), n, setup.dumpBatch) !=
              n ||
          std::fflush(setup.dumpBatch) != 0)
        return fail(step, "cannot write the --dump-batch file");
    }
    double microLoss = 0;
    if (!runMicroStep(session, io, last, tokens.data(), targets.data(),
                      scaler ? std::optional(lossScale) : std::nullopt,
                      uint32_t(step), microLoss, error))
      return fail(step, error);
    takeTrace(step);
    lossSum += microLoss;
  }
  loss = lossSum / runs;
  return kExitOk;
}

int TrainLoop::stopInsideStep(uint64_t step, uint32_t micro, int signal) {
  if (setup.out && setup.interactive)
    std::fputc('\n', setup.out);
  const uint64_t done = step - 1;
  std::string saved = " (no --save-dir: nothing saved)";
  if (setup.save && done > savedStep) {
    if (int status = save(done))
      return status;
    saved = "";
  } else if (setup.save) {
    saved = done ? " (step " + std::to_string(done) + " was saved)"
                 : " (nothing trained: nothing saved)";
  }
  error = std::string("stopped by ") + signalName(signal) + " in step " +
          std::to_string(step) + " after micro-step " + std::to_string(micro) +
          " of " + std::to_string(setup.accumulationSteps) +
          "; the step is dropped and the run ends after step " +
          std::to_string(done) + saved;
  return 128 + signal;
}

// Read once per step; on several ranks, agreed on with the loss: every
// rank sees the same mean, so all stop together on a non-finite one; and
// the same stop request (how many ranks have had a SIGINT, a SIGTERM), so
// all stop after the same step however late the signal reached some.
int TrainLoop::agreeOnLoss(uint64_t step, double &loss, int &stopSignal) {
  stopSignal = setup.stop ? int(*setup.stop) : 0;
  if (setup.worldSize > 1) {
    if (!setup.comm)
      return fail(step, "no communicator for " +
                            std::to_string(setup.worldSize) + " ranks");
    double local[3] = {loss, double(stopSignal == SIGINT),
                       double(stopSignal == SIGTERM)};
    double sum[3] = {0, 0, 0};
    if (!setup.comm->allReduceSum(local, sum, 3, error))
      return fail(step, "averaging the loss over the ranks: " + error);
    loss = setup.meanLoss(sum[0]);
    stopSignal = sum[2] > 0 ? SIGTERM : sum[1] > 0 ? SIGINT : 0;
  }
  // A plan that skips overflowed steps reads a non-finite loss as one (its
  // gradients are not finite either); others stop.
  if (!std::isfinite(loss) && !setup.skipsOverflow)
    return fail(step, std::string("loss is ") + (std::isnan(loss) ? "nan"
                                                 : loss > 0       ? "inf"
                                                                  : "-inf"));
  return kExitOk;
}

int TrainLoop::applyStep(uint64_t step, double lossScale) {
  if (setup.injectOverflowAt.count(step) && !injectOverflow(session, error))
    return fail(step, error);
  ApplyOutcome outcome;
  if (!runApply(session, io, setup.schedule, applied,
                scaler ? std::optional(lossScale) : std::nullopt,
                setup.skipsOverflow, uint32_t(step), outcome, error))
    return fail(step, error);
  record.lossScale = lossScale;
  record.lr = outcome.lr;
  record.hasBeta1 = outcome.hasBeta1;
  record.beta1 = outcome.beta1;
  record.gradNorm = outcome.gradNorm;
  record.skipped = outcome.skipped;
  if (record.skipped)
    ++record.skippedSteps;
  else
    ++applied;
  if (scaler && !scaler->update(record.skipped, error))
    return fail(step, error);
  takeTrace(step);
  record.hasTimes = breakdownStep(step);
  if (setup.timings) {
    const StepBreakdown b = setup.timings->takeBreakdown();
    record.forwardMs = b.forwardMs;
    record.backwardMs = b.backwardMs;
    record.optimizerMs = b.optimizerMs;
    record.commMs = b.commMs;
  }
  return kExitOk;
}

/// The steps with wall_clock_breakdown's line: those with a progress line
/// (the evaluations' aside).
bool TrainLoop::breakdownStep(uint64_t step) const {
  return setup.timings && setup.timings->plan().breakdown &&
         (step % printInterval() == 0 || step == setup.steps);
}

/// The steps that run traced: every one with --trace, the comms logger or
/// a pipeline (its measured bubble), else the breakdown's and, with the
/// breakdown, the flops profile's.
bool TrainLoop::tracedStep(uint64_t step) const {
  return setup.trace || (setup.timings && setup.timings->timesEveryStep()) ||
         setup.pipelineStages > 1 || breakdownStep(step) ||
         (setup.timings && setup.timings->plan().breakdown &&
          step == setup.flopsProfileStep);
}

/// The records of the program runs since the last call, to the trace file
/// and the timings.
void TrainLoop::takeTrace(uint64_t step) {
  if (!tracedStep(step))
    return;
  std::vector<TraceRecord> records = session.takeTrace();
  if (setup.pipelineStages > 1)
    bubble.add(records);
  if (setup.timings)
    setup.timings->add(records, setup.out);
  if (setup.trace)
    setup.trace->add(records, step);
}

/// A pipeline's bubble in this step's micro_step, over every rank.
int TrainLoop::measureBubble(uint64_t step) {
  if (setup.pipelineStages <= 1 || !setup.comm)
    return kExitOk;
  record.hasBubble = true;
  if (!bubble.takeStep(*setup.comm, record.bubble, error))
    return fail(step, "measuring the pipeline's bubble: " + error);
  // The first step's runs include the executor's warm-up.
  if (step > setup.start.step + 1) {
    bubbleSum += record.bubble;
    ++bubbleSteps;
  }
  return kExitOk;
}

// After the step's timing: evaluation is not training throughput. A stop
// during the evaluation cuts it short (`cutBy`, agreed on by every rank);
// the step itself is done, so it is saved and the run stops after it.
int TrainLoop::evaluateAfter(uint64_t step, int &cutBy) {
  record.hasValLoss = false;
  cutBy = 0;
  if (!setup.evalData || !setup.evalEvery ||
      (step % setup.evalEvery != 0 && step != setup.steps))
    return kExitOk;
  if (!evaluate(session, *setup.evalData, setup, setup.evalBatches,
                record.valLoss, error, &cutBy))
    return fail(step, "evaluating: " + error);
  record.hasValLoss = cutBy == 0;
  return kExitOk;
}

void TrainLoop::recordMemory() {
  record.memory = session.arenaUsage();
  record.rank = setup.rank;
  record.worldSize = setup.worldSize;
  record.rssBaselineBytes = setup.rssBaselineBytes;
  record.rssPeakBytes = readProcessMemory().peakBytes;
  DeviceMemory device;
  if (setup.backend && setup.backend->deviceMemory(device)) {
    // The most in use after any step (the arenas are fixed; libraries such
    // as NCCL allocate at first use).
    if (record.hasDevice)
      device.used = std::max(device.used, record.device.used);
    record.device = device;
    record.hasDevice = true;
  }
}

// Flushed per step: a killed run keeps every finished step. A failed write
// (a full disk) stops the run rather than leave a torn file behind an exit
// status of 0.
int TrainLoop::writeMetrics(uint64_t step) {
  if (!setup.metrics)
    return kExitOk;
  if (std::fputs((metricsJson(record) + "\n").c_str(), setup.metrics) < 0 ||
      std::fflush(setup.metrics) != 0)
    return fail(step, std::string("cannot write the --metrics file: ") +
                          std::strerror(errno));
  return kExitOk;
}

void TrainLoop::printProgress(uint64_t step, bool last) {
  if (!setup.out)
    return;
  printStepLine(step, last);
  const bool printed = hasLine(step, last);
  const bool memory = setup.memoryBreakdown && printed;
  // Extra lines go below the live line, which goes on after them (the last
  // step and the profile's step end it themselves).
  if (setup.interactive && (memory || record.hasTimes) && !last &&
      step != setup.flopsProfileStep)
    std::fputc('\n', setup.out);
  if (memory)
    std::fprintf(setup.out, "%s\n", memoryLine(record).c_str());
  if (record.hasTimes)
    std::fprintf(setup.out, "%s\n",
                 breakdownLine({record.forwardMs, record.backwardMs,
                                record.optimizerMs, record.commMs})
                     .c_str());
  std::fflush(setup.out);
  if (step == setup.flopsProfileStep && setup.flopsProfile) {
    const bool timed = setup.timings && setup.timings->plan().breakdown;
    std::fputs(setup.flopsProfile(timed ? &setup.timings->moduleMs() : nullptr)
                   .c_str(),
               setup.out);
    std::fflush(setup.out);
  }
}

/// Whether step gets a plain progress line: every printInterval()-th, the
/// last, and one with a held-out evaluation.
bool TrainLoop::hasLine(uint64_t step, bool last) const {
  return step % printInterval() == 0 || last || record.hasValLoss;
}

uint64_t TrainLoop::printInterval() const {
  return setup.printEvery ? setup.printEvery
                          : std::max<uint64_t>(1, setup.steps / 20);
}

void TrainLoop::printStepLine(uint64_t step, bool last) {
  if (setup.interactive) {
    // Redraw at most ten times a second: a terminal is slower than a small
    // model's steps.
    if (last || secondsSince(lastDraw) >= 0.1) {
      std::fprintf(setup.out, "\r%s\x1b[K",
                   progressLine(record, setup.steps).c_str());
      std::fflush(setup.out);
      lastDraw = Clock::now();
    }
    // The profile starts a line of its own below the live one.
    if (last || step == setup.flopsProfileStep)
      std::fputc('\n', setup.out);
    return;
  }
  if (hasLine(step, last)) {
    std::fprintf(setup.out, "%s\n", progressLine(record, setup.steps).c_str());
    std::fflush(setup.out);
  }
}

int TrainLoop::save(uint64_t step) {
  RunState state{step, applied, record.skippedSteps, std::nullopt};
  if (scaler)
    state.scaler = scaler->state();
  if (!setup.save(state, error))
    return fail(step, "saving a checkpoint: " + error);
  savedStep = step;
  return kExitOk;
}

void TrainLoop::printSummary() {
  if (!setup.out)
    return;
  RunSummary summary;
  summary.steps = setup.steps - std::min(setup.steps, setup.start.step);
  summary.skippedSteps = record.skippedSteps;
  summary.lossScaling = scaler.has_value();
  summary.finalLossScale = scaler ? scaler->scale() : 1.0;
  summary.finalLoss = record.loss;
  summary.seconds = secondsSince(runStart);
  summary.tokens = record.tokens;
  if (bubbleSteps) {
    summary.hasBubble = true;
    summary.meanBubble = bubbleSum / double(bubbleSteps);
  }
  summary.memory = session.arenaUsage();
  summary.rssBaselineBytes = setup.rssBaselineBytes;
  summary.rssPeakBytes = readProcessMemory().peakBytes;
  summary.hasDevice = record.hasDevice;
  summary.device = record.device;
  std::fputs(summaryText(summary).c_str(), setup.out);
  if (setup.timings)
    std::fputs(setup.timings->commsSummary().c_str(), setup.out);
  std::fflush(setup.out);
}

int TrainLoop::run() {
  const StepShape shape{setup.microBatch * setup.microBatchesPerRun(),
                        setup.seqLen, setup.lossScale.has_value(),
                        setup.schedule.cyclesMomentum(), setup.sequencePart()};
  if (!bindPrograms(session, shape, io, error))
    return kExitBadInput;
  if (setup.lossScale)
    scaler.emplace(*setup.lossScale);
  if (scaler && setup.start.scaler)
    scaler->restore(*setup.start.scaler);
  applied = setup.start.applied;
  savedStep = setup.start.step;
  record.skippedSteps = setup.start.skipped;
  for (uint64_t step = setup.start.step + 1; step <= setup.steps; ++step) {
    session.setTracing(tracedStep(step));
    Clock::time_point stepStart = Clock::now();
    const double lossScale = scaler ? scaler->scale() : 1.0;
    double loss = 0;
    int stopSignal = 0, cutEvalBy = 0;
    if (int status = microSteps(step, lossScale, loss))
      return status;
    if (int status = agreeOnLoss(step, loss, stopSignal))
      return status;
    if (int status = measureBubble(step))
      return status;
    if (int status = applyStep(step, lossScale))
      return status;
    record.step = step;
    record.loss = loss;
    record.tokens = step * tokensPerStep;
    record.stepS = secondsSince(stepStart);
    record.tokensPerS =
        record.stepS > 0 ? double(tokensPerStep) / record.stepS : 0;
    if (int status = evaluateAfter(step, cutEvalBy))
      return status;
    recordMemory();
    if (int status = writeMetrics(step))
      return status;
    bool callbackStop = setup.onStep && !setup.onStep(record);
    bool last = step == setup.steps;
    printProgress(step, last);
    if (setup.worldSize == 1 && setup.stop)
      stopSignal = int(*setup.stop); // the latest word, on one rank
    if (cutEvalBy)
      stopSignal = cutEvalBy; // agreed on by every rank inside evaluate
    if (callbackStop && !stopSignal)
      stopSignal = SIGINT; // as a Ctrl-C would: finish, save, stop
    if (setup.save && ((setup.saveEvery && step % setup.saveEvery == 0) ||
                       last || stopSignal))
      if (int status = save(step))
        return status;
    if (stopSignal && !last) {
      if (setup.out && setup.interactive)
        std::fputc('\n', setup.out);
      error = "stopped by " +
              std::string(callbackStop ? "the step callback"
                                       : signalName(stopSignal)) +
              " after step " + std::to_string(step) +
              (setup.save ? "" : " (no --save-dir: nothing saved)");
      return 128 + stopSignal;
    }
  }
  printSummary();
  return kExitOk;
}

} // namespace

int train(Session &session, const DataLoader &data, const TrainSetup &setup,
          std::string &error) {
  return TrainLoop(session, data, setup, error).run();
}

} // namespace dsc::rt
