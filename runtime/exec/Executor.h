//===- Executor.h - run a prepared program on stream threads -*- C++ -*-===//
//
// The CPU executor behind Session::run: one worker thread per stream the plan
// uses, each running its stream's instructions in program order; events are
// the only synchronization between streams (wait before starting, record
// after finishing). Internal to runtime/exec.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_EXEC_EXECUTOR_H
#define DSC_RUNTIME_EXEC_EXECUTOR_H

#include "runtime/exec/Session.h"

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace dsc::rt {

constexpr int kNumStreams = 4; ///< compute, comm, h2d, d2h (plan.fbs Stream)

/// One instruction with its operands resolved to tensors.
struct PreparedInstr {
  uint32_t index = 0;
  KernelFn fn = nullptr;
  std::string_view kernel;
  std::string_view loc;
  std::vector<TensorRef> inputs, outputs;
  std::vector<int64_t> intAttrs;
  std::vector<double> floatAttrs;
  std::vector<uint32_t> wait, record;
  /// The backend's queue and handles for this instruction's space and
  /// stream (KernelContext::stream and ::handles).
  StreamResources resources;
  /// (arena, end of the output's bytes) for the high-water mark.
  std::vector<std::pair<uint32_t, uint64_t>> writes;
};

struct PreparedProgram {
  std::string_view name;
  std::vector<PreparedInstr> instrs;
  /// Indices into `instrs`, per stream, in program order.
  std::array<std::vector<uint32_t>, kNumStreams> perStream;
  uint32_t numEvents = 0;
  std::vector<uint32_t> inputs, outputs; ///< buffer ids
};

class Executor {
public:
  /// Starts a worker for each stream with `streamUsed[s]`; `maxEvents` is the
  /// largest event count of any program.
  Executor(std::array<bool, kNumStreams> streamUsed, uint32_t maxEvents,
           size_t numArenas);
  ~Executor();
  Executor(const Executor &) = delete;
  Executor &operator=(const Executor &) = delete;

  /// Runs `program` and waits for every stream. On a kernel failure the run
  /// stops (instructions already started finish) and `error` names the
  /// instruction; `what` prefixes it.
  bool run(const PreparedProgram &program, const KernelContext &ctx,
           const std::string &what, std::string &error);

  /// Per arena, the highest output byte any executed instruction wrote.
  const std::vector<uint64_t> &highWater() const { return highWater_; }

  void setTracing(bool on) { tracing_ = on; }
  std::vector<TraceRecord> takeTrace();

private:
  struct Worker {
    int stream = 0;
    std::thread thread;
    std::vector<uint64_t> highWater;
    std::vector<TraceRecord> trace;
  };

  void workerLoop(Worker &worker);
  void runStream(Worker &worker, const PreparedProgram &program);
  bool waitEvent(uint32_t event);
  void recordEvent(uint32_t event);
  void abort(std::string message);
  int64_t nowNs() const;

  std::vector<std::unique_ptr<Worker>> workers_;
  std::vector<uint64_t> highWater_;
  std::chrono::steady_clock::time_point epoch_;
  bool tracing_ = false;

  // Guarded by mutex_: the current run and the events' state.
  std::mutex mutex_;
  std::condition_variable workCv_, doneCv_, eventCv_;
  bool stop_ = false;
  uint64_t generation_ = 0; ///< bumped for each run
  const PreparedProgram *job_ = nullptr;
  KernelContext ctx_;
  int pending_ = 0; ///< workers still running the current job
  /// eventGen_[e] == generation_ once event e is recorded in this run.
  std::vector<uint64_t> eventGen_;
  std::string error_;
  std::atomic<bool> aborted_{false};
  std::string what_;
};

} // namespace dsc::rt

#endif // DSC_RUNTIME_EXEC_EXECUTOR_H
