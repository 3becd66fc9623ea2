//===- PlanVerifierTest.cpp - bad plans: one exact error line, never a crash
//---===//

#include "test/unit/plan/PlanTestSupport.h"

using namespace dsc;
using namespace dsc::plantest;

namespace {

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

// A byte changed where the FlatBuffers verifier cannot see it (inside a
// string, an initializer's data or a scalar) is caught by the checksum.
TEST(PlanVerifier, ChangedByteFailsTheChecksum) {
  PlanSpec spec = basicPlan();
  std::vector<uint8_t> bytes = spec.build();
  std::string error;
  ASSERT_NE(LoadedPlan::fromBytes(bytes, "t.dsplan", error, testBackend),
            nullptr)
      << error;
  auto at = std::search(bytes.begin(), bytes.end(), std::begin("test"),
                        std::end("test") - 1); // the model name
  ASSERT_NE(at, bytes.end());
  at[3] ^= 1; // "tesu"
  EXPECT_EQ(LoadedPlan::fromBytes(bytes, "t.dsplan", error, testBackend),
            nullptr);
  EXPECT_EQ(error.substr(0, error.find('(')), "t.dsplan: checksum mismatch ");
  EXPECT_NE(error.find("): the plan was changed or damaged after dsc wrote "
                       "it"),
            std::string::npos)
      << error;
  // Resealed (as dsc would write it), the same bytes load.
  ASSERT_TRUE(fb::sealPlan(bytes));
  EXPECT_NE(LoadedPlan::fromBytes(bytes, "t.dsplan", error, testBackend),
            nullptr)
      << error;
}

TEST(PlanVerifier, NoChecksum) {
  PlanSpec p = basicPlan();
  p.checksum = false;
  EXPECT_EQ(loadError(p), "t.dsplan: plan has no checksum (dsc writes one "
                          "into every plan; this file was not written by "
                          "dsc)");
}

TEST(PlanVerifier, SchemaVersion) {
  PlanSpec p = basicPlan();
  p.schemaVersion = 10;
  EXPECT_EQ(loadError(p), "t.dsplan: schema version 10, this dsrun reads 9 "
                          "(compile the plan again with the dsc of this "
                          "build)");
  // A plan from the previous release (no master weights) as well.
  p.schemaVersion = 3;
  EXPECT_EQ(loadError(p), "t.dsplan: schema version 3, this dsrun reads 9 "
                          "(compile the plan again with the dsc of this "
                          "build)");
}

TEST(PlanVerifier, ArenaPeaks) {
  // One per arena, each within its arena: a program's own peak.
  PlanSpec p = basicPlan();
  p.programs[0].arenaPeaks = {0, 0, 0, 16, 0};
  std::string error;
  EXPECT_NE(load(p, error), nullptr) << error;
  p.programs[0].arenaPeaks = {0, 0, 16};
  EXPECT_EQ(loadError(p), "t.dsplan: program 'micro_step' has 3 arena peaks "
                          "for 5 arenas");
  p.programs[0].arenaPeaks = {0, 0, 0, 17, 0};
  EXPECT_EQ(loadError(p), "t.dsplan: program 'micro_step': its peak in arena "
                          "3 (17 bytes) is past the arena's end (16 bytes)");
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
  EXPECT_EQ(
      LoadedPlan::fromBytes(p.build(), "t.dsplan", error, test::cpuBackend()),
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

TEST(PlanVerifier, NoVariantForTheOperandDTypes) {
  // ds.add adds floats (f32, and f16/bf16 widened to f32), not integers.
  PlanSpec p = basicPlan();
  p.buffers[kY].dtype = fb::DType::i32;
  EXPECT_EQ(loadError(p), "t.dsplan: program 'micro_step' instruction 0 "
                          "(ds.add) has no variant for dtypes f32,i32->f32 on "
                          "backend cpu (it has f32,f32->f32 or "
                          "f32|f16|bf16,f32|f16|bf16->f32|f16|bf16)");
  p.buffers[kY].dtype = fb::DType::bf16;
  std::string mixed;
  EXPECT_NE(load(p, mixed), nullptr) << mixed;
  // Data movement takes any dtype, but the same one throughout.
  p = basicPlan();
  uint32_t out = p.buffer(3, 0, {2, 2}, "h.t");
  p.program("apply").instrs = {
      {"ds.transpose", {kWGrad}, {out}, {}, {}, {}, {1, 0}}};
  std::string error;
  EXPECT_NE(load(p, error), nullptr) << error;
  p.buffers[out].dtype = fb::DType::i32;
  EXPECT_EQ(loadError(p), "t.dsplan: program 'apply' instruction 0 "
                          "(ds.transpose) has no variant for dtypes f32->i32 "
                          "on backend cpu (it has T->T)");
}

// A backend that runs only device instructions and reaches only device
// arenas from them, as a GPU backend without mapped host memory would.
class DeviceOnlyBackend : public TestBackend {
public:
  bool runsIn(rt::MemorySpace where) const override {
    return where == rt::MemorySpace::device;
  }
  bool reaches(rt::MemorySpace where, rt::MemorySpace data) const override {
    return where == data;
  }
};

TEST(PlanVerifier, InstructionPlacement) {
  PlanSpec p = basicPlan();
  p.program("apply").instrs[1].space = fb::Space(9);
  EXPECT_EQ(loadError(p), "t.dsplan: program 'apply' instruction 1 (ds.sub) "
                          "is placed in unknown space 9");
  // The CPU backend runs host instructions and reaches every arena.
  p.program("apply").instrs[1].space = fb::Space::host;
  std::string error;
  EXPECT_NE(load(p, error), nullptr) << error;

  DeviceOnlyBackend gpuLike;
  EXPECT_EQ(LoadedPlan::fromBytes(p.build(), "t.dsplan", error, gpuLike),
            nullptr);
  EXPECT_EQ(error, "t.dsplan: program 'micro_step' instruction 0 (ds.add) "
                   "runs in the device space but input 0 is buffer 0 ('x') in "
                   "arena 0 (host), which backend cpu cannot reach from "
                   "there");
  // Inputs in a device arena: micro_step loads; apply's host instruction
  // does not.
  p.arenas[0].space = fb::Space::device;
  p.arenas[4].space = fb::Space::device;
  EXPECT_EQ(LoadedPlan::fromBytes(p.build(), "t.dsplan", error, gpuLike),
            nullptr);
  EXPECT_EQ(error, "t.dsplan: program 'apply' instruction 1 (ds.sub) is "
                   "placed in the host space, where backend cpu runs "
                   "nothing");
  p.program("apply").instrs[1].space = fb::Space::device;
  EXPECT_NE(LoadedPlan::fromBytes(p.build(), "t.dsplan", error, gpuLike),
            nullptr)
      << error;
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
  // Plan.aliases (tied names of an exported module) name a parameter and
  // no variable.
  p = basicPlan();
  p.aliases = {{"head.w", "w.grad"}};
  EXPECT_EQ(loadError(p), "t.dsplan: alias 0 ('head.w') ties to 'w.grad', "
                          "which is not a parameter");
  p.aliases = {{"w.grad", "w"}};
  EXPECT_EQ(loadError(p), "t.dsplan: alias 0 ('w.grad') is also a "
                          "variable's or another alias's name");
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
  p.buffers[0].dtype = fb::DType::i32;
  EXPECT_EQ(loadError(p), "t.dsplan: variable 0 ('a') is sharded but buffer 0 "
                          "('params.shard') is i32; sharded variables are "
                          "floating-point");
  p = shardedPlan(2, 5); // mixed precision's 16-bit parameter shards
  p.buffers[0].dtype = fb::DType::bf16;
  EXPECT_NE(load(p, error), nullptr) << error;
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

/// Flip bytes all over a valid plan. As written, every flip must be refused
/// with one clean line (the checksum covers every byte). Resealed, as if dsc
/// had written the changed value, each must load or fail with one clean
/// line, and one that loads must create, initialize and run, or fail with
/// one clean line: the semantic checks stand without the checksum.
void flipBytesOf(const PlanSpec &spec) {
  const std::vector<uint8_t> good = spec.build();
  int loaded = 0, rejected = 0;
  for (size_t pos = 0; pos < good.size(); ++pos) {
    for (uint8_t flip : {0x01, 0x80, 0xff, 0x7f}) {
      std::vector<uint8_t> bytes = good;
      bytes[pos] ^= flip;
      std::string error;
      ASSERT_EQ(LoadedPlan::fromBytes(bytes, "t.dsplan", error, testBackend),
                nullptr)
          << "byte " << pos << " ^ " << int(flip) << " loaded unsealed";
      ASSERT_EQ(error.rfind("t.dsplan", 0), 0u) << error;
      ASSERT_EQ(error.find('\n'), std::string::npos) << error;
      // Where the flip leaves a verifiable plan with its checksum field.
      if (flatbuffers::Verifier(bytes.data(), bytes.size())
              .VerifyBuffer<fb::Plan>(nullptr))
        fb::sealPlan(bytes);
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
