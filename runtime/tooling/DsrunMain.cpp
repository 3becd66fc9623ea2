//===- DsrunMain.cpp - the dsrun tool as a library call -------------------===//
//
// One rank's run: flags, the ranks joined, the rank prepared
// (DsrunPrepare.h), every rank agreed to start, then sampling, an
// evaluation or training (Trainer.h) and what the run writes. The
// launcher that starts ranks is DsrunLaunch.cpp.
//
//===----------------------------------------------------------------------===//
#include "runtime/tooling/DsrunMain.h"

#include "runtime/tooling/FlopsProfile.h"

#include "runtime/comm/Communicator.h"
#include "runtime/core/NumberText.h"
#include "runtime/plan/ProgramNames.h"
#include "runtime/tooling/Checkpoint.h"
#include "runtime/tooling/DsrunPrepare.h"
#include "runtime/tooling/Flags.h"
#include "runtime/tooling/Interrupt.h"
#include "runtime/tooling/Launch.h"
#include "runtime/tooling/PipelineWeights.h"
#include "runtime/tooling/Sampler.h"
#include "runtime/tooling/Trainer.h"
#include "runtime/tooling/Weights.h"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <map>

#include <unistd.h>

namespace dsc::rt {

namespace {

/// Whether every rank got ready: one collective that every rank reaches,
/// failed or not. A rank that is ready stops with kExitBadInput (and a line
/// saying so) when another one is not.
int agreeToStart(Communicator &comm, int status, std::string &error) {
  double failed = status == kExitOk ? 0 : 1, failures = 0;
  std::string commError;
  if (!comm.allReduceSum(&failed, &failures, 1, commError)) {
    if (status == kExitOk)
      error = commError;
    return status == kExitOk ? kExitTrainingFailed : status;
  }
  if (status == kExitOk && failures > 0) {
    int n = int(failures);
    error = std::to_string(n) + " of " + std::to_string(comm.size()) +
            " ranks could not start (" + (n == 1 ? "its" : "their") +
            " own line says why); stopping";
    return kExitBadInput;
  }
  return status;
}

/// The run's one line on rank 0: the plan, the model, its size, the batch,
/// the steps and the schedule.
void describeRun(const std::string &planName, const Communicator &comm,
                 const Prepared &p) {
  const PlanInfo &info = p.info;
  std::string ranks =
      comm.size() == 1 ? "" : "; " + std::to_string(comm.size()) + " ranks";
  if (info.pipelineStages > 1)
    ranks +=
        ", a pipeline of " + std::to_string(info.pipelineStages) + " stages";
  if (info.pipelineStages > 1 && info.tensorParallel > 1)
    ranks += ", " + std::to_string(info.tensorParallel) +
             " tensor-parallel ranks each";
  std::printf("dsrun: %s: %s, %llu parameters; %u x %u tokens per "
              "micro-batch, %u micro-step%s per step; %llu steps; %s%s\n",
              planName.c_str(),
              info.model.empty() ? "model" : info.model.c_str(),
              (unsigned long long)info.numParams, info.microBatch, info.seqLen,
              info.accumulationSteps, info.accumulationSteps == 1 ? "" : "s",
              (unsigned long long)p.setup.steps,
              p.setup.schedule.describe().c_str(), ranks.c_str());
}

/// The training loop's settings from the plan, the flags and this rank.
void fillSetup(const DsrunOptions &options, Communicator &comm,
               const DsrunHooks &hooks, Prepared &p) {
  const bool lead = comm.rank() == 0;
  const PlanInfo &info = p.info;
  TrainSetup &setup = p.setup;
  setup.microBatch = info.microBatch;
  setup.seqLen = info.seqLen;
  setup.accumulationSteps = info.accumulationSteps;
  setup.rank = uint32_t(comm.rank());
  setup.worldSize = uint32_t(comm.size());
  setup.tensorParallel = info.tensorParallel;
  setup.sequenceParallel = info.sequenceParallel;
  setup.pipelineStages = info.pipelineStages;
  setup.comm = &comm;
  setup.seed = options.seed;
  setup.out = lead ? stdout : nullptr;
  // mpirun hands its ranks a pseudo-terminal whatever its own output is, so
  // a rank's live line could end up in a log file: ranks print plain lines.
  setup.interactive = lead && !underMpirun() && ::isatty(fileno(stdout));
  setup.metrics = p.files.metrics;
  if (lead)
    setup.onStep = hooks.onStep;
  setup.dumpBatch = p.files.dumpBatch;
  setup.trace = p.files.trace.get();
  setup.lossScale = info.lossScale;
  setup.skipsOverflow = info.skipsOverflow;
  setup.evalData = p.evalData.get();
  setup.evalMicroBatch = info.evalBatch;
  setup.evalEvery = options.evalEvery;
  setup.printEvery = options.printEvery;
  setup.evalBatches = uint32_t(options.evalBatches);
  setup.flopsProfileStep = flopsProfileStep(p.loaded->plan());
  setup.memoryBreakdown = p.loaded->plan().memory_breakdown();
  TimingPlan timing = timingPlanOf(p.loaded->plan());
  if (timing.breakdown || timing.logComms) {
    p.timings = std::make_unique<StepTimings>(std::move(timing));
    setup.timings = p.timings.get();
  }
  if (lead && setup.flopsProfileStep) {
    const plan::Plan &plan = p.loaded->plan();
    setup.flopsProfile = [&plan](const ModuleTimes *measured) {
      return flopsProfileText(plan, measured);
    };
  }
  if (options.saveDir.empty())
    return;
  setup.saveEvery = options.saveEvery;
  CheckpointRun run = checkpointRun(options, comm, p);
  setup.save = [run, &options, lead](const RunState &state, std::string &err) {
    std::string path;
    if (!saveCheckpoint(run, options.saveDir, state, options.keep, path, err))
      return false;
    if (lead) {
      std::printf("dsrun: saved %s\n", path.c_str());
      std::fflush(stdout);
    }
    return true;
  };
}

/// --sample N: tokens generated from the prompt, printed by rank 0.
int runSample(const DsrunOptions &options, bool lead, Prepared &p,
              std::string &error) {
  const PlanInfo &info = p.info;
  double temperature = 0;
  if (!parseFiniteNumber(options.temperature, 0, 1e6, temperature)) {
    error = "--temperature: expected a number from 0 to 1e6, got '" +
            options.temperature + "'";
    return kExitBadInput;
  }
  SampleOptions so;
  so.count = uint32_t(options.sample);
  so.prompt.assign(options.prompt.begin(), options.prompt.end());
  for (int32_t &c : so.prompt)
    c = int32_t(uint8_t(c)); // bytes, whatever char's signedness
  // A byte the model has no embedding row for failed in a kernel (exit 1).
  for (size_t i = 0; i < so.prompt.size(); ++i)
    if (uint32_t(so.prompt[i]) >= info.vocabSize) {
      error = "--prompt: byte " + std::to_string(i) + " is " +
              std::to_string(so.prompt[i]) + ", outside the plan's " +
              std::to_string(info.vocabSize) + "-token vocabulary";
      return kExitBadInput;
    }
  so.temperature = temperature;
  so.topK = uint32_t(options.topK);
  so.seed = options.seed;
  so.microBatch = info.evalBatch ? info.evalBatch : info.microBatch;
  so.seqLen = info.seqLen;
  so.vocabSize = info.vocabSize;
  so.tensorParallel = info.tensorParallel;
  so.sequence = p.setup.sequencePart();
  if (info.pipelineStages > 1) {
    so.world = p.setup.comm;
    so.drawer = int((info.pipelineStages - 1) * info.tensorParallel);
  }
  std::vector<int32_t> tokens;
  ForwardCounts forwards;
  const auto start = std::chrono::steady_clock::now();
  if (!sampleTokens(*p.session, so, tokens, error, &forwards))
    return error.rfind("plan:", 0) == 0 ? kExitBadInput : kExitTrainingFailed;
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  if (lead) {
    // What each token cost and which forward drew it (a one-row sample_<T>
    // as short as the context, or eval's whole batch).
    std::string runs;
    for (const auto &[program, n] : forwards)
      runs += (runs.empty() ? "" : ", ") + program + " x" + std::to_string(n);
    std::fprintf(stderr,
                 "dsrun: sampled %zu tokens in %.2f s (%.1f ms a token): %s\n",
                 tokens.size(), seconds,
                 tokens.empty() ? 0.0 : 1e3 * seconds / double(tokens.size()),
                 runs.c_str());
    std::string text;
    for (int32_t t : tokens)
      text += info.vocabSize <= 256 ? std::string(1, char(t))
                                    : std::to_string(t) + " ";
    std::printf("%s%s\n", options.prompt.c_str(), text.c_str());
  }
  return kExitOk;
}

/// After training: the weights (every rank takes part, sharded parameters
/// are gathered; rank 0 writes) and each rank's --dump-state. A rank that
/// fails here abandons the job, so none waits for it longer than a
/// collective's timeout.
int writeResults(const DsrunOptions &options, bool lead, Prepared &p,
                 std::string &error) {
  const TrainSetup &setup = p.setup;
  if (!options.exportWeights.empty()) {
    std::map<std::string, std::string> metadata = {
        {"producer", "dsrun"},
        {"model", p.info.model},
        // The weights' step: a resumed run past --steps trained nothing.
        {"step", std::to_string(std::max(setup.steps, setup.start.step))},
        {"seed", std::to_string(options.seed)}};
    const bool written =
        p.info.pipelineStages > 1
            ? exportPipelineWeights(*p.session, p.layout, *setup.comm,
                                    int(p.info.pipelineStages),
                                    int(p.info.tensorParallel),
                                    options.exportWeights, metadata, error)
            : exportWeights(*p.session, p.layout, options.exportWeights,
                            metadata, lead, error);
    if (!written)
      return kExitTrainingFailed;
    if (lead && !options.quietExport)
      std::printf("dsrun: wrote %s\n", options.exportWeights.c_str());
  }
  if (!options.dumpState.empty()) {
    std::string path = options.dumpState + ".rank" +
                       std::to_string(setup.rank) + ".safetensors";
    if (!dumpState(*p.session, shardRankOf(p.info, int(setup.rank)), path,
                   error))
      return kExitTrainingFailed;
  }
  return kExitOk;
}

/// Trains (unless a checkpoint is already past --steps), then writes what
/// the run produces.
int trainAndWrite(const DsrunOptions &options, bool lead, Prepared &p,
                  std::string &error) {
  TrainSetup &setup = p.setup;
  int status = kExitOk;
  // Ctrl-C finishes the step and saves; a rank hears of it from the
  // launcher (SIGUSR1/2 through mpirun), as SIGTERM is mpirun's own.
  setup.stop =
      underMpirun() ? installRankStopHandlers() : installStopHandlers();
  if (setup.start.step >= setup.steps) {
    if (lead)
      std::printf("dsrun: the checkpoint is at step %llu: nothing to train "
                  "up to --steps %llu\n",
                  (unsigned long long)setup.start.step,
                  (unsigned long long)setup.steps);
  } else {
    status = train(*p.session, *p.data, setup, error);
  }
  // A trace that cannot be written fails the run, but after the weights
  // are out: a late failure must not throw the training away.
  std::string traceError;
  if (p.files.trace && !p.files.trace->close(traceError) && status == kExitOk)
    status = kExitTrainingFailed;
  else
    traceError.clear();
  if (status != kExitOk && traceError.empty())
    return status;
  if (int written = writeResults(options, lead, p, error))
    return written;
  if (!traceError.empty()) {
    error = traceError;
    return kExitTrainingFailed;
  }
  return kExitOk;
}

/// Everything before the first step: the rank prepared (with --resume,
/// `options` gets the checkpoint's seed), every rank agreed to start, the
/// plan's init program run, the run described, the setup filled. With
/// p.exported the run is done.
int start(const DsrunOptions &given, Communicator &comm,
          const DsrunHooks &hooks, DsrunOptions &options, Prepared &p,
          std::string &error) {
  const bool lead = comm.rank() == 0;
  // A rank hears a stop request as SIGUSR1/2 forwarded by mpirun, whose
  // default action kills it: the handlers go in before the plan is loaded,
  // since another rank may already be training (and the launcher
  // forwarding) while this one allocates. The request waits in the flag
  // trainAndWrite hands to train.
  if (underMpirun())
    installRankStopHandlers();
  options = given;
  int status = !options.resume || options.saveDir.empty() ||
                       resumedSeed(options.saveDir, options.wasGiven("--seed"),
                                   options.seed, error)
                   ? prepare(options, comm, p, error)
                   : kExitBadInput;
  if (status == kExitOk && p.info.tensorParallel > 1 &&
      !options.dumpState.empty()) {
    error = "--dump-state: a tensor-parallel plan's per-rank state is not "
            "supported yet (--save-dir and --export-weights write it whole)";
    status = kExitBadInput;
  }
  status = agreeToStart(comm, status, error);
  if (status != kExitOk || p.exported)
    return status;
  // The plan's own initialization (casts, shards) sees the final weights.
  const std::string init(plan::kInitProgram);
  if (p.session->hasProgram(init) && !p.session->run(init, 0, error)) {
    error = init + ": " + error;
    return kExitTrainingFailed;
  }
  if (lead && !hooks.quiet)
    describeRun(options.planName.empty() ? options.plan : options.planName,
                comm, p);
  std::fflush(stdout);
  fillSetup(options, comm, hooks, p);
  return kExitOk;
}

int run(const DsrunOptions &given, Communicator &comm, const DsrunHooks &hooks,
        std::string &error) {
  const bool lead = comm.rank() == 0;
  DsrunOptions options;
  Prepared p;
  int status = start(given, comm, hooks, options, p, error);
  if (status != kExitOk || p.exported)
    return status;
  if (lead && options.data.empty() && !options.evalOnly && !options.sample)
    std::fprintf(stderr, "dsrun: no --data; training on %s\n",
                 p.data->description().c_str());
  if (options.sample)
    return runSample(options, lead, p, error);
  if (options.evalOnly) {
    double loss = 0;
    const TrainSetup &setup = p.setup;
    if (!evaluate(*p.session, *p.evalData, setup, setup.evalBatches, loss,
                  error))
      return kExitTrainingFailed;
    if (lead)
      std::printf("val_loss %.9g over %u batches of %s\n", loss,
                  setup.evalBatches, p.evalData->description().c_str());
    return kExitOk;
  }
  return trainAndWrite(options, lead, p, error);
}

/// This rank's communicator, checked against --np.
std::unique_ptr<Communicator> joinRanks(const DsrunOptions &options,
                                        std::string &error) {
  std::string flag = "--np " + std::to_string(options.np);
  if (options.np > 1 && !underMpirun()) {
    error = flag + ": only the dsrun executable starts ranks (through "
                   "mpirun); this in-process run has one";
    return nullptr;
  }
  limitThreadsPerRank(); // before the first kernel reads them
  std::unique_ptr<Communicator> comm = createCommunicator(error);
  if (!comm)
    return nullptr;
  if (underMpirun())
    stopWhenOrphaned(comm->rank());
  if (options.np > 1 && options.np != uint64_t(comm->size())) {
    error = flag + ", but mpirun started " + std::to_string(comm->size()) +
            (comm->size() == 1 ? " rank" : " ranks");
    return nullptr;
  }
  return comm;
}

} // namespace

int openDsrun(const std::vector<std::string> &args, OpenedRun &run,
              std::string &error) {
  DsrunOptions given;
  if (!parseDsrunFlags(args, given, error) || !checkDsrunFlags(given, error))
    return kExitBadInput;
  run.comm = joinRanks(given, error);
  if (!run.comm)
    return kExitBadInput;
  DsrunHooks quiet;
  quiet.quiet = true;
  int status = start(given, *run.comm, quiet, run.options, run.prepared, error);
  if (status == kExitOk && run.prepared.exported) {
    error = "the run ended before its first step (--export-weights with "
            "--resume)";
    return kExitBadInput;
  }
  return status;
}

int runDsrunMain(int argc, char **argv) {
  return runDsrun(std::vector<std::string>(argv + 1, argv + argc), {});
}

int runDsrun(const std::vector<std::string> &args, const DsrunHooks &hooks) {
  DsrunOptions options;
  std::string error;
  int status = kExitBadInput;
  std::unique_ptr<Communicator> comm;
  if (parseDsrunFlags(args, options, error)) {
    if (options.help) {
      const char *rank = std::getenv("OMPI_COMM_WORLD_RANK");
      if (!rank || std::string(rank) == "0")
        std::fputs(dsrunUsage().c_str(), stdout);
      return kExitOk;
    }
    if (checkDsrunFlags(options, error) && (comm = joinRanks(options, error)))
      status = run(options, *comm, hooks, error);
  }
  // A stop the launcher asked for (Interrupt.h): every rank has saved. Exit
  // 0, so that mpirun lets each rank finish rather than ending the job at
  // the first non-zero status; the launcher exits 130 or 143.
  if (underMpirun() && comm &&
      (status == 128 + SIGINT || status == 128 + SIGTERM)) {
    std::fflush(stdout);
    if (comm->rank() == 0)
      std::fprintf(stderr, "dsrun: %s\n", error.c_str());
    return kExitOk;
  }
  if (status != kExitOk) {
    std::fflush(stdout);
    if (comm && comm->size() > 1)
      std::fprintf(stderr, "dsrun: rank %d: %s\n", comm->rank(), error.c_str());
    else
      std::fprintf(stderr, "dsrun: %s\n", error.c_str());
    // Other ranks may be waiting in a collective for this one: leave without
    // MPI's orderly shutdown, so that mpirun ends the job now. Bad input is
    // agreed on by every rank before training, so they shut down together.
    if (comm && status == kExitTrainingFailed)
      comm->abandon();
  }
  return status;
}
} // namespace dsc::rt
