//===- Communicator.h - collectives between the ranks of a run --*- C++ -*-===//
//
// The runtime's view of the other ranks: rank(), size() and collectives over
// `count` elements of a DType, issued on the backend's comm stream. Plans
// call them through the comm.* kernels on the comm stream's worker thread
// (passing KernelContext::stream), so compute on the other streams goes on
// while a collective is in flight; dsrun calls them from its main thread
// between programs (the step's mean loss, the start-up agreement) on host
// buffers with no stream. Calls are never concurrent: one collective at a
// time per communicator, issued in the same order on every rank.
//
// Streams: a device communicator (NCCL) enqueues the collective on `stream`
// and returns once it is enqueued, the stream ordering what follows; a host
// communicator (MPI, Local) ignores `stream` and returns when the
// collective is complete. Either way the caller may reuse the buffers for
// work ordered after it on the same stream. MPI stays the launcher and
// bootstrap: an NCCL communicator would exchange its unique id over it.
//
// Element types: every DType. Sums add in the element type's own
// arithmetic; f16 and bf16 add through float, rounding each partial sum to
// the 16-bit format as NCCL does, so a 16-bit reduction over N ranks rounds
// up to N - 1 times (reduce in f32 where that matters).
//
// Implementations: LocalCommunicator (one rank; copies) and the MPI one
// (MpiCommunicator.cpp, OpenMPI), chosen by createCommunicator.
//
// Buffers: `in` and `out` must either be the same pointer where a
// collective allows it (allReduceSum; broadcast works in place by design;
// allGather when `in` is this rank's slice of `out`) or not overlap.
//
// Faults: every collective waits at most timeout() seconds (default 300;
// DSC_COMM_TIMEOUT or setTimeout). On a timeout or an MPI error it returns
// false and sets `error` to one line naming this rank, the collective and its
// sequence number (1 for the first collective of the communicator), e.g.
//   rank 1: all_reduce #12 timed out after 30 s (a rank stopped answering)
// A communicator that failed stays failed: later collectives fail at once,
// naming the first failure, because the ranks no longer agree on what
// comes next.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_COMM_COMMUNICATOR_H
#define DSC_RUNTIME_COMM_COMMUNICATOR_H

#include "runtime/core/DType.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

namespace dsc::rt {

class Communicator {
public:
  static constexpr double kDefaultTimeoutS = 300;

  virtual ~Communicator();
  Communicator(const Communicator &) = delete;
  Communicator &operator=(const Communicator &) = delete;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// "local" or "mpi", for messages.
  virtual const char *kind() const = 0;

  /// out[i] = sum over ranks of in[i], i < count; in may equal out.
  bool allReduceSum(const void *in, void *out, size_t count, DType dtype,
                    void *stream, std::string &error) {
    return doAllReduceSum(in, out, count, dtype, stream, error);
  }
  /// in holds size() blocks of `count`; out = the sum over ranks of block
  /// rank().
  bool reduceScatterSum(const void *in, void *out, size_t count, DType dtype,
                        void *stream, std::string &error) {
    return doReduceScatterSum(in, out, count, dtype, stream, error);
  }
  /// out holds size() blocks of `count`; block r = rank r's in. In place
  /// when in == out + rank() * count elements.
  bool allGather(const void *in, void *out, size_t count, DType dtype,
                 void *stream, std::string &error) {
    return doAllGather(in, out, count, dtype, stream, error);
  }
  /// in and out hold size() blocks of `count`: rank r's block j goes to
  /// rank j's block r (MPI_Alltoall; Ulysses' exchange between cut tokens
  /// and cut heads). in and out must not overlap.
  bool allToAll(const void *in, void *out, size_t count, DType dtype,
                void *stream, std::string &error) {
    return doAllToAll(in, out, count, dtype, stream, error);
  }
  /// data[0, count) = root's data[0, count) on every rank.
  bool broadcast(void *data, size_t count, DType dtype, int root, void *stream,
                 std::string &error) {
    return doBroadcast(data, count, dtype, root, stream, error);
  }
  virtual bool barrier(std::string &error) = 0;

  /// Point-to-point messages between pipeline stages, on host buffers (no
  /// stream): a message is keyed by (peer, tag) and matched in order per
  /// key. send copies `data` out and returns at once, whether or not the
  /// peer has posted its recv (a buffered send: a stage never waits on its
  /// sends, so any schedule that completes with blocking receives alone
  /// completes here); recv returns once the message is in `data`, or fails
  /// after timeout() naming the peer. Not collectives: the sequence number
  /// counts them, but the ranks need not call them in the same order.
  bool send(const void *data, size_t count, DType dtype, int peer, int tag,
            std::string &error) {
    return doSend(data, count, dtype, peer, tag, error);
  }
  bool recv(void *data, size_t count, DType dtype, int peer, int tag,
            std::string &error) {
    return doRecv(data, count, dtype, peer, tag, error);
  }
  /// Waits until every message this rank sent has been received (each
  /// within timeout(), else false + the line naming its peer). A program's
  /// sends end with it (Session::run): MPI moves a message larger than its
  /// eager limit only while the sender is inside an MPI call, so a stage
  /// that sent its last message and went on computing would leave the
  /// receiving stage idle until its next collective.
  bool completeSends(std::string &error) { return doCompleteSends(error); }
  /// What a receive's line calls its peer: "rank", or "stage" on a
  /// pipeline group, whose ranks are the stages ("recv from stage 1").
  void setPeerLabel(std::string label) { peerLabel_ = std::move(label); }
  const std::string &peerLabel() const { return peerLabel_; }

  /// The communicator over the ranks of this one that pass the same
  /// `color`, ranked by `key` (MPI_Comm_split): a mesh's tensor- or
  /// data-parallel group (Mesh.h). A collective on this communicator: every
  /// rank calls it at the same point, which a barrier bounded by timeout()
  /// checks first. `name` ("tensor group 1") labels the group's lines,
  /// which name the rank in this communicator's numbering: "rank 3 (tensor
  /// group 1): all_reduce #2 ...". The group inherits the timeout. Null and
  /// one line on failure.
  std::unique_ptr<Communicator>
  split(int color, int key, const std::string &name, std::string &error);
  /// "rank R", or "rank R (NAME)" for a group (R: the rank in the
  /// communicator it was split from, recursively the job's), for lines.
  std::string who() const;

  // On host buffers, no stream (dsrun's main thread, tests).
  bool allReduceSum(const float *in, float *out, size_t count,
                    std::string &error) {
    return allReduceSum(in, out, count, DType::f32, nullptr, error);
  }
  bool allReduceSum(const double *in, double *out, size_t count,
                    std::string &error) {
    return allReduceSum(in, out, count, DType::f64, nullptr, error);
  }
  bool reduceScatterSum(const float *in, float *out, size_t count,
                        std::string &error) {
    return reduceScatterSum(in, out, count, DType::f32, nullptr, error);
  }
  bool allGather(const float *in, float *out, size_t count,
                 std::string &error) {
    return allGather(in, out, count, DType::f32, nullptr, error);
  }
  bool broadcast(float *data, size_t count, int root, std::string &error) {
    return broadcast(data, count, DType::f32, root, nullptr, error);
  }
  bool allToAll(const float *in, float *out, size_t count, std::string &error) {
    return allToAll(in, out, count, DType::f32, nullptr, error);
  }

  /// This rank gives up while others may still wait for it in a collective,
  /// so its exit must not wait for them: under MPI it skips MPI_Finalize
  /// and mpirun ends the job. Nothing to do for one rank.
  virtual void abandon() {}

  /// Seconds any one collective may take before it fails (> 0).
  double timeout() const { return timeoutS_; }
  void setTimeout(double seconds);
  /// Collectives started so far (the last one's sequence number).
  uint64_t sequence() const { return sequence_; }

protected:
  Communicator() = default;
  /// Lines name this communicator's ranks as `other`'s (a device
  /// communicator over the same ranks as a host group).
  void nameAs(const Communicator &other) {
    groupName_ = other.groupName_;
    parentRank_ = other.parentRank_;
  }

  // What an implementation provides (the public calls above forward here).
  virtual bool doAllReduceSum(const void *in, void *out, size_t count,
                              DType dtype, void *stream,
                              std::string &error) = 0;
  virtual bool doReduceScatterSum(const void *in, void *out, size_t count,
                                  DType dtype, void *stream,
                                  std::string &error) = 0;
  virtual bool doAllGather(const void *in, void *out, size_t count, DType dtype,
                           void *stream, std::string &error) = 0;
  virtual bool doAllToAll(const void *in, void *out, size_t count, DType dtype,
                          void *stream, std::string &error) = 0;
  virtual bool doBroadcast(void *data, size_t count, DType dtype, int root,
                           void *stream, std::string &error) = 0;
  /// Point-to-point (send, recv above); by default refused, naming kind().
  virtual bool doSend(const void *data, size_t count, DType dtype, int peer,
                      int tag, std::string &error);
  virtual bool doRecv(void *data, size_t count, DType dtype, int peer, int tag,
                      std::string &error);
  /// completeSends(); nothing to wait for without buffered sends.
  virtual bool doCompleteSends(std::string &) { return true; }
  /// split() once every rank has arrived.
  virtual std::unique_ptr<Communicator> doSplit(int color, int key,
                                                std::string &error) = 0;

  /// Starts collective `name`: bumps the sequence number and fails with
  /// "rank R: NAME #S ..." if the communicator already failed or the
  /// arguments are wrong (null buffers, a dtype outside the enum, a root
  /// outside the world).
  bool begin(const char *name, std::string &error, const void *in = nullptr,
             const void *out = nullptr, size_t count = 0, int root = 0,
             DType dtype = DType::f32);
  /// "rank R: NAME #S " for the collective just begun.
  std::string prefix(const char *name) const;
  /// Marks the communicator failed; later collectives name `what`.
  void markFailed(const char *name) {
    failed_ = std::string(name) + " #" + std::to_string(sequence_);
  }
  bool failed() const { return !failed_.empty(); }

private:
  double timeoutS_ = kDefaultTimeoutS;
  std::string peerLabel_ = "rank";
  uint64_t sequence_ = 0;
  std::string failed_; ///< "all_reduce #12" once a collective failed
  /// A group's: its name and this process's rank in the parent's numbering.
  std::string groupName_;
  int parentRank_ = 0;
};

/// One rank: every collective is a copy (or nothing).
class LocalCommunicator final : public Communicator {
public:
  LocalCommunicator() = default;
  int rank() const override { return 0; }
  int size() const override { return 1; }
  const char *kind() const override { return "local"; }
  bool barrier(std::string &error) override;

private:
  bool doAllReduceSum(const void *in, void *out, size_t count, DType dtype,
                      void *stream, std::string &error) override;
  bool doReduceScatterSum(const void *in, void *out, size_t count, DType dtype,
                          void *stream, std::string &error) override;
  bool doAllGather(const void *in, void *out, size_t count, DType dtype,
                   void *stream, std::string &error) override;
  bool doAllToAll(const void *in, void *out, size_t count, DType dtype,
                  void *stream, std::string &error) override;
  bool doBroadcast(void *data, size_t count, DType dtype, int root,
                   void *stream, std::string &error) override;
  std::unique_ptr<Communicator> doSplit(int color, int key,
                                        std::string &error) override;
};

/// Whether this process was started by OpenMPI's mpirun (it sets
/// OMPI_COMM_WORLD_SIZE in every rank's environment).
bool underMpirun();

/// The run's communicator: MPI under mpirun (initializing MPI; see
/// MpiCommunicator.cpp for the thread level and shutdown), Local otherwise.
/// The timeout comes from DSC_COMM_TIMEOUT (seconds) when set. Null + one
/// line on failure (MPI did not start, a malformed DSC_COMM_TIMEOUT).
std::unique_ptr<Communicator> createCommunicator(std::string &error);

/// "WHO: NAME #S timed out after T s (a rank stopped answering)": a
/// collective that timed out, the same line on every backend (WHO:
/// Communicator::who()).
std::string collectiveTimeoutLine(const std::string &who, const char *name,
                                  uint64_t sequence, double timeoutS);

/// The MPI communicator over every rank of the job (a duplicate of
/// MPI_COMM_WORLD, so its traffic never mixes with another's). Each call
/// returns a new one; MPI is initialized by the first. Null + one line
/// when not under an MPI launcher or MPI fails to start. MPI's start-up is
/// itself a wait on every rank: it gives up (one line, exit 1) after
/// max(`timeoutS`, kMinStartTimeoutS).
std::unique_ptr<Communicator>
createMpiCommunicator(std::string &error,
                      double timeoutS = Communicator::kDefaultTimeoutS);

/// The shortest wait for MPI's start-up: it resolves host names, which
/// takes seconds where the host's own name does not resolve (no /etc/hosts
/// entry), so a short collective timeout must not fail a healthy start.
constexpr double kMinStartTimeoutS = 60;

/// Parses a DSC_COMM_TIMEOUT value: seconds, a positive finite number.
bool parseCommTimeout(const char *text, double &seconds, std::string &error);

} // namespace dsc::rt

#endif // DSC_RUNTIME_COMM_COMMUNICATOR_H
