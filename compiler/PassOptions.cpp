//===- PassOptions.cpp - a ds_config.json as pass options -----------------===//

#include "compiler/PassOptions.h"

namespace dsc {

TrainOptions passOptionsFromConfig(const DsConfig &config, int64_t worldSize) {
  TrainOptions o;
  o.setWorldSize(worldSize);
  o.setAccumulationSteps(config.gradientAccumulationSteps);
  // optimizer.params, gradient_clipping
  o.adamw.beta1 = config.optimizer.beta1;
  o.adamw.beta2 = config.optimizer.beta2;
  o.adamw.eps = config.optimizer.eps;
  o.adamw.weightDecay = config.optimizer.weightDecay;
  o.adamw.gradClip = config.gradientClipping;
  // zero_optimization
  o.zero.stage = config.zero.stage;
  o.zero.bucketSize = config.zero.reduceBucketSize;
  o.zero.prefetchBucketSize = config.zero.stage3PrefetchBucketSize;
  o.zero.maxLiveParameters = config.zero.stage3MaxLiveParameters;
  o.zero.persistenceThreshold = config.zero.stage3ParamPersistenceThreshold;
  // What dsrun reads from the plan: the whole config, the LR schedule.
  o.plan.configJson = toJson(config);
  o.plan.scheduleKind = config.scheduler.type;
  o.plan.lr = config.optimizer.lr;
  o.plan.warmupMinLr = config.scheduler.warmupMinLr;
  o.plan.warmupMaxLr = config.scheduler.warmupMaxLr;
  o.plan.warmupNumSteps = config.scheduler.warmupNumSteps;
  o.plan.warmupType = config.scheduler.warmupType;
  o.plan.totalNumSteps = config.scheduler.totalNumSteps;
  o.plan.cosMinRatio = config.scheduler.cosMinRatio;
  o.plan.warmupMinRatio = config.scheduler.warmupMinRatio;
  return o;
}

} // namespace dsc
