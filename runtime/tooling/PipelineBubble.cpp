//===- PipelineBubble.cpp - a pipeline's measured bubble ------------------===//

#include "runtime/tooling/PipelineBubble.h"

#include "runtime/comm/Communicator.h"
#include "runtime/plan/ProgramNames.h"

#include <algorithm>
#include <limits>

namespace dsc::rt {

void PipelineBubble::add(const std::vector<TraceRecord> &records) {
  int64_t begin = std::numeric_limits<int64_t>::max();
  int64_t end = std::numeric_limits<int64_t>::min();
  for (const TraceRecord &r : records) {
    if (r.program != plan::kMicroStepProgram &&
        r.program != plan::kMicroStepSyncProgram)
      continue;
    begin = std::min(begin, r.beginNs);
    end = std::max(end, r.endNs);
    if (r.stream == "compute")
      busyNs_ += double(r.endNs - r.beginNs);
  }
  if (end > begin)
    spanNs_ += double(end - begin);
}

bool PipelineBubble::takeStep(Communicator &comm, double &bubble,
                              std::string &error) {
  const double mine[2] = {busyNs_, spanNs_};
  std::vector<double> all(2 * size_t(comm.size()));
  busyNs_ = spanNs_ = 0;
  if (!comm.allGather(mine, all.data(), 2, DType::f64, nullptr, error))
    return false;
  double busy = 0, span = 0;
  for (size_t r = 0; r < all.size(); r += 2) {
    busy += all[r];
    span = std::max(span, all[r + 1]);
  }
  const double ranks = double(comm.size());
  bubble = span > 0 ? std::clamp(1 - busy / (ranks * span), 0.0, 1.0) : 0.0;
  return true;
}

} // namespace dsc::rt
