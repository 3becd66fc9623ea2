//===- TrainerTest.cpp - the training loop and weights I/O over a fake Session
//---===//

#include "test/unit/dsrun/DsrunTestSupport.h"

#include <set>

using namespace dsc::rt;
using namespace dsc::rt::dsruntest;

namespace {

//===----------------------------------------------------------------------===//
// A fake Session: two parameters, micro_step reporting a loss derived from
// its batch, apply doing SGD on one weight. It logs every run.
//===----------------------------------------------------------------------===//

struct RunLog {
  std::string program;
  uint32_t step;
  float lr = 0, stepInput = 0;
  float lossScale = 0; ///< the loss_scale input, when the programs take one
};

class FakeSession : public Session {
public:
  struct Options {
    uint32_t batch = 2, seqLen = 4;
    DType tokenType = DType::i32;
    uint64_t badLossAt = 0; ///< report `badLoss` at this step
    float badLoss = NAN;
    uint64_t failApplyAt = 0;
    bool lossScale = false;        ///< a third input, loss_scale
    std::set<uint64_t> overflowAt; ///< apply reports a NaN norm there
    std::vector<int64_t> embeddingShape = {4, 2};
    bool sync = false; ///< has micro_step_sync, with buffers of its own
  };

  explicit FakeSession(Options o) : o_(o) {
    auto add = [&](std::vector<NamedTensor> &list, const std::string &name,
                   std::vector<int64_t> shape, DType dtype) {
      NamedTensor t;
      t.name = name;
      t.shape = std::move(shape);
      int64_t n = 1;
      for (int64_t d : t.shape)
        n *= d;
      storage_.emplace_back(size_t(n), 0.0f); // 4 bytes: f32 and i32 alike
      t.ref.data = storage_.back().data();
      t.ref.dtype = dtype;
      list.push_back(std::move(t));
    };
    int64_t b = o.batch, t = o.seqLen;
    add(variables_, "transformer.wte.weight", o.embeddingShape, DType::f32);
    add(variables_, "transformer.ln_f.weight", {2}, DType::f32);
    add(variables_, "transformer.ln_f.weight.grad", {2}, DType::f32);
    add(microIn_, "tokens", {b, t}, o.tokenType);
    add(microIn_, "targets", {b, t}, DType::i32);
    add(microOut_, "loss", {}, DType::f32);
    add(syncIn_, "tokens", {b, t}, o.tokenType);
    add(syncIn_, "targets", {b, t}, DType::i32);
    add(syncOut_, "loss", {}, DType::f32);
    add(applyIn_, "lr", {}, DType::f32);
    add(applyIn_, "step", {1}, DType::f32);
    if (o.lossScale) {
      add(microIn_, "loss_scale", {}, DType::f32);
      add(syncIn_, "loss_scale", {}, DType::f32);
      add(applyIn_, "loss_scale", {}, DType::f32);
    }
    add(applyOut_, "grad_norm", {}, DType::f32);
    for (auto *list : {&variables_, &microIn_, &microOut_, &syncIn_, &syncOut_,
                       &applyIn_, &applyOut_})
      for (NamedTensor &v : *list) {
        v.ref.shape = v.shape.data();
        v.ref.rank = int(v.shape.size());
      }
  }

  void initVariables() override {
    float x = 0.25f;
    for (NamedTensor &v : variables_)
      for (int64_t i = 0; i < v.ref.numel(); ++i)
        v.ref.f32()[i] = (x += 0.25f);
  }
  const std::vector<NamedTensor> &variables() const override {
    return variables_;
  }
  NamedTensor *findVariable(std::string_view name) override {
    for (NamedTensor &v : variables_)
      if (v.name == name)
        return &v;
    return nullptr;
  }
  std::vector<NamedTensor> programInputs(std::string_view p) override {
    return p == "micro_step"                   ? microIn_
           : p == "apply"                      ? applyIn_
           : p == "micro_step_sync" && o_.sync ? syncIn_
                                               : std::vector<NamedTensor>();
  }
  std::vector<NamedTensor> programOutputs(std::string_view p) override {
    return p == "micro_step"                   ? microOut_
           : p == "apply"                      ? applyOut_
           : p == "micro_step_sync" && o_.sync ? syncOut_
                                               : std::vector<NamedTensor>();
  }
  bool hasProgram(std::string_view p) const override {
    return p == "micro_step" || p == "apply" ||
           (p == "micro_step_sync" && o_.sync);
  }
  bool run(std::string_view program, uint32_t step,
           std::string &error) override {
    RunLog entry{std::string(program), step};
    if (program == "micro_step" || program == "micro_step_sync") {
      // The loss is the batch's first token plus the weight, so tests can
      // recompute it from the DataLoader.
      bool sync = program == "micro_step_sync";
      float loss =
          float((sync ? syncIn_ : microIn_)[0].ref.i32()[0]) + weight();
      if (step == o_.badLossAt)
        loss = o_.badLoss;
      *(sync ? syncOut_ : microOut_)[0].ref.f32() = loss;
      if (o_.lossScale)
        entry.lossScale = *(sync ? syncIn_ : microIn_)[2].ref.f32();
    } else {
      entry.lr = *applyIn_[0].ref.f32();
      entry.stepInput = *applyIn_[1].ref.f32();
      if (step == o_.failApplyAt) {
        error = "apply: instr 3 (ds.adamw): boom";
        return false;
      }
      if (o_.lossScale)
        entry.lossScale = *applyIn_[2].ref.f32();
      bool overflow = o_.overflowAt.count(step);
      if (!overflow)
        weight() -= entry.lr;
      *applyOut_[0].ref.f32() = overflow ? NAN : 0.5f * float(step);
    }
    log.push_back(entry);
    if (tracing_)
      trace_.push_back({program == "micro_step" ? "micro_step" : "apply",
                        "ds.matmul", "model.py:3", "compute", 0,
                        int64_t(step) * 1000, int64_t(step) * 1000 + 500});
    return true;
  }
  std::vector<ArenaUsage> arenaUsage() const override {
    return {{"params", "device", 100, 80},
            {"activations", "device", 64, 50},
            {"optimizer_state", "host", 30, 30}};
  }
  void setTracing(bool on) override { tracing_ = on; }
  std::vector<TraceRecord> takeTrace() override {
    return std::exchange(trace_, {});
  }

  float &weight() {
    return findVariable("transformer.ln_f.weight")->ref.f32()[0];
  }

  std::vector<RunLog> log;

private:
  Options o_;
  std::list<std::vector<float>> storage_; // stable addresses
  std::vector<NamedTensor> variables_, microIn_, microOut_, syncIn_, syncOut_,
      applyIn_, applyOut_;
  bool tracing_ = false;
  std::vector<TraceRecord> trace_;
};

const std::vector<std::string> kParams = {"transformer.wte.weight",
                                          "transformer.ln_f.weight"};

struct TrainerFixture : ::testing::Test {
  void SetUp() override {
    data = DataLoader::open(writeFile("data.txt", countingBytes(300)), 256, 2,
                            4, error);
    ASSERT_TRUE(data) << error;
    setup.microBatch = 2;
    setup.seqLen = 4;
    setup.accumulationSteps = 2;
    setup.seed = 11;
    setup.steps = 3;
    setup.rssBaselineBytes = 12345;
    ScheduleParams p = warmup("WarmupLR", 0, 1e-2, 4, "linear");
    ASSERT_TRUE(LrSchedule::create(p, setup.schedule, error)) << error;
  }

  std::unique_ptr<DataLoader> data;
  TrainSetup setup;
  std::string error;
};

TEST_F(TrainerFixture, RunsMicroStepsThenApplyWithTheScheduledLr) {
  FakeSession session({});
  session.initVariables();
  float w0 = session.weight();
  std::FILE *metrics = std::tmpfile();
  setup.metrics = metrics;
  ASSERT_EQ(train(session, *data, setup, error), kExitOk) << error;

  ASSERT_EQ(session.log.size(), 9u);
  for (uint32_t s = 1; s <= 3; ++s) {
    const RunLog *step = &session.log[(s - 1) * 3];
    EXPECT_EQ(step[0].program, "micro_step");
    EXPECT_EQ(step[1].program, "micro_step");
    EXPECT_EQ(step[2].program, "apply");
    for (int k = 0; k < 3; ++k)
      EXPECT_EQ(step[k].step, s);
    EXPECT_EQ(step[2].lr, float(setup.schedule.lrAt(s)));
    EXPECT_EQ(step[2].stepInput, float(s));
  }

  std::vector<std::string> records = lines(readBack(metrics));
  std::fclose(metrics);
  ASSERT_EQ(records.size(), 3u);
  float w = w0;
  for (uint32_t s = 1; s <= 3; ++s) {
    Json j = Json::parse(records[s - 1]);
    // The step's loss is the mean of its micro-steps' losses, each computed
    // by the fake from the micro-batch the loader draws for (seed, s, m).
    double expected = 0;
    for (uint32_t m = 0; m < 2; ++m) {
      std::vector<int32_t> tok(8), tgt(8);
      data->fill({11, s, m, 0, 1}, tok.data(), tgt.data());
      expected += double(float(tok[0]) + w);
    }
    w -= float(setup.schedule.lrAt(s));
    EXPECT_EQ(j["step"], s);
    EXPECT_DOUBLE_EQ(j["loss"].get<double>(), expected / 2);
    EXPECT_DOUBLE_EQ(j["lr"].get<double>(), setup.schedule.lrAt(s));
    EXPECT_EQ(j["grad_norm"], 0.5 * s);
    EXPECT_EQ(j["loss_scale"], 1.0);
    EXPECT_EQ(j["tokens"], s * 16);
    EXPECT_GT(j["step_s"].get<double>(), 0);
    EXPECT_GT(j["tokens_per_s"].get<double>(), 0);
    EXPECT_EQ(j["plan_written_bytes"], Json::parse(R"({"activations": 50,
        "optimizer_state": 30, "params": 80})"));
    EXPECT_EQ(j["predicted_bytes"], Json::parse(R"({"activations": 64,
        "optimizer_state": 30, "params": 100})"));
    EXPECT_EQ(j["plan_written_bytes_per_space"],
              Json::parse(R"({"device": 130, "host": 30})"));
    EXPECT_EQ(j["predicted_bytes_per_space"],
              Json::parse(R"({"device": 164, "host": 30})"));
    // The operating system's reading, not the plan's: this test process is
    // resident, and the trainer passes the baseline it was given.
    EXPECT_EQ(j["rank"], 0);
    EXPECT_EQ(j["world_size"], 1);
    EXPECT_EQ(j["rss_baseline_bytes"], setup.rssBaselineBytes);
    EXPECT_GT(j["rss_peak_bytes"].get<uint64_t>(), 1u << 20);
  }
}

// A plan with micro_step_sync (ZeRO stages 0-1 with accumulation) runs it for
// each step's last micro-batch, filling its own inputs with that batch.
TEST_F(TrainerFixture, LastMicroBatchRunsMicroStepSync) {
  FakeSession::Options o;
  o.sync = true;
  FakeSession session(o);
  session.initVariables();
  float w0 = session.weight();
  std::FILE *metrics = std::tmpfile();
  setup.metrics = metrics;
  setup.accumulationSteps = 3;
  ASSERT_EQ(train(session, *data, setup, error), kExitOk) << error;

  ASSERT_EQ(session.log.size(), 12u);
  for (uint32_t s = 1; s <= 3; ++s) {
    const RunLog *step = &session.log[(s - 1) * 4];
    EXPECT_EQ(step[0].program, "micro_step");
    EXPECT_EQ(step[1].program, "micro_step");
    EXPECT_EQ(step[2].program, "micro_step_sync");
    EXPECT_EQ(step[3].program, "apply");
  }
  std::vector<std::string> records = lines(readBack(metrics));
  std::fclose(metrics);
  ASSERT_EQ(records.size(), 3u);
  float w = w0;
  for (uint32_t s = 1; s <= 3; ++s) {
    double expected = 0;
    for (uint32_t m = 0; m < 3; ++m) {
      std::vector<int32_t> tok(8), tgt(8);
      data->fill({11, s, m, 0, 1}, tok.data(), tgt.data());
      expected += double(float(tok[0]) + w);
    }
    w -= float(setup.schedule.lrAt(s));
    EXPECT_DOUBLE_EQ(Json::parse(records[s - 1])["loss"].get<double>(),
                     expected / 3);
  }
}

// fp16: dsrun hands every program the scaler's scale; an overflowed step
// (NaN norm) is skipped: the scale follows DeepSpeed's state machine, and
// the LR schedule and Adam's step input do not advance.
TEST_F(TrainerFixture, LossScaleAndSkippedSteps) {
  FakeSession::Options o;
  o.lossScale = true;
  o.overflowAt = {2, 3};
  FakeSession session(o);
  std::FILE *metrics = std::tmpfile();
  setup.metrics = metrics;
  setup.steps = 5;
  ASSERT_TRUE(LrSchedule::create(warmup("WarmupLR", 0, 1e-2, 4, "linear"),
                                 setup.schedule, error))
      << error;
  LossScaleOptions scale;
  scale.initialScalePower = 10;
  scale.hysteresis = 1;
  scale.window = 2;
  setup.lossScale = scale;
  setup.skipsOverflow = true;
  ASSERT_EQ(train(session, *data, setup, error), kExitOk) << error;
  std::vector<std::string> records = lines(readBack(metrics));
  std::fclose(metrics);
  ASSERT_EQ(records.size(), 5u);
  // The scale each step used, and whether it was skipped: the overflows
  // at 2 and 3 halve it (hysteresis 1); 4 and 5 are clean but fewer than a
  // window of clean steps after the overflow, so it does not grow.
  const double scales[] = {1024, 1024, 512, 256, 256};
  const bool skipped[] = {false, true, true, false, false};
  for (size_t i = 0; i < 5; ++i) {
    Json r = Json::parse(records[i]);
    EXPECT_EQ(r["loss_scale"].get<double>(), scales[i]) << "step " << i + 1;
    EXPECT_EQ(r["skipped"].get<bool>(), skipped[i]) << "step " << i + 1;
  }
  // Apply's inputs: the applied-step count (1, 2, 2, 2, 3) and its LR.
  std::vector<RunLog> applies;
  for (const RunLog &e : session.log)
    if (e.program == "apply")
      applies.push_back(e);
  ASSERT_EQ(applies.size(), 5u);
  const float stepInputs[] = {1, 2, 2, 2, 3};
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(applies[i].stepInput, stepInputs[i]) << "step " << i + 1;
    EXPECT_EQ(applies[i].lr,
              float(setup.schedule.lrAt(uint64_t(stepInputs[i]))));
    EXPECT_EQ(applies[i].lossScale, float(scales[i]));
  }
  for (const RunLog &e : session.log) {
    if (e.program == "micro_step") {
      EXPECT_EQ(e.lossScale, float(scales[e.step - 1])) << "step " << e.step;
    }
  }
}

TEST_F(TrainerFixture, OverflowAtTheMinimumScaleEndsTheRun) {
  FakeSession::Options o;
  o.lossScale = true;
  o.overflowAt = {1, 2, 3};
  FakeSession session(o);
  setup.steps = 5;
  LossScaleOptions scale;
  scale.initialScalePower = 1;
  scale.hysteresis = 1;
  setup.lossScale = scale;
  setup.skipsOverflow = true;
  EXPECT_EQ(train(session, *data, setup, error), kExitTrainingFailed);
  EXPECT_EQ(error, "step 2: gradient overflow at the minimum loss scale 1 "
                   "(min_loss_scale): it cannot be reduced further");
}

TEST_F(TrainerFixture, NonFiniteLossFailsTheRun) {
  for (float bad : {float(NAN), float(INFINITY), -float(INFINITY)}) {
    FakeSession::Options o;
    o.badLossAt = 2;
    o.badLoss = bad;
    FakeSession session(o);
    std::FILE *metrics = std::tmpfile();
    setup.metrics = metrics;
    EXPECT_EQ(train(session, *data, setup, error), kExitTrainingFailed);
    EXPECT_EQ(error, std::string("step 2: loss is ") + (std::isnan(bad) ? "nan"
                                                        : bad > 0       ? "inf"
                                                                  : "-inf"));
    EXPECT_EQ(lines(readBack(metrics)).size(), 1u);
    EXPECT_EQ(session.log.back().program, "micro_step"); // no apply after it
    std::fclose(metrics);
  }
}

/// Rank `rank` of two; the other rank's loss is always `otherLoss` (the
/// first element of the step's all-reduce; it asks for no stop, the
/// others), or the all-reduce times out.
class TwoRankComm : public Communicator {
public:
  explicit TwoRankComm(int rank) : rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return 2; }
  const char *kind() const override { return "fake"; }
  bool barrier(std::string &) override { return false; }

protected:
  bool doAllReduceSum(const void *in, void *out, size_t count, DType dtype,
                      void *, std::string &error) override {
    if (dtype != DType::f64)
      return false;
    if (!begin("all_reduce", error, in, out, count))
      return false;
    if (sequence() == failAt) {
      error = prefix("all_reduce") + " timed out after 2 s (a rank stopped "
                                     "answering)";
      return false;
    }
    for (size_t i = 0; i < count; ++i)
      static_cast<double *>(out)[i] =
          static_cast<const double *>(in)[i] + (i == 0 ? otherLoss : 0.0);
    return true;
  }
  bool doReduceScatterSum(const void *, void *, size_t, DType, void *,
                          std::string &) override {
    return false;
  }
  bool doAllGather(const void *, void *, size_t, DType, void *,
                   std::string &) override {
    return false;
  }
  bool doAllToAll(const void *, void *, size_t, DType, void *,
                  std::string &) override {
    return false;
  }
  bool doBroadcast(void *, size_t, DType, int, void *, std::string &) override {
    return false;
  }
  std::unique_ptr<Communicator> doSplit(int, int, std::string &) override {
    return nullptr;
  }

public:
  double otherLoss = 10;
  uint64_t failAt = 0;

private:
  int rank_;
};

TEST_F(TrainerFixture, LossIsTheMeanOverRanks) {
  FakeSession session({});
  session.initVariables();
  float w = session.weight();
  TwoRankComm comm(1);
  setup.rank = 1;
  setup.worldSize = 2;
  setup.comm = &comm;
  std::FILE *metrics = std::tmpfile();
  setup.metrics = metrics;
  ASSERT_EQ(train(session, *data, setup, error), kExitOk) << error;
  std::vector<std::string> records = lines(readBack(metrics));
  std::fclose(metrics);
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(comm.sequence(), 3u); // one all-reduce per step
  for (uint32_t s = 1; s <= 3; ++s) {
    Json j = Json::parse(records[s - 1]);
    double mine = 0;
    for (uint32_t m = 0; m < 2; ++m) {
      std::vector<int32_t> tok(8), tgt(8);
      data->fill({11, s, m, 1, 2}, tok.data(), tgt.data()); // rank 1 of 2
      mine += double(float(tok[0]) + w);
    }
    w -= float(setup.schedule.lrAt(s));
    EXPECT_DOUBLE_EQ(j["loss"].get<double>(), (mine / 2 + 10) / 2);
    EXPECT_EQ(j["tokens"], s * 32); // both ranks' tokens
  }

  // A lost rank fails the step, naming the collective.
  FakeSession again({});
  comm.failAt = 5;
  setup.metrics = nullptr;
  EXPECT_EQ(train(again, *data, setup, error), kExitTrainingFailed);
  EXPECT_EQ(error, "step 2: averaging the loss over the ranks: rank 1: "
                   "all_reduce #5 timed out after 2 s (a rank stopped "
                   "answering)");
  setup.comm = nullptr;
  EXPECT_EQ(train(again, *data, setup, error), kExitTrainingFailed);
  EXPECT_EQ(error, "step 1: no communicator for 2 ranks");
}

TEST_F(TrainerFixture, KernelFailureFailsTheRun) {
  FakeSession::Options o;
  o.failApplyAt = 2;
  FakeSession session(o);
  EXPECT_EQ(train(session, *data, setup, error), kExitTrainingFailed);
  EXPECT_EQ(error, "step 2: apply: instr 3 (ds.adamw): boom");
}

TEST_F(TrainerFixture, ProgramsMustFollowTheConventions) {
  FakeSession::Options o;
  o.tokenType = DType::f32;
  FakeSession session(o);
  EXPECT_EQ(train(session, *data, setup, error), kExitBadInput);
  EXPECT_EQ(error, "plan: micro_step input 0 ('tokens') is f32 [2, 4]; dsrun "
                   "passes i32 [2, 4]");
  EXPECT_TRUE(session.log.empty());

  FakeSession::Options wrongBatch;
  wrongBatch.batch = 3;
  FakeSession other(wrongBatch);
  EXPECT_EQ(train(other, *data, setup, error), kExitBadInput);
  EXPECT_EQ(error, "plan: micro_step input 0 ('tokens') is i32 [3, 4]; dsrun "
                   "passes i32 [2, 4]");
}

TEST_F(TrainerFixture, PlainProgressEveryTwentiethAndSummary) {
  FakeSession session({});
  std::FILE *out = std::tmpfile();
  setup.out = out;
  setup.steps = 45; // a line every 2 steps, and the last
  ASSERT_EQ(train(session, *data, setup, error), kExitOk) << error;
  std::vector<std::string> text = lines(readBack(out));
  std::fclose(out);
  std::vector<std::string> progress;
  for (const std::string &l : text)
    if (l.rfind("step ", 0) == 0)
      progress.push_back(l);
  ASSERT_EQ(progress.size(), 23u);
  EXPECT_EQ(progress.front().rfind("step 2/45  loss ", 0), 0u);
  EXPECT_EQ(progress.back().rfind("step 45/45  loss ", 0), 0u);
  EXPECT_NE(progress.back().find("  mem 160 B"), std::string::npos);
  std::string all;
  for (const std::string &l : text)
    all += l + "\n";
  EXPECT_NE(all.find("done: 45 steps in "), std::string::npos);
  EXPECT_NE(all.find("optimizer_state (host)"), std::string::npos);
  EXPECT_NE(all.find("total"), std::string::npos);
}

// --print-every (DeepSpeed's steps_per_print): every K-th step and the
// last; and onStep sees every step's record, in order.
TEST_F(TrainerFixture, PrintEveryAndStepCallback) {
  FakeSession session({});
  std::FILE *out = std::tmpfile();
  setup.out = out;
  setup.steps = 10;
  setup.printEvery = 4;
  std::vector<uint64_t> seen;
  setup.onStep = [&](const StepRecord &r) {
    seen.push_back(r.step);
    return true;
  };
  ASSERT_EQ(train(session, *data, setup, error), kExitOk) << error;
  std::vector<std::string> progress;
  for (const std::string &l : lines(readBack(out)))
    if (l.rfind("step ", 0) == 0)
      progress.push_back(l.substr(0, l.find("  ")));
  std::fclose(out);
  EXPECT_EQ(progress,
            (std::vector<std::string>{"step 4/10", "step 8/10", "step 10/10"}));
  EXPECT_EQ(seen, (std::vector<uint64_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}));
}

// A callback that says stop ends the run after that step, as SIGINT does.
TEST_F(TrainerFixture, StepCallbackStopsTheRun) {
  FakeSession session({});
  setup.steps = 10;
  uint64_t last = 0;
  setup.onStep = [&](const StepRecord &r) {
    last = r.step;
    return r.step < 3;
  };
  EXPECT_EQ(train(session, *data, setup, error), 128 + SIGINT);
  EXPECT_EQ(last, 3u);
  EXPECT_EQ(error, "stopped by the step callback after step 3 (no "
                   "--save-dir: nothing saved)");
}

TEST_F(TrainerFixture, TraceHasOneEventPerInstruction) {
  FakeSession session({});
  std::string path = tempPath("trace.json");
  auto trace = TraceWriter::open(path, 0, error);
  ASSERT_TRUE(trace) << error;
  setup.trace = trace.get();
  ASSERT_EQ(train(session, *data, setup, error), kExitOk) << error;
  ASSERT_TRUE(trace->close(error)) << error;
  Json events = Json::parse(readFile(path));
  ASSERT_TRUE(events.is_array());
  int complete = 0, named = 0;
  for (const Json &e : events) {
    if (e["ph"] == "X") {
      ++complete;
      EXPECT_EQ(e["name"], "ds.matmul");
      EXPECT_EQ(e["tid"], 0);
      EXPECT_DOUBLE_EQ(e["dur"].get<double>(), 0.5);
      EXPECT_EQ(e["args"]["loc"], "model.py:3");
    } else if (e["name"] == "thread_name") {
      ++named;
    }
  }
  EXPECT_EQ(complete, 9); // 3 steps x (2 micro-steps + apply)
  EXPECT_EQ(named, 5);    // compute, comm, h2d, d2h, other
}

//===----------------------------------------------------------------------===//
// Weights in and out
//===----------------------------------------------------------------------===//

TEST(Weights, ExportWritesTiedLmHeadAndImportRoundTrips) {
  FakeSession trained({});
  trained.initVariables();
  WeightsLayout layout = WeightsLayout::forModel("gpt2", kParams);
  using Aliases = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(layout.aliases,
            (Aliases{{"lm_head.weight", "transformer.wte.weight"}}));
  std::string path = tempPath("w.safetensors");
  std::string error;
  ASSERT_TRUE(
      exportWeights(trained, layout, path, {{"step", "3"}}, true, error))
      << error;

  auto file = SafetensorsFile::read(path, error);
  ASSERT_TRUE(file) << error;
  std::vector<std::string> names;
  for (const SafetensorsEntry &e : file->tensors())
    names.push_back(e.name);
  EXPECT_EQ(names, (std::vector<std::string>{"transformer.wte.weight",
                                             "lm_head.weight",
                                             "transformer.ln_f.weight"}));
  std::vector<float> wte(8), head(8);
  ASSERT_TRUE(
      file->readF32(*file->find("transformer.wte.weight"), wte.data(), error));
  ASSERT_TRUE(file->readF32(*file->find("lm_head.weight"), head.data(), error));
  EXPECT_EQ(wte, head);
  EXPECT_EQ(file->metadata().at("format"), "pt");
  EXPECT_EQ(file->metadata().at("step"), "3");

  FakeSession fresh({});
  ASSERT_TRUE(importWeights(fresh, layout, path, error)) << error;
  for (const std::string &name : kParams) {
    const NamedTensor *a = trained.findVariable(name);
    const NamedTensor *b = fresh.findVariable(name);
    EXPECT_EQ(std::vector<float>(a->ref.f32(), a->ref.f32() + a->ref.numel()),
              std::vector<float>(b->ref.f32(), b->ref.f32() + b->ref.numel()))
        << name;
  }
  // Untied models write no lm_head of their own making.
  EXPECT_TRUE(WeightsLayout::forModel("llama", kParams).aliases.empty());
  std::vector<std::string> withHead = kParams;
  withHead.push_back("lm_head.weight");
  EXPECT_TRUE(WeightsLayout::forModel("gpt2", withHead).aliases.empty());
  // A plan's own aliases (an exported module's tied names) go the same way.
  WeightsLayout exported = WeightsLayout::forModel(
      "GPT", kParams, {{"head.weight", "transformer.wte.weight"}});
  std::string path2 = tempPath("w2.safetensors");
  ASSERT_TRUE(exportWeights(trained, exported, path2, {}, true, error))
      << error;
  auto file2 = SafetensorsFile::read(path2, error);
  ASSERT_TRUE(file2 && file2->find("head.weight")) << error;
  FakeSession again({});
  ASSERT_TRUE(importWeights(again, exported, path2, error)) << error;
}

TEST(Weights, ImportRejectsMismatchesAndLoadsNothing) {
  WeightsLayout gpt2 = WeightsLayout::forModel("gpt2", kParams);
  std::string error;
  std::vector<float> wte(8, 1.0f), other(8, 2.0f), ln(2, 3.0f), ln3(3, 3.0f);
  auto importError = [&](const std::vector<TensorToSave> &tensors,
                         const WeightsLayout &layout) {
    std::string path = tempPath("in.safetensors");
    EXPECT_TRUE(saveSafetensors(path, tensors, {}, error)) << error;
    FakeSession session({});
    session.initVariables();
    float before = session.weight();
    EXPECT_FALSE(importWeights(session, layout, path, error));
    EXPECT_EQ(session.weight(), before) << "nothing may be loaded";
    return error.substr(path.size() + 2);
  };
  EXPECT_EQ(importError({{"transformer.wte.weight", {4, 2}, wte.data()}}, gpt2),
            "missing parameter 'transformer.ln_f.weight' [2]");
  EXPECT_EQ(importError({{"transformer.wte.weight", {4, 2}, wte.data()},
                         {"transformer.ln_f.weight", {3}, ln3.data()}},
                        gpt2),
            "'transformer.ln_f.weight' has shape [3], the plan expects [2]");
  EXPECT_EQ(importError({{"transformer.wte.weight", {4, 2}, wte.data()},
                         {"transformer.ln_f.weight", {2}, ln.data()},
                         {"extra", {2}, ln.data()}},
                        gpt2),
            "unexpected tensor 'extra' (not a parameter of this plan)");
  EXPECT_EQ(importError({{"transformer.wte.weight", {8}, wte.data()},
                         {"extra", {2}, ln.data()}},
                        gpt2),
            "'transformer.wte.weight' has shape [8], the plan expects [4, 2] "
            "(and 2 more problems)");
  EXPECT_EQ(importError({{"transformer.wte.weight", {4, 2}, wte.data()},
                         {"lm_head.weight", {4, 2}, other.data()},
                         {"transformer.ln_f.weight", {2}, ln.data()}},
                        gpt2),
            "lm_head.weight differs from transformer.wte.weight, but this "
            "plan ties them");
  EXPECT_EQ(
      importError({{"transformer.wte.weight", {4, 2}, wte.data()},
                   {"lm_head.weight", {4, 2}, wte.data()},
                   {"transformer.ln_f.weight", {2}, ln.data()}},
                  WeightsLayout::forModel("llama", kParams)),
      "unexpected tensor 'lm_head.weight' (not a parameter of this plan)");
  std::string missing = tempPath("missing.safetensors");
  FakeSession session({});
  EXPECT_FALSE(importWeights(session, gpt2, missing, error));
  EXPECT_EQ(error, missing + ": cannot open: No such file or directory");
}

} // namespace
