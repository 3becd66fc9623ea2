//===- DsrunPrepare.cpp - what a dsrun rank makes ready before it runs ----===//
#include "runtime/tooling/DsrunPrepare.h"

#include "runtime/backends/Registry.h"
#include "runtime/core/NumberText.h"
#include "runtime/core/OutputPath.h"
#include "runtime/core/PathRules.h"
#include "runtime/plan/PlanFormat.h"
#include "runtime/tooling/CheckpointIndex.h"
#include "runtime/tooling/PipelineState.h"
#include "runtime/tooling/ProcessMemory.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <set>

namespace dsc::rt {

namespace {

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
  // A pipeline's weights are every stage's parameters.
  PipelineState stages;
  if (p.pipelineFile)
    stages = pipelineStateOf(*p.pipelineFile, 0);
  else
    stages.paramShapes = paramShapes(p.loaded->plan());
  for (const auto &[name, shape] : stages.paramShapes) {
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
      p.pipelineFile
          ? WeightsLayout::forModel(p.info.model, stages.params, stages.aliases)
          : WeightsLayout::forModel(p.info.model, p.info.params,
                                    p.info.aliases);
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

} // namespace

CheckpointRun checkpointRun(const DsrunOptions &options, Communicator &comm,
                            Prepared &p) {
  CheckpointRun run;
  run.session = p.session.get();
  run.comm = &comm;
  run.rank = comm.rank();
  run.worldSize = comm.size();
  run.mesh =
      p.info.tensorParallel > 1 && int(p.info.tensorParallel) < run.worldSize;
  run.seed = options.seed;
  run.model = p.info.model;
  // A pipeline's identity is its file's, the same on every stage.
  run.planId =
      planIdentity((p.pipelineFile ? p.pipelineFile : p.loaded)->bytes());
  run.shardRank = shardRankOf(p.info, run.rank);
  run.leadsState =
      run.rank == int(p.info.pipelineStage * p.info.tensorParallel);
  if (p.pipelineFile) {
    PipelineState state =
        pipelineStateOf(*p.pipelineFile, p.info.pipelineStage);
    run.heldEarlier = std::move(state.heldEarlier);
    run.pipelineState = std::move(state.state);
  }
  return run;
}

namespace {

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
      options.dumpState.empty()
          ? ""
          : options.dumpState + ".rank" + std::to_string(rank) + ".safetensors";
  return checkOutputsDistinct(
      {{"the plan", options.plan},
       {"--data", options.data},
       {"--eval-data", options.evalData},
       {"--init-from", options.initFrom}},
      {{"--metrics", options.metrics.empty()
                         ? ""
                         : rankFileFor(options.metrics, rank, ".jsonl")},
       {"--trace",
        options.trace.empty() ? "" : rankFileFor(options.trace, rank, ".json")},
       {"--export-weights", rank == 0 ? options.exportWeights : ""},
       {"--dump-batch", rank == 0 ? options.dumpBatch : ""},
       {"--dump-state", dumpState}},
      error);
}

/// The backend, the plan (loaded and verified) and what dsrun reads of it.
/// A pipeline's file holds a plan per stage: a rank runs its stage's.
int openPlan(const DsrunOptions &options, int rank, Prepared &p,
             std::string &error) {
  p.backend = createBackend(options.backend, error);
  if (!p.backend) {
    // An environment variable the backend reads (DSC_CPU_THREADS) names
    // itself; anything else is about the --backend given.
    if (error.rfind("DSC_", 0) != 0)
      error = "--backend " + options.backend + ": " + error;
    return kExitBadInput;
  }
  p.loaded = LoadedPlan::load(options.plan, error, *p.backend);
  if (p.loaded && p.loaded->stageCount() > 0) {
    p.pipelineFile = std::move(p.loaded);
    p.loaded = p.pipelineFile->stage(p.pipelineFile->stageOfRank(rank), error);
  }
  if (!p.loaded || !readPlanInfo(p.loaded->plan(), p.info, error) ||
      !LrSchedule::create(p.info.schedule, p.setup.schedule, error))
    return kExitBadInput;
  return kExitOk;
}

/// The steps to train (--steps, else the schedule's total_num_steps) and
/// the steps --debug-overflow-at makes overflow.
int chooseSteps(const DsrunOptions &options, bool lead, Prepared &p,
                std::string &error) {
  TrainSetup &setup = p.setup;
  setup.steps = options.steps;
  int64_t total = p.info.schedule.totalNumSteps;
  if (!options.wasGiven("--steps") && !options.evalOnly && !options.sample) {
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
    if (!p.info.skipsOverflow) {
      error = "--debug-overflow-at: " + options.plan +
              " does not skip overflowed steps (compile it with fp16 or "
              "bf16 enabled)";
      return kExitBadInput;
    }
  }
  if (!setup.schedule.momentumValidUntil(setup.steps, error))
    return kExitBadInput;
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
  return kExitOk;
}

/// The held-out data: --eval-data, or the tail of --data (--eval-split).
int openEvalData(const DsrunOptions &options, Prepared &p, std::string &error) {
  const PlanInfo &info = p.info;
  const uint32_t evalRows = info.evalBatch ? info.evalBatch : 1;
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
    if (!(p.evalData = p.data->splitTail(f, evalRows, error)))
      return kExitBadInput;
  }
  if ((options.evalEvery || options.evalOnly) && !p.evalData &&
      options.evalData.empty()) {
    error = std::string(options.evalOnly ? "--eval-only" : "--eval-every") +
            ": needs --eval-data FILE or --eval-split F (the held-out data)";
    return kExitBadInput;
  }
  if (!options.evalData.empty() &&
      !(p.evalData = DataLoader::open(options.evalData, info.vocabSize,
                                      evalRows, info.seqLen, error)))
    return kExitBadInput;
  if (p.evalData) {
    bool hasEval = false;
    if (const auto *programs = p.loaded->plan().programs())
      for (const plan::Program *prog : *programs)
        hasEval |=
            prog->name() && prog->name()->string_view() == plan::kEvalProgram;
    if (!hasEval) {
      error = (options.evalData.empty() ? "--eval-split: " : "--eval-data: ") +
              options.plan + " has no eval program (compile it with this dsc)";
      return kExitBadInput;
    }
  }
  return kExitOk;
}

/// --data (synthetic without it), then the held-out data.
int openData(const DsrunOptions &options, Prepared &p, std::string &error) {
  const PlanInfo &info = p.info;
  if (options.data.empty())
    p.data =
        DataLoader::synthetic(info.vocabSize, info.microBatch, info.seqLen);
  else if (!(p.data = DataLoader::open(options.data, info.vocabSize,
                                       info.microBatch, info.seqLen, error)))
    return kExitBadInput;
  return openEvalData(options, p, error);
}

/// Rank 0 writes the batch dump and the weights (every rank gathers them);
/// every rank writes its own metrics (its memory is its own) and trace.
int openOutputs(const DsrunOptions &options, int rank, Prepared &p,
                std::string &error) {
  OutputFiles &files = p.files;
  const bool lead = rank == 0;
  if (!options.metrics.empty() &&
      !(files.metrics = openStreamOutput(
            rankFileFor(options.metrics, rank, ".jsonl"), error))) {
    error = "--metrics " + error;
    return kExitBadInput;
  }
  if (lead && !options.dumpBatch.empty() &&
      !(files.dumpBatch = openStreamOutput(options.dumpBatch, error))) {
    error = "--dump-batch " + error;
    return kExitBadInput;
  }
  if (lead && !options.exportWeights.empty() &&
      !probeWritable("--export-weights", options.exportWeights, error))
    return kExitBadInput;
  if (!options.dumpState.empty() &&
      !probeWritable("--dump-state",
                     options.dumpState + ".rank" + std::to_string(rank) +
                         ".safetensors",
                     error))
    return kExitBadInput;
  if (!options.trace.empty() &&
      !(files.trace = TraceWriter::open(
            rankFileFor(options.trace, rank, ".json"), uint32_t(rank), error)))
    return kExitBadInput;
  return kExitOk;
}

/// The Session and its weights: initialized, then --init-from or the
/// newest checkpoint (--resume).
int createSession(const DsrunOptions &options, Communicator &comm, Prepared &p,
                  std::string &error) {
  SessionOptions sessionOptions;
  sessionOptions.seed = options.seed;
  sessionOptions.rank = comm.rank();
  sessionOptions.worldSize = comm.size();
  sessionOptions.deviceMemory = options.deviceMemory;
  sessionOptions.comm = &comm;
  // What the process holds before any arena exists: libraries, the plan,
  // the data, MPI. The rss_* metrics measure the arenas' real cost on top.
  p.setup.rssBaselineBytes = readProcessMemory().residentBytes;
  p.setup.backend = &p.loaded->backend();
  p.session = Session::create(*p.loaded, sessionOptions, error);
  if (!p.session)
    return kExitBadInput;
  p.session->initVariables();
  PlanInfo &info = p.info;
  p.layout = WeightsLayout::forModel(info.model, info.params, info.aliases);
  // A pipeline stage loads its parameters from a file of the whole model's.
  WeightsLayout model;
  if (p.pipelineFile) {
    PipelineState stages = pipelineStateOf(*p.pipelineFile, 0);
    model = WeightsLayout::forModel(info.model, stages.params, stages.aliases);
  }
  if (!options.initFrom.empty() &&
      !importWeights(*p.session, p.layout, options.initFrom, error,
                     p.pipelineFile ? &model : nullptr))
    return kExitBadInput;
  if (!options.saveDir.empty() && !resumeFrom(options, comm, p, error))
    return kExitBadInput;
  for (const std::string &name : info.params)
    if (const NamedTensor *v = p.session->findVariable(name))
      info.numParams += uint64_t(v->numel()); // whole, even if sharded
  // A pipeline stage holds its blocks' parameters: the plan counts the
  // model's.
  if (p.loaded->plan().model_parameters())
    info.numParams = p.loaded->plan().model_parameters();
  return kExitOk;
}

} // namespace

int prepare(const DsrunOptions &options, Communicator &comm, Prepared &p,
            std::string &error) {
  if (!checkRunPaths(options, comm.rank(), error))
    return kExitBadInput;
  if (int status = openPlan(options, comm.rank(), p, error))
    return status;
  if (int status = chooseSteps(options, comm.rank() == 0, p, error))
    return status;
  if (int status = openData(options, p, error))
    return status;
  if (int status = openOutputs(options, comm.rank(), p, error))
    return status;
  // --resume --export-weights alone, on one process: nothing to train.
  if (options.resume && !options.exportWeights.empty() && comm.size() == 1 &&
      !options.sample && !options.evalOnly && options.dumpState.empty() &&
      options.trace.empty() && options.metrics.empty()) {
    if (!exportFromCheckpoint(options, p, p.exported, error))
      return kExitBadInput;
    if (p.exported)
      return kExitOk;
  }
  return createSession(options, comm, p, error);
}

} // namespace dsc::rt
