//===- Session.h - a loaded plan, its memory and its programs -----*- C++ -*-===//
//
// The runtime's one entry point for tools: load (and verify) a plan, create a
// Session that allocates the plan's arenas, initialize or load variables, and
// run programs by name. No LLVM/MLIR here.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_EXEC_SESSION_H
#define DSC_RUNTIME_EXEC_SESSION_H

#include "runtime/kernels/Kernel.h"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace dsc::plan {
struct Plan; // generated from runtime/schema/plan.fbs
}

namespace dsc::rt {

/// A plan file's bytes, checked by the FlatBuffers verifier and then by the
/// semantic checks (buffers inside arenas, kernels known with the right
/// arity, events recorded before they are waited on, schema version).
class LoadedPlan {
public:
  /// Returns null and sets `error` to one line naming `path` on failure.
  static std::unique_ptr<LoadedPlan> load(const std::string &path,
                                          std::string &error);
  /// Same checks on bytes already in memory (`what` names them in errors).
  static std::unique_ptr<LoadedPlan> fromBytes(std::vector<uint8_t> bytes,
                                               const std::string &what,
                                               std::string &error);
  const dsc::plan::Plan &plan() const { return *plan_; }
  const std::vector<uint8_t> &bytes() const { return bytes_; }

private:
  std::vector<uint8_t> bytes_;
  const dsc::plan::Plan *plan_ = nullptr;
};

struct SessionOptions {
  uint64_t seed = 1337;
  int rank = 0;
  int worldSize = 1;
  /// Capacity of the "device" space in bytes; 0 = unlimited.
  uint64_t deviceMemory = 0;
};

/// A named tensor the tool can read or write (variables, program I/O).
struct NamedTensor {
  std::string name;
  TensorRef ref;
  std::vector<int64_t> shape;
};

/// Per arena: what the compiler predicted and the highest byte the run wrote.
struct ArenaUsage {
  std::string category; ///< params, grads, optimizer_state, activations, ...
  std::string space;    ///< device or host
  uint64_t predictedBytes = 0;
  uint64_t measuredBytes = 0;
};

class Session {
public:
  static std::unique_ptr<Session> create(const LoadedPlan &plan,
                                         const SessionOptions &options,
                                         std::string &error);
  virtual ~Session() = default;

  /// Fills every variable from its initializer (zeros, ones, or a normal
  /// draw keyed by (seed, variable stream, element index)).
  virtual void initVariables() = 0;

  /// Parameters, gradient accumulators and moments, in plan order.
  virtual const std::vector<NamedTensor> &variables() const = 0;
  virtual NamedTensor *findVariable(std::string_view name) = 0;

  /// The input and output buffers of a program, in signature order.
  virtual std::vector<NamedTensor> programInputs(std::string_view program) = 0;
  virtual std::vector<NamedTensor> programOutputs(std::string_view program) = 0;

  /// Runs every instruction of `program` on its streams and waits for it.
  /// `step` is the optimizer step (dropout masks). False + error on a kernel
  /// failure.
  virtual bool run(std::string_view program, uint32_t step,
                   std::string &error) = 0;

  virtual std::vector<ArenaUsage> arenaUsage() const = 0;
};

} // namespace dsc::rt

#endif // DSC_RUNTIME_EXEC_SESSION_H
