//===- ShardedVariablesTest.cpp - ZeRO-3 variables: shards, init, read and write
//---===//

#include "test/unit/plan/PlanTestSupport.h"

using namespace dsc;
using namespace dsc::plantest;

namespace {

//===----------------------------------------------------------------------===//
// Sharded variables (ZeRO stage 3): two ranks in one process
//===----------------------------------------------------------------------===//

/// Two ranks in one process, one thread each, meeting in `Shared`:
/// broadcast (what Session::readVariable uses) and barrier. The other
/// collectives fail. No timeout: a rank that never comes hangs the test.
class TwoRankComm final : public rt::Communicator {
public:
  struct Shared {
    std::mutex mutex;
    std::condition_variable cv;
    int arrived = 0;
    uint64_t generation = 0;
    void *data[2] = {};
  };

  TwoRankComm(Shared &shared, int rank) : shared_(shared), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return 2; }
  const char *kind() const override { return "test"; }

  bool barrier(std::string &error) override {
    if (!begin("barrier", error))
      return false;
    meet();
    return true;
  }

protected:
  bool doBroadcast(void *data, size_t count, rt::DType dtype, int root, void *,
                   std::string &error) override {
    if (!begin("broadcast", error, data, data, count, root, dtype))
      return false;
    shared_.data[rank_] = data;
    meet();
    if (rank_ != root)
      std::memcpy(data, shared_.data[root], count * rt::dtypeSize(dtype));
    meet(); // the root's data stays put until the other rank has copied it
    return true;
  }
  bool doAllReduceSum(const void *, void *, size_t, rt::DType, void *,
                      std::string &error) override {
    return unsupported("all_reduce", error);
  }
  bool doReduceScatterSum(const void *, void *, size_t, rt::DType, void *,
                          std::string &error) override {
    return unsupported("reduce_scatter", error);
  }
  std::unique_ptr<rt::Communicator> doSplit(int, int,
                                            std::string &error) override {
    unsupported("split", error);
    return nullptr;
  }
  bool doAllGather(const void *, void *, size_t, rt::DType, void *,
                   std::string &error) override {
    return unsupported("all_gather", error);
  }
  bool doAllToAll(const void *, void *, size_t, rt::DType, void *,
                  std::string &error) override {
    return unsupported("all_to_all", error);
  }

private:
  bool unsupported(const char *name, std::string &error) {
    error = std::string(name) + ": not in this test";
    return false;
  }
  /// Returns once both ranks have called it.
  void meet() {
    std::unique_lock<std::mutex> lock(shared_.mutex);
    uint64_t generation = shared_.generation;
    if (++shared_.arrived == 2) {
      shared_.arrived = 0;
      ++shared_.generation;
      shared_.cv.notify_all();
    } else {
      shared_.cv.wait(lock, [&] { return shared_.generation != generation; });
    }
  }

  Shared &shared_;
  int rank_;
};

/// shardedPlan's parameters, each whole in its own buffer, on one rank.
PlanSpec wholePlan() {
  PlanSpec p;
  uint32_t params = p.arena(fb::Space::device, fb::Category::params, 28);
  uint32_t a = p.buffer(params, 0, {3}, "a");
  uint32_t b = p.buffer(params, 12, {2, 2}, "b");
  p.variables.push_back(
      {"a", fb::VarKind::param, "", a, fb::InitKind::normal, 0.5, 21});
  p.variables.push_back(
      {"b", fb::VarKind::param, "", b, fb::InitKind::normal, 1.0, 22});
  p.programs.push_back({"micro_step", {}});
  p.programs.push_back({"apply", {}});
  return p;
}

/// shardedPlan(2, 5) on both ranks of one TwoRankComm.
struct TwoRanks {
  TwoRankComm::Shared shared;
  TwoRankComm comm[2] = {{shared, 0}, {shared, 1}};
  std::unique_ptr<LoadedPlan> plan;
  std::unique_ptr<Session> session[2];

  explicit TwoRanks(const PlanSpec &spec, uint64_t seed = 5) {
    std::string error;
    plan = load(spec, error);
    EXPECT_TRUE(plan) << error;
    for (int r = 0; plan && r < 2; ++r) {
      SessionOptions options;
      options.seed = seed;
      options.rank = r;
      options.worldSize = 2;
      options.comm = &comm[r];
      session[r] = Session::create(*plan, options, error);
      EXPECT_TRUE(session[r]) << error;
    }
  }
  /// Both shards, one after the other: the group's flat layout.
  std::vector<float> group() const {
    std::vector<float> out;
    for (int r = 0; r < 2; ++r) {
      std::vector<float> shard = floats(session[r]->variables()[0].ref);
      out.insert(out.end(), shard.begin(), shard.end());
    }
    return out;
  }
  /// readVariable on both ranks at once (it is a collective): what each
  /// rank got for every variable, in plan order.
  std::vector<std::vector<float>> readAll(int rank) {
    std::vector<std::vector<float>> got[2];
    auto read = [&](int r) {
      std::string error;
      for (const rt::NamedTensor &v : session[r]->variables()) {
        std::vector<float> whole(size_t(v.numel()), -1.0f);
        EXPECT_TRUE(session[r]->readVariable(v, whole.data(), error)) << error;
        got[r].push_back(whole);
      }
    };
    std::thread other(read, 1);
    read(0);
    other.join();
    EXPECT_EQ(got[0], got[1]);
    return got[rank];
  }
};

/// Every variable of `session`, whole, in plan order.
std::vector<std::vector<float>> wholeVariables(Session &session) {
  std::vector<std::vector<float>> out;
  for (const rt::NamedTensor &v : session.variables())
    out.push_back(floats(v.ref));
  return out;
}

TEST(ShardedVariables, ShapesAndShards) {
  TwoRanks ranks(shardedPlan(2, 5));
  ASSERT_TRUE(ranks.session[1]);
  for (int r = 0; r < 2; ++r) {
    const rt::NamedTensor *a = ranks.session[r]->findVariable("a");
    const rt::NamedTensor *b = ranks.session[r]->findVariable("b");
    ASSERT_TRUE(a && b);
    EXPECT_TRUE(a->sharded && b->sharded);
    EXPECT_EQ(a->shardOffset, 0);
    EXPECT_EQ(b->shardOffset, 3);
    EXPECT_EQ(a->shape, (std::vector<int64_t>{3}));
    EXPECT_EQ(b->shape, (std::vector<int64_t>{2, 2}));
    EXPECT_EQ(a->numel(), 3);
    EXPECT_EQ(b->numel(), 4);
    EXPECT_EQ(b->ref.numel(), 5); // the shard
    EXPECT_EQ(a->ref.data, b->ref.data);
  }
}

TEST(ShardedVariables, InitDrawsTheWholeVariablesValues) {
  std::string error;
  auto wholeLoaded = load(wholePlan(), error);
  ASSERT_TRUE(wholeLoaded) << error;
  SessionOptions options;
  options.seed = 5;
  auto whole = Session::create(*wholeLoaded, options, error);
  ASSERT_TRUE(whole) << error;
  whole->initVariables();
  std::vector<std::vector<float>> want = wholeVariables(*whole);
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(want[0][i],
              float(rng::normalAt(5, 21, fb::kInitRngStep, i) * 0.5));

  TwoRanks ranks(shardedPlan(2, 5));
  ASSERT_TRUE(ranks.session[1]);
  // Padding and other members' elements are left alone: fill the shards
  // first to see it.
  for (int r = 0; r < 2; ++r)
    setFloats(ranks.session[r]->variables()[0], std::vector<float>(5, 99));
  for (int r = 0; r < 2; ++r)
    ranks.session[r]->initVariables();
  std::vector<float> group = ranks.group();
  std::vector<float> expected = want[0];
  expected.insert(expected.end(), want[1].begin(), want[1].end());
  expected.insert(expected.end(), {99, 99, 99});
  EXPECT_EQ(group, expected);
  EXPECT_EQ(ranks.readAll(0), want);

  // One rank holding the whole group draws the same weights.
  auto oneLoaded = load(shardedPlan(1, 7), error);
  ASSERT_TRUE(oneLoaded) << error;
  auto one = Session::create(*oneLoaded, options, error);
  ASSERT_TRUE(one) << error;
  one->initVariables();
  expected.resize(7);
  EXPECT_EQ(floats(one->variables()[0].ref), expected);
  for (size_t i = 0; i < 2; ++i) {
    std::vector<float> got(want[i].size());
    ASSERT_TRUE(one->readVariable(one->variables()[i], got.data(), error))
        << error;
    EXPECT_EQ(got, want[i]);
  }
}

TEST(ShardedVariables, OnesAndZerosTouchOnlyTheirElements) {
  PlanSpec p = shardedPlan(2, 5);
  p.variables[0].init = fb::InitKind::ones;
  p.variables[1].init = fb::InitKind::zeros;
  TwoRanks ranks(p);
  ASSERT_TRUE(ranks.session[1]);
  for (int r = 0; r < 2; ++r) {
    setFloats(ranks.session[r]->variables()[0], std::vector<float>(5, 99));
    ranks.session[r]->initVariables();
  }
  EXPECT_EQ(ranks.group(),
            (std::vector<float>{1, 1, 1, 0, 0, 0, 0, 99, 99, 99}));
}

TEST(ShardedVariables, WriteTakesThisRanksPartAndReadGathers) {
  TwoRanks ranks(shardedPlan(2, 5));
  ASSERT_TRUE(ranks.session[1]);
  const std::vector<float> a = {10, 11, 12}, b = {20, 21, 22, 23};
  for (int r = 0; r < 2; ++r)
    ranks.session[r]->writeVariable(*ranks.session[r]->findVariable("a"),
                                    a.data());
  EXPECT_EQ(ranks.group(), (std::vector<float>{10, 11, 12, 0, 0, 0, 0, 0, 0,
                                               0})); // rank 1 holds no a
  for (int r = 0; r < 2; ++r)
    ranks.session[r]->writeVariable(*ranks.session[r]->findVariable("b"),
                                    b.data());
  EXPECT_EQ(ranks.group(),
            (std::vector<float>{10, 11, 12, 20, 21, 22, 23, 0, 0, 0}));
  for (int r = 0; r < 2; ++r)
    EXPECT_EQ(ranks.readAll(r), (std::vector<std::vector<float>>{a, b}));
}

TEST(ShardedVariables, ReadFailsOnAFailedCollective) {
  std::string error;
  auto plan = load(shardedPlan(2, 5), error);
  ASSERT_TRUE(plan) << error;
  // No communicator: the Session's own has one rank, so no rank 1 to
  // broadcast from.
  SessionOptions options;
  options.worldSize = 2;
  auto session = Session::create(*plan, options, error);
  ASSERT_TRUE(session) << error;
  std::vector<float> out(4);
  EXPECT_FALSE(
      session->readVariable(*session->findVariable("b"), out.data(), error));
  EXPECT_EQ(error, "reading variable 'b': rank 0: broadcast #2: root 1 is "
                   "outside world size 1");
}

//===----------------------------------------------------------------------===//
// Tensor-parallel parts (phase shard): each rank holds part t of a cut
// dimension, of each of its blocks
//===----------------------------------------------------------------------===//

/// "w" [4, 3] cut along dimension 0 in 2 blocks over 2 ranks: a rank holds
/// rows {t, 2 + t} (its half of each block), as GPT-2's c_attn is cut.
PlanSpec tensorSplitPlan() {
  PlanSpec p;
  p.worldSize = 2;
  p.tensorParallel = 2;
  uint32_t params = p.arena(fb::Space::device, fb::Category::params, 6 * 4);
  uint32_t w = p.buffer(params, 0, {2, 3}, "w");
  PlanSpec::Variable v{
      "w", fb::VarKind::param, "", w, fb::InitKind::normal, 0.5, 21};
  v.shape = std::vector<int64_t>{4, 3};
  v.tensorSplitDim = 0;
  v.tensorSplitBlocks = 2;
  p.variables.push_back(v);
  p.programs.push_back({"micro_step", {}});
  p.programs.push_back({"apply", {}});
  return p;
}

TEST(TensorSplitVariables, PartsDrawTheWholeVariablesValuesAndGather) {
  TwoRanks ranks(tensorSplitPlan());
  ASSERT_TRUE(ranks.session[1]);
  std::vector<float> whole(12);
  for (int i = 0; i < 12; ++i)
    whole[size_t(i)] = float(rng::normalAt(5, 21, fb::kInitRngStep, i) * 0.5);
  for (int r = 0; r < 2; ++r) {
    const rt::NamedTensor &w = ranks.session[r]->variables()[0];
    EXPECT_EQ(w.shape, (std::vector<int64_t>{4, 3}));
    EXPECT_EQ(w.ref.numel(), 6);
    EXPECT_EQ(w.tpPart, r);
    ranks.session[r]->initVariables();
    // Rows r and 2 + r of the whole tensor.
    std::vector<float> want(whole.begin() + 3 * r, whole.begin() + 3 * r + 3);
    want.insert(want.end(), whole.begin() + 6 + 3 * r,
                whole.begin() + 9 + 3 * r);
    EXPECT_EQ(floats(w.ref), want) << "rank " << r;
  }
  EXPECT_EQ(ranks.readAll(0), std::vector<std::vector<float>>{whole});
  // Writing the whole tensor gives each rank its part back.
  std::vector<float> counted(12);
  for (int i = 0; i < 12; ++i)
    counted[size_t(i)] = float(i);
  for (int r = 0; r < 2; ++r)
    ranks.session[r]->writeVariable(ranks.session[r]->variables()[0],
                                    counted.data());
  EXPECT_EQ(floats(ranks.session[1]->variables()[0].ref),
            (std::vector<float>{3, 4, 5, 9, 10, 11}));
  EXPECT_EQ(ranks.readAll(1), std::vector<std::vector<float>>{counted});
}

TEST(TensorSplitVariables, BadPartsAreRefused) {
  PlanSpec p = tensorSplitPlan();
  p.tensorParallel = 3;
  EXPECT_EQ(loadError(p),
            "t.dsplan: tensor_parallel 3 does not divide world size 2");
  p = tensorSplitPlan();
  p.variables[0].shape = std::vector<int64_t>{6, 3};
  EXPECT_EQ(loadError(p),
            "t.dsplan: variable 0 ('w') of shape [6,3] cut along dimension 0 "
            "in 2 blocks over 2 ranks is not buffer 0 ('w') of shape [2,3]");
  p = tensorSplitPlan();
  p.variables[0].tensorSplitDim = 2;
  EXPECT_EQ(loadError(p), "t.dsplan: variable 0 ('w'): tensor_split_dim 2 "
                          "(2 blocks) does not fit shape [4,3] and buffer 0 "
                          "('w')");
}

} // namespace
