//===- PipelineWeights.h - a pipeline's weights in one file -----*- C++ -*-===//
#ifndef DSC_RUNTIME_TOOLING_PIPELINEWEIGHTS_H
#define DSC_RUNTIME_TOOLING_PIPELINEWEIGHTS_H

#include "runtime/tooling/Weights.h"

#include <map>
#include <string>

namespace dsc::rt {

class Communicator;

/// --export-weights for replicas of a pipeline of `stages` stages, each
/// stage `tensorParallel` ranks, over the world `comm` (ranks s x
/// tensorParallel .. of replica 0 run stage s; `layout`: this rank's
/// stage's parameters): the file one rank would write, each parameter
/// once, written by rank 0 (`everyRank`: by each rank to its own `path`). A
/// collective: every rank calls it. False + one line on error.
bool exportPipelineWeights(Session &session, const WeightsLayout &layout,
                           Communicator &comm, int stages, int tensorParallel,
                           const std::string &path,
                           std::map<std::string, std::string> metadata,
                           std::string &error, bool everyRank = false);

} // namespace dsc::rt

#endif // DSC_RUNTIME_TOOLING_PIPELINEWEIGHTS_H
