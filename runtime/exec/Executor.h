//===- Executor.h - run a prepared program on stream threads -*- C++ -*-===//
//
// The runtime's host executor (StreamExecutor.h), used by every backend
// that brings none of its own: one worker thread per stream the plan uses,
// each running its stream's instructions in program order, each kernel
// finished before the next starts; events are the only synchronization
// between streams (wait before starting, record after finishing). Internal
// to runtime/exec.
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

class HostExecutor final : public StreamExecutor {
public:
  /// Starts a worker for each stream the spec uses.
  explicit HostExecutor(const ExecutorSpec &spec);
  ~HostExecutor() override;
  HostExecutor(const HostExecutor &) = delete;
  HostExecutor &operator=(const HostExecutor &) = delete;

  bool run(const PreparedProgram &program, const KernelContext &ctx,
           const std::string &what, std::string &error) override;
  const std::vector<uint64_t> &highWater() const override { return highWater_; }
  void setTracing(bool on) override { tracing_ = on; }
  std::vector<TraceRecord> takeTrace() override;

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
  /// The clock's own zero: steady_clock is CLOCK_MONOTONIC, one clock for
  /// every process of the machine, so the ranks' traces share a time axis
  /// (scripts/pipeline_timeline.py lines the stages up on it).
  std::chrono::steady_clock::time_point epoch_{};
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
