//===- StreamExecutor.h - what runs a prepared program's streams -*- C++
//-*-===//
//
// The Session resolves a plan's programs into PreparedPrograms (kernel
// functions over tensors, per stream, with their events) and hands each run
// to a StreamExecutor. A backend may bring its own (Backend::createExecutor:
// CUDA enqueues each stream's kernels on a cudaStream_t and turns events
// into cudaEvent_t's); otherwise the Session uses the runtime's host
// executor (runtime/exec/Executor.h: one worker thread per stream, each
// kernel finished before the next starts). Either way the contract is the
// plan's: a stream runs its instructions in program order, waits on an
// instruction's `wait` events before starting it and records its `record`
// events after it, and run() returns once every stream has finished.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_BACKENDS_STREAMEXECUTOR_H
#define DSC_RUNTIME_BACKENDS_STREAMEXECUTOR_H

#include "runtime/comm/Communicator.h"
#include "runtime/kernels/Kernel.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dsc::rt {

/// Queue and library handles of one plan stream (KernelContext::stream and
/// ::handles), from Backend::streamResources.
struct StreamResources {
  void *stream = nullptr;
  void *handles = nullptr;
};

/// One executed instruction. Names point into the plan, which must outlive
/// the record; times are nanoseconds since the Session was created.
struct TraceRecord {
  std::string_view program;
  std::string_view kernel;
  std::string_view loc;
  std::string_view stream; ///< compute, comm, h2d, d2h
  uint32_t instr = 0;      ///< index in the program
  int64_t beginNs = 0;
  int64_t endNs = 0;
  /// Its place in a pipeline schedule (PreparedInstr's): -1 / 0 for none.
  int32_t microBatch = -1;
  char part = 0;
};

constexpr int kNumStreams = 4; ///< compute, comm, h2d, d2h (plan.fbs Stream)

/// One instruction with its operands resolved to tensors.
struct PreparedInstr {
  uint32_t index = 0;
  KernelFn fn = nullptr;
  std::string_view kernel;
  std::string_view loc;
  /// Its place in a pipeline stage's schedule (plan Instr.micro_batch and
  /// .schedule_part as 'F', 'B' or 'W'): -1 and 0 outside one.
  int32_t microBatch = -1;
  char part = 0;
  std::vector<TensorRef> inputs, outputs;
  std::vector<int64_t> intAttrs;
  std::vector<double> floatAttrs;
  std::vector<uint32_t> wait, record;
  /// The backend's queue and handles for this instruction's space and
  /// stream (KernelContext::stream and ::handles).
  StreamResources resources;
  /// Placed in the host space: a GPU executor runs it on the CPU, in its
  /// plan stream's order.
  bool host = false;
  /// A collective over the tensor-parallel group (KernelContext's
  /// tensorComm).
  bool tensorGroup = false;
  /// A pipeline-group collective's or a stage's message's communicator
  /// (the Session resolves Instr.pipeline_group and comm.send/recv to the
  /// group they run over), its ranks the group's stages; else null.
  Communicator *groupComm = nullptr;
  /// (arena, end of the output's bytes) for the high-water mark.
  std::vector<std::pair<uint32_t, uint64_t>> writes;
};

/// The context instruction `in` runs with: the run's, with the resources
/// of its stream (`onHost`: none, a host function's), and for a
/// tensor-group collective the tensor group as its communicator, with its
/// place and size there as rank and world size. Every executor builds its
/// instructions' contexts here.
inline KernelContext instructionContext(const PreparedInstr &in,
                                        const KernelContext &run,
                                        bool onHost = false) {
  KernelContext ctx = run;
  ctx.stream = onHost ? nullptr : in.resources.stream;
  ctx.handles = onHost ? nullptr : in.resources.handles;
  Communicator *group = in.groupComm     ? in.groupComm
                        : in.tensorGroup ? run.tensorComm
                                         : nullptr;
  if (group) {
    ctx.comm = group;
    ctx.rank = group->rank();
    ctx.worldSize = group->size();
  }
  return ctx;
}

struct PreparedProgram {
  std::string_view name;
  std::vector<PreparedInstr> instrs;
  /// Indices into `instrs`, per stream, in program order.
  std::array<std::vector<uint32_t>, kNumStreams> perStream;
  uint32_t numEvents = 0;
  std::vector<uint32_t> inputs, outputs; ///< buffer ids
};

/// What an executor is created for: the streams some program uses, the
/// most events any program declares, and the number of arenas (for the
/// high-water marks).
struct ExecutorSpec {
  std::array<bool, kNumStreams> streamUsed{};
  uint32_t maxEvents = 0;
  size_t numArenas = 0;
};

class StreamExecutor {
public:
  virtual ~StreamExecutor() = default;

  /// Runs `program` and returns once every stream has finished. On a
  /// kernel failure the run stops (instructions already started finish)
  /// and `error` names the instruction, prefixed with `what`.
  virtual bool run(const PreparedProgram &program, const KernelContext &ctx,
                   const std::string &what, std::string &error) = 0;

  /// Per arena, the highest output byte any executed instruction wrote.
  virtual const std::vector<uint64_t> &highWater() const = 0;

  virtual void setTracing(bool on) = 0;
  virtual std::vector<TraceRecord> takeTrace() = 0;
};

} // namespace dsc::rt

#endif // DSC_RUNTIME_BACKENDS_STREAMEXECUTOR_H
