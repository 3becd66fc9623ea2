//===- Executor.cpp - run a prepared program on stream threads ----------===//

#include "runtime/exec/Executor.h"

#include "runtime/plan/PlanFormat.h"

#include <algorithm>
#include <exception>

namespace dsc::rt {

HostExecutor::HostExecutor(const ExecutorSpec &spec)
    : highWater_(spec.numArenas, 0), eventGen_(spec.maxEvents, 0) {
  for (int s = 0; s < kNumStreams; ++s) {
    if (!spec.streamUsed[s])
      continue;
    auto worker = std::make_unique<Worker>();
    worker->stream = s;
    worker->highWater.assign(spec.numArenas, 0);
    workers_.push_back(std::move(worker));
  }
  // Start the threads once every Worker has its final address.
  for (auto &worker : workers_)
    worker->thread = std::thread([this, w = worker.get()] { workerLoop(*w); });
}

HostExecutor::~HostExecutor() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  workCv_.notify_all();
  for (auto &worker : workers_)
    worker->thread.join();
}

int64_t HostExecutor::nowNs() const {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now() - epoch_)
      .count();
}

bool HostExecutor::run(const PreparedProgram &program, const KernelContext &ctx,
                       const std::string &what, std::string &error) {
  std::unique_lock<std::mutex> lock(mutex_);
  job_ = &program;
  ctx_ = ctx;
  what_ = what;
  error_.clear();
  aborted_ = false;
  ++generation_;
  pending_ = 0;
  for (auto &worker : workers_)
    if (!program.perStream[worker->stream].empty())
      ++pending_;
  workCv_.notify_all();
  doneCv_.wait(lock, [&] { return pending_ == 0; });
  job_ = nullptr;

  for (auto &worker : workers_)
    for (size_t a = 0; a < highWater_.size(); ++a)
      highWater_[a] = std::max(highWater_[a], worker->highWater[a]);
  if (aborted_) {
    error = error_;
    return false;
  }
  return true;
}

void HostExecutor::workerLoop(Worker &worker) {
  std::unique_lock<std::mutex> lock(mutex_);
  uint64_t seen = 0; // run() may bump the generation before we get here
  for (;;) {
    workCv_.wait(lock, [&] { return stop_ || generation_ != seen; });
    if (stop_)
      return;
    seen = generation_;
    const PreparedProgram *program = job_;
    // The caller counted only workers whose stream has instructions.
    if (!program || program->perStream[worker.stream].empty())
      continue;
    lock.unlock();
    runStream(worker, *program);
    lock.lock();
    if (--pending_ == 0)
      doneCv_.notify_all();
  }
}

void HostExecutor::runStream(Worker &worker, const PreparedProgram &program) {
  const KernelContext ctx = ctx_; // written before the generation was bumped
  for (uint32_t index : program.perStream[worker.stream]) {
    const PreparedInstr &in = program.instrs[index];
    for (uint32_t e : in.wait)
      if (!waitEvent(e))
        return;
    if (aborted_)
      return;

    KernelContext instrCtx = instructionContext(in, ctx);
    KernelArgs args = makeKernelArgs(in.inputs, in.outputs, in.intAttrs,
                                     in.floatAttrs, &instrCtx);

    int64_t begin = tracing_ ? nowNs() : 0;
    std::string kernelError;
    bool ok = false;
    try {
      ok = in.fn(args, kernelError);
    } catch (const std::exception &e) {
      kernelError = e.what();
    } catch (...) {
      kernelError = "unknown exception";
    }
    if (tracing_)
      worker.trace.push_back({program.name, in.kernel, in.loc,
                              plan::streamName(plan::Stream(worker.stream)),
                              in.index, begin, nowNs(), in.microBatch,
                              in.part});
    if (!ok) {
      std::string at(in.kernel);
      if (!in.loc.empty())
        at += std::string(" at ") + std::string(in.loc);
      abort(what_ + ": program '" + std::string(program.name) +
            "' instruction " + std::to_string(in.index) + " (" + at +
            ") failed: " + (kernelError.empty() ? "no message" : kernelError));
      return;
    }
    for (auto [arena, end] : in.writes)
      worker.highWater[arena] = std::max(worker.highWater[arena], end);
    for (uint32_t e : in.record)
      recordEvent(e);
  }
}

bool HostExecutor::waitEvent(uint32_t event) {
  std::unique_lock<std::mutex> lock(mutex_);
  eventCv_.wait(lock,
                [&] { return aborted_ || eventGen_[event] == generation_; });
  return !aborted_;
}

void HostExecutor::recordEvent(uint32_t event) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    eventGen_[event] = generation_;
  }
  eventCv_.notify_all();
}

void HostExecutor::abort(std::string message) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!aborted_) {
      error_ = std::move(message);
      aborted_ = true;
    }
  }
  eventCv_.notify_all();
}

std::vector<TraceRecord> HostExecutor::takeTrace() {
  std::vector<TraceRecord> all;
  for (auto &worker : workers_) {
    all.insert(all.end(), worker->trace.begin(), worker->trace.end());
    worker->trace.clear();
  }
  std::sort(all.begin(), all.end(),
            [](const TraceRecord &a, const TraceRecord &b) {
              return a.beginNs < b.beginNs;
            });
  return all;
}

} // namespace dsc::rt
