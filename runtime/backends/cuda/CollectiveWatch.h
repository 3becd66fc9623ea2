//===- CollectiveWatch.h - which NCCL collective is stuck, and since when -===//
//
// NCCL's kernels spin on the GPU while a peer is gone, and a replayed CUDA
// graph makes no host call per collective, so the host learns where a run
// is from a progress word in pinned memory: the communicator enqueues a
// one-thread kernel before collective k of the run (writing 2k - 1) and
// after it (writing 2k). While the word is odd, collective (word + 1) / 2
// is in flight; while it is even, the GPU is computing. The CPU backend
// times each collective from its start, and so does this: the clock
// restarts whenever the word changes and only runs out while a collective
// is in flight, so long compute between collectives never counts.
//
// Pure logic, so the rules are unit-tested without a GPU
// (test/unit/cuda/CollectiveWatchTest.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_BACKENDS_CUDA_COLLECTIVEWATCH_H
#define DSC_RUNTIME_BACKENDS_CUDA_COLLECTIVEWATCH_H

#include <cstdint>

namespace dsc::rt::cuda {

class CollectiveWatch {
public:
  /// Watching from time `start` (seconds on any steady clock).
  CollectiveWatch(double timeoutS, double start)
      : timeout_(timeoutS), since_(start) {}

  /// A reading of the progress word at time `now`: the number of the
  /// collective that has been in flight longer than the timeout, or 0.
  uint32_t observe(uint32_t word, double now) {
    if (word != last_) {
      last_ = word;
      since_ = now;
    }
    return word % 2 == 1 && now - since_ > timeout_ ? (word + 1) / 2 : 0;
  }

  /// The collective a failure belongs to: the one in flight, or else the
  /// next one.
  uint32_t current() const { return last_ / 2 + 1; }

  /// Collectives a finished run completed, from its last word.
  static uint32_t completed(uint32_t word) { return word / 2; }

private:
  double timeout_, since_;
  uint32_t last_ = 0;
};

} // namespace dsc::rt::cuda

#endif // DSC_RUNTIME_BACKENDS_CUDA_COLLECTIVEWATCH_H
