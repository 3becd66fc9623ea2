//===- Nccl.h - the ranks' collectives on the GPU through NCCL --*- C++ -*-===//
//
// A Communicator whose collectives are enqueued on the caller's CUDA
// stream (Communicator.h's device kind). It is made from the run's host
// communicator (MPI), which carries NCCL's unique id from rank 0 to the
// others, and spans the same ranks. libnccl is opened with dlopen when the
// first one is made, for the reason cuBLASLt is (CublasLt.h).
//
// Faults: NCCL's kernels spin on the GPU while a peer is gone, so the
// executor waits for a program with collectives by polling, and past the
// communicator's timeout (or on an NCCL async error) aborts the
// communicator (ncclCommAbort), which ends the spinning; the run then fails
// with one line naming the rank (abortAfter).
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_BACKENDS_CUDA_NCCL_H
#define DSC_RUNTIME_BACKENDS_CUDA_NCCL_H

#include "runtime/comm/Communicator.h"

#include <memory>
#include <string>

namespace dsc::rt::cuda {

class NcclCommunicator : public Communicator {
public:
  /// The NCCL communicator over `host`'s ranks (a collective call on every
  /// rank: each must make its own at the same point). Null with one line.
  static std::unique_ptr<NcclCommunicator> create(Communicator &host,
                                                  std::string &error);

  /// Whether NCCL reported an asynchronous error (a peer lost, a network
  /// failure): its message, or empty.
  virtual std::string asyncError() = 0;
  /// Aborts the communicator (in-flight collectives end) and marks it
  /// failed; `why` becomes the line later collectives name.
  virtual void abort(const std::string &why) = 0;
};

} // namespace dsc::rt::cuda

#endif // DSC_RUNTIME_BACKENDS_CUDA_NCCL_H
