//===- DsrunMainTest.cpp - dsrun end to end on a hand-built plan, and the
// backend registry ---===//

#include "test/unit/dsrun/DsrunTestSupport.h"

using namespace dsc::rt;
using namespace dsc::rt::dsruntest;

namespace {

//===----------------------------------------------------------------------===//
// dsrun end to end on a real Session: a bigram model (logits = table[token])
// trained by SGD, in a plan built here with the FlatBuffers builder.
//===----------------------------------------------------------------------===//

namespace fb = dsc::plan;

constexpr int kV = 8, kB = 2, kT = 4;

std::string writeBigramPlan(const std::string &name) {
  flatbuffers::FlatBufferBuilder b;
  enum { Params, Grads, Activations, Inputs, Constants };
  std::vector<flatbuffers::Offset<fb::Arena>> arenas = {
      fb::CreateArena(b, fb::Space::device, fb::Category::params, 256),
      fb::CreateArena(b, fb::Space::device, fb::Category::grads, 256),
      fb::CreateArena(b, fb::Space::device, fb::Category::activations, 1152),
      fb::CreateArena(b, fb::Space::device, fb::Category::inputs, 72),
      fb::CreateArena(b, fb::Space::device, fb::Category::constants, 4)};
  std::vector<flatbuffers::Offset<fb::Buffer>> buffers;
  auto buffer = [&](uint32_t arena, uint64_t offset, fb::DType dtype,
                    std::vector<int64_t> shape, const char *name) {
    buffers.push_back(
        fb::CreateBufferDirect(b, arena, offset, dtype, &shape, name));
    return uint32_t(buffers.size() - 1);
  };
  const fb::DType f32 = fb::DType::f32, i32 = fb::DType::i32;
  uint32_t table = buffer(Params, 0, f32, {kV, kV}, "table");
  uint32_t grad = buffer(Grads, 0, f32, {kV, kV}, "table.grad");
  uint32_t logits = buffer(Activations, 0, f32, {kB, kT, kV}, "logits");
  uint32_t dlogits = buffer(Activations, 256, f32, {kB, kT, kV}, "dlogits");
  uint32_t loss = buffer(Activations, 512, f32, {}, "loss");
  uint32_t square = buffer(Activations, 576, f32, {kV, kV}, "square");
  uint32_t sum = buffer(Activations, 832, f32, {}, "sum");
  uint32_t norm = buffer(Activations, 836, f32, {}, "grad_norm");
  uint32_t update = buffer(Activations, 896, f32, {kV, kV}, "update");
  uint32_t tokens = buffer(Inputs, 0, i32, {kB, kT}, "tokens");
  uint32_t targets = buffer(Inputs, 32, i32, {kB, kT}, "targets");
  uint32_t lr = buffer(Inputs, 64, f32, {}, "lr");
  uint32_t step = buffer(Inputs, 68, f32, {}, "step");
  uint32_t one = buffer(Constants, 0, f32, {}, "one");

  std::vector<flatbuffers::Offset<fb::Variable>> variables = {
      fb::CreateVariableDirect(b, "table", fb::VarKind::param, "", table,
                               fb::InitKind::normal, 0.1,
                               dsc::rng::streamForName("table"), false),
      fb::CreateVariableDirect(b, "table.grad", fb::VarKind::grad, "table",
                               grad, fb::InitKind::zeros, 0, 0, false)};
  float oneValue = 1.0f;
  std::vector<uint8_t> oneBytes(4);
  std::memcpy(oneBytes.data(), &oneValue, 4);
  std::vector<flatbuffers::Offset<fb::Constant>> constants = {
      fb::CreateConstantDirect(b, one, &oneBytes)};

  auto instr = [&](const char *kernel, std::vector<uint32_t> in,
                   std::vector<uint32_t> out, std::vector<int64_t> ints = {}) {
    std::vector<double> floats;
    return fb::CreateInstrDirect(b, kernel, &in, &out, &ints, &floats,
                                 fb::Stream::compute, nullptr, nullptr, "");
  };
  std::vector<flatbuffers::Offset<fb::Instr>> micro = {
      instr("ds.embedding", {table, tokens}, {logits}, {1}),
      instr("ds.cross_entropy", {logits, targets}, {loss}, {-1}),
      instr("ds.cross_entropy_grad", {logits, targets, one}, {dlogits}, {-1}),
      instr("ds.embedding_grad", {tokens, dlogits}, {grad}, {1})};
  std::vector<flatbuffers::Offset<fb::Instr>> apply = {
      instr("ds.mul", {grad, grad}, {square}),
      instr("ds.reduce_sum", {square}, {sum}, {0, 1}),
      instr("ds.sqrt", {sum}, {norm}), instr("ds.mul", {grad, lr}, {update}),
      instr("ds.sub", {table, update}, {table})};
  std::vector<uint32_t> microIn = {tokens, targets}, microOut = {loss};
  std::vector<uint32_t> applyIn = {lr, step}, applyOut = {norm};
  std::vector<flatbuffers::Offset<fb::Program>> programs = {
      fb::CreateProgramDirect(b, "micro_step", &micro, &microIn, &microOut),
      fb::CreateProgramDirect(b, "apply", &apply, &applyIn, &applyOut)};
  auto schedule =
      fb::CreateScheduleDirect(b, "WarmupLR", 0.5, 0.05, 0.5, 4, "linear");
  auto root = fb::CreatePlanDirect(
      b, fb::kSchemaVersion, 1, "bigram", "{}", kB, kT, kV, 2, schedule,
      &arenas, &buffers, &variables, &constants, &programs,
      /*loss_scale=*/0, /*skips_overflow=*/false, fb::kUnsealedChecksum);
  fb::FinishPlanBuffer(b, root);
  std::vector<uint8_t> bytes(b.GetBufferPointer(),
                             b.GetBufferPointer() + b.GetSize());
  fb::sealPlan(bytes);
  return writeFile(name, std::string(bytes.begin(), bytes.end()));
}

int dsrun(std::vector<std::string> args) {
  args.insert(args.begin(), "dsrun");
  std::vector<char *> argv;
  for (std::string &a : args)
    argv.push_back(a.data());
  return runDsrunMain(int(argv.size()), argv.data());
}

std::vector<Json> readMetrics(const std::string &path) {
  std::vector<Json> records;
  for (const std::string &line : lines(readFile(path)))
    records.push_back(Json::parse(line));
  return records;
}

TEST(DsrunMain, TrainsExportsAndReloadsABigramModel) {
  std::string plan = writeBigramPlan("bigram.dsplan");
  std::string metrics = tempPath("m.jsonl"),
              weights = tempPath("w.safetensors");
  ASSERT_EQ(dsrun({plan, "--steps", "40", "--metrics", metrics,
                   "--export-weights", weights}),
            kExitOk);
  std::vector<Json> run = readMetrics(metrics);
  ASSERT_EQ(run.size(), 40u);
  // WarmupLR, linear, as DeepSpeed steps it: iteration -1 (min_lr), 0
  // (min_lr again), 1, ...
  EXPECT_NEAR(run[0]["lr"].get<double>(), 0.05, 1e-12);
  EXPECT_NEAR(run[1]["lr"].get<double>(), 0.05, 1e-12);
  EXPECT_NEAR(run[2]["lr"].get<double>(), 0.1625, 1e-12);
  EXPECT_NEAR(run[39]["lr"].get<double>(), 0.5, 1e-12);
  EXPECT_LT(run[39]["loss"].get<double>(), run[0]["loss"].get<double>() - 0.3);
  EXPECT_EQ(run[0]["tokens"], kB * kT * 2);
  EXPECT_EQ(run[0]["plan_written_bytes"]["params"], 256);
  EXPECT_EQ(run[0]["predicted_bytes"]["activations"], 1152);

  std::string error;
  auto file = SafetensorsFile::read(weights, error);
  ASSERT_TRUE(file) << error;
  ASSERT_EQ(file->tensors().size(), 1u); // not gpt2: no lm_head alias
  EXPECT_EQ(file->tensors()[0].name, "table");
  EXPECT_EQ(file->metadata().at("step"), "40");

  // The trained weights give a lower loss on step 1's batch than the
  // initialization did.
  std::string again = tempPath("again.jsonl");
  ASSERT_EQ(
      dsrun({plan, "--steps", "1", "--init-from", weights, "--metrics", again}),
      kExitOk);
  EXPECT_LT(readMetrics(again)[0]["loss"].get<double>(),
            run[0]["loss"].get<double>() - 0.3);
}

TEST(DsrunMain, ExitStatuses) {
  std::string plan = writeBigramPlan("bigram.dsplan");
  EXPECT_EQ(dsrun({"--help"}), kExitOk);
  EXPECT_EQ(dsrun({plan, "--steps", "x"}), kExitBadInput);
  EXPECT_EQ(dsrun({plan, "--np", "2"}), kExitBadInput);
  EXPECT_EQ(dsrun({tempPath("missing.dsplan"), "--steps", "1"}), kExitBadInput);
  EXPECT_EQ(dsrun({plan}), kExitBadInput); // no total_num_steps: --steps
  std::string outOfVocab = writeFile("oov.bin", uint16File({1, 2, 3, 9, 4, 5}));
  EXPECT_EQ(dsrun({plan, "--steps", "1", "--data", outOfVocab}), kExitBadInput);
  EXPECT_EQ(dsrun({plan, "--steps", "1", "--init-from",
                   tempPath("missing.safetensors")}),
            kExitBadInput);
  std::string noDir = tempPath("no-such-dir") + "/out";
  EXPECT_EQ(dsrun({plan, "--steps", "1", "--metrics", noDir}), kExitBadInput);
  EXPECT_EQ(dsrun({plan, "--steps", "1", "--export-weights", noDir}),
            kExitBadInput);
  EXPECT_EQ(dsrun({plan, "--steps", "1", "--device-memory", "1K"}),
            kExitBadInput);
  // A backend this build does not have (Backends.Registry pins the line).
  EXPECT_EQ(dsrun({plan, "--steps", "1", "--backend", "tpu"}), kExitBadInput);
  EXPECT_EQ(dsrun({plan, "--steps", "1", "--backend", "cuda"}), kExitBadInput);
  std::string trace = tempPath("trace.json");
  EXPECT_EQ(dsrun({plan, "--steps", "2", "--trace", trace}), kExitOk);
  EXPECT_EQ(Json::parse(readFile(trace)).size(), 6u + 2 * (2 * 4 + 5));
}

// The registry knows the backends of this build by name; the core
// libraries know none (dsrun registers them, as this test does).
TEST(Backends, Registry) {
  std::string error;
#if DSC_HAVE_CUDA // compiled in wherever the toolkit was found
  const std::vector<std::string> names = {"cpu", "cuda"};
  const std::string has = "cpu, cuda";
#else
  const std::vector<std::string> names = {"cpu"};
  const std::string has = "cpu";
#endif
  EXPECT_EQ(backendNames(), names);
  std::unique_ptr<Backend> cpu = createBackend("cpu", error);
  ASSERT_TRUE(cpu) << error;
  EXPECT_EQ(cpu->name(), "cpu");
  EXPECT_NE(cpu->findKernel("ds.matmul"), nullptr);
  EXPECT_EQ(cpu->findKernel("ds.nope"), nullptr);
  void *block = cpu->allocate(MemorySpace::device, 100, error);
  ASSERT_NE(block, nullptr) << error;
  EXPECT_EQ(reinterpret_cast<uintptr_t>(block) % 64, 0u);
  const uint8_t bytes[3] = {1, 2, 3};
  uint8_t back[3] = {};
  cpu->copyToArena(block, bytes, 3);
  cpu->copyFromArena(back, block, 3);
  EXPECT_EQ(std::vector<uint8_t>(back, back + 3),
            std::vector<uint8_t>(bytes, bytes + 3));
  cpu->release(block);
  EXPECT_EQ(createBackend("tpu", error), nullptr);
  EXPECT_EQ(error, "unknown backend 'tpu' (this build has: " + has + ")");
  // Options after a colon: an empty list is none; each item is KEY=VALUE.
  error.clear();
  EXPECT_NE(createBackend("cpu:", error), nullptr) << error;
  EXPECT_EQ(createBackend("cpu:=1", error), nullptr);
  EXPECT_EQ(error, "option '=1' is not KEY=VALUE");
  EXPECT_EQ(createBackend("cpu:a=1,", error), nullptr);
  EXPECT_EQ(error, "option '' is not KEY=VALUE");
  EXPECT_EQ(createBackend("cpu:k=", error), nullptr);
  EXPECT_EQ(error, "unknown option 'k' (backend cpu takes none)");
  BackendOptions options{{"graphs", "on"}, {"tf32", "maybe"}};
  bool value = false;
  EXPECT_TRUE(checkBackendOptions("x", options, {"graphs", "tf32"}, error));
  EXPECT_TRUE(backendSwitch(options, "graphs", false, value, error));
  EXPECT_TRUE(value);
  EXPECT_TRUE(backendSwitch(options, "absent", true, value, error));
  EXPECT_TRUE(value);
  EXPECT_FALSE(backendSwitch(options, "tf32", false, value, error));
  EXPECT_EQ(error, "option tf32 must be on or off, got 'maybe'");
  EXPECT_FALSE(checkBackendOptions("x", options, {"graphs"}, error));
  EXPECT_EQ(error, "unknown option 'tf32' (backend x takes graphs)");
}

} // namespace
