//===- Emit.cpp - the plan model as a FlatBuffer --------------------------===//
#include "compiler/plan/PlanModel.h"

#include "compiler/config/Config.h"

#include "runtime/plan/PlanChecksum.h"
#include "runtime/plan/PlanFormat.h"

#include <cassert>

namespace dsc {
namespace {

/// The finished buffer's bytes, sealed with their checksum.
std::vector<uint8_t> finish(flatbuffers::FlatBufferBuilder &b,
                            flatbuffers::Offset<dsc::plan::Plan> root) {
  dsc::plan::FinishPlanBuffer(b, root);
  std::vector<uint8_t> bytes(b.GetBufferPointer(),
                             b.GetBufferPointer() + b.GetSize());
  bool sealed = plan::sealPlan(bytes);
  assert(sealed && "Plan.checksum is stored");
  (void)sealed;
  return bytes;
}

} // namespace

std::vector<uint8_t> serializePlan(const PlanModel &model,
                                   const DsConfig *config) {
  namespace fb = dsc::plan;
  flatbuffers::FlatBufferBuilder b(1 << 16);

  // Arena i < 8 holds the device's category i; with offload, arena 8 + i
  // the host's.
  std::vector<flatbuffers::Offset<fb::Arena>> arenas;
  for (int c = 0; c < kNumCategories; ++c)
    arenas.push_back(fb::CreateArena(b, fb::Space::device,
                                     static_cast<fb::Category>(c),
                                     model.arenaBytes[c]));
  if (model.hasHostArenas())
    for (int c = 0; c < kNumCategories; ++c)
      arenas.push_back(fb::CreateArena(b, fb::Space::host,
                                       static_cast<fb::Category>(c),
                                       model.hostArenaBytes[c]));

  std::vector<flatbuffers::Offset<fb::Buffer>> buffers;
  for (const PlanBuffer &buf : model.buffers)
    buffers.push_back(fb::CreateBufferDirect(
        b,
        static_cast<uint32_t>(buf.arena) +
            (buf.space == Space::Host ? kNumCategories : 0),
        buf.offset, static_cast<fb::DType>(buf.dtype), &buf.shape,
        buf.name.c_str()));

  std::vector<flatbuffers::Offset<fb::Variable>> variables;
  for (const PlanVariable &v : model.variables)
    variables.push_back(fb::CreateVariableDirect(
        b, v.name.c_str(), static_cast<fb::VarKind>(v.kind), v.of.c_str(),
        v.buffer, static_cast<fb::InitKind>(v.init), v.std, v.rngStream,
        v.weightDecay, v.sharded, v.shardOffset, &v.shape, int32_t(v.splitDim),
        uint32_t(v.splitBlocks)));

  std::vector<flatbuffers::Offset<fb::Constant>> constants;
  for (const PlanConstant &c : model.constants)
    constants.push_back(fb::CreateConstantDirect(b, c.buffer, &c.data));

  std::vector<flatbuffers::Offset<fb::Program>> programs;
  for (const PlanProgram &p : model.programs) {
    std::vector<flatbuffers::Offset<fb::Instr>> instrs;
    for (const PlanInstr &i : p.instrs)
      instrs.push_back(fb::CreateInstrDirect(
          b, i.kernel.c_str(), &i.inputs, &i.outputs, &i.intAttrs,
          &i.floatAttrs, static_cast<fb::Stream>(i.stream), &i.wait, &i.record,
          i.loc.c_str(),
          fb::schemaSpace(memorySpace(static_cast<Space>(i.space))), i.flops,
          i.tensorGroup, i.pipelineGroup, i.microBatch,
          static_cast<fb::SchedulePart>(i.schedulePart)));
    // Arena order as above: the device's categories, then the host's.
    std::vector<uint64_t> peaks(p.arenaPeaks.begin(), p.arenaPeaks.end());
    if (model.hasHostArenas())
      peaks.insert(peaks.end(), p.hostArenaPeaks.begin(),
                   p.hostArenaPeaks.end());
    programs.push_back(fb::CreateProgramDirect(b, p.name.c_str(), &instrs,
                                               &p.inputs, &p.outputs,
                                               p.numEvents, p.flops, &peaks));
  }

  static const DsConfig kDefaults;
  const DsConfig &c = config ? *config : kDefaults;
  const DsConfig::Scheduler &s = c.scheduler;
  // Only the fields of the schedule's own kind (the rest stay at their
  // defaults, which the plan stores as nothing).
  const bool range = s.type == "LRRangeTest", cycle = s.type == "OneCycle";
  const bool mom = cycle && s.cycleMomentum;
  auto schedule = fb::CreateScheduleDirect(
      b, s.type.c_str(), c.optimizer.lr, s.warmupMinLr, s.warmupMaxLr,
      s.warmupNumSteps, s.warmupType.c_str(), s.totalNumSteps, s.cosMinRatio,
      s.warmupMinRatio, range ? s.rangeMinLr : 0, range ? s.rangeStepSize : 0,
      range ? s.rangeStepRate : 0, range && s.rangeStaircase,
      cycle ? s.cycleMinLr : 0, cycle ? s.cycleMaxLr : 0,
      cycle ? s.decayLrRate : 0, cycle ? s.cycleFirstStepSize : 0,
      cycle ? s.cycleSecondStepSize : 0, cycle ? s.cycleFirstStairCount : 0,
      cycle ? s.cycleSecondStairCount : 0, cycle ? s.decayStepSize : 0, mom,
      mom ? s.cycleMinMom : 0, mom ? s.cycleMaxMom : 0,
      mom ? s.decayMomRate : 0);
  flatbuffers::Offset<fb::LossScale> lossScale;
  if (model.lossScaling) {
    const DsConfig::Fp16 &l = c.fp16;
    lossScale = fb::CreateLossScale(
        b, l.lossScale, int32_t(l.initialScalePower), l.lossScaleWindow,
        int32_t(l.hysteresis), l.consecutiveHysteresis, l.minLossScale);
  }
  const std::string configJson = config ? toJson(*config) : "{}";
  std::vector<flatbuffers::Offset<fb::Alias>> aliases;
  for (const auto &[name, of] : model.aliases)
    aliases.push_back(fb::CreateAliasDirect(b, name.c_str(), of.c_str()));

  flatbuffers::Offset<fb::FlopsProfile> flopsProfile;
  if (const DsConfig::FlopsProfiler &f = c.flopsProfiler; f.enabled)
    flopsProfile = fb::CreateFlopsProfile(
        b, f.profileStep, int32_t(f.moduleDepth), int32_t(f.topModules));
  flatbuffers::Offset<fb::CommsLogger> commsLogger;
  if (const DsConfig::CommsLogger &l = c.commsLogger; l.enabled) {
    std::vector<flatbuffers::Offset<flatbuffers::String>> ops;
    for (const std::string &op : l.ops)
      ops.push_back(b.CreateString(op));
    commsLogger =
        fb::CreateCommsLogger(b, l.verbose, l.allOps, b.CreateVector(ops));
  }
  auto root = fb::CreatePlanDirect(
      b, fb::kSchemaVersion, model.options.worldSize,
      model.options.model.c_str(), configJson.c_str(), model.microBatch,
      model.seqLen, model.vocabSize, model.options.accumulationSteps, schedule,
      &arenas, &buffers, &variables, &constants, &programs, lossScale,
      model.skipsOverflow, plan::kUnsealedChecksum,
      aliases.empty() ? nullptr : &aliases, flopsProfile, c.wallClockBreakdown,
      commsLogger, c.memoryBreakdown, uint32_t(model.options.tensorParallel),
      uint32_t(model.options.sequenceParallel),
      uint32_t(model.options.pipelineStages),
      uint32_t(model.options.pipelineStage),
      model.pipelineGroups.empty() ? nullptr : &model.pipelineGroups,
      /*stages=*/nullptr, model.modelParameters);
  return finish(b, root);
}

std::vector<uint8_t>
serializePipeline(const std::vector<std::vector<uint8_t>> &stagePlans,
                  int64_t worldSize, int64_t tensorParallel,
                  const std::string &model) {
  namespace fb = dsc::plan;
  flatbuffers::FlatBufferBuilder b(1 << 16);
  std::vector<flatbuffers::Offset<fb::PipelineStage>> stages;
  for (const std::vector<uint8_t> &bytes : stagePlans) {
    // A nested FlatBuffer is read in place: aligned as a buffer's start.
    b.ForceVectorAlignment(bytes.size(), 1, 16);
    stages.push_back(fb::CreatePipelineStage(b, b.CreateVector(bytes)));
  }
  // Offsets first: the builder takes no nested objects once a table starts.
  auto modelName = b.CreateString(model);
  auto stageVector = b.CreateVector(stages);
  fb::PlanBuilder root(b);
  root.add_schema_version(fb::kSchemaVersion);
  root.add_world_size(uint32_t(worldSize));
  root.add_model(modelName);
  root.add_checksum(plan::kUnsealedChecksum);
  root.add_tensor_parallel(uint32_t(tensorParallel));
  root.add_pipeline_parallel(uint32_t(stagePlans.size()));
  root.add_stages(stageVector);
  return finish(b, root.Finish());
}

} // namespace dsc
