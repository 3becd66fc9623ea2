//===- ConfigJson.cpp - a DsConfig back to JSON, and equality -------------===//
//
// toJson writes every key with its resolved value ("auto" resolved), which
// is what a plan records as the configuration it was compiled with.
//
//===----------------------------------------------------------------------===//

#include "compiler/config/Config.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

using namespace dsc;
namespace json = llvm::json;

std::string dsc::toJson(const DsConfig &c) {
  const auto &o = c.optimizer;
  const auto &s = c.scheduler;
  const auto &f = c.fp16;
  const auto &z = c.zero;
  const auto &a = c.activationCheckpointing;

  json::Object root{
      {"train_batch_size", c.trainBatchSize},
      {"train_micro_batch_size_per_gpu", c.microBatchSize},
      {"gradient_accumulation_steps", c.gradientAccumulationSteps},
      {"gradient_clipping", c.gradientClipping},
      {"optimizer",
       json::Object{{"type", o.type},
                    {"params", json::Object{{"lr", o.lr},
                                            {"betas", {o.beta1, o.beta2}},
                                            {"eps", o.eps},
                                            {"weight_decay", o.weightDecay}}}}},
      {"fp16", json::Object{{"enabled", f.enabled},
                            {"loss_scale", f.lossScale},
                            {"initial_scale_power", f.initialScalePower},
                            {"loss_scale_window", f.lossScaleWindow},
                            {"hysteresis", f.hysteresis},
                            {"consecutive_hysteresis", f.consecutiveHysteresis},
                            {"min_loss_scale", f.minLossScale}}},
      {"bf16", json::Object{{"enabled", c.bf16.enabled},
                            {"check_grad_overflow", c.bf16.checkGradOverflow}}},
      {"zero_optimization",
       json::Object{
           {"stage", z.stage},
           {"offload_optimizer", json::Object{{"device", z.offloadOptimizer}}},
           {"offload_param", json::Object{{"device", z.offloadParam}}},
           {"reduce_bucket_size", z.reduceBucketSize},
           {"contiguous_gradients", z.contiguousGradients},
           {"overlap_comm", z.overlapComm},
           {"stage3_prefetch_bucket_size", z.stage3PrefetchBucketSize},
           {"stage3_param_persistence_threshold",
            z.stage3ParamPersistenceThreshold},
           {"stage3_max_live_parameters", z.stage3MaxLiveParameters}}},
      {"activation_checkpointing",
       json::Object{
           {"partition_activations", a.partitionActivations},
           {"cpu_checkpointing", a.cpuCheckpointing},
           {"contiguous_memory_optimization", a.contiguousMemoryOptimization},
           {"number_checkpoints", a.numberCheckpoints < 0
                                      ? json::Value(nullptr)
                                      : json::Value(a.numberCheckpoints)},
           {"synchronize_checkpoint_boundary", a.synchronizeCheckpointBoundary},
           {"profile", a.profile},
           {"remat", a.remat},
           {"remat_every", a.rematEvery},
           {"activation_memory", a.activationMemory}}},
  };

  if (s.type != "constant") {
    json::Object params{{"warmup_num_steps", s.warmupNumSteps},
                        {"warmup_type", s.warmupType}};
    if (s.type == "WarmupCosineLR") {
      params["warmup_min_ratio"] = s.warmupMinRatio;
      params["cos_min_ratio"] = s.cosMinRatio;
    } else {
      params["warmup_min_lr"] = s.warmupMinLr;
      params["warmup_max_lr"] = s.warmupMaxLr;
    }
    if (s.type != "WarmupLR")
      params["total_num_steps"] = s.totalNumSteps;
    root["scheduler"] =
        json::Object{{"type", s.type}, {"params", std::move(params)}};
  }
  if (!c.communicationDataType.empty())
    root["communication_data_type"] = c.communicationDataType;

  std::string text;
  llvm::raw_string_ostream os(text);
  os << json::Value(std::move(root));
  os.flush();
  return text;
}

bool dsc::operator==(const DsConfig &a, const DsConfig &b) {
  const auto &ao = a.optimizer, &bo = b.optimizer;
  const auto &as = a.scheduler, &bs = b.scheduler;
  const auto &af = a.fp16, &bf = b.fp16;
  const auto &az = a.zero, &bz = b.zero;
  const auto &aa = a.activationCheckpointing, &ba = b.activationCheckpointing;
  return a.trainBatchSize == b.trainBatchSize &&
         a.microBatchSize == b.microBatchSize &&
         a.gradientAccumulationSteps == b.gradientAccumulationSteps &&
         a.gradientClipping == b.gradientClipping &&
         // Optimizer
         ao.type == bo.type && ao.lr == bo.lr && ao.beta1 == bo.beta1 &&
         ao.beta2 == bo.beta2 && ao.eps == bo.eps &&
         ao.weightDecay == bo.weightDecay &&
         // Scheduler
         as.type == bs.type && as.warmupMinLr == bs.warmupMinLr &&
         as.warmupMaxLr == bs.warmupMaxLr &&
         as.warmupNumSteps == bs.warmupNumSteps &&
         as.warmupType == bs.warmupType &&
         as.totalNumSteps == bs.totalNumSteps &&
         as.cosMinRatio == bs.cosMinRatio &&
         as.warmupMinRatio == bs.warmupMinRatio &&
         // Precision
         af.enabled == bf.enabled && af.lossScale == bf.lossScale &&
         af.initialScalePower == bf.initialScalePower &&
         af.lossScaleWindow == bf.lossScaleWindow &&
         af.hysteresis == bf.hysteresis &&
         af.consecutiveHysteresis == bf.consecutiveHysteresis &&
         af.minLossScale == bf.minLossScale &&
         a.bf16.enabled == b.bf16.enabled &&
         a.bf16.checkGradOverflow == b.bf16.checkGradOverflow &&
         a.communicationDataType == b.communicationDataType &&
         // ZeRO
         az.stage == bz.stage && az.offloadOptimizer == bz.offloadOptimizer &&
         az.offloadParam == bz.offloadParam &&
         az.reduceBucketSize == bz.reduceBucketSize &&
         az.contiguousGradients == bz.contiguousGradients &&
         az.overlapComm == bz.overlapComm &&
         az.stage3PrefetchBucketSize == bz.stage3PrefetchBucketSize &&
         az.stage3ParamPersistenceThreshold ==
             bz.stage3ParamPersistenceThreshold &&
         az.stage3MaxLiveParameters == bz.stage3MaxLiveParameters &&
         // Activation checkpointing
         aa.partitionActivations == ba.partitionActivations &&
         aa.cpuCheckpointing == ba.cpuCheckpointing &&
         aa.contiguousMemoryOptimization == ba.contiguousMemoryOptimization &&
         aa.numberCheckpoints == ba.numberCheckpoints &&
         aa.synchronizeCheckpointBoundary == ba.synchronizeCheckpointBoundary &&
         aa.profile == ba.profile && aa.remat == ba.remat &&
         aa.rematEvery == ba.rematEvery &&
         aa.activationMemory == ba.activationMemory;
}
