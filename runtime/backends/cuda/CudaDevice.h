//===- CudaDevice.h - the GPU a CUDA backend drives -------------*- C++ -*-===//
//
// Internal to runtime/backends/cuda (host code): the device, its plan
// streams with their library handles, the run context, and the error
// helpers every host-side file uses. One CudaDevice per backend object.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_BACKENDS_CUDA_CUDADEVICE_H
#define DSC_RUNTIME_BACKENDS_CUDA_CUDADEVICE_H

#include "runtime/backends/StreamExecutor.h"
#include "runtime/backends/cuda/CudaHandles.h"
#include "runtime/backends/cuda/Nccl.h"

#include <cuda_runtime_api.h>

#include <array>
#include <memory>
#include <string>
#include <vector>

namespace dsc::rt::cuda {

/// False, with "<what>: <CUDA's message>" in `err`, unless `status` is
/// success.
bool cudaOk(cudaError_t status, std::string &err, const char *what);

struct CudaDevice {
  int ordinal = 0;
  std::string name; ///< "NVIDIA H200"
  /// Plan streams: compute, comm, h2d, d2h (non-blocking: they do not
  /// synchronize with the legacy default stream).
  std::array<cudaStream_t, kNumStreams> streams{};
  std::array<CudaHandles, kNumStreams> handles{};
  RunContext *run = nullptr; ///< device memory
  /// One NCCL communicator per host communicator the run's collectives
  /// use (the world; on a data x tensor mesh the rank's data group and its
  /// tensor group), each made at the first collective over it (ncclFor).
  struct Nccl {
    Communicator *host = nullptr;
    std::unique_ptr<NcclCommunicator> comm;
  };
  std::vector<Nccl> nccls;

  /// The NCCL communicator for `host`'s ranks, made on first use (every
  /// rank of the group makes it at the same collective); null with one
  /// line.
  NcclCommunicator *ncclFor(Communicator *host, std::string &err);
  /// Where a wait for a run with collectives went wrong: collective k of
  /// the run (1-based; 0 when something else failed) over communicator
  /// `comm` (an index into nccls) stayed in flight past the timeout, or
  /// NCCL reported an error (its message).
  struct CollectiveFault {
    size_t comm = 0;
    uint32_t collective = 0;
    std::string ncclError;
  };
  /// Waits for every plan stream; with NCCL communicators, polls each one's
  /// progress word (CollectiveWatch.h), and once a collective has been in
  /// flight past its timeout or on an NCCL error aborts them all and
  /// fails, saying which collective in `fault`.
  bool finishCollectives(CollectiveFault &fault, std::string &err);

  /// What `--backend cuda:...` chose (CudaBackend.cpp).
  struct Settings {
    bool tf32 = false;  ///< tf32=on: f32 GEMMs on TF32 tensor cores
    bool graphs = true; ///< graphs=off: every run kernel by kernel
  };
  Settings settings;

  /// Sets up the device, streams and handles; false with one line.
  bool open(int ordinal, const Settings &chosen, std::string &err);
  /// Waits for the streams and frees everything open() made.
  void close();

  /// Writes the run context (and clears its error bits); blocks until the
  /// device has it.
  bool writeRunContext(const RunContext &values, std::string &err);
  /// What the last run's kernels flagged: `message` is the CPU backend's
  /// line for the same bad datum ("ds.embedding: index 5 at position 1 is
  /// outside [0, 5): ..."), empty when nothing was flagged. False with
  /// `err` when the device could not be read. Clears the flag.
  bool takeRunError(std::string &message, std::string &err);
  /// Waits for every plan stream.
  bool synchronize(std::string &err);
};

/// The GPU for this process: the local rank (OMPI_COMM_WORLD_LOCAL_RANK,
/// SLURM_LOCALID) modulo the visible devices; false with one line when the
/// machine has none.
bool pickDevice(int &ordinal, std::string &err);

} // namespace dsc::rt::cuda

#endif // DSC_RUNTIME_BACKENDS_CUDA_CUDADEVICE_H
