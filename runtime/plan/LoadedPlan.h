//===- LoadedPlan.h - a plan file, verified ---------------------*- C++ -*-===//
//
// The plan loader (LoadedPlan.cpp): the FlatBuffers verifier, then the
// semantic checks against the backend that will run it. runtime/exec's
// Session runs what this accepts; this knows nothing of the Session, so
// the two libraries depend one way (exec on plan). No LLVM/MLIR here.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_PLAN_LOADEDPLAN_H
#define DSC_RUNTIME_PLAN_LOADEDPLAN_H

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dsc::plan {
struct Plan; // generated from runtime/schema/plan.fbs
}

namespace dsc::rt {

class Backend;

/// A plan file's bytes, checked by the FlatBuffers verifier and then by the
/// semantic checks (buffers inside arenas, kernels known with the right
/// arity, events recorded before they are waited on, schema version). The
/// world size is checked by Session::create, which knows the run's.
class LoadedPlan {
public:
  /// Returns null and sets `error` to one line naming `path` on failure.
  /// The plan's kernels are checked against `backend`'s table, and its
  /// Sessions run on `backend`, which must outlive them.
  static std::unique_ptr<LoadedPlan> load(const std::string &path,
                                          std::string &error, Backend &backend);
  /// Same checks on bytes already in memory (`what` names them in errors).
  static std::unique_ptr<LoadedPlan> fromBytes(std::vector<uint8_t> bytes,
                                               const std::string &what,
                                               std::string &error,
                                               Backend &backend);
  const dsc::plan::Plan &plan() const { return *plan_; }
  const std::vector<uint8_t> &bytes() const { return bytes_; }
  /// The path or description the plan was loaded from, for messages.
  const std::string &name() const { return name_; }
  /// A pipeline's file (Plan.stages): the number of stage plans, else 0.
  uint32_t stageCount() const;
  /// Stage s's plan out of a pipeline's file, verified as a file is
  /// (named "PATH (stage s)"); null and one line on failure.
  std::unique_ptr<LoadedPlan> stage(uint32_t s, std::string &error) const;
  /// The stage rank `rank` runs: ranks are data x pipeline x tensor,
  /// tensor innermost (runtime/exec/RankGroups.h).
  uint32_t stageOfRank(int rank) const;
  /// The backend the plan was verified for.
  Backend &backend() const { return *backend_; }

private:
  std::vector<uint8_t> bytes_;
  const dsc::plan::Plan *plan_ = nullptr;
  std::string name_;
  Backend *backend_ = nullptr;
};

} // namespace dsc::rt

#endif // DSC_RUNTIME_PLAN_LOADEDPLAN_H
