//===- PlanTest.cpp - plan loading, verification and Session tests ------===//
//
// Plans are built here with the generated FlatBuffers builder, so each test
// states exactly what the plan holds. Good plans run through a Session and
// their results are checked by hand; bad plans must give one exact error
// line (and never crash, whatever bytes are flipped).
//
//===----------------------------------------------------------------------===//

#include "runtime/backends/cpu/CpuKernels.h"
#include "runtime/comm/Communicator.h"
#include "runtime/exec/Session.h"
#include "runtime/plan/PlanFormat.h"
#include "runtime/reference/RefKernels.h"
#include "runtime/rng/Philox.h"
#include "test/unit/PlanSpec.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <fstream>
#include <mutex>
#include <thread>

using namespace dsc;
namespace fb = dsc::plan;
using rt::LoadedPlan;
using rt::Session;
using rt::SessionOptions;
using test::floatBytes;
using test::PlanSpec;

namespace {

// Buffer ids of basicPlan().
enum : uint32_t { kX, kY, kW, kWGrad, kH, kTwo, kRamp, kNumBasicBuffers };

/// micro_step: h = (x + y) * 2; w.grad += h. apply: w -= w.grad * ramp;
/// w.grad = 0. Every arena is exactly filled by its buffers.
PlanSpec basicPlan() {
  using S = fb::Space;
  using C = fb::Category;
  PlanSpec p;
  uint32_t in = p.arena(S::host, C::inputs, 32);
  uint32_t params = p.arena(S::device, C::params, 16);
  uint32_t grads = p.arena(S::device, C::grads, 16);
  uint32_t acts = p.arena(S::device, C::activations, 16);
  uint32_t consts = p.arena(S::host, C::constants, 20);
  p.buffer(in, 0, {2, 2}, "x");
  p.buffer(in, 16, {2, 2}, "y");
  p.buffer(params, 0, {2, 2}, "w");
  p.buffer(grads, 0, {2, 2}, "w.grad");
  p.buffer(acts, 0, {2, 2}, "h");
  p.buffer(consts, 0, {2, 2}, "two");
  p.buffer(consts, 16, {}, "ramp");
  p.variables.push_back({"w", fb::VarKind::param, "", kW, fb::InitKind::normal,
                         0.02, rng::streamForName("w")});
  p.variables.push_back(
      {"w.grad", fb::VarKind::grad, "w", kWGrad, fb::InitKind::zeros});
  p.constants.push_back({kTwo, floatBytes({2.0f})});
  p.constants.push_back({kRamp, floatBytes({0.5f})});
  p.programs.push_back({"micro_step",
                        {{"ds.add", {kX, kY}, {kH}},
                         {"ds.mul", {kH, kTwo}, {kH}},
                         {"ds.add", {kWGrad, kH}, {kWGrad}}},
                        {kX, kY},
                        {kH}});
  p.programs.back().instrs[0].loc = "test.py:1";
  p.programs.push_back({"apply",
                        {{"ds.mul", {kWGrad, kRamp}, {kH}},
                         {"ds.sub", {kW, kH}, {kW}},
                         {"ds.sub", {kWGrad, kWGrad}, {kWGrad}}},
                        {},
                        {kW}});
  return p;
}

// Test-only kernels on top of the CPU backend's table.
bool failKernel(const rt::KernelArgs &, std::string &error) {
  error = "test.fail: asked to fail";
  return false;
}
bool slowCopyKernel(const rt::KernelArgs &args, std::string &error) {
  // Slow enough that a missing event shows as a wrong answer.
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  const rt::TensorRef &x = args.inputs[0], &out = args.outputs[0];
  std::memcpy(out.data, x.data, size_t(x.numel()) * 4);
  return true;
}
const rt::KernelInfo kTestKernels[] = {
    {"test.fail", 1, 1, 0, 0, failKernel},
    {"test.slow_copy", 1, 1, 0, 0, slowCopyKernel},
};
// The CPU backend with the test kernels added to its table.
class TestBackend : public rt::CpuBackend {
public:
  const rt::KernelInfo *findKernel(std::string_view name) const override {
    for (const rt::KernelInfo &k : kTestKernels)
      if (k.name == name)
        return &k;
    return rt::CpuBackend::findKernel(name);
  }
};
TestBackend testBackend;

std::unique_ptr<LoadedPlan> load(const PlanSpec &spec, std::string &error) {
  return LoadedPlan::fromBytes(spec.build(), "t.dsplan", error, testBackend);
}

/// The error line for a plan that must not load.
std::string loadError(const PlanSpec &spec) {
  std::string error;
  auto plan = load(spec, error);
  EXPECT_EQ(plan, nullptr);
  return error;
}

void setFloats(const rt::NamedTensor &t, std::vector<float> values) {
  ASSERT_EQ(int64_t(values.size()), t.ref.numel()) << t.name;
  std::memcpy(t.ref.data, values.data(), values.size() * 4);
}
std::vector<float> floats(const rt::TensorRef &t) {
  return std::vector<float>(t.f32(), t.f32() + t.numel());
}

//===----------------------------------------------------------------------===//
// Good plans
//===----------------------------------------------------------------------===//

TEST(PlanFormat, NamesAndSizes) {
  EXPECT_STREQ(fb::categoryName(fb::Category::optimizer_state),
               "optimizer_state");
  EXPECT_STREQ(fb::spaceName(fb::Space::host), "host");
  EXPECT_STREQ(fb::streamName(fb::Stream::d2h), "d2h");
  EXPECT_STREQ(fb::dtypeName(fb::DType::bf16), "bf16");
  EXPECT_STREQ(fb::categoryName(fb::Category(42)), "?");
  EXPECT_EQ(fb::dtypeSize(fb::DType::i64), 8u);
  EXPECT_EQ(fb::dtypeSize(fb::DType::f16), 2u);
  EXPECT_EQ(fb::parseCategory("activations"), fb::Category::activations);
  EXPECT_EQ(fb::parseStream("comm"), fb::Stream::comm);
  EXPECT_EQ(fb::parseDType("f8"), std::nullopt);
}

TEST(Session, RunsMicroStepAndApply) {
  std::string error;
  auto plan = load(basicPlan(), error);
  ASSERT_TRUE(plan) << error;
  SessionOptions options;
  options.seed = 7;
  auto session = Session::create(*plan, options, error);
  ASSERT_TRUE(session) << error;
  session->initVariables();

  ASSERT_EQ(session->variables().size(), 2u);
  EXPECT_EQ(session->variables()[0].name, "w");
  EXPECT_EQ(session->variables()[1].name, "w.grad");
  EXPECT_EQ(session->findVariable("nope"), nullptr);
  rt::NamedTensor *w = session->findVariable("w");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->shape, (std::vector<int64_t>{2, 2}));
  std::vector<float> w0 = floats(w->ref);
  EXPECT_FALSE(w->sharded);
  EXPECT_EQ(w->numel(), 4);
  std::vector<float> read(4);
  ASSERT_TRUE(session->readVariable(*w, read.data(), error)) << error;
  EXPECT_EQ(read, w0);

  // The float64 interpreter draws the same initial weights.
  auto ref = ref::init(ref::InitKind::Normal, {2, 2}, 7,
                       rng::streamForName("w"), 0.0, 0.02);
  ASSERT_TRUE(ref.ok()) << ref.error;
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(w0[i], float(ref.value.data[i])) << i;

  auto inputs = session->programInputs("micro_step");
  ASSERT_EQ(inputs.size(), 2u);
  EXPECT_EQ(inputs[0].name, "x");
  EXPECT_EQ(inputs[1].name, "y");
  setFloats(inputs[0], {1, 2, 3, 4});
  setFloats(inputs[1], {10, 20, 30, 40});
  for (int micro = 0; micro < 2; ++micro)
    ASSERT_TRUE(session->run("micro_step", 0, error)) << error;
  auto outputs = session->programOutputs("micro_step");
  ASSERT_EQ(outputs.size(), 1u);
  EXPECT_EQ(outputs[0].name, "h");
  EXPECT_EQ(floats(outputs[0].ref), (std::vector<float>{22, 44, 66, 88}));
  EXPECT_EQ(floats(session->findVariable("w.grad")->ref),
            (std::vector<float>{44, 88, 132, 176}));

  ASSERT_TRUE(session->run("apply", 1, error)) << error;
  std::vector<float> w1 = floats(w->ref);
  const float grad[] = {44, 88, 132, 176};
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(w1[i], w0[i] - grad[i] * 0.5f) << i;
  EXPECT_EQ(floats(session->findVariable("w.grad")->ref),
            (std::vector<float>{0, 0, 0, 0}));

  EXPECT_TRUE(session->hasProgram("apply"));
  EXPECT_FALSE(session->hasProgram("init"));
  EXPECT_FALSE(session->run("init", 0, error));
  EXPECT_EQ(error, "t.dsplan: no program 'init'");
  EXPECT_TRUE(session->programInputs("init").empty());
}

// Tooling moves data in and out through the Session's staged calls, which
// check the size; the base versions copy host memory, as the CPU backend's.
TEST(Session, StagedTensorAccess) {
  std::string error;
  auto plan = load(basicPlan(), error);
  ASSERT_TRUE(plan) << error;
  auto session = Session::create(*plan, {}, error);
  ASSERT_TRUE(session) << error;
  session->initVariables();
  auto inputs = session->programInputs("micro_step");
  ASSERT_EQ(inputs.size(), 2u);
  const float x[] = {1, 2, 3, 4}, y[] = {10, 20, 30, 40};
  ASSERT_TRUE(session->writeTensor(inputs[0], x, sizeof(x), error)) << error;
  ASSERT_TRUE(session->writeTensor(inputs[1], y, sizeof(y), error)) << error;
  ASSERT_TRUE(session->run("micro_step", 0, error)) << error;
  float h[4] = {};
  auto outputs = session->programOutputs("micro_step");
  ASSERT_TRUE(session->readTensor(outputs[0], h, sizeof(h), error)) << error;
  EXPECT_EQ(std::vector<float>(h, h + 4), (std::vector<float>{22, 44, 66, 88}));

  EXPECT_FALSE(session->writeTensor(inputs[0], x, 8, error));
  EXPECT_EQ(error, "cannot write 'x': 8 bytes given, it holds 16");
  EXPECT_FALSE(session->readTensor(outputs[0], h, 20, error));
  EXPECT_EQ(error, "cannot read 'h': 20 bytes given, it holds 16");
}

TEST(Session, LoadsFromFile) {
  std::string path = testing::TempDir() + "plan_test_load.dsplan";
  std::vector<uint8_t> bytes = basicPlan().build();
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char *>(bytes.data()), bytes.size());
  std::string error;
  auto plan = LoadedPlan::load(path, error, testBackend);
  ASSERT_TRUE(plan) << error;
  EXPECT_EQ(plan->name(), path);
  EXPECT_EQ(plan->bytes(), bytes);
  EXPECT_EQ(plan->plan().world_size(), 1u);
  std::remove(path.c_str());
}

TEST(Session, InitializersByDType) {
  PlanSpec p = basicPlan();
  uint32_t arena = p.arena(fb::Space::host, fb::Category::params, 64);
  uint32_t h16 = p.buffer(arena, 0, {8}, "h16", fb::DType::f16);
  uint32_t b16 = p.buffer(arena, 16, {8}, "b16", fb::DType::bf16);
  uint32_t one = p.buffer(arena, 32, {2}, "one", fb::DType::f64);
  uint32_t cnt = p.buffer(arena, 48, {4}, "count", fb::DType::i32);
  p.variables.push_back(
      {"h16", fb::VarKind::param, "", h16, fb::InitKind::normal, 1.0, 11});
  p.variables.push_back(
      {"b16", fb::VarKind::param, "", b16, fb::InitKind::normal, 1.0, 12});
  p.variables.push_back(
      {"one", fb::VarKind::opt_state, "w", one, fb::InitKind::ones});
  p.variables.push_back(
      {"count", fb::VarKind::opt_state, "w", cnt, fb::InitKind::ones});
  std::string error;
  auto plan = load(p, error);
  ASSERT_TRUE(plan) << error;
  auto session = Session::create(*plan, {}, error);
  ASSERT_TRUE(session) << error;
  session->initVariables();

  auto half = [](uint16_t h) { // IEEE binary16 to float
    int exp = (h >> 10) & 31, mant = h & 1023;
    float mag = exp ? std::ldexp(float(1024 + mant), exp - 25)
                    : std::ldexp(float(mant), -24);
    return h & 0x8000 ? -mag : mag;
  };
  auto bf16 = [](uint16_t h) {
    uint32_t x = uint32_t(h) << 16;
    float f;
    std::memcpy(&f, &x, 4);
    return f;
  };
  auto *hv = static_cast<uint16_t *>(session->findVariable("h16")->ref.data);
  auto *bv = static_cast<uint16_t *>(session->findVariable("b16")->ref.data);
  for (int i = 0; i < 8; ++i) {
    float want16 = float(rng::normalAt(1337, 11, fb::kInitRngStep, i));
    float wantb = float(rng::normalAt(1337, 12, fb::kInitRngStep, i));
    // Rounded to nearest: within half a unit in the last place.
    EXPECT_LE(std::fabs(half(hv[i]) - want16),
              std::ldexp(std::fabs(want16), -11))
        << i;
    EXPECT_LE(std::fabs(bf16(bv[i]) - wantb), std::ldexp(std::fabs(wantb), -8))
        << i;
  }
  auto *ones = static_cast<double *>(session->findVariable("one")->ref.data);
  EXPECT_EQ(ones[0], 1.0);
  EXPECT_EQ(ones[1], 1.0);
  EXPECT_EQ(session->findVariable("count")->ref.i32()[3], 1);
  std::vector<float> out(8);
  EXPECT_FALSE(
      session->readVariable(*session->findVariable("h16"), out.data(), error));
  EXPECT_EQ(error, "variable 'h16' is f16; only f32 variables can be read");
}

TEST(Session, ConstantsSplatOrCopy) {
  PlanSpec p = basicPlan();
  p.arenas[4].bytes = 32;
  p.buffers[kRamp].shape = {2, 2};
  p.constants[1].data = floatBytes({1, 2, 3, 4});
  std::string error;
  auto plan = load(p, error);
  ASSERT_TRUE(plan) << error;
  auto session = Session::create(*plan, {}, error);
  ASSERT_TRUE(session) << error;
  session->initVariables();
  rt::NamedTensor *grad = session->findVariable("w.grad");
  setFloats(*grad, {8, 8, 8, 8});
  ASSERT_TRUE(session->run("apply", 1, error)) << error;
  // h = w.grad * ramp shows the constant; two = 2 was a splat.
  EXPECT_EQ(floats(session->programOutputs("micro_step")[0].ref),
            (std::vector<float>{8, 16, 24, 32}));
  auto inputs = session->programInputs("micro_step");
  setFloats(inputs[0], {0, 0, 0, 0});
  setFloats(inputs[1], {1, 1, 1, 1});
  ASSERT_TRUE(session->run("micro_step", 0, error)) << error;
  EXPECT_EQ(floats(session->programOutputs("micro_step")[0].ref),
            (std::vector<float>{2, 2, 2, 2}));
}

/// x on the comm stream is slowly copied to b, compute doubles it into out,
/// d2h slowly copies out to c; events order the three streams.
PlanSpec threeStreamPlan() {
  PlanSpec p;
  uint32_t in = p.arena(fb::Space::host, fb::Category::inputs, 4096);
  uint32_t acts = p.arena(fb::Space::device, fb::Category::activations, 8192);
  uint32_t out = p.arena(fb::Space::host, fb::Category::activations, 4096);
  uint32_t x = p.buffer(in, 0, {1024}, "x");
  uint32_t b = p.buffer(acts, 0, {1024}, "b");
  uint32_t o = p.buffer(acts, 4096, {1024}, "out");
  uint32_t c = p.buffer(out, 0, {1024}, "c");
  p.programs.push_back(
      {"micro_step",
       {{"test.slow_copy", {x}, {b}, fb::Stream::comm, {}, {0}},
        {"ds.add", {b, b}, {o}, fb::Stream::compute, {0}, {1}},
        {"test.slow_copy", {o}, {c}, fb::Stream::d2h, {1}, {}}},
       {x},
       {c},
       2});
  p.programs.push_back({"apply", {}});
  return p;
}

TEST(Session, EventsOrderStreams) {
  std::string error;
  auto plan = load(threeStreamPlan(), error);
  ASSERT_TRUE(plan) << error;
  auto session = Session::create(*plan, {}, error);
  ASSERT_TRUE(session) << error;
  session->setTracing(true);
  rt::NamedTensor x = session->programInputs("micro_step")[0];
  rt::NamedTensor c = session->programOutputs("micro_step")[0];
  for (int run = 1; run <= 10; ++run) {
    std::vector<float> values(1024);
    for (int i = 0; i < 1024; ++i)
      values[i] = float(run * 1000 + i);
    setFloats(x, values);
    ASSERT_TRUE(session->run("micro_step", 0, error)) << error;
    for (int i = 0; i < 1024; ++i)
      ASSERT_EQ(c.ref.f32()[i], 2 * values[i]) << "run " << run << " " << i;
  }
  ASSERT_TRUE(session->run("apply", 0, error)) << error; // no instructions

  std::vector<rt::TraceRecord> trace = session->takeTrace();
  ASSERT_EQ(trace.size(), 30u);
  for (size_t i = 0; i < trace.size(); i += 3) {
    EXPECT_EQ(trace[i].stream, "comm");
    EXPECT_EQ(trace[i + 1].stream, "compute");
    EXPECT_EQ(trace[i + 1].kernel, "ds.add");
    EXPECT_EQ(trace[i + 2].stream, "d2h");
    EXPECT_EQ(trace[i + 2].program, "micro_step");
    EXPECT_GE(trace[i + 1].beginNs, trace[i].endNs);
    EXPECT_GE(trace[i + 2].beginNs, trace[i + 1].endNs);
  }
  EXPECT_TRUE(session->takeTrace().empty());
}

TEST(Session, EventChainAcrossAllStreams) {
  // v += 1, 200 times, hopping between the four streams; each step waits for
  // the previous one, so any lost or early event shows in the sum.
  PlanSpec p;
  uint32_t arena = p.arena(fb::Space::host, fb::Category::activations, 8);
  uint32_t v = p.buffer(arena, 0, {}, "v");
  uint32_t one = p.buffer(arena, 4, {}, "one");
  p.constants.push_back({one, floatBytes({1.0f})});
  PlanSpec::Program chain{"micro_step", {}, {}, {v}, 200};
  for (uint32_t k = 0; k < 200; ++k) {
    PlanSpec::Instr in{"ds.add", {v, one}, {v}, fb::Stream(k * 7 % 4)};
    if (k > 0)
      in.wait = {k - 1};
    in.record = {k};
    chain.instrs.push_back(in);
  }
  p.programs.push_back(chain);
  p.programs.push_back({"apply", {{"ds.sub", {v, v}, {v}}}});
  std::string error;
  auto plan = load(p, error);
  ASSERT_TRUE(plan) << error;
  auto session = Session::create(*plan, {}, error);
  ASSERT_TRUE(session) << error;
  const float *value = session->programOutputs("micro_step")[0].ref.f32();
  for (int run = 0; run < 20; ++run) {
    ASSERT_TRUE(session->run("micro_step", 0, error)) << error;
    ASSERT_EQ(*value, 200.0f) << "run " << run;
    ASSERT_TRUE(session->run("apply", 0, error)) << error;
    ASSERT_EQ(*value, 0.0f) << "run " << run;
  }
}

TEST(Session, KernelErrorStopsTheRun) {
  PlanSpec p = threeStreamPlan();
  // The failing instruction records the event the others wait on: they must
  // give up instead of waiting forever.
  p.programs[0].instrs[0] = {"test.fail", {0}, {1}, fb::Stream::comm, {}, {0}};
  p.programs[0].instrs[0].loc = "model.py:7";
  std::string error;
  auto plan = load(p, error);
  ASSERT_TRUE(plan) << error;
  auto session = Session::create(*plan, {}, error);
  ASSERT_TRUE(session) << error;
  setFloats(session->programInputs("micro_step")[0],
            std::vector<float>(1024, 1));
  for (int attempt = 0; attempt < 3; ++attempt) {
    EXPECT_FALSE(session->run("micro_step", 0, error));
    EXPECT_EQ(error, "t.dsplan: program 'micro_step' instruction 0 "
                     "(test.fail at model.py:7) failed: test.fail: asked to "
                     "fail");
  }
  // Nothing after the failure ran.
  EXPECT_EQ(floats(session->programOutputs("micro_step")[0].ref),
            std::vector<float>(1024, 0));
  EXPECT_TRUE(session->run("apply", 0, error)) << error;
}

TEST(Session, MeasuredHighWaterEqualsPredicted) {
  std::string error;
  auto plan = load(basicPlan(), error);
  ASSERT_TRUE(plan) << error;
  auto session = Session::create(*plan, {}, error);
  ASSERT_TRUE(session) << error;
  session->initVariables();
  // Before a run only resident state (constants, variables) counts.
  std::vector<rt::ArenaUsage> before = session->arenaUsage();
  ASSERT_EQ(before.size(), 5u);
  EXPECT_EQ(before[0].category, "inputs");
  EXPECT_EQ(before[0].writtenBytes, 0u);
  EXPECT_EQ(before[3].category, "activations");
  EXPECT_EQ(before[3].space, "device");
  EXPECT_EQ(before[3].writtenBytes, 0u);
  EXPECT_EQ(before[4].writtenBytes, 20u);

  ASSERT_TRUE(session->run("micro_step", 0, error)) << error;
  ASSERT_TRUE(session->run("apply", 1, error)) << error;
  for (const rt::ArenaUsage &u : session->arenaUsage())
    EXPECT_EQ(u.writtenBytes, u.predictedBytes) << u.category;
}

TEST(Session, MeasuredHighWaterShowsSlack) {
  PlanSpec p = basicPlan();
  p.arenas[3].bytes = 4096; // activations: 16 bytes used
  std::string error;
  auto plan = load(p, error);
  ASSERT_TRUE(plan) << error;
  auto session = Session::create(*plan, {}, error);
  ASSERT_TRUE(session) << error;
  ASSERT_TRUE(session->run("micro_step", 0, error)) << error;
  std::vector<rt::ArenaUsage> usage = session->arenaUsage();
  EXPECT_EQ(usage[3].predictedBytes, 4096u);
  EXPECT_EQ(usage[3].writtenBytes, 16u);
}

TEST(Session, DeviceMemoryBudget) {
  std::string error;
  auto plan = load(basicPlan(), error);
  ASSERT_TRUE(plan) << error;
  SessionOptions options;
  options.deviceMemory = 47;
  EXPECT_EQ(Session::create(*plan, options, error), nullptr);
  EXPECT_EQ(error, "t.dsplan needs 48 bytes of device memory (params 16 + "
                   "grads 16 + activations 16); --device-memory allows 47");
  options.deviceMemory = 48;
  EXPECT_NE(Session::create(*plan, options, error), nullptr) << error;
}

TEST(Session, WorldSizeMismatch) {
  PlanSpec p = basicPlan();
  p.worldSize = 2;
  std::string error;
  auto plan = load(p, error);
  ASSERT_TRUE(plan) << error;
  EXPECT_EQ(Session::create(*plan, {}, error), nullptr);
  EXPECT_EQ(error,
            "t.dsplan was compiled for world size 2; this run has 1 rank");
  SessionOptions options;
  options.worldSize = 3;
  EXPECT_EQ(Session::create(*plan, options, error), nullptr);
  EXPECT_EQ(error,
            "t.dsplan was compiled for world size 2; this run has 3 ranks");
  options.worldSize = 2;
  options.rank = 1;
  EXPECT_NE(Session::create(*plan, options, error), nullptr) << error;
}

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
    float *data[2] = {};
  };

  TwoRankComm(Shared &shared, int rank) : shared_(shared), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return 2; }
  const char *kind() const override { return "test"; }

  bool broadcast(float *data, size_t count, int root,
                 std::string &error) override {
    if (!begin("broadcast", error, data, data, count, root))
      return false;
    shared_.data[rank_] = data;
    meet();
    if (rank_ != root)
      std::memcpy(data, shared_.data[root], count * sizeof(float));
    meet(); // the root's data stays put until the other rank has copied it
    return true;
  }
  bool barrier(std::string &error) override {
    if (!begin("barrier", error))
      return false;
    meet();
    return true;
  }
  bool allReduceSum(const float *, float *, size_t,
                    std::string &error) override {
    return unsupported("all_reduce", error);
  }
  bool allReduceSum(const double *, double *, size_t,
                    std::string &error) override {
    return unsupported("all_reduce", error);
  }
  bool reduceScatterSum(const float *, float *, size_t,
                        std::string &error) override {
    return unsupported("reduce_scatter", error);
  }
  bool allGather(const float *, float *, size_t, std::string &error) override {
    return unsupported("all_gather", error);
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

/// Parameters a [3] and b [2, 2] (normal draws) in one group of `world`
/// shards of `s` elements: a at group offset 0, b at 3, the rest padding.
/// With 2 x 5, rank 0 holds a and b[0:2], rank 1 b[2:4] and 3 padding.
PlanSpec shardedPlan(uint32_t world, int64_t s) {
  PlanSpec p;
  p.worldSize = world;
  uint32_t params =
      p.arena(fb::Space::device, fb::Category::params, uint64_t(s) * 4);
  uint32_t shard = p.buffer(params, 0, {s}, "params.shard");
  p.variables.push_back({"a", fb::VarKind::param, "", shard,
                         fb::InitKind::normal, 0.5, 21, true, 0,
                         std::vector<int64_t>{3}});
  p.variables.push_back({"b", fb::VarKind::param, "", shard,
                         fb::InitKind::normal, 1.0, 22, true, 3,
                         std::vector<int64_t>{2, 2}});
  p.programs.push_back({"micro_step", {}});
  p.programs.push_back({"apply", {}});
  return p;
}

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
// Bad plans: one exact line each
//===----------------------------------------------------------------------===//

TEST(PlanVerifier, MissingFile) {
  std::string error;
  EXPECT_EQ(LoadedPlan::load("/nonexistent/plan.dsplan", error, testBackend),
            nullptr);
  EXPECT_EQ(error,
            "/nonexistent/plan.dsplan: cannot open: No such file or directory");
  EXPECT_EQ(LoadedPlan::load("/", error, testBackend), nullptr);
  EXPECT_EQ(error, "/: cannot read: not a regular file");
}

TEST(PlanVerifier, Truncated) {
  std::vector<uint8_t> bytes = basicPlan().build();
  size_t full = bytes.size();
  std::string error;
  for (size_t keep : {full - 1, full / 2, size_t(8)}) {
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + keep);
    EXPECT_EQ(LoadedPlan::fromBytes(cut, "t.dsplan", error, testBackend),
              nullptr);
    EXPECT_EQ(error, "t.dsplan: corrupt or truncated plan (" +
                         std::to_string(keep) +
                         " bytes; the FlatBuffers verifier rejects it)");
  }
  EXPECT_EQ(LoadedPlan::fromBytes({1, 2, 3}, "t.dsplan", error, testBackend),
            nullptr);
  EXPECT_EQ(error,
            "t.dsplan: not a dsc plan (3 bytes, too short for a plan header)");
}

TEST(PlanVerifier, WrongFileIdentifier) {
  std::vector<uint8_t> bytes = basicPlan().build();
  std::memcpy(&bytes[4], "NOPE", 4);
  std::string error;
  EXPECT_EQ(LoadedPlan::fromBytes(bytes, "t.dsplan", error, testBackend),
            nullptr);
  EXPECT_EQ(error, "t.dsplan: not a dsc plan (file identifier 'NOPE', expected "
                   "'DSPL')");
  bytes[5] = 0;
  LoadedPlan::fromBytes(bytes, "t.dsplan", error, testBackend);
  EXPECT_EQ(error, "t.dsplan: not a dsc plan (file identifier 'N\\x00PE', "
                   "expected 'DSPL')");
}

TEST(PlanVerifier, SchemaVersion) {
  PlanSpec p = basicPlan();
  p.schemaVersion = 7;
  EXPECT_EQ(loadError(p), "t.dsplan: schema version 7, this dsrun reads 2");
}

TEST(PlanVerifier, WorldSizeZero) {
  PlanSpec p = basicPlan();
  p.worldSize = 0;
  EXPECT_EQ(loadError(p),
            "t.dsplan: world size 0; a plan runs on at least 1 rank");
}

TEST(PlanVerifier, BufferOutsideArena) {
  PlanSpec p = basicPlan();
  p.buffers[kH].offset = 8;
  EXPECT_EQ(loadError(p), "t.dsplan: buffer 4 ('h') [offset 8, 16 bytes] lies "
                          "outside arena 3 (activations, 16 bytes)");
  p = basicPlan();
  p.buffers[kH].arena = 9;
  EXPECT_EQ(loadError(p),
            "t.dsplan: buffer 4 ('h') is in arena 9; the plan has 5 arenas");
  p = basicPlan();
  p.buffers[kH].offset = 2;
  p.arenas[3].bytes = 32;
  EXPECT_EQ(loadError(p), "t.dsplan: buffer 4 ('h') at offset 2 is not "
                          "aligned to its f32 elements");
}

TEST(PlanVerifier, BufferShapes) {
  PlanSpec p = basicPlan();
  p.buffers[kH].shape = {2, -2};
  EXPECT_EQ(
      loadError(p),
      "t.dsplan: buffer 4 ('h') has a negative dimension in shape [2,-2]");
  p.buffers[kH].shape = {int64_t(1) << 40, int64_t(1) << 40};
  EXPECT_EQ(loadError(p), "t.dsplan: buffer 4 ('h') of shape "
                          "[1099511627776,1099511627776] is larger than the "
                          "limit 72057594037927936 bytes");
  p.buffers[kH].shape = {2, 2};
  p.buffers[kH].dtype = fb::DType(42);
  EXPECT_EQ(loadError(p), "t.dsplan: buffer 4 ('h') has unknown dtype 42");
}

TEST(PlanVerifier, BufferIdOutOfRange) {
  PlanSpec p = basicPlan();
  p.program("micro_step").instrs[1].inputs[1] = 99;
  EXPECT_EQ(loadError(p), "t.dsplan: program 'micro_step' instruction 1 "
                          "(ds.mul) input 1 is buffer 99; the plan has 7 "
                          "buffers");
  p = basicPlan();
  p.variables[1].buffer = 7;
  EXPECT_EQ(loadError(p), "t.dsplan: variable 1 ('w.grad') is buffer 7; the "
                          "plan has 7 buffers");
  p = basicPlan();
  p.program("apply").outputs = {12};
  EXPECT_EQ(loadError(p), "t.dsplan: program 'apply' output 0 is buffer 12; "
                          "the plan has 7 buffers");
}

TEST(PlanVerifier, UnknownKernel) {
  PlanSpec p = basicPlan();
  p.program("micro_step").instrs[1].kernel = "ds.foo";
  EXPECT_EQ(loadError(p), "t.dsplan: program 'micro_step' instruction 1 uses "
                          "unknown kernel 'ds.foo'");
  // Only the test table knows test.fail; the CPU backend's does not.
  p.program("micro_step").instrs[1].kernel = "test.fail";
  p.program("micro_step").instrs[1].inputs = {kH};
  std::string error;
  EXPECT_EQ(LoadedPlan::fromBytes(p.build(), "t.dsplan", error, test::cpuBackend()),
            nullptr);
  EXPECT_EQ(error, "t.dsplan: program 'micro_step' instruction 1 uses unknown "
                   "kernel 'test.fail'");
}

TEST(PlanVerifier, WrongArity) {
  PlanSpec p = basicPlan();
  p.program("micro_step").instrs[0].inputs = {kX, kY, kH};
  EXPECT_EQ(loadError(p), "t.dsplan: program 'micro_step' instruction 0 "
                          "(ds.add) has 3 inputs, the kernel takes 2");
  p = basicPlan();
  p.program("apply").instrs[2].outputs = {};
  EXPECT_EQ(loadError(p), "t.dsplan: program 'apply' instruction 2 (ds.sub) "
                          "has 0 outputs, the kernel takes 1");
  p = basicPlan();
  p.program("apply").instrs[2].floats = {1.0};
  EXPECT_EQ(loadError(p), "t.dsplan: program 'apply' instruction 2 (ds.sub) "
                          "has 1 float attribute, the kernel takes 0");
}

TEST(PlanVerifier, Events) {
  PlanSpec p = basicPlan();
  p.program("micro_step").numEvents = 1;
  p.program("micro_step").instrs[1].wait = {0};
  EXPECT_EQ(loadError(p), "t.dsplan: program 'micro_step' instruction 1 "
                          "(ds.mul) waits on event 0, which no earlier "
                          "instruction records");
  // Recorded, but only after the wait.
  p.program("micro_step").instrs[2].record = {0};
  EXPECT_EQ(loadError(p), "t.dsplan: program 'micro_step' instruction 1 "
                          "(ds.mul) waits on event 0, which no earlier "
                          "instruction records");
  p.program("micro_step").instrs[0].record = {0};
  EXPECT_EQ(loadError(p), "t.dsplan: program 'micro_step' instruction 2 "
                          "(ds.add) records event 0 again (instruction 0 "
                          "records it); an event is recorded once per run");
  p.program("micro_step").instrs[2].record = {};
  std::string error;
  EXPECT_NE(load(p, error), nullptr) << error;
  p.program("micro_step").instrs[1].wait = {3};
  EXPECT_EQ(loadError(p), "t.dsplan: program 'micro_step' instruction 1 "
                          "(ds.mul) waits on event 3; the program has 1 "
                          "event");
}

TEST(PlanVerifier, CrossStreamHazards) {
  // h is written on compute and read on comm with nothing between them.
  PlanSpec p = basicPlan();
  p.program("micro_step").instrs[1].stream = fb::Stream::comm;
  EXPECT_EQ(loadError(p), "t.dsplan: program 'micro_step' instruction 0 "
                          "(ds.add on compute) writes buffer 4 ('h') and "
                          "instruction 1 (ds.mul on comm) reads buffer 4 "
                          "('h') with no event ordering them");
  // An event orders the write before the read, but instruction 2 (compute)
  // reads h while instruction 1 (comm) may still be writing it.
  p.program("micro_step").numEvents = 1;
  p.program("micro_step").instrs[0].record = {0};
  p.program("micro_step").instrs[1].wait = {0};
  EXPECT_EQ(loadError(p), "t.dsplan: program 'micro_step' instruction 1 "
                          "(ds.mul on comm) writes buffer 4 ('h') and "
                          "instruction 2 (ds.add on compute) reads buffer 4 "
                          "('h') with no event ordering them");
  p.program("micro_step").numEvents = 2;
  p.program("micro_step").instrs[1].record = {1};
  p.program("micro_step").instrs[2].wait = {1};
  std::string error;
  EXPECT_NE(load(p, error), nullptr) << error;

  // Reads on two streams need no event; a write through an overlapping
  // view (an alias of x's second half) does.
  p = basicPlan();
  uint32_t tail = p.buffer(0, 8, {2}, "x.tail");
  p.program("apply").instrs = {{"ds.copy", {kX}, {kH}, fb::Stream::h2d},
                               {"ds.add", {kX, kY}, {kWGrad}}};
  EXPECT_NE(load(p, error), nullptr) << error;
  p.program("apply").instrs[1] = {"ds.add", {tail, tail}, {tail}};
  EXPECT_EQ(loadError(p), "t.dsplan: program 'apply' instruction 0 (ds.copy "
                          "on h2d) reads buffer 0 ('x') and instruction 1 "
                          "(ds.add on compute) writes buffer 7 ('x.tail') "
                          "with no event ordering them");
}

TEST(PlanVerifier, ProgramsAndVariables) {
  PlanSpec p = basicPlan();
  p.programs.pop_back();
  EXPECT_EQ(loadError(p), "t.dsplan: the plan has no program 'apply' (dsrun "
                          "runs micro_step and apply)");
  p = basicPlan();
  p.programs[1].name = "micro_step";
  EXPECT_EQ(loadError(p), "t.dsplan: program 'micro_step' is declared twice");
  p = basicPlan();
  p.variables[1].name = "w";
  EXPECT_EQ(loadError(p), "t.dsplan: variable 1 ('w') is declared twice");
  p = basicPlan();
  p.variables[0].std = -1;
  EXPECT_EQ(loadError(p), "t.dsplan: variable 0 ('w') has a normal "
                          "initializer with std -1");
  p = basicPlan();
  p.constants[0].data = {1, 2, 3};
  EXPECT_EQ(loadError(p), "t.dsplan: constant 0 has 3 bytes; buffer 5 ('two') "
                          "needs 16 (or 4 for a splat)");
  p = basicPlan();
  p.program("apply").instrs[2].outputs = {kTwo};
  EXPECT_EQ(loadError(p), "t.dsplan: program 'apply' instruction 2 (ds.sub) "
                          "writes buffer 5 ('two'), which overlaps constant 0 "
                          "(buffer 5 ('two'))");
  p = basicPlan();
  p.accumulationSteps = 0;
  EXPECT_EQ(loadError(p), "t.dsplan: accumulation_steps 0; a step runs "
                          "micro_step at least once");
}

TEST(PlanVerifier, ShardedVariables) {
  std::string error;
  EXPECT_NE(load(shardedPlan(2, 5), error), nullptr) << error;
  PlanSpec p = shardedPlan(2, 5);
  p.buffers[0].dtype = fb::DType::f16;
  EXPECT_EQ(loadError(p), "t.dsplan: variable 0 ('a') is sharded but buffer 0 "
                          "('params.shard') is f16; sharded variables are "
                          "f32");
  p = shardedPlan(2, 5);
  p.buffers[0].shape = {1, 5};
  EXPECT_EQ(loadError(p), "t.dsplan: variable 0 ('a') is sharded but buffer 0 "
                          "('params.shard') has shape [1,5]; a shard is 1-D");
  p = shardedPlan(2, 5);
  p.variables[1].shape = std::nullopt;
  EXPECT_EQ(loadError(p),
            "t.dsplan: variable 1 ('b') is sharded but has no shape");
  p = shardedPlan(2, 5);
  p.variables[1].shape = {{0, -2}};
  EXPECT_EQ(loadError(p), "t.dsplan: variable 1 ('b') has a negative "
                          "dimension in shape [0,-2]");
  p = shardedPlan(2, 5);
  p.variables[1].shape = {{2, 0}};
  EXPECT_EQ(loadError(p), "t.dsplan: variable 1 ('b') is sharded with shape "
                          "[2,0]; a sharded variable has at least one "
                          "element");
  // b ends at 11 > 2 x 5.
  p = shardedPlan(2, 5);
  p.variables[1].shardOffset = 7;
  EXPECT_EQ(loadError(p), "t.dsplan: variable 1 ('b') of shape [2,2] at shard "
                          "offset 7 does not fit its group: 2 ranks x 5 "
                          "elements (buffer 0 ('params.shard'))");
  p.variables[1].shardOffset = 6; // ends exactly at the end
  EXPECT_NE(load(p, error), nullptr) << error;
  // Offsets and shapes that would wrap 64 bits.
  p = shardedPlan(2, 5);
  p.variables[1].shardOffset = ~uint64_t(0) - 1;
  EXPECT_EQ(loadError(p), "t.dsplan: variable 1 ('b') of shape [2,2] at shard "
                          "offset 18446744073709551614 does not fit its "
                          "group: 2 ranks x 5 elements (buffer 0 "
                          "('params.shard'))");
  p = shardedPlan(1, 5);
  p.variables[0].shape = {{int64_t(1) << 32, int64_t(1) << 32, 16}};
  EXPECT_EQ(loadError(p), "t.dsplan: variable 0 ('a') of shape "
                          "[4294967296,4294967296,16] at shard offset 0 does "
                          "not fit its group: 1 rank x 5 elements (buffer 0 "
                          "('params.shard'))");
  // A group beyond the size limit (the plan is only verified, never
  // allocated).
  p = shardedPlan(5, 5);
  p.arenas[0].bytes = fb::kMaxBytes;
  p.buffers[0].shape = {int64_t(fb::kMaxBytes / 4)};
  EXPECT_EQ(loadError(p), "t.dsplan: variable 0 ('a') is sharded over a group "
                          "of 5 x 18014398509481984 elements, more than the "
                          "limit 72057594037927936");
}

/// Flip bytes all over a valid plan: each result must load or fail with one
/// clean line, and one that loads must create, initialize and run, or fail
/// with one clean line.
void flipBytesOf(const PlanSpec &spec) {
  const std::vector<uint8_t> good = spec.build();
  int loaded = 0, rejected = 0;
  for (size_t pos = 0; pos < good.size(); ++pos) {
    for (uint8_t flip : {0x01, 0x80, 0xff, 0x7f}) {
      std::vector<uint8_t> bytes = good;
      bytes[pos] ^= flip;
      std::string error;
      auto plan = LoadedPlan::fromBytes(bytes, "t.dsplan", error, testBackend);
      if (!plan) {
        ++rejected;
        ASSERT_EQ(error.rfind("t.dsplan", 0), 0u) << error;
        ASSERT_EQ(error.find('\n'), std::string::npos) << error;
        continue;
      }
      ++loaded;
      // Keep the arenas small so a flipped size cannot exhaust memory.
      SessionOptions options;
      options.worldSize = int(plan->plan().world_size());
      uint64_t total = 0;
      if (const auto *arenas = plan->plan().arenas())
        for (const fb::Arena *a : *arenas)
          total += a->bytes();
      if (total > (1u << 20))
        continue;
      auto session = Session::create(*plan, options, error);
      if (!session) {
        ASSERT_EQ(error.find('\n'), std::string::npos) << error;
        continue;
      }
      session->initVariables();
      // Kernels check their operands: a verified plan fails cleanly too.
      for (const char *program : {"micro_step", "apply"}) {
        bool ran = session->run(program, 1, error);
        ASSERT_TRUE(ran || error.find('\n') == std::string::npos) << error;
      }
    }
  }
  EXPECT_GT(loaded, 0);
  EXPECT_GT(rejected, 0);
}

TEST(PlanVerifier, FlippedBytesNeverCrash) {
  flipBytesOf(basicPlan());
  // The same plan spread over three streams, so events get flipped too.
  PlanSpec p = basicPlan();
  PlanSpec::Program &micro = p.program("micro_step");
  micro.numEvents = 2;
  micro.instrs[0].record = {0};
  micro.instrs[1].stream = fb::Stream::comm;
  micro.instrs[1].wait = {0};
  micro.instrs[1].record = {1};
  micro.instrs[2].stream = fb::Stream::h2d;
  micro.instrs[2].wait = {1};
  flipBytesOf(p);
  // Sharded variables: offsets, shapes and flags get flipped.
  flipBytesOf(shardedPlan(2, 5));
}

} // namespace
