//===- ConfigJson.cpp - a DsConfig back to JSON, and equality -------------===//
//
// toJson writes every key with its resolved value ("auto" resolved), which
// is what a plan records as the configuration it was compiled with.
//
//===----------------------------------------------------------------------===//

#include "compiler/config/Config.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <tuple>

using namespace dsc;
namespace json = llvm::json;

namespace {

/// The scheduler's params, each under DeepSpeed's name for its type.
json::Object schedulerParams(const DsConfig::Scheduler &s) {
  if (s.type == "LRRangeTest")
    return json::Object{{"lr_range_test_min_lr", s.rangeMinLr},
                        {"lr_range_test_step_size", s.rangeStepSize},
                        {"lr_range_test_step_rate", s.rangeStepRate},
                        {"lr_range_test_staircase", s.rangeStaircase}};
  if (s.type == "OneCycle")
    return json::Object{{"cycle_min_lr", s.cycleMinLr},
                        {"cycle_max_lr", s.cycleMaxLr},
                        {"decay_lr_rate", s.decayLrRate},
                        {"cycle_first_step_size", s.cycleFirstStepSize},
                        {"cycle_second_step_size", s.cycleSecondStepSize},
                        {"cycle_first_stair_count", s.cycleFirstStairCount},
                        {"cycle_second_stair_count", s.cycleSecondStairCount},
                        {"decay_step_size", s.decayStepSize},
                        {"cycle_momentum", s.cycleMomentum},
                        {"cycle_min_mom", s.cycleMinMom},
                        {"cycle_max_mom", s.cycleMaxMom},
                        {"decay_mom_rate", s.decayMomRate}};
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
  return params;
}

/// The params each optimizer takes (ConfigOptimizer.cpp refuses the
/// others').
json::Object optimizerParams(const DsConfig::Optimizer &o) {
  json::Object params{{"lr", o.lr}, {"weight_decay", o.weightDecay}};
  if (o.type == "SGD") {
    params["momentum"] = o.momentum;
    params["dampening"] = o.dampening;
    params["nesterov"] = o.nesterov;
    return params;
  }
  if (o.type == "Adagrad") {
    params["eps"] = o.eps;
    params["lr_decay"] = o.lrDecay;
    return params;
  }
  params["betas"] = json::Array{o.beta1, o.beta2};
  if (o.type != "Lion")
    params["eps"] = o.eps;
  if (o.type == "Lamb") {
    params["bias_correction"] = o.biasCorrection;
    params["eps_inside_sqrt"] = o.epsInsideSqrt;
    params["min_coeff"] = o.minCoeff;
    params["max_coeff"] = o.maxCoeff;
  }
  return params;
}

} // namespace

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
       json::Object{{"type", o.type}, {"params", optimizerParams(o)}}},
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

  if (s.type != "constant")
    root["scheduler"] =
        json::Object{{"type", s.type}, {"params", schedulerParams(s)}};
  if (!c.communicationDataType.empty())
    root["communication_data_type"] = c.communicationDataType;
  // Written only when on: the plans of other configs record what they did.
  if (const auto &p = c.flopsProfiler; p.enabled)
    root["flops_profiler"] = json::Object{{"enabled", true},
                                          {"profile_step", p.profileStep},
                                          {"module_depth", p.moduleDepth},
                                          {"top_modules", p.topModules}};
  if (c.wallClockBreakdown)
    root["wall_clock_breakdown"] = true;
  if (c.memoryBreakdown)
    root["memory_breakdown"] = true;
  if (const auto &l = c.commsLogger; l.enabled) {
    json::Array ops;
    for (const std::string &op : l.ops)
      ops.push_back(op);
    root["comms_logger"] = json::Object{{"enabled", true},
                                        {"verbose", l.verbose},
                                        {"prof_all", l.allOps},
                                        {"prof_ops", std::move(ops)}};
  }

  std::string text;
  llvm::raw_string_ostream os(text);
  os << json::Value(std::move(root));
  os.flush();
  return text;
}

namespace {

// Each section's values as a tuple of references, compared field by field
// (C++17 has no defaulted ==). A field added to DsConfig belongs in its
// section's tuple, as it does in toJson.
auto topLevelFields(const DsConfig &c) {
  return std::tie(c.trainBatchSize, c.microBatchSize,
                  c.gradientAccumulationSteps, c.gradientClipping,
                  c.communicationDataType, c.wallClockBreakdown,
                  c.memoryBreakdown);
}

auto fields(const DsConfig::Optimizer &o) {
  return std::tie(o.type, o.lr, o.beta1, o.beta2, o.eps, o.weightDecay,
                  o.momentum, o.dampening, o.nesterov, o.lrDecay, o.minCoeff,
                  o.maxCoeff, o.biasCorrection, o.epsInsideSqrt);
}

auto fields(const DsConfig::Scheduler &s) {
  return std::tie(
      s.type, s.warmupMinLr, s.warmupMaxLr, s.warmupNumSteps, s.warmupType,
      s.totalNumSteps, s.cosMinRatio, s.warmupMinRatio, s.rangeMinLr,
      s.rangeStepRate, s.rangeStepSize, s.rangeStaircase, s.cycleMinLr,
      s.cycleMaxLr, s.decayLrRate, s.cycleFirstStepSize, s.cycleSecondStepSize,
      s.cycleFirstStairCount, s.cycleSecondStairCount, s.decayStepSize,
      s.cycleMomentum, s.cycleMinMom, s.cycleMaxMom, s.decayMomRate);
}

auto fields(const DsConfig::Fp16 &f) {
  return std::tie(f.enabled, f.lossScale, f.initialScalePower,
                  f.lossScaleWindow, f.hysteresis, f.consecutiveHysteresis,
                  f.minLossScale);
}

auto fields(const DsConfig::Bf16 &b) {
  return std::tie(b.enabled, b.checkGradOverflow);
}

auto fields(const DsConfig::FlopsProfiler &p) {
  return std::tie(p.enabled, p.profileStep, p.moduleDepth, p.topModules);
}

auto fields(const DsConfig::CommsLogger &l) {
  return std::tie(l.enabled, l.verbose, l.allOps, l.ops);
}

auto fields(const DsConfig::Zero &z) {
  return std::tie(z.stage, z.offloadOptimizer, z.offloadParam,
                  z.reduceBucketSize, z.contiguousGradients, z.overlapComm,
                  z.stage3PrefetchBucketSize, z.stage3ParamPersistenceThreshold,
                  z.stage3MaxLiveParameters);
}

auto fields(const DsConfig::ActivationCheckpointing &a) {
  return std::tie(a.partitionActivations, a.cpuCheckpointing,
                  a.contiguousMemoryOptimization, a.numberCheckpoints,
                  a.synchronizeCheckpointBoundary, a.profile, a.remat,
                  a.rematEvery, a.activationMemory);
}

} // namespace

bool dsc::operator==(const DsConfig &a, const DsConfig &b) {
  return topLevelFields(a) == topLevelFields(b) &&
         fields(a.optimizer) == fields(b.optimizer) &&
         fields(a.scheduler) == fields(b.scheduler) &&
         fields(a.fp16) == fields(b.fp16) && fields(a.bf16) == fields(b.bf16) &&
         fields(a.flopsProfiler) == fields(b.flopsProfiler) &&
         fields(a.commsLogger) == fields(b.commsLogger) &&
         fields(a.zero) == fields(b.zero) &&
         fields(a.activationCheckpointing) == fields(b.activationCheckpointing);
}
