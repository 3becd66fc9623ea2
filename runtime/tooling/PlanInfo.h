//===- PlanInfo.h - what dsrun reads from a plan besides its programs -*- C++
//-*-===//
//
// The model's name and batch, the learning-rate schedule, the parameters'
// names and ties, the loss scaler's settings and the eval program's batch:
// read once from a verified plan, each checked for what the plan verifier
// does not (a schedule table, positive sizes, a loss scale in range).
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_TOOLING_PLANINFO_H
#define DSC_RUNTIME_TOOLING_PLANINFO_H

#include "runtime/plan/PlanFormat.h"
#include "runtime/tooling/LossScaler.h"
#include "runtime/tooling/Schedule.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace dsc::rt {

/// What dsrun reads from the plan besides the programs.
struct PlanInfo {
  std::string model;
  uint32_t microBatch = 0, seqLen = 0, vocabSize = 0, accumulationSteps = 0;
  ScheduleParams schedule;
  std::vector<std::string> params;
  std::vector<std::pair<std::string, std::string>> aliases; ///< Plan.aliases
  uint64_t numParams = 0; ///< elements over all parameters
  std::optional<LossScaleOptions> lossScale;
  bool skipsOverflow = false;
  uint32_t evalBatch = 0; ///< rows of the eval program's batch; 0: no eval
  /// Ranks of a tensor-parallel group (Plan.tensor_parallel): every rank
  /// of a group trains on the same batches.
  uint32_t tensorParallel = 1;
  /// Ranks of a Ulysses group (Plan.sequence_parallel): each feeds its
  /// [microBatch, seqLen / sequenceParallel] part of the group's batch.
  uint32_t sequenceParallel = 1;
  /// A pipeline's stages and the one this plan runs (Plan.pipeline_*).
  uint32_t pipelineStages = 1, pipelineStage = 0;
};

/// Rank `rank`'s place among the replicas its ZeRO shards are cut over:
/// ranks are data x pipeline x tensor (RankGroups.h); Ulysses' data
/// parallelism spans the world.
inline int shardRankOf(const PlanInfo &info, int rank) {
  return info.sequenceParallel > 1
             ? rank
             : rank / int(info.tensorParallel * info.pipelineStages);
}

/// Fills `info` from `plan` (already verified); false + one line ("plan:
/// ...") when a table dsrun needs is missing or out of range.
bool readPlanInfo(const plan::Plan &plan, PlanInfo &info, std::string &error);

/// The plan's parameters' whole shapes, by name.
std::map<std::string, std::vector<int64_t>> paramShapes(const plan::Plan &plan);

} // namespace dsc::rt

#endif // DSC_RUNTIME_TOOLING_PLANINFO_H
