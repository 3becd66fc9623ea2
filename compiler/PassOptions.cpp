//===- PassOptions.cpp - a ds_config.json as pass options -----------------===//

#include "compiler/PassOptions.h"

namespace dsc {

TrainOptions passOptionsFromConfig(const DsConfig &config, int64_t worldSize) {
  TrainOptions o;
  o.setWorldSize(worldSize, config.tensorParallel, config.pipelineStages);
  o.pipeline.schedule = config.pipelineSchedule;
  o.pipelineCut.partition = config.pipelinePartition;
  o.pipeline.virtualStages = config.pipelineVirtualStages;
  o.shard.sequenceParallel = config.sequenceParallel;
  o.ulysses.sequenceParallel = config.sequenceParallelSize;
  o.chunk.chunks = config.microBatchChunks;
  o.setAccumulationSteps(config.gradientAccumulationSteps);
  // optimizer.params, gradient_clipping
  o.adamw.beta1 = config.optimizer.beta1;
  o.adamw.beta2 = config.optimizer.beta2;
  o.adamw.eps = config.optimizer.eps;
  o.adamw.weightDecay = config.optimizer.weightDecay;
  o.adamw.gradClip = config.gradientClipping;
  // "Adam" is AdamW here: dsc's Adam decays decoupled (adam_w_mode).
  const std::string &type = config.optimizer.type;
  o.adamw.optimizer = type == "SGD"       ? "sgd"
                      : type == "Lion"    ? "lion"
                      : type == "Adagrad" ? "adagrad"
                      : type == "Lamb"    ? "lamb"
                      : type == "Muon"    ? "muon"
                                          : "adamw";
  // Muon: the schedule's lr is its AdamW half's (optimizer.lr).
  if (type == "Muon" && config.optimizer.lr > 0)
    o.adamw.muonLrRatio = config.optimizer.muonLr / config.optimizer.lr;
  o.adamw.perHeadMuon = config.optimizer.perHeadMuon;
  o.adamw.lrDecay = config.optimizer.lrDecay;
  o.adamw.momentum = config.optimizer.momentum;
  o.adamw.dampening = config.optimizer.dampening;
  o.adamw.nesterov = config.optimizer.nesterov;
  o.adamw.cycleMomentum = config.scheduler.cycleMomentum;
  o.adamw.minCoeff = config.optimizer.minCoeff;
  o.adamw.maxCoeff = config.optimizer.maxCoeff;
  o.adamw.biasCorrection = config.optimizer.biasCorrection;
  o.adamw.epsInsideSqrt = config.optimizer.epsInsideSqrt;
  // fp16 / bf16: the model in 16 bits; fp16 (which scales the loss)
  // always checks for overflow, bf16 when check_grad_overflow says so.
  if (config.fp16.enabled || config.bf16.enabled) {
    mlir::ds::DsPrecisionOptions p = mlir::ds::precisionOptionsFor(
        config.fp16.enabled ? mlir::ds::LowPrecision::f16
                            : mlir::ds::LowPrecision::bf16);
    p.checkOverflow = config.fp16.enabled || config.bf16.checkGradOverflow;
    o.precision = p;
    o.zero.wideCollectives = config.communicationDataType == "fp32";
  }
  // activation_checkpointing: dsc's policy keys
  o.remat.policy =
      mlir::ds::remat::policyNamed(config.activationCheckpointing.remat);
  o.remat.every = config.activationCheckpointing.rematEvery;
  o.remat.activationMemory = config.activationCheckpointing.activationMemory;
  // zero_optimization
  o.zero.stage = config.zero.stage;
  o.zero.bucketSize = config.zero.reduceBucketSize;
  o.zero.prefetchBucketSize = config.zero.stage3PrefetchBucketSize;
  o.zero.maxLiveParameters = config.zero.stage3MaxLiveParameters;
  o.zero.persistenceThreshold = config.zero.stage3ParamPersistenceThreshold;
  o.offload.offloadOptimizer = config.zero.offloadOptimizer == "cpu";
  o.offload.offloadParam = config.zero.offloadParam == "cpu";
  o.offload.persistenceThreshold = o.zero.persistenceThreshold;
  o.offload.cpuCheckpointing = config.activationCheckpointing.cpuCheckpointing;
  return o;
}

} // namespace dsc
