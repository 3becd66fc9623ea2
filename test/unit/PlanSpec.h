//===- PlanSpec.h - plans built in tests, field by field -------*- C++ -*-===//
//
// A plan in plain structs, serialized with the generated FlatBuffers
// builder, so that each test states exactly what its plan holds. Shared by
// the runtime's unit tests (PlanTest, CommTest).
//
//===----------------------------------------------------------------------===//
#ifndef DSC_TEST_UNIT_PLANSPEC_H
#define DSC_TEST_UNIT_PLANSPEC_H

#include "runtime/backends/cpu/CpuBackend.h"
#include "runtime/plan/PlanChecksum.h"
#include "runtime/plan/PlanFormat.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace dsc::test {

namespace fb = dsc::plan;

/// The CPU backend the runtime tests load their plans for.
inline rt::Backend &cpuBackend() {
  static rt::CpuBackend backend;
  return backend;
}

/// A plan in plain structs, serialized with the generated builder.
struct PlanSpec {
  struct Arena {
    fb::Space space;
    fb::Category category;
    uint64_t bytes;
  };
  struct Buffer {
    uint32_t arena;
    uint64_t offset;
    fb::DType dtype;
    std::vector<int64_t> shape;
    std::string name;
  };
  struct Variable {
    std::string name;
    fb::VarKind kind;
    std::string of;
    uint32_t buffer;
    fb::InitKind init;
    double std = 0;
    uint32_t rngStream = 0;
    /// ZeRO stage 3: `buffer` is this rank's shard of the group and
    /// `shape` the whole variable's (absent unless set).
    bool sharded = false;
    uint64_t shardOffset = 0;
    std::optional<std::vector<int64_t>> shape = std::nullopt;
    /// Tensor parallelism: the dimension of `shape` cut over the group
    /// (in that many blocks); -1 when whole.
    int32_t tensorSplitDim = -1;
    uint32_t tensorSplitBlocks = 1;
  };
  struct Constant {
    uint32_t buffer;
    std::vector<uint8_t> data;
  };
  struct Instr {
    std::string kernel;
    std::vector<uint32_t> inputs, outputs;
    fb::Stream stream = fb::Stream::compute;
    std::vector<uint32_t> wait = {}, record = {};
    std::vector<int64_t> ints = {};
    std::vector<double> floats = {};
    std::string loc = "";
    fb::Space space = fb::Space::device;
  };
  struct Program {
    std::string name;
    std::vector<Instr> instrs;
    std::vector<uint32_t> inputs = {}, outputs = {};
    uint32_t numEvents = 0;
    std::vector<uint64_t> arenaPeaks = {}; ///< none: the plan stores none
  };

  uint32_t schemaVersion = fb::kSchemaVersion;
  uint32_t worldSize = 1;
  uint32_t tensorParallel = 1;
  uint32_t accumulationSteps = 1;
  uint32_t microBatch = 1, seqLen = 4, vocabSize = 256;
  double lr = 1e-3;     ///< a constant schedule
  bool checksum = true; ///< false: a plan that stores no Plan.checksum
  std::vector<Arena> arenas;
  std::vector<Buffer> buffers;
  std::vector<Variable> variables;
  std::vector<Constant> constants;
  std::vector<Program> programs;
  std::vector<std::pair<std::string, std::string>> aliases; ///< (name, of)

  uint32_t arena(fb::Space space, fb::Category category, uint64_t bytes) {
    arenas.push_back({space, category, bytes});
    return uint32_t(arenas.size() - 1);
  }
  uint32_t buffer(uint32_t arena, uint64_t offset, std::vector<int64_t> shape,
                  std::string name, fb::DType dtype = fb::DType::f32) {
    buffers.push_back({arena, offset, dtype, std::move(shape), name});
    return uint32_t(buffers.size() - 1);
  }
  Program &program(const std::string &name) {
    for (Program &p : programs)
      if (p.name == name)
        return p;
    ADD_FAILURE() << "no program " << name;
    return programs.front();
  }

  std::vector<uint8_t> build() const {
    flatbuffers::FlatBufferBuilder b;
    std::vector<flatbuffers::Offset<fb::Arena>> as;
    for (const Arena &a : arenas)
      as.push_back(fb::CreateArena(b, a.space, a.category, a.bytes));
    std::vector<flatbuffers::Offset<fb::Buffer>> bs;
    for (const Buffer &x : buffers)
      bs.push_back(fb::CreateBufferDirect(b, x.arena, x.offset, x.dtype,
                                          &x.shape, x.name.c_str()));
    std::vector<flatbuffers::Offset<fb::Variable>> vs;
    for (const Variable &v : variables)
      vs.push_back(fb::CreateVariableDirect(
          b, v.name.c_str(), v.kind, v.of.c_str(), v.buffer, v.init, v.std,
          v.rngStream, false, v.sharded, v.shardOffset,
          v.shape ? &*v.shape : nullptr, v.tensorSplitDim,
          v.tensorSplitBlocks));
    std::vector<flatbuffers::Offset<fb::Constant>> cs;
    for (const Constant &c : constants)
      cs.push_back(fb::CreateConstantDirect(b, c.buffer, &c.data));
    std::vector<flatbuffers::Offset<fb::Program>> ps;
    for (const Program &p : programs) {
      std::vector<flatbuffers::Offset<fb::Instr>> is;
      for (const Instr &i : p.instrs)
        is.push_back(fb::CreateInstrDirect(
            b, i.kernel.c_str(), &i.inputs, &i.outputs, &i.ints, &i.floats,
            i.stream, &i.wait, &i.record, i.loc.c_str(), i.space));
      ps.push_back(fb::CreateProgramDirect(
          b, p.name.c_str(), &is, &p.inputs, &p.outputs, p.numEvents, 0.0,
          p.arenaPeaks.empty() ? nullptr : &p.arenaPeaks));
    }
    std::vector<flatbuffers::Offset<fb::Alias>> als;
    for (const auto &[name, of] : aliases)
      als.push_back(fb::CreateAliasDirect(b, name.c_str(), of.c_str()));
    auto schedule = fb::CreateScheduleDirect(b, "constant", lr);
    auto plan = fb::CreatePlanDirect(
        b, schemaVersion, worldSize, "test", "{}", microBatch, seqLen,
        vocabSize, accumulationSteps, schedule, &as, &bs, &vs, &cs, &ps,
        /*loss_scale=*/0, /*skips_overflow=*/false,
        checksum ? fb::kUnsealedChecksum : 0, als.empty() ? nullptr : &als,
        /*flops_profile=*/0, /*wall_clock_breakdown=*/false,
        /*comms_logger=*/0, /*memory_breakdown=*/false, tensorParallel);
    fb::FinishPlanBuffer(b, plan);
    std::vector<uint8_t> bytes(b.GetBufferPointer(),
                               b.GetBufferPointer() + b.GetSize());
    if (checksum)
      fb::sealPlan(bytes);
    return bytes;
  }
};

inline std::vector<uint8_t> floatBytes(std::vector<float> values) {
  std::vector<uint8_t> out(values.size() * 4);
  std::memcpy(out.data(), values.data(), out.size());
  return out;
}

} // namespace dsc::test

#endif // DSC_TEST_UNIT_PLANSPEC_H
