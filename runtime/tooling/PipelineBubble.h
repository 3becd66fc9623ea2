//===- PipelineBubble.h - a pipeline's measured bubble ----------*- C++ -*-===//
//
// The share of a step a pipeline's stages spend not computing: waiting for
// a neighbour's activation or gradient, or for the slowest stage. Measured
// as dsc --report predicts it (PipelineTimeline::bubble): 1 - (the ranks'
// compute-stream busy time) / (ranks x the step's span), where a rank's busy
// time is the sum of its compute-stream instructions in its micro_step run
// (the executor's trace records) and the span the longest micro_step run of
// any rank (every stage starts the step together, after the previous
// step's collectives, and the step ends when the last stage ends).
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_TOOLING_PIPELINEBUBBLE_H
#define DSC_RUNTIME_TOOLING_PIPELINEBUBBLE_H

#include "runtime/backends/StreamExecutor.h"

#include <string>
#include <vector>

namespace dsc::rt {

class Communicator;

class PipelineBubble {
public:
  /// Adds the micro_step runs among a step's trace records (other
  /// programs' records are ignored).
  void add(const std::vector<TraceRecord> &records);
  /// The step's bubble over every rank of `comm` (a collective: every rank
  /// calls it once per step), in [0, 1]; clears what was added. False and
  /// one line when the collective fails.
  bool takeStep(Communicator &comm, double &bubble, std::string &error);

private:
  double busyNs_ = 0, spanNs_ = 0;
};

} // namespace dsc::rt

#endif // DSC_RUNTIME_TOOLING_PIPELINEBUBBLE_H
