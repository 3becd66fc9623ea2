//===- RankGroups.h - the communicators a rank's plan runs over -*- C++ -*-===//
//
// A plan's parallel layout cuts the world into groups: the world is a mesh
// data x pipeline x tensor (or data x sequence), innermost last, so rank
// (d x P + s) x G + t is tensor (or sequence) rank t of stage s of replica
// d. A tensor group is G consecutive ranks (one host, as Megatron places
// them), a pipeline group the P ranks of one replica that share a tensor
// rank, a data group (what ZeRO shards over) the replicas of one stage and
// tensor rank. Ulysses keeps every weight whole, so its data group is the
// world. RankGroups builds them once per Session; an axis as large as the
// world, or of size 1, uses the world's communicator itself.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_RUNTIME_EXEC_RANKGROUPS_H
#define DSC_RUNTIME_EXEC_RANKGROUPS_H

#include "runtime/comm/Communicator.h"

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace dsc::plan {
struct Plan;
} // namespace dsc::plan

namespace dsc::rt {

class RankGroups {
public:
  /// Splits `world` by `plan`'s layout for rank `rank` of `ranks` (the
  /// run's; a Session's own one-rank communicator stands in for a larger
  /// world until its first collective fails): a collective on `world`,
  /// every rank calls it. False and one line naming `planName` when the
  /// layout does not fit the world.
  bool make(const plan::Plan &plan, const std::string &planName, int rank,
            int ranks, Communicator &world, std::string &error);

  Communicator *data = nullptr;     ///< ZeRO's group
  Communicator *tensor = nullptr;   ///< tensor (or sequence) parallelism's
  Communicator *pipeline = nullptr; ///< the replica's stages, by stage
  int dataRank = 0, dataWorld = 1;
  int tensorRank = 0; ///< the rank's place in its tensor group
  int stage = 0;      ///< the rank's pipeline stage

  /// The communicator of a set of stages of Plan.pipeline_groups (bit s:
  /// stage s; the rank may be outside it), or null for a set the plan
  /// does not list.
  Communicator *ofStages(uint64_t stages) const;

private:
  bool makeStageGroups(const plan::Plan &plan, int stages, std::string &error);

  std::unique_ptr<Communicator> dataGroup_, tensorGroup_, pipelineGroup_;
  std::vector<std::pair<uint64_t, std::unique_ptr<Communicator>>> stageGroups_;
};

} // namespace dsc::rt

#endif // DSC_RUNTIME_EXEC_RANKGROUPS_H
