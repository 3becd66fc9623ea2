//===- SessionTest.cpp - good plans through a Session ---===//

#include "runtime/exec/Executor.h"
#include "test/unit/plan/PlanTestSupport.h"

#include <cstring>

using namespace dsc;
using namespace dsc::plantest;

namespace {

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

// A backend whose arena bytes are not the host's values (each byte XOR
// 0x5A): a Session that wrote an initial value, or read one, by
// dereferencing arena memory instead of staging through the backend would
// see garbage.
class ScramblingBackend : public TestBackend {
public:
  void copyToArena(void *arena, const void *host, size_t bytes) override {
    for (size_t i = 0; i < bytes; ++i)
      static_cast<uint8_t *>(arena)[i] =
          static_cast<const uint8_t *>(host)[i] ^ 0x5A;
  }
  void copyFromArena(void *host, const void *arena, size_t bytes) override {
    for (size_t i = 0; i < bytes; ++i)
      static_cast<uint8_t *>(host)[i] =
          static_cast<const uint8_t *>(arena)[i] ^ 0x5A;
  }
};

TEST(Session, InitialValuesAreStagedThroughTheBackend) {
  ScramblingBackend scrambling;
  std::string error;
  auto plan =
      LoadedPlan::fromBytes(basicPlan().build(), "t.dsplan", error, scrambling);
  ASSERT_TRUE(plan) << error;
  SessionOptions options;
  options.seed = 7;
  auto session = Session::create(*plan, options, error);
  ASSERT_TRUE(session) << error;
  session->initVariables();
  auto ref = ref::init(ref::InitKind::Normal, {2, 2}, 7,
                       rng::streamForName("w"), 0.0, 0.02);
  ASSERT_TRUE(ref.ok()) << ref.error;
  rt::NamedTensor *w = session->findVariable("w");
  rt::NamedTensor *grad = session->findVariable("w.grad");
  ASSERT_TRUE(w && grad);
  std::vector<float> read(4);
  ASSERT_TRUE(session->readVariable(*w, read.data(), error)) << error;
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(read[size_t(i)], float(ref.value.data[size_t(i)])) << i;
  // The arena itself holds the scrambled bytes.
  EXPECT_NE(floats(w->ref), read);
  ASSERT_TRUE(session->readVariable(*grad, read.data(), error)) << error;
  EXPECT_EQ(read, std::vector<float>(4, 0.0f));
}

// A backend with an executor of its own and per-stream resources: the
// Session creates the executor through the backend, runs every program
// through it, and each kernel sees its stream's queue.
int computeQueue = 0, commQueue = 0; // stand-ins for two cudaStream_t
std::vector<void *> streamsSeen;

bool recordStreamKernel(const rt::KernelArgs &a, std::string &) {
  streamsSeen.push_back(a.ctx->stream);
  std::memcpy(a.outputs[0].data, a.inputs[0].data,
              size_t(a.inputs[0].numel()) * sizeof(float));
  return true;
}
const rt::KernelInfo kRecordStream = {
    "test.record_stream", "f32->f32", 1, 1, 0, 0, recordStreamKernel};

class DelegatingExecutor : public rt::StreamExecutor {
public:
  DelegatingExecutor(const rt::ExecutorSpec &spec,
                     std::vector<std::string> &log)
      : host(spec), log(log) {}
  bool run(const rt::PreparedProgram &program, const rt::KernelContext &ctx,
           const std::string &what, std::string &error) override {
    log.push_back(std::string(program.name));
    return host.run(program, ctx, what, error);
  }
  const std::vector<uint64_t> &highWater() const override {
    return host.highWater();
  }
  void setTracing(bool on) override { host.setTracing(on); }
  std::vector<rt::TraceRecord> takeTrace() override { return host.takeTrace(); }

private:
  rt::HostExecutor host;
  std::vector<std::string> &log;
};

class OwnExecutorBackend : public TestBackend {
public:
  rt::KernelVariants kernelVariants(std::string_view name) const override {
    if (name == kRecordStream.name)
      return {&kRecordStream, 1};
    return TestBackend::kernelVariants(name);
  }
  std::unique_ptr<rt::StreamExecutor>
  createExecutor(const rt::ExecutorSpec &spec) const override {
    specs.push_back(spec);
    return std::make_unique<DelegatingExecutor>(spec, log);
  }
  rt::StreamResources streamResources(rt::MemorySpace,
                                      int stream) const override {
    return {stream == 0 ? static_cast<void *>(&computeQueue)
                        : static_cast<void *>(&commQueue),
            nullptr};
  }
  mutable std::vector<rt::ExecutorSpec> specs;
  mutable std::vector<std::string> log;
};

TEST(Session, BackendsBringTheirExecutorAndStreams) {
  OwnExecutorBackend backend;
  PlanSpec p = basicPlan();
  // apply: one probe on compute, one on comm after it (an event orders
  // them, as the verifier requires).
  PlanSpec::Program &apply = p.program("apply");
  apply.numEvents = 2;
  apply.instrs.insert(
      apply.instrs.begin(),
      {{"test.record_stream", {kX}, {kH}, fb::Stream::compute, {}, {0}},
       {"test.record_stream", {kH}, {kH}, fb::Stream::comm, {0}, {1}}});
  apply.instrs[2].wait = {1};
  std::string error;
  auto plan = LoadedPlan::fromBytes(p.build(), "t.dsplan", error, backend);
  ASSERT_TRUE(plan) << error;
  auto session = Session::create(*plan, SessionOptions(), error);
  ASSERT_TRUE(session) << error;
  ASSERT_EQ(backend.specs.size(), 1u);
  EXPECT_TRUE(backend.specs[0].streamUsed[0]);
  EXPECT_TRUE(backend.specs[0].streamUsed[1]);
  EXPECT_FALSE(backend.specs[0].streamUsed[2]);
  EXPECT_EQ(backend.specs[0].maxEvents, 2u);
  EXPECT_EQ(backend.specs[0].numArenas, 5u);
  session->initVariables();
  streamsSeen.clear();
  ASSERT_TRUE(session->run("micro_step", 0, error)) << error;
  ASSERT_TRUE(session->run("apply", 1, error)) << error;
  EXPECT_EQ(backend.log, (std::vector<std::string>{"micro_step", "apply"}));
  EXPECT_EQ(streamsSeen, (std::vector<void *>{&computeQueue, &commQueue}));
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

// A variable past the 1M-element staging chunk, each chunk drawn by several
// threads where the machine has cores: every element is still the draw
// keyed by its own index (the float64 interpreter's), whatever the split.
TEST(Session, LargeVariablesDrawEachElementsOwnValue) {
  // Two whole chunks and one of 3 x 64K + 1 elements: split unevenly over
  // two or more threads.
  constexpr int64_t kCount = (int64_t(1) << 21) + 3 * 65536 + 1;
  PlanSpec p = basicPlan();
  uint32_t arena =
      p.arena(fb::Space::host, fb::Category::params, uint64_t(kCount) * 4);
  uint32_t big = p.buffer(arena, 0, {kCount}, "big", fb::DType::f32);
  p.variables.push_back(
      {"big", fb::VarKind::param, "", big, fb::InitKind::normal, 0.02, 77});
  SessionOptions options;
  options.seed = 9;
  InitializedSession s = initializedSession(p, options);
  ASSERT_TRUE(s.session);
  const float *v = s.session->findVariable("big")->ref.f32();
  int64_t wrong = 0, first = -1;
  for (int64_t i = 0; i < kCount; ++i)
    if (v[i] !=
            float(rng::normalAt(9, 77, fb::kInitRngStep, uint64_t(i)) * 0.02) &&
        wrong++ == 0)
      first = i;
  EXPECT_EQ(wrong, 0) << "first at " << first;
}

// readFloats: a range of a variable's elements as floats (how checkpoints
// stream state), 16-bit ones widened exactly; a range past the buffer and
// an integer variable are one line each.
TEST(Session, ReadFloatsReadsARangeAsFloats) {
  PlanSpec p = basicPlan();
  uint32_t arena = p.arena(fb::Space::host, fb::Category::params, 64);
  uint32_t b16 = p.buffer(arena, 0, {8}, "b16", fb::DType::bf16);
  uint32_t cnt = p.buffer(arena, 16, {4}, "count", fb::DType::i32);
  p.variables.push_back(
      {"b16", fb::VarKind::param, "", b16, fb::InitKind::normal, 1.0, 12});
  p.variables.push_back(
      {"count", fb::VarKind::opt_state, "w", cnt, fb::InitKind::ones});
  InitializedSession s = initializedSession(p, {});
  ASSERT_TRUE(s.session);
  Session *session = s.session.get();
  std::string error;
  const rt::NamedTensor &v = *session->findVariable("b16");
  const auto *bits = static_cast<const uint16_t *>(v.ref.data);
  float got[3];
  ASSERT_TRUE(session->readFloats(v, 5, got, 3, error)) << error;
  for (int i = 0; i < 3; ++i) {
    uint32_t wide = uint32_t(bits[5 + i]) << 16;
    float want;
    std::memcpy(&want, &wide, 4);
    EXPECT_EQ(got[i], want) << i;
  }
  EXPECT_FALSE(session->readFloats(v, 6, got, 3, error));
  EXPECT_EQ(error, "variable 'b16': cannot read 3 elements from element 6 "
                   "of its 8");
  EXPECT_FALSE(session->readFloats(v, -1, got, 1, error));
  EXPECT_EQ(error, "variable 'b16': cannot read 1 elements from element -1 "
                   "of its 8");
  EXPECT_FALSE(
      session->readFloats(*session->findVariable("count"), 0, got, 1, error));
  EXPECT_EQ(error,
            "variable 'count' is i32; only floating-point state converts to "
            "floats");
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

// A backend with device memory of its own (CUDA) is its own budget when
// none is given: the plan's total against what the driver reports free.
TEST(Session, DeviceMemoryFree) {
  struct SmallDevice : TestBackend {
    uint64_t used = 0;
    bool deviceMemory(rt::DeviceMemory &m) const override {
      m.used = used;
      m.baseline = 10;
      m.total = 100;
      return true;
    }
  } backend;
  std::string error;
  auto plan =
      LoadedPlan::fromBytes(basicPlan().build(), "t.dsplan", error, backend);
  ASSERT_TRUE(plan) << error;
  backend.used = 53;
  EXPECT_EQ(Session::create(*plan, {}, error), nullptr);
  EXPECT_EQ(error, "t.dsplan needs 48 bytes of device memory (params 16 + "
                   "grads 16 + activations 16); the cpu device has 47 free "
                   "of 100");
  backend.used = 52;
  EXPECT_NE(Session::create(*plan, {}, error), nullptr) << error;
  backend.used = 90; // a budget given is the budget
  SessionOptions options;
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

} // namespace
