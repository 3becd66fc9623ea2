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
      !s->choice("schedule", {"1f1b", "gpipe", "interleaved", "zbh1"},
                 c.pipelineSchedule, /*allowAuto=*/false) ||
      !s->integer("virtual_stages", c.pipelineVirtualStages) ||
      !r.atLeast(s->at("virtual_stages"), c.pipelineVirtualStages,
                 int64_t(1)) ||
      !s->ignoredBoolean("seed_layers") ||
      !s->ignoredInteger("activation_checkpoint_interval") ||
      !s->ignoredBoolean("pipe_partitioned") ||
      !s->ignoredBoolean("grad_partitioned"))
    return false;
  // The interleaved schedule runs 2 chunks a stage unless told otherwise.
  const bool interleaved = c.pipelineSchedule == "interleaved";
  if (interleaved && !s->get("virtual_stages"))
    c.pipelineVirtualStages = 2;
  if (interleaved != (c.pipelineVirtualStages > 1))
    return r.fail(s->at("virtual_stages"),
                  formatNumber(c.pipelineVirtualStages) +
                      (interleaved ? ": the interleaved schedule runs at "
                                     "least 2 chunks a stage"
                                   : " chunks a stage: virtual_stages is the "
                                     "\"interleaved\" schedule's"));
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
  if (c.pipelineSchedule == "interleaved" &&
      c.gradientAccumulationSteps % c.pipelineStages != 0)
    return r.fail(root.at("pipeline") + ".schedule",
                  "\"interleaved\" runs the micro-batches in groups of the " +
                      formatNumber(c.pipelineStages) +
                      " stages: gradient_accumulation_steps " +
                      formatNumber(c.gradientAccumulationSteps) +
                      " is not a multiple of it");
  if (c.sequenceParallelSize <= 1)
    return true;
  return r.fail(root.at("pipeline") + ".stages",
                "sequence_parallel_size beside a pipeline is not supported "
                "yet (docs/pipeline.md)");
}

} // namespace dsc::config
