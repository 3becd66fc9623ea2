//===- RankGroups.cpp - the communicators a rank's plan runs over --------===//

#include "runtime/exec/RankGroups.h"

#include "runtime/comm/Mesh.h"
#include "runtime/plan/PlanFormat.h"

#include <algorithm>

namespace dsc::rt {
namespace {

/// "0,3": the stages of a set (bit s: stage s), for a group's name.
std::string stageList(uint64_t set) {
  std::string out;
  for (int s = 0; s < 64; ++s)
    if (set >> s & 1)
      out += (out.empty() ? "" : ",") + std::to_string(s);
  return out;
}

} // namespace

bool RankGroups::make(const plan::Plan &plan, const std::string &planName,
                      int rank, int ranks, Communicator &world,
                      std::string &error) {
  const int tp = int(std::max<uint32_t>(1, plan.tensor_parallel()));
  const int sp = int(std::max<uint32_t>(1, plan.sequence_parallel()));
  const int stages = int(std::max<uint32_t>(1, plan.pipeline_parallel()));
  // The innermost group: tensor-parallel, or Ulysses'.
  const int group = std::max(tp, sp);
  if (ranks % (group * stages) != 0) {
    error =
        planName + ": " +
        (stages > 1 ? "a pipeline of " + std::to_string(stages) + " stages" +
                          (group > 1 ? " x " + std::to_string(group) +
                                           "-way tensor groups"
                                     : "")
                    : "groups of " + std::to_string(group) + " ranks") +
        " do not divide this run's " + std::to_string(ranks) + " ranks";
    return false;
  }
  const int replicas = ranks / (group * stages);
  tensorRank = rank % group;
  stage = rank / group % stages;
  dataRank = sp > 1 ? rank : rank / (group * stages);
  dataWorld = sp > 1 ? ranks : replicas;
  data = tensor = pipeline = &world;

  Mesh mesh = Mesh::make({{"data", replicas},
                          {"pipeline", stages},
                          {sp > 1 ? "sequence" : "tensor", group}},
                         error);
  if (!mesh.valid())
    return false;
  // The CUDA backend makes an NCCL communicator for each group from it. An
  // axis of size 1 or of the world's size needs no split.
  auto along = [&](size_t axis, std::unique_ptr<Communicator> &owned,
                   Communicator *&use) {
    const int size = mesh.axes()[axis].size;
    if (size == 1 || size == ranks)
      return true;
    owned = splitAlong(world, mesh, axis, error);
    use = owned.get();
    return owned != nullptr;
  };
  if (!along(2, tensorGroup_, tensor) ||
      (sp == 1 && !along(0, dataGroup_, data)) ||
      !along(1, pipelineGroup_, pipeline))
    return false;
  return stages == 1 || makeStageGroups(plan, stages, error);
}

// Each set of stages gets its communicator from a split of the pipeline
// group that every rank takes part in, in the plan's order; a rank outside
// the set holds one it never uses.
bool RankGroups::makeStageGroups(const plan::Plan &plan, int stages,
                                 std::string &error) {
  pipeline->setPeerLabel("stage");
  const uint64_t all =
      stages >= 64 ? ~uint64_t(0) : (uint64_t(1) << stages) - 1;
  if (const auto *sets = plan.pipeline_groups())
    for (uint64_t set : *sets) {
      if (set == all) {
        stageGroups_.push_back({set, nullptr});
        continue;
      }
      const bool member = set >> stage & 1;
      std::unique_ptr<Communicator> group = pipeline->split(
          member ? 0 : 1, stage, "stages " + stageList(set), error);
      if (!group)
        return false;
      stageGroups_.push_back({set, std::move(group)});
    }
  return true;
}

Communicator *RankGroups::ofStages(uint64_t stages) const {
  for (const auto &[set, comm] : stageGroups_)
    if (set == stages)
      return comm ? comm.get() : pipeline;
  return nullptr;
}

} // namespace dsc::rt
