//===- CudaDevice.cpp - the GPU a CUDA backend drives ---------------------===//
#include "runtime/backends/cuda/CudaDevice.h"
#include "runtime/backends/cuda/CollectiveWatch.h"

#include "runtime/backends/cuda/CublasLt.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <thread>

namespace dsc::rt::cuda {
namespace {

// cuBLASLt's own guidance for Hopper is 32 MiB; Ampere needs less.
constexpr size_t kWorkspaceBytes = size_t(32) << 20;

int localRank() {
  for (const char *var : {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID",
                          "MPI_LOCALRANKID", "LOCAL_RANK"})
    if (const char *v = std::getenv(var))
      return std::atoi(v);
  return 0;
}

} // namespace

bool cudaOk(cudaError_t status, std::string &err, const char *what) {
  if (status == cudaSuccess)
    return true;
  err = std::string(what) + ": " + cudaGetErrorString(status);
  cudaGetLastError(); // clear a non-sticky error so the next call is judged
                      // on its own
  return false;
}

bool pickDevice(int &ordinal, std::string &err) {
  int count = 0;
  cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count == 0) {
    err = std::string("no CUDA device here (") +
          (status != cudaSuccess ? cudaGetErrorString(status)
                                 : "cudaGetDeviceCount found none") +
          ")";
    cudaGetLastError();
    return false;
  }
  ordinal = localRank() % count;
  return true;
}

bool CudaDevice::open(int device, const Settings &chosen, std::string &err) {
  settings = chosen;
  ordinal = device;
  cudaDeviceProp prop;
  if (!cudaOk(cudaSetDevice(device), err, "cudaSetDevice") ||
      !cudaOk(cudaGetDeviceProperties(&prop, device), err,
              "cudaGetDeviceProperties"))
    return false;
  name = prop.name;
  if (prop.major < 8) {
    err = "GPU " + std::to_string(device) + " (" + name + ") has compute " +
          "capability " + std::to_string(prop.major) + "." +
          std::to_string(prop.minor) + "; the CUDA backend needs 8.0 or newer";
    return false;
  }
  if (!cudaOk(cudaMalloc(reinterpret_cast<void **>(&run), sizeof(RunContext)),
              err, "cudaMalloc (run context)") ||
      !cudaOk(cudaMemset(run, 0, sizeof(RunContext)), err, "cudaMemset") ||
      !cudaOk(cudaDeviceSynchronize(), err, "cudaDeviceSynchronize"))
    return false;
  const CublasLtApi *lt = cublasLt(err);
  if (!lt)
    return false;
  const bool tf32 = settings.tf32;
  for (int s = 0; s < kNumStreams; ++s) {
    CudaHandles &h = handles[size_t(s)];
    h.run = run;
    h.allowTf32 = tf32;
    h.owner = this;
    cublasLtHandle_t handle = nullptr;
    if (!cudaOk(cudaStreamCreateWithFlags(&streams[size_t(s)],
                                          cudaStreamNonBlocking),
                err, "cudaStreamCreateWithFlags") ||
        !cudaOk(cudaMalloc(&h.workspace, kWorkspaceBytes), err,
                "cudaMalloc (cuBLASLt workspace)"))
      return false;
    h.workspaceBytes = kWorkspaceBytes;
    cublasStatus_t st = lt->create(&handle);
    if (st != CUBLAS_STATUS_SUCCESS) {
      err = std::string("cublasLtCreate: ") + lt->statusString(st);
      return false;
    }
    h.lt = handle;
  }
  return true;
}

void CudaDevice::close() {
  std::string unused;
  synchronize(unused);
  nccls.clear();
  for (int s = 0; s < kNumStreams; ++s) {
    CudaHandles &h = handles[size_t(s)];
    std::string ignored;
    if (h.lt)
      cublasLt(ignored)->destroy(static_cast<cublasLtHandle_t>(h.lt));
    if (h.workspace)
      cudaFree(h.workspace);
    if (streams[size_t(s)])
      cudaStreamDestroy(streams[size_t(s)]);
    h = CudaHandles{};
    streams[size_t(s)] = nullptr;
  }
  if (run)
    cudaFree(run);
  run = nullptr;
}

bool CudaDevice::writeRunContext(const RunContext &values, std::string &err) {
  // Async on a plan stream and then waited for: a plain cudaMemcpy from
  // pageable memory may return before its DMA lands, and non-blocking
  // streams would not wait for it.
  cudaStream_t s = streams[0];
  return cudaOk(cudaMemcpyAsync(run, &values, sizeof values,
                                cudaMemcpyHostToDevice, s),
                err, "writing the run context") &&
         cudaOk(cudaStreamSynchronize(s), err, "writing the run context");
}

bool CudaDevice::takeRunError(std::string &message, std::string &err) {
  cudaStream_t s = streams[0];
  RunContext ctx;
  if (!cudaOk(cudaMemcpyAsync(&ctx, run, sizeof ctx, cudaMemcpyDeviceToHost, s),
              err, "reading the run context") ||
      !cudaOk(cudaStreamSynchronize(s), err, "reading the run context"))
    return false;
  message.clear();
  if (ctx.errorBits == 0)
    return true;
  const std::string v = std::to_string(ctx.badValue),
                    at = std::to_string(ctx.badPosition),
                    n = std::to_string(ctx.badLimit);
  switch (ctx.errorBits) {
  case kEmbeddingIndex:
  case kEmbeddingGradIndex:
    message =
        std::string(ctx.errorBits == kEmbeddingIndex ? "ds.embedding"
                                                     : "ds.embedding_grad") +
        ": index " + v + " at position " + at + " is outside [0, " + n +
        "): the table has V = " + n + " rows";
    break;
  case kAdamwStep:
  case kAdamwRoundStep:
  case kSgdStep:
  case kLionStep:
  case kAdagradStep:
  case kSgdRoundStep:
  case kLionRoundStep:
  case kAdagradRoundStep:
  case kLambStep:
  case kBeta1Value: {
    float value;
    uint32_t bits = uint32_t(ctx.badValue);
    std::memcpy(&value, &bits, sizeof value);
    // Indexed by the step errors' values, kAdamwStep (5) on.
    const char *kernel[] = {"ds.adamw",         "ds.adamw_round",
                            "ds.sgd",           "ds.lion",
                            "ds.adagrad",       "",
                            "ds.sgd_round",     "ds.lion_round",
                            "ds.adagrad_round", "ds.lamb"};
    const bool beta1 = ctx.errorBits == kBeta1Value;
    const int64_t which = beta1 ? ctx.badPosition : int64_t(ctx.errorBits);
    std::ostringstream os; // as the CPU kernel prints it
    os << kernel[which - kAdamwStep]
       << (beta1 ? ": beta1_value must be in [0, 1), got "
                 : ": step must be an integer >= 1, got ")
       << value;
    message = os.str();
    break;
  }
  default: {
    const char *kernel =
        ctx.errorBits == kCrossEntropyTarget         ? "ds.cross_entropy"
        : ctx.errorBits == kLinearCrossEntropyTarget ? "ds.linear_cross_entropy"
        : ctx.errorBits == kCrossEntropyPartTarget   ? "ds.cross_entropy_part"
        : ctx.errorBits == kCrossEntropyPartGradTarget
            ? "ds.cross_entropy_part_grad"
            : "ds.cross_entropy_grad";
    message = std::string(kernel) + ": target " + v + " at position " + at +
              " is outside [0, " + n + ") and is not the ignore index " +
              std::to_string(ctx.badIgnore);
  }
  }
  uint32_t zero = 0;
  return cudaOk(cudaMemcpyAsync(&run->errorBits, &zero, sizeof zero,
                                cudaMemcpyHostToDevice, s),
                err, "clearing the run's error") &&
         cudaOk(cudaStreamSynchronize(s), err, "clearing the run's error");
}

NcclCommunicator *CudaDevice::ncclFor(Communicator *host, std::string &err) {
  if (!host) {
    err = "no communicator (collectives run inside a Session)";
    return nullptr;
  }
  for (Nccl &n : nccls)
    if (n.host == host)
      return n.comm.get();
  std::unique_ptr<NcclCommunicator> comm = NcclCommunicator::create(*host, err);
  if (!comm) {
    err = "cannot start NCCL: " + err;
    return nullptr;
  }
  nccls.push_back({host, std::move(comm)});
  return nccls.back().comm.get();
}

bool CudaDevice::finishCollectives(CollectiveFault &fault, std::string &err) {
  if (nccls.empty())
    return synchronize(err);
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  std::vector<CollectiveWatch> watches;
  for (const Nccl &n : nccls)
    watches.emplace_back(n.comm->timeout(), 0.0);
  for (;;) {
    bool done = true;
    for (cudaStream_t s : streams) {
      cudaError_t q = s ? cudaStreamQuery(s) : cudaSuccess;
      if (q == cudaErrorNotReady) {
        // "Not ready" is also left as the thread's last error, which the
        // next kernel's launch check would report as its own.
        (void)cudaGetLastError();
        done = false;
      } else if (!cudaOk(q, err, "cudaStreamQuery"))
        return false;
    }
    if (done)
      return true;
    const double now =
        std::chrono::duration<double>(Clock::now() - start).count();
    for (size_t c = 0; c < nccls.size(); ++c) {
      NcclCommunicator &comm = *nccls[c].comm;
      const uint32_t late = watches[c].observe(comm.progress(), now);
      std::string why = comm.asyncError();
      if (!late && why.empty())
        continue;
      fault.comm = c;
      fault.collective = late ? late : watches[c].current();
      fault.ncclError = why;
      err = comm.who() +
            ": NCCL: " + (why.empty() ? "a collective timed out" : why);
      // Every group's kernels may wait on the lost rank: end them all.
      for (Nccl &n : nccls)
        n.comm->abort("an earlier collective");
      std::string ignored;
      synchronize(ignored); // the aborted kernels return
      return false;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

bool CudaDevice::synchronize(std::string &err) {
  for (cudaStream_t s : streams)
    if (s && !cudaOk(cudaStreamSynchronize(s), err, "cudaStreamSynchronize"))
      return false;
  return true;
}

} // namespace dsc::rt::cuda
