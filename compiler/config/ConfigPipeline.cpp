//===- ConfigPipeline.cpp - the pipeline section --------------------------===//
//
// DeepSpeed configures a pipeline's stages in PipelineModule (num_stages,
// partition_method) and keeps a `pipeline` section for the engine's
// options. dsc has no module to ask, so the section carries the stages
// themselves (docs/pipeline.md): `stages`, `partition` and dsc's
// `schedule`. The micro-batches of a step are gradient_accumulation_steps.
//
//===----------------------------------------------------------------------===//
#include "compiler/config/ConfigReader.h"

namespace dsc::config {

bool readPipeline(Reader &r, Section &root, int64_t worldSize, DsConfig &c) {
  std::optional<Section> s;
  if (!root.section("pipeline", s))
    return false;
  if (!s->present())
    return true;
  if (!s->checkKeys() || !s->integer("stages", c.pipelineStages) ||
      !r.atLeast(s->at("stages"), c.pipelineStages, int64_t(1)) ||
      !s->choice("partition", {"uniform", "parameters", "balanced"},
                 c.pipelinePartition, /*allowAuto=*/false) ||
      !s->choice("schedule", {"1f1b", "gpipe"}, c.pipelineSchedule,
                 /*allowAuto=*/false) ||
      !s->ignoredBoolean("seed_layers") ||
      !s->ignoredInteger("activation_checkpoint_interval") ||
      !s->ignoredBoolean("pipe_partitioned") ||
      !s->ignoredBoolean("grad_partitioned"))
    return false;
  if (c.pipelineStages > 64) {
    r.fail(s->at("stages"), formatNumber(c.pipelineStages) +
                                " stages: at most 64 are supported");
    c.pipelineStages = 1;
    return false;
  }
  if (worldSize % c.pipelineStages != 0) {
    r.fail(s->at("stages"), formatNumber(c.pipelineStages) +
                                " does not divide the world size " +
                                formatNumber(worldSize));
    c.pipelineStages = 1;
    return false;
  }
  // Read after tensor_parallel: a replica is stages x tensor groups.
  if (worldSize % (c.pipelineStages * c.tensorParallel) != 0) {
    r.fail(s->at("stages"), formatNumber(c.pipelineStages) + " stages x " +
                                formatNumber(c.tensorParallel) +
                                " tensor-parallel ranks do not divide the "
                                "world size " +
                                formatNumber(worldSize));
    c.pipelineStages = 1;
    return false;
  }
  return true;
}

bool checkPipelineComposition(Reader &r, Section &root, const DsConfig &c) {
  if (c.pipelineStages <= 1)
    return true;
  const char *other =
      c.sequenceParallelSize > 1 ? "sequence_parallel_size"
      : c.zero.stage > 1         ? "zero_optimization.stage 2 and 3"
      : c.zero.offloadOptimizer != "none" || c.zero.offloadParam != "none"
          ? "zero_optimization's offload"
          : nullptr;
  if (!other)
    return true;
  return r.fail(root.at("pipeline") + ".stages",
                std::string(other) +
                    " beside a pipeline is not supported yet "
                    "(docs/pipeline.md: ZeRO stages 0 and 1, no offload)");
}

} // namespace dsc::config
