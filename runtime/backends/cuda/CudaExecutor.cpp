//===- CudaExecutor.cpp - a program's streams on a GPU --------------------===//
#include "runtime/backends/cuda/CudaExecutor.h"

#include "runtime/backends/cuda/CudaDevice.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <unordered_map>

namespace dsc::rt::cuda {
namespace {

constexpr const char *kStreamNames[kNumStreams] = {"compute", "comm", "h2d",
                                                   "d2h"};

class CudaExecutor final : public StreamExecutor {
public:
  CudaExecutor(CudaDevice &device, const ExecutorSpec &spec)
      : dev_(device), highWater_(spec.numArenas, 0),
        graphs_(device.settings.graphs) {
    events_.resize(spec.maxEvents, nullptr);
    for (cudaEvent_t &e : events_)
      cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
    cudaEventCreateWithFlags(&fork_, cudaEventDisableTiming);
    for (cudaEvent_t &e : join_)
      cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
  }

  ~CudaExecutor() override {
    std::string ignored;
    dev_.synchronize(ignored);
    for (auto &entry : programs_)
      if (entry.second.exec)
        cudaGraphExecDestroy(entry.second.exec);
    for (cudaEvent_t e : events_)
      cudaEventDestroy(e);
    for (cudaEvent_t e : timing_)
      cudaEventDestroy(e);
    cudaEventDestroy(fork_);
    for (cudaEvent_t e : join_)
      cudaEventDestroy(e);
  }

  bool run(const PreparedProgram &program, const KernelContext &ctx,
           const std::string &what, std::string &error) override;
  const std::vector<uint64_t> &highWater() const override { return highWater_; }
  void setTracing(bool on) override { tracing_ = on; }
  std::vector<TraceRecord> takeTrace() override { return std::move(trace_); }

private:
  /// Collective k of a run (1-based) and the instruction that issued it,
  /// as the last enqueue of the program recorded them: a replayed graph
  /// issues nothing, so a timeout is named from this.
  struct CollectiveSite {
    const PreparedInstr *instr;
    const char *name; ///< "all_reduce"
  };
  struct Program {
    int runs = 0;
    cudaGraphExec_t exec = nullptr;
    bool uncapturable = false;
    /// Per NCCL communicator (CudaDevice::nccls), its collectives.
    std::vector<std::vector<CollectiveSite>> collectives;
  };

  /// A host instruction as a host function's argument: where its operands
  /// are, the run's context (hostCtx_, rewritten each run before any host
  /// function can run) and its error, read after the run.
  struct HostJob {
    const PreparedInstr *instr = nullptr;
    const KernelContext *ctx = nullptr;
    bool failed = false;
    std::string error;
  };
  static void CUDART_CB runHostJob(void *arg);
  HostJob &hostJob(const PreparedInstr &in);

  bool enqueue(const PreparedProgram &program, const KernelContext &ctx,
               const std::string &what, Program &state, std::string &error,
               bool timed);
  bool capture(const PreparedProgram &program, const KernelContext &ctx,
               const std::string &what, Program &state, std::string &error);
  bool finish(const PreparedProgram &program, const Program &state,
              const std::string &what, std::string &error);
  std::string collectiveFault(const PreparedProgram &program,
                              const Program &state, const std::string &what,
                              const CudaDevice::CollectiveFault &fault,
                              const std::string &err) const;
  void collectTrace(const PreparedProgram &program, int64_t startNs);
  cudaEvent_t timingEvent(size_t k);

  CudaDevice &dev_;
  std::vector<uint64_t> highWater_;
  bool graphs_;
  bool tracing_ = false;
  /// The clock's zero: every rank's trace on one time axis (Executor.h).
  std::chrono::steady_clock::time_point epoch_{};
  std::vector<cudaEvent_t> events_; ///< the plan's, by index
  cudaEvent_t fork_ = nullptr;
  std::array<cudaEvent_t, kNumStreams> join_{};
  std::vector<cudaEvent_t> timing_; ///< begin/end per instruction, traced
  std::vector<TraceRecord> trace_;
  std::unordered_map<const PreparedProgram *, Program> programs_;
  KernelContext hostCtx_;
  /// By instruction; a map node's address stays put, as the graphs need.
  std::unordered_map<const PreparedInstr *, HostJob> hostJobs_;
};

/// "<what>: program 'P' instruction N (<kernel> at <loc>) failed: <why>",
/// the CPU executor's line.
std::string instructionError(const std::string &what,
                             const PreparedProgram &program,
                             const PreparedInstr &in, const std::string &why) {
  std::string at(in.kernel);
  if (!in.loc.empty())
    at += " at " + std::string(in.loc);
  return what + ": program '" + std::string(program.name) + "' instruction " +
         std::to_string(in.index) + " (" + at + ") failed: " + why;
}

void CUDART_CB CudaExecutor::runHostJob(void *arg) {
  auto *job = static_cast<HostJob *>(arg);
  const PreparedInstr &in = *job->instr;
  KernelContext ctx = instructionContext(in, *job->ctx, /*onHost=*/true);
  KernelArgs args =
      makeKernelArgs(in.inputs, in.outputs, in.intAttrs, in.floatAttrs, &ctx);
  std::string err;
  bool ok = false;
  try {
    ok = in.fn(args, err);
  } catch (const std::exception &ex) {
    err = ex.what();
  }
  if (!ok && !job->failed) {
    job->failed = true;
    job->error = err.empty() ? "no message" : err;
  }
}

CudaExecutor::HostJob &CudaExecutor::hostJob(const PreparedInstr &in) {
  HostJob &job = hostJobs_[&in];
  job.instr = &in;
  job.ctx = &hostCtx_;
  return job;
}

cudaEvent_t CudaExecutor::timingEvent(size_t k) {
  while (timing_.size() <= k) {
    cudaEvent_t e = nullptr;
    cudaEventCreate(&e);
    timing_.push_back(e);
  }
  return timing_[k];
}

bool CudaExecutor::enqueue(const PreparedProgram &program,
                           const KernelContext &ctx, const std::string &what,
                           Program &state, std::string &error, bool timed) {
  state.collectives.clear();
  for (size_t i = 0; i < program.instrs.size(); ++i) {
    const PreparedInstr &in = program.instrs[i];
    auto stream = static_cast<cudaStream_t>(in.resources.stream);
    std::string kernelError;
    bool ok = stream != nullptr;
    if (!ok)
      kernelError = "no CUDA stream for it (is it placed on the host?)";
    for (uint32_t e : in.wait)
      if (ok)
        ok = cudaOk(cudaStreamWaitEvent(stream, events_[e], 0), kernelError,
                    "cudaStreamWaitEvent");
    if (ok && timed)
      ok = cudaOk(cudaEventRecord(timingEvent(2 * i), stream), kernelError,
                  "cudaEventRecord");
    if (ok && in.host) {
      ok = cudaOk(cudaLaunchHostFunc(stream, runHostJob, &hostJob(in)),
                  kernelError, "cudaLaunchHostFunc");
    } else if (ok) {
      KernelContext instrCtx = instructionContext(in, ctx);
      KernelArgs args = makeKernelArgs(in.inputs, in.outputs, in.intAttrs,
                                       in.floatAttrs, &instrCtx);
      std::vector<uint32_t> issuedBefore;
      for (const CudaDevice::Nccl &n : dev_.nccls)
        issuedBefore.push_back(n.comm->issued());
      // A launch check reads CUDA's last error: clear what an earlier,
      // already handled call left there, so it is not blamed on this one.
      (void)cudaGetLastError();
      try {
        ok = in.fn(args, kernelError);
      } catch (const std::exception &ex) {
        ok = false;
        kernelError = ex.what();
      }
      // (the first collective over a group makes its communicator)
      state.collectives.resize(dev_.nccls.size());
      for (size_t c = 0; c < dev_.nccls.size(); ++c) {
        const NcclCommunicator &comm = *dev_.nccls[c].comm;
        for (uint32_t k = c < issuedBefore.size() ? issuedBefore[c] + 1 : 1;
             k <= comm.issued(); ++k)
          state.collectives[c].push_back({&in, comm.issuedName(k)});
      }
    }
    if (ok && timed)
      ok = cudaOk(cudaEventRecord(timingEvent(2 * i + 1), stream), kernelError,
                  "cudaEventRecord");
    for (uint32_t e : in.record)
      if (ok)
        ok = cudaOk(cudaEventRecord(events_[e], stream), kernelError,
                    "cudaEventRecord");
    if (!ok) {
      error = instructionError(
          what, program, in, kernelError.empty() ? "no message" : kernelError);
      return false;
    }
  }
  return true;
}

// Records the program once into a graph: the compute stream is the origin,
// every other stream the program uses forks from it and joins back.
bool CudaExecutor::capture(const PreparedProgram &program,
                           const KernelContext &ctx, const std::string &what,
                           Program &state, std::string &error) {
  cudaStream_t origin = dev_.streams[0];
  std::string err;
  if (!cudaOk(cudaStreamBeginCapture(origin, cudaStreamCaptureModeThreadLocal),
              err, "cudaStreamBeginCapture"))
    return false;
  bool ok = cudaOk(cudaEventRecord(fork_, origin), err, "cudaEventRecord");
  for (int s = 1; s < kNumStreams && ok; ++s)
    if (!program.perStream[size_t(s)].empty())
      ok = cudaOk(cudaStreamWaitEvent(dev_.streams[size_t(s)], fork_, 0), err,
                  "cudaStreamWaitEvent");
  ok = ok && enqueue(program, ctx, what, state, err, false);
  // Joined and ended whatever happened, or the streams stay in capture
  // mode; the first failure is the one reported.
  std::string joinErr, why;
  for (int s = 1; s < kNumStreams; ++s)
    if (!program.perStream[size_t(s)].empty() &&
        !(cudaOk(cudaEventRecord(join_[size_t(s)], dev_.streams[size_t(s)]),
                 why, "cudaEventRecord") &&
          cudaOk(cudaStreamWaitEvent(origin, join_[size_t(s)], 0), why,
                 "cudaStreamWaitEvent")) &&
        joinErr.empty())
      joinErr = why;
  cudaGraph_t graph = nullptr;
  std::string endErr;
  const bool ended = cudaOk(cudaStreamEndCapture(origin, &graph), endErr,
                            "cudaStreamEndCapture");
  if (ok && !joinErr.empty()) {
    ok = false;
    err = joinErr;
  }
  if (ok && !ended) {
    ok = false;
    err = endErr;
  }
  // A failed capture leaves its (non-sticky) error behind; the kernel by
  // kernel run that follows must not report it as its first kernel's.
  if (!ok)
    (void)cudaGetLastError();
  if (ok)
    ok = cudaOk(cudaGraphInstantiate(&state.exec, graph, 0), err,
                "cudaGraphInstantiate");
  if (graph)
    cudaGraphDestroy(graph);
  if (!ok) {
    // The eager run before succeeded, so this is a kernel that cannot be
    // captured; the program runs kernel by kernel from now on.
    state.uncapturable = true;
    state.exec = nullptr;
    std::fprintf(stderr,
                 "dsrun: note: program '%.*s' runs without a CUDA graph: %s\n",
                 int(program.name.size()), program.name.data(), err.c_str());
  }
  (void)error;
  return ok;
}

std::string
CudaExecutor::collectiveFault(const PreparedProgram &program,
                              const Program &state, const std::string &what,
                              const CudaDevice::CollectiveFault &fault,
                              const std::string &err) const {
  const std::string inProgram =
      what + ": program '" + std::string(program.name) + "'";
  const uint32_t k = fault.collective;
  if (k == 0 || fault.comm >= state.collectives.size() ||
      k > state.collectives[fault.comm].size())
    return inProgram + ": " + err;
  const CollectiveSite &site = state.collectives[fault.comm][k - 1];
  const NcclCommunicator &comm = *dev_.nccls[fault.comm].comm;
  const uint64_t sequence = comm.completedBefore() + k;
  // The CPU backend's lines (MpiCommunicator).
  const std::string line = fault.ncclError.empty()
                               ? collectiveTimeoutLine(comm.who(), site.name,
                                                       sequence, comm.timeout())
                               : comm.who() + ": " + site.name + " #" +
                                     std::to_string(sequence) +
                                     " failed: " + fault.ncclError;
  return instructionError(what, program, *site.instr, line);
}

bool CudaExecutor::finish(const PreparedProgram &program, const Program &state,
                          const std::string &what, std::string &error) {
  std::string err, bad;
  CudaDevice::CollectiveFault fault;
  if (!dev_.finishCollectives(fault, err)) {
    error = collectiveFault(program, state, what, fault, err);
    return false;
  }
  for (const PreparedInstr &in : program.instrs) {
    if (!in.host)
      continue;
    HostJob &job = hostJob(in);
    if (!job.failed)
      continue;
    error = instructionError(what, program, in, job.error);
    job.failed = false;
    job.error.clear();
    return false;
  }
  if (!dev_.takeRunError(bad, err)) {
    error = what + ": program '" + std::string(program.name) +
            "' failed on the GPU: " + err;
    return false;
  }
  if (!bad.empty()) {
    error = what + ": program '" + std::string(program.name) + "': " + bad;
    return false;
  }
  for (const PreparedInstr &in : program.instrs)
    for (auto [arena, end] : in.writes)
      highWater_[arena] = std::max(highWater_[arena], end);
  return true;
}

void CudaExecutor::collectTrace(const PreparedProgram &program,
                                int64_t startNs) {
  // Times relative to the first instruction's begin event, which the host
  // clock placed at startNs (enqueue time: the GPU starts no earlier).
  cudaEvent_t base = program.instrs.empty() ? nullptr : timing_[0];
  for (size_t i = 0; i < program.instrs.size(); ++i) {
    const PreparedInstr &in = program.instrs[i];
    float begin = 0, end = 0;
    cudaEventElapsedTime(&begin, base, timing_[2 * i]);
    cudaEventElapsedTime(&end, base, timing_[2 * i + 1]);
    int stream = 0;
    for (int s = 0; s < kNumStreams; ++s)
      if (in.resources.stream == dev_.streams[size_t(s)])
        stream = s;
    trace_.push_back({program.name, in.kernel, in.loc, kStreamNames[stream],
                      in.index, startNs + int64_t(double(begin) * 1e6),
                      startNs + int64_t(double(end) * 1e6), in.microBatch,
                      in.part});
  }
}

bool CudaExecutor::run(const PreparedProgram &program, const KernelContext &ctx,
                       const std::string &what, std::string &error) {
  // This thread's current device (a Session may run from any thread).
  cudaSetDevice(dev_.ordinal);
  std::string err;
  if (!dev_.writeRunContext(
          {ctx.seed, ctx.sampleOffset, ctx.step, 0, 0, 0, 0, 0}, err)) {
    error = what + ": " + err;
    return false;
  }
  hostCtx_ = ctx;                 // what host functions of this run read
  for (auto &entry : hostJobs_) { // a failed run leaves no stale errors
    entry.second.failed = false;
    entry.second.error.clear();
  }
  Program &state = programs_[&program];
  for (CudaDevice::Nccl &n : dev_.nccls) // number this run's collectives
    n.comm->startRun();                  // from 1
  const bool replay =
      graphs_ && !tracing_ && !state.uncapturable && state.runs >= 1;
  ++state.runs;
  if (replay && (state.exec || capture(program, ctx, what, state, error))) {
    if (!cudaOk(cudaGraphLaunch(state.exec, dev_.streams[0]), err,
                "cudaGraphLaunch")) {
      error = what + ": program '" + std::string(program.name) + "': " + err;
      return false;
    }
    return finish(program, state, what, error);
  }
  int64_t startNs = std::chrono::duration_cast<std::chrono::nanoseconds>(
                        std::chrono::steady_clock::now() - epoch_)
                        .count();
  for (CudaDevice::Nccl &n : dev_.nccls) // a failed capture issued (and
    n.comm->startRun();                  // numbered) collectives
  if (!enqueue(program, ctx, what, state, error, tracing_)) {
    // Let what was enqueued finish before returning, under the collective
    // watch: collectives already issued may wait for a rank that is gone.
    CudaDevice::CollectiveFault ignored;
    dev_.finishCollectives(ignored, err);
    return false;
  }
  if (!finish(program, state, what, error))
    return false;
  if (tracing_)
    collectTrace(program, startNs);
  return true;
}

} // namespace

std::unique_ptr<StreamExecutor> createCudaExecutor(CudaDevice &device,
                                                   const ExecutorSpec &spec) {
  return std::make_unique<CudaExecutor>(device, spec);
}

} // namespace dsc::rt::cuda
