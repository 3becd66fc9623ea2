//===- DsrunMain.cpp - the dsrun tool as a library call -------------------===//
#include "runtime/tooling/DsrunMain.h"

#include <csignal>

#include "runtime/backends/Registry.h"
#include "runtime/checkpoint/Safetensors.h"
#include "runtime/comm/Communicator.h"
#include "runtime/core/NumberText.h"
#include "runtime/core/OutputPath.h"
#include "runtime/core/PathRules.h"
#include "runtime/plan/PlanFormat.h"
#include "runtime/tooling/Checkpoint.h"
#include "runtime/tooling/CheckpointIndex.h"
#include "runtime/tooling/Flags.h"
#include "runtime/tooling/Interrupt.h"
#include "runtime/tooling/Launch.h"
#include "runtime/tooling/Metrics.h"
#include "runtime/tooling/ProcessMemory.h"
#include "runtime/tooling/Sampler.h"
#include "runtime/tooling/Trace.h"
#include "runtime/tooling/Trainer.h"
#include "runtime/tooling/Weights.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <set>

#include <unistd.h>

namespace dsc::rt {

namespace {

namespace fb = dsc::plan;

std::string str(const flatbuffers::String *s) { return s ? s->str() : ""; }

// What dsrun reads from the plan besides the programs.
struct PlanInfo {
  std::string model;
  uint32_t microBatch = 0, seqLen = 0, vocabSize = 0, accumulationSteps = 0;
  ScheduleParams schedule;
  std::vector<std::string> params;
  std::vector<std::pair<std::string, std::string>> aliases; ///< Plan.aliases
  uint64_t numParams = 0; ///< elements over all parameters
  std::optional<LossScaleOptions> lossScale;
  bool skipsOverflow = false;
  uint32_t evalBatch = 0; ///< rows of the eval program's batch; 0: no eval
};

bool readPlanInfo(const fb::Plan &plan, PlanInfo &info, std::string &error) {
  info.model = str(plan.model());
  info.microBatch = plan.micro_batch();
  info.seqLen = plan.seq_len();
  info.vocabSize = plan.vocab_size();
  info.accumulationSteps = plan.accumulation_steps();
  if (!info.microBatch || !info.seqLen || !info.vocabSize ||
      !info.accumulationSteps) {
    error = "plan: micro_batch, seq_len, vocab_size and accumulation_steps "
            "must be positive (got " +
            std::to_string(info.microBatch) + ", " +
            std::to_string(info.seqLen) + ", " +
            std::to_string(info.vocabSize) + ", " +
            std::to_string(info.accumulationSteps) + ")";
    return false;
  }
  const fb::Schedule *s = plan.schedule();
  if (!s) {
    error = "plan: no schedule table, so the learning rate is unknown";
    return false;
  }
  info.schedule.kind = str(s->kind());
  info.schedule.lr = s->lr();
  info.schedule.warmupMinLr = s->warmup_min_lr();
  info.schedule.warmupMaxLr = s->warmup_max_lr();
  info.schedule.warmupNumSteps = s->warmup_num_steps();
  info.schedule.warmupType = str(s->warmup_type());
  info.schedule.totalNumSteps = s->total_num_steps();
  info.schedule.cosMinRatio = s->cos_min_ratio();
  info.schedule.warmupMinRatio = s->warmup_min_ratio();
  if (plan.variables())
    for (const fb::Variable *v : *plan.variables())
      if (v->kind() == fb::VarKind::param)
        info.params.push_back(str(v->name()));
  if (plan.aliases()) // checked by the loader: each ties to a parameter
    for (const fb::Alias *a : *plan.aliases())
      info.aliases.push_back({str(a->name()), str(a->of())});
  if (const fb::LossScale *l = plan.loss_scale()) {
    LossScaleOptions o;
    o.lossScale = l->static_scale();
    o.initialScalePower = l->initial_scale_power();
    o.window = l->window();
    o.hysteresis = l->hysteresis();
    o.consecutiveHysteresis = l->consecutive_hysteresis();
    o.minScale = l->min_scale();
    if (!(o.lossScale >= 0) || o.initialScalePower < 0 ||
        o.initialScalePower > 60 || o.window < 1 || o.hysteresis < 1 ||
        !(o.minScale > 0)) {
      error = "plan: the loss_scale table is out of range (static scale >= "
              "0, initial power 0-60, window >= 1, hysteresis >= 1, minimum "
              "> 0)";
      return false;
    }
    info.lossScale = o;
  }
  info.skipsOverflow = plan.skips_overflow();
  // The eval program's batch (dsc --eval-micro-batch-size), from its first
  // input, the tokens [rows, seq_len].
  if (plan.programs() && plan.buffers())
    for (const fb::Program *prog : *plan.programs())
      if (prog->name() && prog->name()->string_view() == plan::kEvalProgram &&
          prog->inputs() && prog->inputs()->size() > 0) {
        const fb::Buffer *b = plan.buffers()->Get(prog->inputs()->Get(0));
        if (b->shape() && b->shape()->size() == 2)
          info.evalBatch = uint32_t(b->shape()->Get(0));
      }
  return true;
}

// "3" or "3,7,12" (--debug-overflow-at) into `steps`.
bool parseStepList(const std::string &text, std::set<uint64_t> &steps,
                   std::string &error) {
  size_t begin = 0;
  while (begin <= text.size()) {
    size_t end = text.find(',', begin);
    if (end == std::string::npos)
      end = text.size();
    std::string item = text.substr(begin, end - begin);
    char *rest = nullptr;
    errno = 0;
    unsigned long long v = std::strtoull(item.c_str(), &rest, 10);
    if (item.empty() || !std::isdigit((unsigned char)item[0]) || *rest ||
        errno || v == 0) {
      error = "--debug-overflow-at: expected step numbers >= 1 like 3 or "
              "3,7, got '" +
              text + "'";
      return false;
    }
    steps.insert(v);
    begin = end + 1;
  }
  return true;
}

// Fails early on an output path that cannot be written, instead of after
// hours of training.
bool probeWritable(const std::string &flag, const std::string &path,
                   std::string &error) {
  OutputFile probe; // never committed: whatever is there stays
  if (!probe.open(path, error)) {
    error = flag + " " + error;
    return false;
  }
  return true;
}

// Owns the files a run writes to, so every early return closes them.
struct OutputFiles {
  std::FILE *metrics = nullptr;
  std::FILE *dumpBatch = nullptr;
  std::unique_ptr<TraceWriter> trace;
  ~OutputFiles() {
    if (metrics)
      std::fclose(metrics);
    if (dumpBatch)
      std::fclose(dumpBatch);
  }
};

/// Rank r > 0 of a multi-rank run writes its own trace and metrics to PATH
/// with ".rank<r>" before the extension `ext` (t.json -> t.rank1.json,
/// m.jsonl -> m.rank1.jsonl), rank 0 to PATH itself.
std::string rankFileFor(const std::string &path, int rank,
                        const std::string &ext) {
  if (rank == 0)
    return path;
  std::string tag = ".rank" + std::to_string(rank);
  if (path.size() > ext.size() &&
      path.compare(path.size() - ext.size(), ext.size(), ext) == 0)
    return path.substr(0, path.size() - ext.size()) + tag + ext;
  return path + tag;
}

// Everything a rank prepares before its first collective. Nothing here
// talks to the other ranks, so a rank that fails here cannot leave another
// waiting; the ranks agree on whether all got ready right after
// (agreeToStart).
struct Prepared {
  std::unique_ptr<Backend> backend; // first: it outlives the plan and Session
  std::unique_ptr<LoadedPlan> loaded;
  PlanInfo info;
  TrainSetup setup;
  std::unique_ptr<DataLoader> data;
  std::unique_ptr<DataLoader> evalData; ///< --eval-data, or null
  OutputFiles files;
  std::unique_ptr<Session> session;
  WeightsLayout layout;
  bool exported = false; ///< the weights came out of a checkpoint; done
};

/// The plan's parameters' whole shapes, by name.
std::map<std::string, std::vector<int64_t>> paramShapes(const fb::Plan &plan) {
  std::map<std::string, std::vector<int64_t>> shapes;
  if (!plan.variables() || !plan.buffers())
    return shapes;
  for (const fb::Variable *v : *plan.variables()) {
    if (v->kind() != fb::VarKind::param || !v->name())
      continue;
    const auto *dims =
        v->shape() ? v->shape() : plan.buffers()->Get(v->buffer())->shape();
    shapes[v->name()->str()] =
        dims ? std::vector<int64_t>(dims->begin(), dims->end())
             : std::vector<int64_t>();
  }
  return shapes;
}

/// `--resume --export-weights` with nothing to train, on one process: the
/// weights are streamed out of the newest checkpoint (Weights.h), with no
/// session, so memory stays near one variable instead of the run's whole
/// state. Sets `done` when it applies.
bool exportFromCheckpoint(const DsrunOptions &options, Prepared &p, bool &done,
                          std::string &error) {
  done = false;
  std::string path;
  std::vector<std::string> notes;
  if (!findLatestCheckpoint(options.saveDir, path, notes, error))
    return false;
  if (path.empty())
    return true;
  CheckpointIndex checkpoint;
  if (!checkpoint.open(path, error))
    return false;
  if (checkpoint.state().step < p.setup.steps)
    return true; // there is training to do first
  for (const auto &[name, shape] : paramShapes(p.loaded->plan())) {
    auto it = checkpoint.shapes().find(name);
    if (it == checkpoint.shapes().end()) {
      error = path + ": the checkpoint has no '" + name + "'";
      return false;
    }
    if (it->second != shape) {
      error = path + ": '" + name + "' is " + formatShape(it->second) +
              " in the checkpoint and " + formatShape(shape) + " in the plan";
      return false;
    }
  }
  std::map<std::string, std::string> metadata = {
      {"producer", "dsrun"},
      {"model", p.info.model},
      {"step", std::to_string(checkpoint.state().step)},
      {"seed", std::to_string(checkpoint.seed())}};
  p.layout =
      WeightsLayout::forModel(p.info.model, p.info.params, p.info.aliases);
  if (!exportCheckpointWeights(checkpoint, p.layout, options.exportWeights,
                               metadata, error))
    return false;
  for (const std::string &note : notes)
    std::printf("dsrun: note: %s\n", note.c_str());
  std::printf("dsrun: wrote %s from %s (step %llu), streamed\n",
              options.exportWeights.c_str(), path.c_str(),
              (unsigned long long)checkpoint.state().step);
  done = true;
  return true;
}

CheckpointRun checkpointRun(const DsrunOptions &options, Communicator &comm,
                            Prepared &p) {
  CheckpointRun run;
  run.session = p.session.get();
  run.comm = &comm;
  run.rank = comm.rank();
  run.worldSize = comm.size();
  run.seed = options.seed;
  run.model = p.info.model;
  run.planId = planIdentity(p.loaded->bytes());
  return run;
}

/// --save-dir: a directory (or nothing yet) before anything trains; with
/// --resume, the newest committed checkpoint there loaded into the session
/// and p.setup.start. Local: every rank reads what it needs.
bool resumeFrom(const DsrunOptions &options, Communicator &comm, Prepared &p,
                std::string &error) {
  const bool lead = comm.rank() == 0;
  std::string path;
  std::vector<std::string> notes;
  if (!findLatestCheckpoint(options.saveDir, path, notes, error))
    return false;
  if (!options.resume)
    return true;
  if (path.empty()) {
    if (lead)
      std::printf("dsrun: no checkpoint in %s yet: starting at step 1\n",
                  options.saveDir.c_str());
    return true;
  }
  if (!loadCheckpoint(checkpointRun(options, comm, p), path, p.setup.start,
                      notes, error))
    return false;
  if (lead) {
    for (const std::string &note : notes)
      std::printf("dsrun: note: %s\n", note.c_str());
    std::printf("dsrun: resuming from %s (step %llu done)\n", path.c_str(),
                (unsigned long long)p.setup.start.step);
  }
  return true;
}

/// PathRules.h for this rank's run: no output is an input or another
/// output. Before anything is opened for writing.
bool checkRunPaths(const DsrunOptions &options, int rank, std::string &error) {
  const std::string dumpState =
      options.dumpState.empty() ? ""
                                : options.dumpState + ".rank" +
                                      std::to_string(rank) + ".safetensors";
  return checkOutputsDistinct(
      {{"the plan", options.plan},
       {"--data", options.data},
       {"--eval-data", options.evalData},
       {"--init-from", options.initFrom}},
      {{"--metrics", options.metrics.empty()
                         ? ""
                         : rankFileFor(options.metrics, rank, ".jsonl")},
       {"--trace", options.trace.empty()
                       ? ""
                       : rankFileFor(options.trace, rank, ".json")},
       {"--export-weights", rank == 0 ? options.exportWeights : ""},
       {"--dump-batch", rank == 0 ? options.dumpBatch : ""},
       {"--dump-state", dumpState}},
      error);
}

int prepare(const DsrunOptions &options, Communicator &comm, Prepared &p,
            std::string &error) {
  const bool lead = comm.rank() == 0;
  if (!checkRunPaths(options, comm.rank(), error))
    return kExitBadInput;
  p.backend = createBackend(options.backend, error);
  if (!p.backend) {
    // An environment variable the backend reads (DSC_CPU_THREADS) names
    // itself; anything else is about the --backend given.
    if (error.rfind("DSC_", 0) != 0)
      error = "--backend " + options.backend + ": " + error;
    return kExitBadInput;
  }
  p.loaded = LoadedPlan::load(options.plan, error, *p.backend);
  if (!p.loaded)
    return kExitBadInput;
  PlanInfo &info = p.info;
  if (!readPlanInfo(p.loaded->plan(), info, error))
    return kExitBadInput;

  TrainSetup &setup = p.setup;
  if (!LrSchedule::create(info.schedule, setup.schedule, error))
    return kExitBadInput;
  const bool stepsUnset = !options.wasGiven("--steps");
  setup.steps = options.steps;
  int64_t total = info.schedule.totalNumSteps;
  if (stepsUnset && !options.evalOnly && !options.sample) {
    if (total <= 0) {
      error = "--steps is required: the plan's schedule has no "
              "total_num_steps";
      return kExitBadInput;
    }
    setup.steps = uint64_t(total);
  }
  if (!options.debugOverflowAt.empty()) {
    if (!parseStepList(options.debugOverflowAt, setup.injectOverflowAt, error))
      return kExitBadInput;
    if (!info.skipsOverflow) {
      error = "--debug-overflow-at: " + options.plan +
              " does not skip overflowed steps (compile it with fp16 or "
              "bf16 enabled)";
      return kExitBadInput;
    }
  }
  LrSchedule::Kind kind = setup.schedule.kind();
  if (lead &&
      (kind == LrSchedule::Kind::WarmupDecayLR ||
       kind == LrSchedule::Kind::WarmupCosineLR) &&
      setup.steps > uint64_t(std::max<int64_t>(total, 0)))
    std::fprintf(stderr,
                 "dsrun: warning: --steps %llu runs past the schedule's "
                 "total_num_steps %lld; the learning rate stays at its final "
                 "value\n",
                 (unsigned long long)setup.steps, (long long)total);

  std::unique_ptr<DataLoader> &data = p.data;
  if (options.data.empty()) {
    data = DataLoader::synthetic(info.vocabSize, info.microBatch, info.seqLen);
  } else {
    data = DataLoader::open(options.data, info.vocabSize, info.microBatch,
                            info.seqLen, error);
    if (!data)
      return kExitBadInput;
  }
  if (!options.evalSplit.empty()) {
    double f = 0;
    if (!parseFiniteNumber(options.evalSplit, 0, 1, f) || !(f > 0 && f < 1)) {
      error = "--eval-split: expected a fraction between 0 and 1, got '" +
              options.evalSplit + "'";
      return kExitBadInput;
    }
    if (!options.evalData.empty()) {
      error = "--eval-split: give it or --eval-data, not both";
      return kExitBadInput;
    }
    p.evalData = data->splitTail(f, info.evalBatch ? info.evalBatch : 1, error);
    if (!p.evalData)
      return kExitBadInput;
  }
  if ((options.evalEvery || options.evalOnly) && !p.evalData &&
      options.evalData.empty()) {
    error = std::string(options.evalOnly ? "--eval-only" : "--eval-every") +
            ": needs --eval-data FILE or --eval-split F (the held-out data)";
    return kExitBadInput;
  }
  if (!options.evalData.empty()) {
    p.evalData = DataLoader::open(options.evalData, info.vocabSize,
                                  info.evalBatch ? info.evalBatch : 1,
                                  info.seqLen, error);
    if (!p.evalData)
      return kExitBadInput;
  }
  if (p.evalData) {
    bool hasEval = false;
    if (const auto *programs = p.loaded->plan().programs())
      for (const fb::Program *prog : *programs)
        hasEval |=
            prog->name() && prog->name()->string_view() == plan::kEvalProgram;
    if (!hasEval) {
      error = (options.evalData.empty() ? "--eval-split: " : "--eval-data: ") +
              options.plan + " has no eval program (compile it with this dsc)";
      return kExitBadInput;
    }
  }

  // Rank 0 writes the batch dump and the weights (every rank gathers them);
  // every rank writes its own metrics (its memory is its own) and trace.
  OutputFiles &files = p.files;
  if (!options.metrics.empty()) {
    std::string path = rankFileFor(options.metrics, comm.rank(), ".jsonl");
    if (!(files.metrics = openStreamOutput(path, error))) {
      error = "--metrics " + error;
      return kExitBadInput;
    }
  }
  if (lead && !options.dumpBatch.empty()) {
    if (!(files.dumpBatch = openStreamOutput(options.dumpBatch, error))) {
      error = "--dump-batch " + error;
      return kExitBadInput;
    }
  }
  if (lead && !options.exportWeights.empty() &&
      !probeWritable("--export-weights", options.exportWeights, error))
    return kExitBadInput;
  if (!options.dumpState.empty() &&
      !probeWritable("--dump-state",
                     options.dumpState + ".rank" +
                         std::to_string(comm.rank()) + ".safetensors",
                     error))
    return kExitBadInput;
  if (!options.trace.empty()) {
    files.trace =
        TraceWriter::open(rankFileFor(options.trace, comm.rank(), ".json"),
                          uint32_t(comm.rank()), error);
    if (!files.trace)
      return kExitBadInput;
  }

  if (options.resume && !options.exportWeights.empty() && comm.size() == 1 &&
      !options.sample && !options.evalOnly && options.dumpState.empty() &&
      options.trace.empty() && options.metrics.empty()) {
    if (!exportFromCheckpoint(options, p, p.exported, error))
      return kExitBadInput;
    if (p.exported)
      return kExitOk;
  }

  SessionOptions sessionOptions;
  sessionOptions.seed = options.seed;
  sessionOptions.rank = comm.rank();
  sessionOptions.worldSize = comm.size();
  sessionOptions.deviceMemory = options.deviceMemory;
  sessionOptions.comm = &comm;
  // What the process holds before any arena exists: libraries, the plan,
  // the data, MPI. The rss_* metrics measure the arenas' real cost on top.
  setup.rssBaselineBytes = readProcessMemory().residentBytes;
  setup.backend = &p.loaded->backend();
  p.session = Session::create(*p.loaded, sessionOptions, error);
  if (!p.session)
    return kExitBadInput;
  p.session->initVariables();
  p.layout = WeightsLayout::forModel(info.model, info.params, info.aliases);
  if (!options.initFrom.empty() &&
      !importWeights(*p.session, p.layout, options.initFrom, error))
    return kExitBadInput;
  if (!options.saveDir.empty() && !resumeFrom(options, comm, p, error))
    return kExitBadInput;
  for (const std::string &name : info.params)
    if (const NamedTensor *v = p.session->findVariable(name))
      info.numParams += uint64_t(v->numel()); // whole, even if sharded
  return kExitOk;
}

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

int run(const DsrunOptions &given, Communicator &comm, const DsrunHooks &hooks,
        std::string &error) {
  const bool lead = comm.rank() == 0;
  DsrunOptions options = given; // with --resume, the checkpoint's seed
  Prepared p;
  int status = !options.resume || options.saveDir.empty() ||
                       resumedSeed(options.saveDir, options.wasGiven("--seed"),
                                   options.seed, error)
                   ? prepare(options, comm, p, error)
                   : kExitBadInput;
  status = agreeToStart(comm, status, error);
  if (status != kExitOk || p.exported)
    return status;
  PlanInfo &info = p.info;
  TrainSetup &setup = p.setup;
  Session *session = p.session.get();
  OutputFiles &files = p.files;

  if (lead && options.data.empty() && !options.evalOnly && !options.sample)
    std::fprintf(stderr, "dsrun: no --data; training on %s\n",
                 p.data->description().c_str());
  // The plan's own initialization (casts, shards) sees the final weights.
  const std::string init(fb::kInitProgram);
  if (session->hasProgram(init) && !session->run(init, 0, error)) {
    error = init + ": " + error;
    return kExitTrainingFailed;
  }

  std::string ranks =
      comm.size() == 1 ? "" : "; " + std::to_string(comm.size()) + " ranks";
  if (lead)
    std::printf(
        "dsrun: %s: %s, %llu parameters; %u x %u tokens per "
        "micro-batch, %u micro-step%s per step; %llu steps; %s%s\n",
        options.plan.c_str(), info.model.empty() ? "model" : info.model.c_str(),
        (unsigned long long)info.numParams, info.microBatch, info.seqLen,
        info.accumulationSteps, info.accumulationSteps == 1 ? "" : "s",
        (unsigned long long)setup.steps, setup.schedule.describe().c_str(),
        ranks.c_str());
  std::fflush(stdout);

  setup.microBatch = info.microBatch;
  setup.seqLen = info.seqLen;
  setup.accumulationSteps = info.accumulationSteps;
  setup.rank = uint32_t(comm.rank());
  setup.worldSize = uint32_t(comm.size());
  setup.comm = &comm;
  setup.seed = options.seed;
  setup.out = lead ? stdout : nullptr;
  // mpirun hands its ranks a pseudo-terminal whatever its own output is, so
  // a rank's live line could end up in a log file: ranks print plain lines.
  setup.interactive = lead && !underMpirun() && ::isatty(fileno(stdout));
  setup.metrics = files.metrics;
  if (lead)
    setup.onStep = hooks.onStep;
  setup.dumpBatch = files.dumpBatch;
  setup.trace = files.trace.get();
  setup.lossScale = info.lossScale;
  setup.skipsOverflow = info.skipsOverflow;
  setup.evalData = p.evalData.get();
  setup.evalMicroBatch = info.evalBatch;
  setup.evalEvery = options.evalEvery;
  setup.printEvery = options.printEvery;
  setup.evalBatches = uint32_t(options.evalBatches);
  if (!options.saveDir.empty()) {
    setup.saveEvery = options.saveEvery;
    CheckpointRun run = checkpointRun(options, comm, p);
    setup.save = [run, &options, lead](const RunState &state,
                                       std::string &err) {
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
  if (options.sample) {
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
    std::vector<int32_t> tokens;
    if (!sampleTokens(*session, so, tokens, error))
      return error.rfind("plan:", 0) == 0 ? kExitBadInput : kExitTrainingFailed;
    if (lead) {
      std::string text;
      for (int32_t t : tokens)
        text += info.vocabSize <= 256 ? std::string(1, char(t))
                                      : std::to_string(t) + " ";
      std::printf("%s%s\n", options.prompt.c_str(), text.c_str());
    }
    return kExitOk;
  }
  if (options.evalOnly) {
    double loss = 0;
    if (!evaluate(*session, *p.evalData, setup, setup.evalBatches, loss, error))
      return kExitTrainingFailed;
    if (lead)
      std::printf("val_loss %.9g over %u batches of %s\n", loss,
                  setup.evalBatches, p.evalData->description().c_str());
    return kExitOk;
  }
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
    status = train(*session, *p.data, setup, error);
  }
  // A trace that cannot be written fails the run, but after the weights
  // are out: a late failure must not throw the training away.
  std::string traceError;
  if (files.trace && !files.trace->close(traceError) && status == kExitOk)
    status = kExitTrainingFailed;
  else
    traceError.clear();
  if (status != kExitOk && traceError.empty())
    return status;

  // Every rank takes part (sharded parameters are gathered); rank 0 writes.
  // A rank that fails here abandons the job, so none waits for it longer
  // than a collective's timeout.
  if (!options.exportWeights.empty()) {
    std::map<std::string, std::string> metadata = {
        {"producer", "dsrun"},
        {"model", info.model},
        // The weights' step: a resumed run past --steps trained nothing.
        {"step", std::to_string(std::max(setup.steps, setup.start.step))},
        {"seed", std::to_string(options.seed)}};
    if (!exportWeights(*session, p.layout, options.exportWeights, metadata,
                       lead, error))
      return kExitTrainingFailed;
    if (lead)
      std::printf("dsrun: wrote %s\n", options.exportWeights.c_str());
  }
  if (!options.dumpState.empty()) {
    std::string path = options.dumpState + ".rank" +
                       std::to_string(setup.rank) + ".safetensors";
    if (!dumpState(*session, int(setup.rank), path, error))
      return kExitTrainingFailed;
  }
  if (!traceError.empty()) {
    error = traceError;
    return kExitTrainingFailed;
  }
  return kExitOk;
}

} // namespace

namespace {

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

int launchDsrun(int argc, char **argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  DsrunOptions options;
  std::string error;
  if (underMpirun() || !parseDsrunFlags(args, options, error) || options.help ||
      options.np <= 1 || !checkDsrunFlags(options, error))
    return runDsrunMain(argc, argv); // reports any error itself
  int status = kExitBadInput;
  // A plan for another world size is refused here, before mpirun starts a
  // thousand ranks to say so. (A plan that does not load is left to the
  // ranks, which say why.)
  uint64_t planRanks = 0, planBytes = 0;
  {
    // The CPU backend reads any plan: no GPU context for a launcher.
    std::string ignored;
    std::unique_ptr<Backend> backend = createBackend("cpu", ignored);
    std::unique_ptr<LoadedPlan> plan =
        backend ? LoadedPlan::load(options.plan, ignored, *backend) : nullptr;
    if (plan) {
      planRanks = plan->plan().world_size();
      // What a rank holds in this machine's memory: every arena on the
      // CPU backend, the host arenas beside a GPU.
      const bool cpu = options.backend.rfind("cpu", 0) == 0;
      if (const auto *arenas = plan->plan().arenas())
        for (const fb::Arena *a : *arenas)
          if (cpu || a->space() == fb::Space::host)
            planBytes += a->bytes();
    }
  }
  if (planRanks && planRanks != options.np)
    error = "--np " + std::to_string(options.np) + ": " + options.plan +
            " is compiled for " + std::to_string(planRanks) +
            (planRanks == 1 ? " rank" : " ranks") + " (dsc --world-size " +
            std::to_string(planRanks) + ")";
  else if (!options.oversubscribe &&
           !checkLocalCapacity(options.np, planBytes, error))
    error = "--np " + std::to_string(options.np) + ": " + error;
  else
    status = relaunchUnderMpirun(withoutDsrunFlag(args, "--np"),
                                 unsigned(options.np), error);
  if (!error.empty()) {
    std::fflush(stdout);
    std::fprintf(stderr, "dsrun: %s\n", error.c_str());
  }
  return status;
}

} // namespace dsc::rt
