//===- DsrunRanksTest.cpp - dsrun on every rank
//-----------------------------===//

#include "test/unit/comm/CommTestSupport.h"

using namespace dsc;
using namespace dsc::commtest;

namespace dsc::commtest {

// Buffer ids of bigramPlan().
enum : uint32_t {
  kTable,
  kGrad,
  kLogits,
  kDLogits,
  kLoss,
  kSquare,
  kSum,
  kNorm,
  kUpdate,
  kTokens,
  kTargets,
  kLr,
  kStep,
  kOneConst
};

/// A bigram model trained with SGD, data parallel over `n` ranks of `batch`
/// rows each: the gradient is all-reduced into its mean on the comm stream
/// right after the compute stream produced it.
PlanSpec bigramPlan(int n, int64_t batch) {
  using S = fb::Space;
  using C = fb::Category;
  PlanSpec p;
  p.worldSize = uint32_t(n);
  p.microBatch = uint32_t(batch);
  p.seqLen = kSeq;
  p.vocabSize = kVocab;
  p.lr = 0.5;
  const uint64_t square = kVocab * kVocab * 4, act = batch * kSeq * kVocab * 4;
  uint32_t params = p.arena(S::device, C::params, square);
  uint32_t grads = p.arena(S::device, C::grads, square);
  uint32_t acts = p.arena(S::device, C::activations, 2 * act + 2 * square + 12);
  uint32_t in = p.arena(S::host, C::inputs, 2 * batch * kSeq * 4 + 8);
  uint32_t consts = p.arena(S::host, C::constants, 4);
  p.buffer(params, 0, {kVocab, kVocab}, "table");
  p.buffer(grads, 0, {kVocab, kVocab}, "table.grad");
  p.buffer(acts, 0, {batch, kSeq, kVocab}, "logits");
  p.buffer(acts, act, {batch, kSeq, kVocab}, "dlogits");
  p.buffer(acts, 2 * act, {}, "loss");
  p.buffer(acts, 2 * act + 4, {kVocab, kVocab}, "square");
  p.buffer(acts, 2 * act + 4 + square, {}, "sum");
  p.buffer(acts, 2 * act + 8 + square, {}, "grad_norm");
  p.buffer(acts, 2 * act + 12 + square, {kVocab, kVocab}, "update");
  const fb::DType i32 = fb::DType::i32;
  p.buffer(in, 0, {batch, kSeq}, "tokens", i32);
  p.buffer(in, batch * kSeq * 4, {batch, kSeq}, "targets", i32);
  p.buffer(in, 2 * batch * kSeq * 4, {}, "lr");
  p.buffer(in, 2 * batch * kSeq * 4 + 4, {}, "step");
  p.buffer(consts, 0, {}, "one");
  p.variables.push_back(
      {"table", fb::VarKind::param, "", kTable, fb::InitKind::normal, 0.1, 7});
  p.variables.push_back(
      {"table.grad", fb::VarKind::grad, "table", kGrad, fb::InitKind::zeros});
  p.constants.push_back({kOneConst, floatBytes({1.0f})});
  using St = fb::Stream;
  PlanSpec::Program micro{
      "micro_step",
      {{"ds.embedding", {kTable, kTokens}, {kLogits}},
       {"ds.cross_entropy", {kLogits, kTargets}, {kLoss}},
       {"ds.cross_entropy_grad", {kLogits, kTargets, kOneConst}, {kDLogits}},
       {"ds.embedding_grad",
        {kTokens, kDLogits},
        {kGrad},
        St::compute,
        {},
        {0}},
       {"comm.all_reduce", {kGrad}, {kGrad}, St::comm, {0}}},
      {kTokens, kTargets},
      {kLoss},
      1};
  micro.instrs[0].ints = {1}; // parts: the whole vocabulary
  micro.instrs[1].ints = {-1};
  micro.instrs[2].ints = {-1};
  micro.instrs[3].ints = {1};
  micro.instrs[4].floats = {1.0 / n};
  p.programs.push_back(micro);
  p.programs.push_back({"apply",
                        {{"ds.mul", {kGrad, kGrad}, {kSquare}},
                         {"ds.reduce_sum", {kSquare}, {kSum}},
                         {"ds.sqrt", {kSum}, {kNorm}},
                         {"ds.mul", {kGrad, kLr}, {kUpdate}},
                         {"ds.sub", {kTable, kUpdate}, {kTable}}},
                        {kLr, kStep},
                        {kNorm}});
  p.programs.back().instrs[1].ints = {0, 1};
  return p;
}

} // namespace dsc::commtest

namespace {

//===----------------------------------------------------------------------===//
// dsrun on every rank: data parallelism on a bigram model
//===----------------------------------------------------------------------===//

std::string tempPath(const std::string &name) {
  return testing::TempDir() + "comm_test_" + name;
}

std::string writePlan(const PlanSpec &spec, const std::string &name) {
  std::vector<uint8_t> bytes = spec.build();
  std::string path = tempPath(name);
  std::FILE *f = std::fopen(path.c_str(), "wb");
  EXPECT_TRUE(f) << path;
  if (f) {
    std::fwrite(bytes.data(), 1, bytes.size(), f);
    std::fclose(f);
  }
  return path;
}

int dsrun(std::vector<std::string> args) {
  args.insert(args.begin(), "dsrun");
  std::vector<char *> argv;
  for (std::string &a : args)
    argv.push_back(a.data());
  return rt::runDsrunMain(int(argv.size()), argv.data());
}

std::vector<double> lossesIn(const std::string &metricsPath) {
  std::vector<double> losses;
  std::FILE *f = std::fopen(metricsPath.c_str(), "r");
  if (!f)
    return losses;
  char line[4096];
  while (std::fgets(line, sizeof line, f)) {
    const char *at = std::strstr(line, "\"loss\":");
    if (at)
      losses.push_back(std::strtod(at + 7, nullptr));
  }
  std::fclose(f);
  return losses;
}

/// `got` and `want` hold `steps` losses, equal within 1e-5 (relative).
void expectLosses(const std::vector<double> &got,
                  const std::vector<double> &want, int steps) {
  ASSERT_EQ(got.size(), size_t(steps));
  ASSERT_EQ(want.size(), size_t(steps));
  for (int s = 0; s < steps; ++s)
    EXPECT_NEAR(got[s], want[s], 1e-5 * std::abs(want[s])) << "step " << s;
}

/// Trains bigramPlan on one rank with all N * B rows for `steps` steps
/// (seed 3, constant lr 0.5), writing the metrics to `metricsPath`: the
/// reference for N ranks of B rows. `loaded` must outlive `session`.
void trainOneRank(int n, int steps, const std::string &metricsPath,
                  std::unique_ptr<rt::LoadedPlan> &loaded,
                  std::unique_ptr<rt::Session> &session) {
  std::string error;
  loaded = rt::LoadedPlan::fromBytes(bigramPlan(1, n * kRows).build(),
                                     "ref.dsplan", error, test::cpuBackend());
  ASSERT_TRUE(loaded) << error;
  rt::SessionOptions options;
  options.seed = 3;
  session = rt::Session::create(*loaded, options, error);
  ASSERT_TRUE(session) << error;
  session->initVariables();
  auto data = rt::DataLoader::synthetic(kVocab, uint32_t(n * kRows), kSeq);
  rt::TrainSetup setup;
  setup.microBatch = uint32_t(n * kRows);
  setup.seqLen = kSeq;
  setup.seed = 3;
  setup.steps = steps;
  rt::ScheduleParams constant;
  constant.lr = 0.5;
  ASSERT_TRUE(rt::LrSchedule::create(constant, setup.schedule, error));
  setup.metrics = std::fopen(metricsPath.c_str(), "w");
  ASSERT_TRUE(setup.metrics);
  int status = rt::train(*session, *data, setup, error);
  std::fclose(setup.metrics);
  ASSERT_EQ(status, 0) << error;
}

TEST(DsrunRanks, MatchOneRankWithTheGlobalBatch) {
  const int n = world().size(), steps = 6;
  // Every rank writes the plan to its own path: ranks may share /tmp.
  std::string rankTag = std::to_string(world().rank());
  std::string plan =
      writePlan(bigramPlan(n, kRows), "dp" + rankTag + ".dsplan");
  std::string metrics = tempPath("dp.jsonl"),
              weights = tempPath("dp.safetensors");
  std::string error;
  if (world().rank() == 0) {
    std::remove(metrics.c_str());
    std::remove(weights.c_str());
  }
  ASSERT_TRUE(world().barrier(error)) << error;
  ASSERT_EQ(dsrun({plan, "--steps", std::to_string(steps), "--seed", "3",
                   "--metrics", metrics, "--export-weights", weights}),
            0);
  ASSERT_TRUE(world().barrier(error)) << error;
  if (world().rank() != 0)
    return; // rank 0 alone wrote the metrics and weights

  // One rank with all N * B rows draws the same samples (DataLoader.h).
  std::unique_ptr<rt::LoadedPlan> loaded;
  std::unique_ptr<rt::Session> session;
  std::string refMetrics = tempPath("ref.jsonl");
  trainOneRank(n, steps, refMetrics, loaded, session);
  ASSERT_FALSE(testing::Test::HasFatalFailure());

  std::vector<double> got = lossesIn(metrics);
  expectLosses(got, lossesIn(refMetrics), steps);
  EXPECT_LT(got.back(), got.front()); // it learns

  auto file = rt::SafetensorsFile::read(weights, error);
  ASSERT_TRUE(file) << error;
  ASSERT_EQ(file->tensors().size(), 1u);
  const float *trained =
      reinterpret_cast<const float *>(file->data(file->tensors()[0]));
  const float *ref = session->findVariable("table")->ref.f32();
  for (int64_t i = 0; i < kVocab * kVocab; ++i)
    EXPECT_NEAR(trained[i], ref[i], 1e-5 * (1 + std::abs(ref[i]))) << i;
}

/// bigramPlan with ZeRO stage 3: the table and an untrained parameter
/// `extra` [3] share one group, sharded over the `n` ranks (padded to n x S
/// elements). micro_step all-gathers the group before the embedding and
/// reduce-scatters the gradient's mean into this rank's shard; apply updates
/// the shard, with the gradient norm all-reduced from the shards.
PlanSpec shardedBigramPlan(int n, int64_t batch) {
  using S = fb::Space;
  using C = fb::Category;
  using St = fb::Stream;
  PlanSpec p;
  p.worldSize = uint32_t(n);
  p.microBatch = uint32_t(batch);
  p.seqLen = kSeq;
  p.vocabSize = kVocab;
  p.lr = 0.5;
  const int64_t members = kVocab * kVocab + 3, shard = (members + n - 1) / n;
  const uint64_t act = batch * kSeq * kVocab * 4, rows = batch * kSeq * 4;
  uint32_t params = p.arena(S::device, C::params, shard * 4);
  uint32_t full = p.arena(S::device, C::comm_buffers, n * shard * 4);
  uint32_t grads = p.arena(S::device, C::grads, (n + 1) * shard * 4);
  uint32_t acts =
      p.arena(S::device, C::activations, 2 * act + 2 * shard * 4 + 12);
  uint32_t in = p.arena(S::host, C::inputs, 2 * rows + 8);
  uint32_t consts = p.arena(S::host, C::constants, 4);
  uint32_t pShard = p.buffer(params, 0, {shard}, "params.shard");
  uint32_t pFull = p.buffer(full, 0, {n * shard}, "params.full");
  uint32_t table = p.buffer(full, 0, {kVocab, kVocab}, "table");
  uint32_t gFull = p.buffer(grads, 0, {n * shard}, "grads.full");
  uint32_t gTable = p.buffer(grads, 0, {kVocab, kVocab}, "table.grad");
  uint32_t gShard = p.buffer(grads, n * shard * 4, {shard}, "grads.shard");
  uint32_t logits = p.buffer(acts, 0, {batch, kSeq, kVocab}, "logits");
  uint32_t dlogits = p.buffer(acts, act, {batch, kSeq, kVocab}, "dlogits");
  uint32_t loss = p.buffer(acts, 2 * act, {}, "loss");
  uint32_t square = p.buffer(acts, 2 * act + 4, {shard}, "square");
  uint32_t sum = p.buffer(acts, 2 * act + 4 + shard * 4, {}, "sum");
  uint32_t norm = p.buffer(acts, 2 * act + 8 + shard * 4, {}, "grad_norm");
  uint32_t update = p.buffer(acts, 2 * act + 12 + shard * 4, {shard}, "update");
  uint32_t tokens = p.buffer(in, 0, {batch, kSeq}, "tokens", fb::DType::i32);
  uint32_t targets =
      p.buffer(in, rows, {batch, kSeq}, "targets", fb::DType::i32);
  uint32_t lr = p.buffer(in, 2 * rows, {}, "lr");
  uint32_t step = p.buffer(in, 2 * rows + 4, {}, "step");
  uint32_t one = p.buffer(consts, 0, {}, "one");
  // The table draws as bigramPlan's does, whatever the world size.
  p.variables.push_back({"table", fb::VarKind::param, "", pShard,
                         fb::InitKind::normal, 0.1, 7, true, 0,
                         std::vector<int64_t>{kVocab, kVocab}});
  p.variables.push_back({"extra", fb::VarKind::param, "", pShard,
                         fb::InitKind::normal, 0.1, 11, true,
                         uint64_t(kVocab * kVocab), std::vector<int64_t>{3}});
  p.constants.push_back({one, floatBytes({1.0f})});
  PlanSpec::Program micro{
      "micro_step",
      {{"comm.all_gather", {pShard}, {pFull}, St::comm, {}, {0}},
       {"ds.embedding", {table, tokens}, {logits}, St::compute, {0}},
       {"ds.cross_entropy", {logits, targets}, {loss}},
       {"ds.cross_entropy_grad", {logits, targets, one}, {dlogits}},
       {"ds.embedding_grad", {tokens, dlogits}, {gTable}, St::compute, {}, {1}},
       {"comm.reduce_scatter", {gFull}, {gShard}, St::comm, {1}}},
      {tokens, targets},
      {loss},
      2};
  micro.instrs[1].ints = {1}; // parts: the whole vocabulary
  micro.instrs[2].ints = {-1};
  micro.instrs[3].ints = {-1};
  micro.instrs[4].ints = {1};
  micro.instrs[5].floats = {1.0 / n};
  p.programs.push_back(micro);
  PlanSpec::Program apply{
      "apply",
      {{"ds.mul", {gShard, gShard}, {square}},
       {"ds.reduce_sum", {square}, {sum}, St::compute, {}, {0}},
       {"comm.all_reduce", {sum}, {sum}, St::comm, {0}, {1}},
       {"ds.sqrt", {sum}, {norm}, St::compute, {1}},
       {"ds.mul", {gShard, lr}, {update}},
       {"ds.sub", {pShard, update}, {pShard}}},
      {lr, step},
      {norm},
      2};
  apply.instrs[1].ints = {0};
  apply.instrs[2].floats = {1.0};
  p.programs.push_back(apply);
  return p;
}

/// The tensors of a safetensors file by name, as floats.
std::map<std::string, std::vector<float>> tensorsIn(const std::string &path) {
  std::map<std::string, std::vector<float>> out;
  std::string error;
  auto file = rt::SafetensorsFile::read(path, error);
  EXPECT_TRUE(file) << error;
  if (!file)
    return out;
  for (const rt::SafetensorsEntry &e : file->tensors()) {
    int64_t n = 1;
    for (int64_t d : e.shape)
      n *= d;
    std::vector<float> values(static_cast<size_t>(n));
    EXPECT_TRUE(file->readF32(e, values.data(), error)) << error;
    out[e.name] = values;
  }
  return out;
}

TEST(DsrunRanks, ShardedParametersTrainAndExportAsOneRank) {
  const int n = world().size(), steps = 6;
  std::string rankTag = std::to_string(world().rank());
  PlanSpec spec = shardedBigramPlan(n, kRows);
  std::string plan = writePlan(spec, "z3" + rankTag + ".dsplan");
  std::string metrics = tempPath("z3.jsonl"),
              weights = tempPath("z3.safetensors"),
              again = tempPath("z3again.safetensors");
  std::string error;
  if (world().rank() == 0) {
    std::remove(metrics.c_str());
    std::remove(weights.c_str());
    std::remove(again.c_str());
  }
  ASSERT_TRUE(world().barrier(error)) << error;
  ASSERT_EQ(dsrun({plan, "--steps", std::to_string(steps), "--seed", "3",
                   "--metrics", metrics, "--export-weights", weights}),
            0);
  ASSERT_TRUE(world().barrier(error)) << error;

  // Every rank loads the file into its shard (a different seed first, so
  // that the weights come from the file) and exports again.
  auto loaded = rt::LoadedPlan::fromBytes(spec.build(), "z3.dsplan", error,
                                          test::cpuBackend());
  ASSERT_TRUE(loaded) << error;
  rt::SessionOptions options;
  options.seed = 9;
  options.rank = world().rank();
  options.worldSize = n;
  options.comm = &world();
  auto session = rt::Session::create(*loaded, options, error);
  ASSERT_TRUE(session) << error;
  session->initVariables();
  rt::WeightsLayout layout =
      rt::WeightsLayout::forModel("test", {"table", "extra"});
  ASSERT_TRUE(rt::importWeights(*session, layout, weights, error)) << error;
  ASSERT_TRUE(rt::exportWeights(*session, layout, again, {},
                                world().rank() == 0, error))
      << error;
  ASSERT_TRUE(world().barrier(error)) << error;
  if (world().rank() != 0)
    return; // rank 0 alone wrote the metrics and weights

  // One rank, whole parameters, all N * B rows (DataLoader.h).
  std::unique_ptr<rt::LoadedPlan> ref;
  std::unique_ptr<rt::Session> refSession;
  std::string refMetrics = tempPath("z3ref.jsonl");
  trainOneRank(n, steps, refMetrics, ref, refSession);
  ASSERT_FALSE(testing::Test::HasFatalFailure());

  std::vector<double> got = lossesIn(metrics);
  expectLosses(got, lossesIn(refMetrics), steps);

  std::map<std::string, std::vector<float>> trained = tensorsIn(weights);
  ASSERT_EQ(trained.size(), 2u);
  ASSERT_EQ(trained["table"].size(), size_t(kVocab * kVocab));
  const float *refTable = refSession->findVariable("table")->ref.f32();
  for (int64_t i = 0; i < kVocab * kVocab; ++i)
    EXPECT_NEAR(trained["table"][i], refTable[i],
                1e-5 * (1 + std::abs(refTable[i])))
        << i;
  // extra has no gradient: it keeps its initial draw.
  ASSERT_EQ(trained["extra"].size(), 3u);
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(trained["extra"][i],
              float(rng::normalAt(3, 11, fb::kInitRngStep, i) * 0.1))
        << i;
  EXPECT_EQ(tensorsIn(again), trained);
}

TEST(DsrunRanks, WrongWorldSizeStopsEveryRankWithoutAHang) {
  const int n = world().size();
  std::string tag = std::to_string(world().rank());
  std::string plan =
      writePlan(bigramPlan(n + 1, kRows), "ws" + tag + ".dsplan");
  auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(dsrun({plan, "--steps", "2"}), 2);
  if (n > 1) {
    EXPECT_EQ(dsrun({plan, "--steps", "2", "--np", std::to_string(n + 1)}), 2);
  }
  EXPECT_LT(seconds(start), 30.0);
  std::string error;
  ASSERT_TRUE(world().barrier(error)) << error;
}

TEST(DsrunRanks, OneRankWithBadInputStopsTheOthers) {
  if (world().size() < 2)
    GTEST_SKIP() << "needs two or more ranks";
  std::string tag = std::to_string(world().rank());
  std::string plan =
      writePlan(bigramPlan(world().size(), kRows), "bad" + tag + ".dsplan");
  // Only the last rank's data file is missing.
  std::string data = tempPath("tokens" + tag + ".bin");
  std::vector<uint16_t> tokens(64);
  for (size_t i = 0; i < tokens.size(); ++i)
    tokens[i] = uint16_t(i % kVocab);
  std::FILE *f = std::fopen(data.c_str(), "wb");
  ASSERT_TRUE(f);
  std::fwrite(tokens.data(), 2, tokens.size(), f);
  std::fclose(f);
  if (world().rank() + 1 == world().size())
    std::remove(data.c_str());
  auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(dsrun({plan, "--steps", "2", "--data", data}), 2);
  EXPECT_LT(seconds(start), 30.0);
  std::string error;
  ASSERT_TRUE(world().barrier(error)) << error;
}

} // namespace
