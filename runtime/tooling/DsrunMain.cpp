//===- DsrunMain.cpp - the dsrun tool as a library call -------------------===//
#include "runtime/tooling/DsrunMain.h"

#include "runtime/plan/PlanFormat.h"
#include "runtime/tooling/Flags.h"
#include "runtime/tooling/Metrics.h"
#include "runtime/tooling/Trace.h"
#include "runtime/tooling/Trainer.h"
#include "runtime/tooling/Weights.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

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
  uint64_t numParams = 0; ///< elements over all parameters
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
  return true;
}

// Fails early on an output path that cannot be written, instead of after
// hours of training.
bool probeWritable(const std::string &path, std::string &error) {
  std::string tmp = path + ".tmp";
  std::FILE *f = std::fopen(tmp.c_str(), "w");
  if (!f) {
    error = path + ": cannot write here: " + std::strerror(errno);
    return false;
  }
  std::fclose(f);
  std::remove(tmp.c_str());
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

int run(const DsrunOptions &options, std::string &error) {
  std::unique_ptr<LoadedPlan> loaded = LoadedPlan::load(options.plan, error);
  if (!loaded)
    return kExitBadInput;
  PlanInfo info;
  if (!readPlanInfo(loaded->plan(), info, error))
    return kExitBadInput;

  TrainSetup setup;
  if (!LrSchedule::create(info.schedule, setup.schedule, error))
    return kExitBadInput;
  setup.steps = options.steps;
  int64_t total = info.schedule.totalNumSteps;
  if (setup.steps == 0) {
    if (total <= 0) {
      error = "--steps is required: the plan's schedule has no "
              "total_num_steps";
      return kExitBadInput;
    }
    setup.steps = uint64_t(total);
  }
  LrSchedule::Kind kind = setup.schedule.kind();
  if ((kind == LrSchedule::Kind::WarmupDecayLR ||
       kind == LrSchedule::Kind::WarmupCosineLR) &&
      setup.steps > uint64_t(std::max<int64_t>(total, 0)))
    std::fprintf(stderr,
                 "dsrun: warning: --steps %llu runs past the schedule's "
                 "total_num_steps %lld; the learning rate stays at its final "
                 "value\n",
                 (unsigned long long)setup.steps, (long long)total);

  std::unique_ptr<DataLoader> data;
  if (options.data.empty()) {
    data = DataLoader::synthetic(info.vocabSize, info.microBatch, info.seqLen);
    std::fprintf(stderr, "dsrun: no --data; training on %s\n",
                 data->description().c_str());
  } else {
    data = DataLoader::open(options.data, info.vocabSize, info.microBatch,
                            info.seqLen, error);
    if (!data)
      return kExitBadInput;
  }

  OutputFiles files;
  if (!options.metrics.empty()) {
    files.metrics = std::fopen(options.metrics.c_str(), "w");
    if (!files.metrics) {
      error = options.metrics +
              ": cannot open for writing: " + std::strerror(errno);
      return kExitBadInput;
    }
  }
  if (!options.dumpBatch.empty()) {
    files.dumpBatch = std::fopen(options.dumpBatch.c_str(), "wb");
    if (!files.dumpBatch) {
      error = options.dumpBatch +
              ": cannot open for writing: " + std::strerror(errno);
      return kExitBadInput;
    }
  }
  if (!options.exportWeights.empty() &&
      !probeWritable(options.exportWeights, error))
    return kExitBadInput;
  if (!options.trace.empty()) {
    files.trace = TraceWriter::open(options.trace, 0, error);
    if (!files.trace)
      return kExitBadInput;
  }

  SessionOptions sessionOptions;
  sessionOptions.seed = options.seed;
  sessionOptions.rank = 0;
  sessionOptions.worldSize = int(options.np);
  sessionOptions.deviceMemory = options.deviceMemory;
  std::unique_ptr<Session> session =
      Session::create(*loaded, sessionOptions, error);
  if (!session)
    return kExitBadInput;
  session->initVariables();
  WeightsLayout layout = WeightsLayout::forModel(info.model, info.params);
  if (!options.initFrom.empty() &&
      !importWeights(*session, layout, options.initFrom, error))
    return kExitBadInput;
  for (const std::string &name : info.params)
    if (const NamedTensor *v = session->findVariable(name))
      info.numParams += uint64_t(v->ref.numel());
  // The plan's own initialization (casts, shards) sees the final weights.
  const std::string init(fb::kInitProgram);
  if (session->hasProgram(init) && !session->run(init, 0, error)) {
    error = init + ": " + error;
    return kExitTrainingFailed;
  }

  std::printf(
      "dsrun: %s: %s, %llu parameters; %u x %u tokens per "
      "micro-batch, %u micro-step%s per step; %llu steps; %s\n",
      options.plan.c_str(), info.model.empty() ? "model" : info.model.c_str(),
      (unsigned long long)info.numParams, info.microBatch, info.seqLen,
      info.accumulationSteps, info.accumulationSteps == 1 ? "" : "s",
      (unsigned long long)setup.steps, setup.schedule.describe().c_str());
  std::fflush(stdout);

  setup.microBatch = info.microBatch;
  setup.seqLen = info.seqLen;
  setup.accumulationSteps = info.accumulationSteps;
  setup.rank = 0;
  setup.worldSize = uint32_t(options.np);
  setup.seed = options.seed;
  setup.out = stdout;
  setup.interactive = ::isatty(fileno(stdout));
  setup.metrics = files.metrics;
  setup.dumpBatch = files.dumpBatch;
  setup.trace = files.trace.get();
  int status = train(*session, *data, setup, error);
  if (files.trace) {
    std::string traceError;
    if (!files.trace->close(traceError) && status == kExitOk) {
      error = traceError;
      status = kExitTrainingFailed;
    }
  }
  if (status != kExitOk)
    return status;

  if (!options.exportWeights.empty()) {
    std::map<std::string, std::string> metadata = {
        {"producer", "dsrun"},
        {"model", info.model},
        {"step", std::to_string(setup.steps)},
        {"seed", std::to_string(options.seed)}};
    if (!exportWeights(*session, layout, options.exportWeights, metadata,
                       error))
      return kExitTrainingFailed;
    std::printf("dsrun: wrote %s\n", options.exportWeights.c_str());
  }
  return kExitOk;
}

} // namespace

int runDsrunMain(int argc, char **argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  DsrunOptions options;
  std::string error;
  int status = kExitBadInput;
  if (parseDsrunFlags(args, options, error)) {
    if (options.help) {
      std::fputs(dsrunUsage().c_str(), stdout);
      return kExitOk;
    }
    if (checkDsrunSupport(options, error))
      status = run(options, error);
  }
  if (status != kExitOk) {
    std::fflush(stdout);
    std::fprintf(stderr, "dsrun: %s\n", error.c_str());
  }
  return status;
}

} // namespace dsc::rt
