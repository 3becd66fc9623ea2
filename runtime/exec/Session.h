//===- Session.h - a loaded plan, its memory and its programs ---*- C++ -*-===//
//
// The runtime's one entry point for tools: load (and verify) a plan, create a
// Session that allocates the plan's arenas, initialize or load variables, and
// run programs by name. No LLVM/MLIR here.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_EXEC_SESSION_H
#define DSC_RUNTIME_EXEC_SESSION_H

#include "runtime/backends/Backend.h"
#include "runtime/backends/StreamExecutor.h"
#include "runtime/kernels/Kernel.h"
#include "runtime/plan/LoadedPlan.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace dsc::rt {

struct SessionOptions {
  uint64_t seed = 1337;
  int rank = 0;
  int worldSize = 1;
  /// The collectives of the comm.* kernels; it must outlive the Session and
  /// have `rank` and `worldSize`. Null: the Session owns a
  /// LocalCommunicator (one rank; a plan for more fails in its first
  /// collective).
  Communicator *comm = nullptr;
  /// Capacity of the "device" space in bytes; 0 = unlimited.
  uint64_t deviceMemory = 0;
};

/// What a variable is (plan.fbs VarKind); program inputs and outputs are
/// `none`.
enum class StateKind : uint8_t {
  param = 0,
  grad = 1,
  optState = 2,
  master = 3,
  none = 255
};

/// The elements of a variable that one rank holds: [begin, end) of the
/// whole variable, element `begin` at index `local` of the rank's buffer.
struct VariablePart {
  int64_t begin = 0, end = 0, local = 0;
  bool empty() const { return begin >= end; }
};

/// A named tensor the tool can read or write (variables, program I/O).
/// `shape` is the whole tensor's and `ref` views its memory, except for a
/// sharded variable (ZeRO stage 3): its `ref` is this rank's shard of the
/// variable's group, S = ref.numel() elements that hold only part of the
/// variable, if any (and may hold other variables). Element i of the
/// variable is element shardOffset + i of the group, which rank
/// (shardOffset + i) / S holds at index (shardOffset + i) % S.
/// A tensor-parallel variable's `ref` is part `tpPart` of `tpParts` of its
/// dimension `tpDim` (of each of its `tpBlocks` blocks): wholeIndex maps
/// its elements into the whole tensor.
/// Session::readVariable and writeVariable see the whole tensor either way.
struct NamedTensor {
  std::string name;
  TensorRef ref;
  std::vector<int64_t> shape;
  bool sharded = false;
  int64_t shardOffset = 0;
  StateKind kind = StateKind::none;
  int tpDim = -1;
  int64_t tpBlocks = 1, tpParts = 1, tpPart = 0;

  bool tensorSplit() const { return tpDim >= 0; }
  /// Elements of this rank's tensor-parallel part (all of them without
  /// tensor parallelism): what ZeRO shards.
  int64_t partNumel() const {
    return tensorSplit() ? numel() / tpParts : numel();
  }
  /// The index in the whole tensor of element `i` of part `part`.
  int64_t wholeIndex(int64_t i, int64_t part) const {
    int64_t inner = 1;
    for (size_t d = size_t(tpDim) + 1; d < shape.size(); ++d)
      inner *= shape[d];
    const int64_t whole = shape[size_t(tpDim)], local = whole / tpParts;
    const int64_t block = whole / tpBlocks, perBlock = block / tpParts;
    const int64_t outer = i / (local * inner), l = (i / inner) % local;
    const int64_t g = (l / perBlock) * block + part * perBlock + l % perBlock;
    return (outer * whole + g) * inner + i % inner;
  }

  /// Elements of the whole tensor: the product of `shape`.
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    return n;
  }
  /// What rank `rank` holds of it: all of it unless sharded. (The
  /// verifier keeps a group within kMaxBytes elements: nothing overflows.)
  VariablePart partOn(int64_t rank) const {
    if (tensorSplit() && !sharded) // every rank holds a part: ref's elements
      return {0, ref.numel(), 0};
    if (!sharded)
      return {0, numel(), 0};
    // ZeRO's shard of the rank's part: indices into the part.
    int64_t s = ref.numel(), first = rank * s; // group index of the shard
    int64_t lo = std::max(shardOffset, first);
    int64_t hi = std::min(shardOffset + partNumel(), first + s);
    if (lo >= hi)
      return {};
    return {lo - shardOffset, hi - shardOffset, lo - first};
  }
};

/// Per arena: what the compiler predicted and the highest byte the run wrote
/// by the plan's own buffer ranges. This checks the plan against itself (the
/// placement covers what the instructions touch); it is not a measurement of
/// the process (see runtime/tooling/ProcessMemory.h). "Written" counts
/// constants and variables (resident from Session::create), a program's inputs
/// (when it runs) and every instruction output (when it has run), each as the
/// end of its buffer: offset + bytes.
struct ArenaUsage {
  std::string category; ///< params, grads, optimizer_state, activations, ...
  std::string space;    ///< device or host
  uint64_t predictedBytes = 0;
  uint64_t writtenBytes = 0;
};

/// Runs one verified plan. Not thread-safe: one run() at a time; the
/// LoadedPlan must outlive the Session.
class Session {
public:
  /// Checks the plan's world size against the run's (and the communicator's
  /// rank and size against the options'), then allocates every
  /// arena (64-byte aligned, zeroed; the device space's total against
  /// `deviceMemory`) and fills the constants. Null + one error line on
  /// failure.
  static std::unique_ptr<Session> create(const LoadedPlan &plan,
                                         const SessionOptions &options,
                                         std::string &error);
  virtual ~Session() = default;

  /// Fills every variable from its initializer (zeros, ones, or a normal
  /// draw keyed by (seed, variable stream, element index)). A sharded
  /// variable gets, on each rank, the values of the elements it holds there:
  /// the same weights whatever the world size.
  virtual void initVariables() = 0;

  /// Parameters, gradient accumulators and moments, in plan order.
  virtual const std::vector<NamedTensor> &variables() const = 0;
  virtual NamedTensor *findVariable(std::string_view name) = 0;

  /// The input and output buffers of a program, in signature order.
  virtual std::vector<NamedTensor> programInputs(std::string_view program) = 0;
  virtual std::vector<NamedTensor> programOutputs(std::string_view program) = 0;

  /// Runs every instruction of `program` on its streams and waits for it:
  /// one worker thread per stream, instructions in order on each, events
  /// between streams. `step` is the optimizer step (dropout masks). False +
  /// error (naming the instruction, its kernel and loc) on a kernel failure,
  /// which stops the run; false + error for an unknown program.
  virtual bool run(std::string_view program, uint32_t step,
                   std::string &error) = 0;

  virtual std::vector<ArenaUsage> arenaUsage() const = 0;

  /// The global index of the first sample the next runs see (dropout
  /// masks; see KernelContext::sampleOffset).
  virtual void setSampleOffset(uint64_t offset) { sampleOffset_ = offset; }
  uint64_t sampleOffset() const { return sampleOffset_; }

  // Not pure, so that test doubles of Session need not implement them.

  /// Host-staged access: the only way tooling moves data into or out of a
  /// program's inputs and outputs (and other tensors this rank holds whole),
  /// so that a backend whose arenas are not host memory stages the copy.
  /// `bytes` must be the tensor's size (numel x dtype size); between runs
  /// only. False + one line naming the tensor otherwise. (The base versions
  /// copy host memory.)
  virtual bool writeTensor(const NamedTensor &t, const void *data, size_t bytes,
                           std::string &error);
  virtual bool readTensor(const NamedTensor &t, void *out, size_t bytes,
                          std::string &error);

  /// Elements [first, first + n) of the buffer of `t` (what this rank
  /// holds: a shard's local elements) as floats: f32 copied, f16 and bf16
  /// widened exactly, f64 rounded; between runs only. False + one line for
  /// another dtype or a range past the buffer. Local; a caller reading a
  /// large tensor a chunk at a time holds only the chunk.
  bool readFloats(const NamedTensor &t, int64_t first, float *out, int64_t n,
                  std::string &error);

  /// Copies variable `v` (one of variables()), the whole tensor of
  /// v.numel() floats, into `out`. For a sharded variable this is a
  /// collective: every rank calls it for the same variables in the same
  /// order, between runs, and gets the whole tensor. False + one line for a
  /// variable that is not f32 or a failed collective. (The base version
  /// handles variables that are not sharded.)
  virtual bool readVariable(const NamedTensor &v, float *out,
                            std::string &error);
  /// Sets variable `v` from `in`, the whole tensor of v.numel() floats (the
  /// same on every rank), rounded to nearest even for an f16 or bf16
  /// variable. Local: a sharded variable takes only the elements this rank
  /// holds. (The base version handles variables that are not sharded and
  /// leaves sharded ones, and any not f32, f16 or bf16, alone.)
  virtual void writeVariable(const NamedTensor &v, const float *in);

  /// The whole of a value cut into contiguous parts over the tensor-parallel
  /// group (a row of eval's logits cut along the vocabulary): `part`, this
  /// rank's `count` floats, and the others' placed in order in `whole`.
  /// A collective of the tensor group. (The base version, one part, copies.)
  virtual bool gatherTensorParts(const float *part, size_t count, float *whole,
                                 std::string &error);

  /// Whether the plan has `program` (dsrun runs `init` only if present).
  virtual bool hasProgram(std::string_view program) const { return false; }
  /// The plan's programs, by name (the sampler looks for sample_<T>).
  virtual std::vector<std::string> programNames() const { return {}; }

  /// With tracing on, run() records every instruction it executes; takeTrace
  /// returns the records since the last call (not while a run is going).
  virtual void setTracing(bool on) {}
  virtual std::vector<TraceRecord> takeTrace() { return {}; }

protected:
  /// How the staged calls above move bytes between host memory and a
  /// tensor's memory: memcpy here (test doubles hold host memory); the
  /// Session of a plan copies through its backend.
  virtual void copyIn(void *tensor, const void *host, size_t bytes);
  /// Elements [first, first + n) of `t` from floats, through copyIn.
  void writeFloats(const TensorRef &t, int64_t first, const float *in,
                   int64_t n);
  virtual void copyOut(void *host, const void *tensor, size_t bytes);

  uint64_t sampleOffset_ = 0;
};

} // namespace dsc::rt

#endif // DSC_RUNTIME_EXEC_SESSION_H
