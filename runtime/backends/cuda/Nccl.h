//===- Nccl.h - the ranks' collectives on the GPU through NCCL --*- C++ -*-===//
//
// A Communicator whose collectives are enqueued on the caller's CUDA
// stream (Communicator.h's device kind). It is made from a host
// communicator (MPI: the world, or a data or tensor group of a mesh),
// which carries NCCL's unique id from its rank 0 to the others, and spans
// the same ranks under the same name. libnccl is opened with dlopen when the
// first one is made, for the reason cuBLASLt is (CublasLt.h).
//
// Faults: NCCL's kernels spin on the GPU while a peer is gone, so the
// executor waits for a program with collectives by polling the progress
// word (CollectiveWatch.h: markers before and after each collective), and
// once a collective has been in flight past the communicator's timeout (or
// on an NCCL async error) aborts the communicator (ncclCommAbort), which
// ends the spinning; the run then fails with the CPU backend's line naming
// the rank and the collective.
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

  /// A run begins: collectives issued from now on are numbered 1, 2, ...
  /// (their markers write 2k - 1 and 2k), and the word is reset. The
  /// previous run, finished, adds its collectives to completedBefore().
  virtual void startRun() = 0;
  /// Collectives issued since startRun(), and the name of the k-th
  /// ("all_reduce"). A replayed graph issues none: its markers were
  /// captured with their numbers.
  virtual uint32_t issued() const = 0;
  virtual const char *issuedName(uint32_t k) const = 0;
  /// The progress word as the GPU last wrote it.
  virtual uint32_t progress() const = 0;
  /// Collectives completed by earlier runs: collective k of this run is
  /// number completedBefore() + k of the job, as the CPU backend counts.
  virtual uint64_t completedBefore() const = 0;
};

} // namespace dsc::rt::cuda

#endif // DSC_RUNTIME_BACKENDS_CUDA_NCCL_H
