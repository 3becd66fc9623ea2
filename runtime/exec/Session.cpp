//===- Session.cpp - a verified plan's memory and programs --------------===//
//
// Session::create turns a LoadedPlan into memory: one zeroed, 64-byte aligned
// block per arena, a TensorRef per buffer, constants filled, and every
// program's instructions resolved to kernel functions and tensors, so that
// run() only hands prepared work to the backend's stream executor (the
// host one of Executor.h unless the backend has its own).
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/Communicator.h"
#include "runtime/core/Half.h"
#include "runtime/exec/Executor.h"
#include "runtime/exec/RankGroups.h"
#include "runtime/plan/PlanFormat.h"
#include "runtime/rng/Philox.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <system_error>
#include <thread>
#include <unordered_map>

namespace dsc::rt {
namespace {

namespace fb = dsc::plan;

// The kernel ABI's DType mirrors the schema's value for value.
static_assert(uint8_t(DType::f32) == uint8_t(fb::DType::f32) &&
                  uint8_t(DType::f16) == uint8_t(fb::DType::f16) &&
                  uint8_t(DType::bf16) == uint8_t(fb::DType::bf16) &&
                  uint8_t(DType::f64) == uint8_t(fb::DType::f64) &&
                  uint8_t(DType::i32) == uint8_t(fb::DType::i32) &&
                  uint8_t(DType::i64) == uint8_t(fb::DType::i64),
              "runtime/kernels/Kernel.h DType differs from plan.fbs");
static_assert(kNumStreams == int(fb::Stream::MAX) + 1,
              "plan.fbs streams changed");

template <typename T> flatbuffers::uoffset_t count(const T *vec) {
  return vec ? vec->size() : 0;
}

std::string_view view(const flatbuffers::String *s) {
  return s ? s->string_view() : std::string_view();
}

/// Stores `value` as element `i` of a tensor of type `t`; floats go through
/// float, as dsc::ref::init's values are converted to float.
void storeElement(void *data, DType t, int64_t i, double value) {
  switch (t) {
  case DType::f32:
    static_cast<float *>(data)[i] = float(value);
    break;
  case DType::f64:
    static_cast<double *>(data)[i] = value;
    break;
  case DType::f16:
    static_cast<uint16_t *>(data)[i] = floatToF16(float(value));
    break;
  case DType::bf16:
    static_cast<uint16_t *>(data)[i] = floatToBf16(float(value));
    break;
  case DType::i32:
    static_cast<int32_t *>(data)[i] = int32_t(std::llround(value));
    break;
  case DType::i64:
    static_cast<int64_t *>(data)[i] = int64_t(std::llround(value));
    break;
  }
}

struct ArenaMemory {
  uint8_t *base = nullptr; ///< from the backend's allocate (64-byte aligned)
  uint64_t bytes = 0;
};

struct BufferView {
  std::vector<int64_t> shape;
  TensorRef ref;
  uint32_t arena = 0;
  uint64_t end = 0; ///< offset + bytes in the arena
  std::string_view name;
};

class SessionImpl : public Session {
public:
  SessionImpl(const LoadedPlan &loaded, const SessionOptions &options)
      : loaded_(loaded), plan_(loaded.plan()), options_(options) {}

  ~SessionImpl() override {
    executor_.reset(); // join the workers before freeing their memory
    for (ArenaMemory &a : arenas_)
      loaded_.backend().release(a.base);
  }

  bool init(std::string &error);

  void initVariables() override;
  const std::vector<NamedTensor> &variables() const override {
    return variables_;
  }
  NamedTensor *findVariable(std::string_view name) override {
    auto it = variableIndex_.find(name);
    return it == variableIndex_.end() ? nullptr : &variables_[it->second];
  }
  std::vector<NamedTensor> programInputs(std::string_view program) override {
    const PreparedProgram *p = findProgram(program);
    return p ? named(p->inputs) : std::vector<NamedTensor>();
  }
  std::vector<NamedTensor> programOutputs(std::string_view program) override {
    const PreparedProgram *p = findProgram(program);
    return p ? named(p->outputs) : std::vector<NamedTensor>();
  }
  bool run(std::string_view program, uint32_t step,
           std::string &error) override;
  std::vector<ArenaUsage> arenaUsage() const override;
  bool readTensorSplit(const NamedTensor &v, const float *mine, bool inArena,
                       float *out, std::string &error);
  bool readShards(const NamedTensor &v, float *out, std::string &error);
  bool readVariable(const NamedTensor &v, float *out,
                    std::string &error) override;
  void writeVariable(const NamedTensor &v, const float *in) override;
  bool gatherTensorParts(const float *part, size_t count, float *whole,
                         std::string &error) override {
    return groups_.tensor->allGather(part, whole, count, error);
  }
  void copyIn(void *tensor, const void *host, size_t bytes) override {
    loaded_.backend().copyToArena(tensor, host, bytes);
  }
  void copyOut(void *host, const void *tensor, size_t bytes) override {
    loaded_.backend().copyFromArena(host, tensor, bytes);
  }
  bool hasProgram(std::string_view program) const override {
    return programIndex_.count(program) != 0;
  }
  std::vector<std::string> programNames() const override {
    std::vector<std::string> names;
    for (const auto &entry : programIndex_)
      names.emplace_back(entry.first);
    return names;
  }
  void setTracing(bool on) override { executor_->setTracing(on); }
  std::vector<TraceRecord> takeTrace() override {
    return executor_->takeTrace();
  }

private:
  const PreparedProgram *findProgram(std::string_view name) const {
    auto it = programIndex_.find(name);
    return it == programIndex_.end() ? nullptr : &programs_[it->second];
  }
  std::vector<NamedTensor> named(const std::vector<uint32_t> &ids) const {
    std::vector<NamedTensor> out;
    for (uint32_t id : ids)
      out.push_back({std::string(buffers_[id].name), buffers_[id].ref,
                     buffers_[id].shape});
    return out;
  }
  void noteWrite(uint32_t buffer) {
    const BufferView &b = buffers_[buffer];
    written_[b.arena] = std::max(written_[b.arena], b.end);
  }
  /// This rank's part of variable `v`: the whole tensor unless sharded
  /// (ZeRO shards over the data-parallel group).
  VariablePart localPart(const NamedTensor &v) const {
    return v.partOn(groups_.dataRank);
  }
  bool allocateArenas(std::string &error);
  void fillConstants();
  void prepareProgram(const fb::Program &program);

  const LoadedPlan &loaded_;
  const fb::Plan &plan_;
  SessionOptions options_;
  std::vector<ArenaMemory> arenas_;
  std::vector<BufferView> buffers_;
  std::vector<NamedTensor> variables_;
  std::unordered_map<std::string_view, size_t> variableIndex_;
  std::vector<PreparedProgram> programs_;
  std::unordered_map<std::string_view, size_t> programIndex_;
  /// Per program, its Program.arena_peaks (empty in a plan without them);
  /// per arena, the largest of them over the programs run so far: what the
  /// plan predicts the run writes in a transient arena.
  std::vector<std::vector<uint64_t>> programPeaks_;
  std::vector<uint64_t> ranPeaks_;
  /// Per arena, the highest byte written outside instructions (constants,
  /// variables, program inputs); the executor tracks instruction outputs.
  std::vector<uint64_t> written_;
  /// options_.comm, or ownComm_ when the caller gave none.
  std::unique_ptr<Communicator> ownComm_;
  Communicator *comm_ = nullptr;
  /// The rank's data, tensor and pipeline groups (RankGroups.h).
  RankGroups groups_;
  std::unique_ptr<StreamExecutor> executor_;
};

bool SessionImpl::allocateArenas(std::string &error) {
  const std::string &what = loaded_.name();
  uint64_t deviceBytes = 0;
  std::string breakdown;
  for (uint32_t i = 0; i < count(plan_.arenas()); ++i) {
    const fb::Arena *a = plan_.arenas()->Get(i);
    if (a->space() != fb::Space::device || a->bytes() == 0)
      continue;
    // Each arena is at most 2^56 bytes; saturate rather than wrap.
    deviceBytes = std::min(deviceBytes + a->bytes(), uint64_t(1) << 63);
    breakdown += std::string(breakdown.empty() ? "" : " + ") +
                 fb::categoryName(a->category()) + " " +
                 std::to_string(a->bytes());
  }
  // The budget: --device-memory's, else the device's own free memory
  // (said before any arena is allocated, in the plan's terms rather than
  // cudaMalloc's).
  uint64_t budget = options_.deviceMemory;
  std::string allows = "--device-memory allows " + std::to_string(budget);
  DeviceMemory device;
  if (budget == 0 && loaded_.backend().deviceMemory(device) &&
      device.total > device.used) {
    budget = device.total - device.used;
    allows = "the " + std::string(loaded_.backend().name()) + " device has " +
             std::to_string(budget) + " free of " +
             std::to_string(device.total);
  }
  if (budget != 0 && deviceBytes > budget) {
    error = what + " needs " + std::to_string(deviceBytes) +
            " bytes of device memory (" + breakdown + "); " + allows;
    return false;
  }
  for (uint32_t i = 0; i < count(plan_.arenas()); ++i) {
    const fb::Arena *a = plan_.arenas()->Get(i);
    ArenaMemory mem;
    mem.bytes = a->bytes();
    std::string why;
    mem.base = static_cast<uint8_t *>(loaded_.backend().allocate(
        fb::memorySpace(a->space()), a->bytes(), why));
    if (!mem.base) {
      error = what + ": cannot allocate arena " + std::to_string(i) + " (" +
              fb::categoryName(a->category()) + ", " +
              fb::spaceName(a->space()) + ", " + std::to_string(a->bytes()) +
              " bytes) on " + std::string(loaded_.backend().name()) + ": " +
              why;
      return false;
    }
    arenas_.push_back(mem);
  }
  return true;
}

// Constants and initial values are built in host memory and staged into
// the arenas through the backend, whose memory may not be the host's.
void SessionImpl::fillConstants() {
  std::vector<uint8_t> host;
  for (uint32_t i = 0; i < count(plan_.constants()); ++i) {
    const fb::Constant *c = plan_.constants()->Get(i);
    const BufferView &b = buffers_[c->buffer()];
    size_t elem = fb::dtypeSize(fb::DType(b.ref.dtype));
    size_t have = count(c->data());
    if (have == 0)
      continue;
    size_t bytes = size_t(b.ref.numel()) * elem;
    if (have == elem) { // a splat (the verifier allows no other short size)
      host.resize(bytes);
      for (size_t k = 0; k < bytes; k += elem)
        std::memcpy(host.data() + k, c->data()->data(), elem);
      copyIn(b.ref.data, host.data(), bytes);
    } else {
      copyIn(b.ref.data, c->data()->data(), have);
    }
    noteWrite(c->buffer());
  }
}

void SessionImpl::prepareProgram(const fb::Program &program) {
  PreparedProgram p;
  p.name = view(program.name());
  p.numEvents = program.num_events();
  auto ids = [](const flatbuffers::Vector<uint32_t> *vec) {
    return vec ? std::vector<uint32_t>(vec->begin(), vec->end())
               : std::vector<uint32_t>();
  };
  p.inputs = ids(program.inputs());
  p.outputs = ids(program.outputs());
  for (uint32_t i = 0; i < count(program.instrs()); ++i) {
    const fb::Instr *in = program.instrs()->Get(i);
    PreparedInstr pi;
    pi.index = i;
    std::vector<DType> ins, outs;
    for (uint32_t id : ids(in->inputs()))
      ins.push_back(buffers_[id].ref.dtype);
    for (uint32_t id : ids(in->outputs()))
      outs.push_back(buffers_[id].ref.dtype);
    // The verifier checked that the backend has a variant for these dtypes.
    const MemorySpace where = fb::memorySpace(in->space());
    const KernelInfo *info = loaded_.backend().findKernel(
        view(in->kernel()), {ins.data(), ins.size()},
        {outs.data(), outs.size()}, where);
    pi.fn = info->fn;
    pi.host = where == MemorySpace::host;
    pi.tensorGroup = in->tensor_group();
    if (in->pipeline_group())
      pi.groupComm = groups_.ofStages(in->pipeline_group());
    else if (info->name == "comm.send" || info->name == "comm.recv")
      pi.groupComm = groups_.pipeline;
    pi.resources = loaded_.backend().streamResources(where, int(in->stream()));
    pi.kernel = info->name;
    pi.loc = view(in->loc());
    pi.microBatch = in->micro_batch();
    pi.part = "\0FBW"[int(in->schedule_part()) & 3];
    for (uint32_t id : ids(in->inputs()))
      pi.inputs.push_back(buffers_[id].ref);
    for (uint32_t id : ids(in->outputs())) {
      pi.outputs.push_back(buffers_[id].ref);
      const BufferView &b = buffers_[id];
      auto same = [&](auto &w) { return w.first == b.arena; };
      auto it = std::find_if(pi.writes.begin(), pi.writes.end(), same);
      if (it == pi.writes.end())
        pi.writes.push_back({b.arena, b.end});
      else
        it->second = std::max(it->second, b.end);
    }
    if (in->int_attrs())
      pi.intAttrs.assign(in->int_attrs()->begin(), in->int_attrs()->end());
    if (in->float_attrs())
      pi.floatAttrs.assign(in->float_attrs()->begin(),
                           in->float_attrs()->end());
    pi.wait = ids(in->wait());
    pi.record = ids(in->record());
    p.perStream[int(in->stream())].push_back(i);
    p.instrs.push_back(std::move(pi));
  }
  programIndex_[p.name] = programs_.size();
  programs_.push_back(std::move(p));
  std::vector<uint64_t> &peaks = programPeaks_.emplace_back();
  if (const auto *given = program.arena_peaks())
    peaks.assign(given->begin(), given->end());
}

bool SessionImpl::init(std::string &error) {
  const std::string &what = loaded_.name();
  uint32_t ranks = uint32_t(std::max(options_.worldSize, 0));
  if (plan_.world_size() != ranks) {
    error = what + " was compiled for world size " +
            std::to_string(plan_.world_size()) + "; this run has " +
            std::to_string(ranks) + (ranks == 1 ? " rank" : " ranks");
    return false;
  }
  if (options_.rank < 0 || options_.rank >= options_.worldSize) {
    error = what + ": rank " + std::to_string(options_.rank) +
            " is outside world size " + std::to_string(options_.worldSize);
    return false;
  }
  comm_ = options_.comm;
  if (!comm_) {
    ownComm_ = std::make_unique<LocalCommunicator>();
    comm_ = ownComm_.get();
  } else if (comm_->rank() != options_.rank ||
             comm_->size() != options_.worldSize) {
    error = what + ": the run is rank " + std::to_string(options_.rank) +
            " of " + std::to_string(options_.worldSize) +
            " but its communicator is rank " + std::to_string(comm_->rank()) +
            " of " + std::to_string(comm_->size());
    return false;
  }
  if (!groups_.make(plan_, loaded_.name(), options_.rank, options_.worldSize,
                    *comm_, error))
    return false;
  if (!allocateArenas(error))
    return false;
  written_.assign(arenas_.size(), 0);

  buffers_.resize(count(plan_.buffers()));
  for (uint32_t i = 0; i < buffers_.size(); ++i) {
    const fb::Buffer *b = plan_.buffers()->Get(i);
    BufferView &v = buffers_[i];
    if (b->shape())
      v.shape.assign(b->shape()->begin(), b->shape()->end());
    v.arena = b->arena();
    v.name = view(b->name());
    v.ref.data = arenas_[b->arena()].base + b->offset();
    v.ref.dtype = DType(b->dtype());
    v.ref.shape = v.shape.data();
    v.ref.rank = int(v.shape.size());
    v.end = b->offset() + fb::dtypeSize(b->dtype()) * uint64_t(v.ref.numel());
  }
  fillConstants();

  for (uint32_t i = 0; i < count(plan_.variables()); ++i) {
    const fb::Variable *var = plan_.variables()->Get(i);
    const BufferView &b = buffers_[var->buffer()];
    variableIndex_[view(var->name())] = variables_.size();
    NamedTensor v{std::string(view(var->name())), b.ref, b.shape};
    v.kind = StateKind(var->kind());
    if (var->sharded()) {
      v.shape.assign(var->shape()->begin(), var->shape()->end());
      v.sharded = true;
      v.shardOffset = int64_t(var->shard_offset());
    }
    if (var->tensor_split_dim() >= 0) {
      v.shape.assign(var->shape()->begin(), var->shape()->end());
      v.tpDim = var->tensor_split_dim();
      v.tpBlocks = int64_t(var->tensor_split_blocks());
      v.tpParts = int64_t(plan_.tensor_parallel());
      v.tpPart = groups_.tensorRank;
      if (v.sharded) // the plan lists a ZeRO share's part
        v.shape[size_t(v.tpDim)] *= v.tpParts;
    }
    variables_.push_back(std::move(v));
    noteWrite(var->buffer()); // persistent state is resident from the start
  }

  std::array<bool, kNumStreams> streamUsed{};
  uint32_t maxEvents = 0;
  for (uint32_t i = 0; i < count(plan_.programs()); ++i) {
    const fb::Program *program = plan_.programs()->Get(i);
    prepareProgram(*program);
    maxEvents = std::max(maxEvents, program->num_events());
    for (int s = 0; s < kNumStreams; ++s)
      streamUsed[s] |= !programs_.back().perStream[s].empty();
  }
  ExecutorSpec spec{streamUsed, maxEvents, arenas_.size()};
  executor_ = loaded_.backend().createExecutor(spec);
  if (!executor_)
    executor_ = std::make_unique<HostExecutor>(spec);
  return true;
}

namespace {

/// Threads that draw initial weights: every core (a draw is a pure function
/// of the element's index, so the split does not change a value), at most
/// 32 (and 16 in effect: a 1M-element chunk in parts of at least 64K);
/// ranks sharing a machine oversubscribe it only for this short phase.
unsigned initThreads() {
  return std::clamp(std::thread::hardware_concurrency(), 1u, 32u);
}

/// fn(begin, end) over [0, n), split in contiguous ranges over up to
/// `threads` threads (the caller runs the first), each with at least 64K
/// elements (a thread's start costs about as much as 1000 draws).
template <class Fn> void splitOverThreads(int64_t n, unsigned threads, Fn fn) {
  const int64_t parts =
      std::clamp<int64_t>(n >> 16, 1, std::max<int64_t>(threads, 1));
  std::vector<std::thread> helpers;
  helpers.reserve(size_t(parts - 1)); // no reallocation with threads running
  for (int64_t p = 1; p < parts; ++p) {
    try {
      helpers.emplace_back(fn, n * p / parts, n * (p + 1) / parts);
    } catch (const std::system_error &) { // no thread to be had: draw here
      fn(n * p / parts, n * (p + 1) / parts);
    }
  }
  fn(int64_t(0), n / parts);
  for (std::thread &t : helpers)
    t.join();
}

} // namespace

void SessionImpl::initVariables() {
  // Staged a chunk at a time, so the host copy stays small.
  constexpr int64_t kChunk = int64_t(1) << 20;
  const unsigned threads = initThreads();
  std::vector<uint64_t> host; // 8-byte words: aligned for every dtype
  for (uint32_t i = 0; i < count(plan_.variables()); ++i) {
    const fb::Variable *var = plan_.variables()->Get(i);
    const NamedTensor &nt = variables_[i];
    const TensorRef &t = nt.ref;
    const size_t size = fb::dtypeSize(fb::DType(t.dtype));
    // Only this rank's elements: a shard also holds other variables.
    VariablePart part = localPart(nt);
    for (int64_t begin = part.begin; begin < part.end; begin += kChunk) {
      int64_t n = std::min(kChunk, part.end - begin);
      host.assign(size_t(n * int64_t(size) + 7) / 8, 0); // zeros as is
      // dsc::ref::init's draw, keyed by the element's index in the whole
      // variable: the float64 interpreter, and runs on any number of ranks
      // or threads, start from the same weights. (GPT-2's 124M draws took
      // ~6 s on one core: log, cos and sqrt in double each.)
      auto draw = [&](int64_t from, int64_t to) {
        for (int64_t k = from; k < to; ++k) {
          const int64_t e = begin + k;
          const int64_t whole =
              nt.tensorSplit() ? nt.wholeIndex(e, nt.tpPart) : e;
          double value =
              var->init() == fb::InitKind::ones
                  ? 1.0
                  : rng::normalAt(options_.seed, var->rng_stream(),
                                  fb::kInitRngStep, uint64_t(whole)) *
                        var->std();
          storeElement(host.data(), t.dtype, k, value);
        }
      };
      if (var->init() != fb::InitKind::zeros)
        splitOverThreads(n, threads, draw);
      copyIn(static_cast<uint8_t *>(t.data) +
                 size_t(part.local + (begin - part.begin)) * size,
             host.data(), size_t(n) * size);
    }
  }
}

bool SessionImpl::readVariable(const NamedTensor &v, float *out,
                               std::string &error) {
  if (!v.tensorSplit())
    return v.sharded && v.ref.dtype == DType::f32
               ? readShards(v, out, error)
               : Session::readVariable(v, out, error);
  if (v.ref.dtype != DType::f32)
    return Session::readVariable(v, out, error);
  if (!v.sharded)
    return readTensorSplit(v, v.ref.f32(), /*inArena=*/true, out, error);
  // A ZeRO share of a part: the part from the data group's shards, then
  // the whole from the tensor group's parts.
  std::vector<float> part(static_cast<size_t>(v.partNumel()));
  return readShards(v, part.data(), error) &&
         readTensorSplit(v, part.data(), /*inArena=*/false, out, error);
}

bool SessionImpl::readShards(const NamedTensor &v, float *out,
                             std::string &error) {
  // Each rank holding a part broadcasts it into place: the traffic is the
  // variable's size, not its group's.
  int64_t s = v.ref.numel();
  int64_t first = v.shardOffset / s,
          last = (v.shardOffset + v.partNumel() - 1) / s;
  for (int64_t rank = first; rank <= last; ++rank) {
    VariablePart part = v.partOn(rank);
    float *dst = out + part.begin;
    size_t n = size_t(part.end - part.begin);
    if (rank == groups_.dataRank)
      copyOut(dst, v.ref.f32() + part.local, n * sizeof(float));
    if (!groups_.data->broadcast(dst, n, int(rank), error)) {
      error = "reading variable '" + v.name + "': " + error;
      return false;
    }
  }
  return true;
}

bool SessionImpl::readTensorSplit(const NamedTensor &v, const float *mine,
                                  bool inArena, float *out,
                                  std::string &error) {
  // Each rank of the tensor group broadcasts its part (its place in the
  // group is its part's number), which every rank of the group places.
  // `mine` is this rank's part: the variable's memory (inArena: copied out
  // through the backend), or a host copy.
  const int64_t n = v.partNumel();
  std::vector<float> part(static_cast<size_t>(n));
  for (int64_t p = 0; p < v.tpParts; ++p) {
    if (p == v.tpPart) {
      if (inArena)
        copyOut(part.data(), mine, size_t(n) * sizeof(float));
      else
        std::copy(mine, mine + n, part.begin());
    }
    if (!groups_.tensor->broadcast(part.data(), size_t(n), int(p), error)) {
      error = "reading variable '" + v.name + "': " + error;
      return false;
    }
    for (int64_t i = 0; i < n; ++i)
      out[v.wholeIndex(i, p)] = part[size_t(i)];
  }
  return true;
}

void SessionImpl::writeVariable(const NamedTensor &v, const float *in) {
  std::vector<float> mine;
  if (v.tensorSplit()) { // this rank's part of the whole
    mine.resize(size_t(v.partNumel()));
    for (size_t i = 0; i < mine.size(); ++i)
      mine[i] = in[v.wholeIndex(int64_t(i), v.tpPart)];
    if (!v.sharded)
      return writeFloats(v.ref, 0, mine.data(), int64_t(mine.size()));
    in = mine.data();
  }
  if (!v.sharded)
    return Session::writeVariable(v, in);
  VariablePart part = localPart(v);
  writeFloats(v.ref, part.local, in + part.begin, part.end - part.begin);
}

bool SessionImpl::run(std::string_view program, uint32_t step,
                      std::string &error) {
  const PreparedProgram *p = findProgram(program);
  if (!p) {
    error = loaded_.name() + ": no program '" + std::string(program) + "'";
    return false;
  }
  for (uint32_t id : p->inputs)
    noteWrite(id); // the tool filled them
  const std::vector<uint64_t> &peaks = programPeaks_[programIndex_[program]];
  ranPeaks_.resize(std::max(ranPeaks_.size(), peaks.size()), 0);
  for (size_t a = 0; a < peaks.size(); ++a)
    ranPeaks_[a] = std::max(ranPeaks_[a], peaks[a]);
  KernelContext ctx;
  ctx.seed = options_.seed;
  ctx.step = step;
  ctx.sampleOffset = sampleOffset_;
  ctx.rank = groups_.dataRank;
  ctx.tensorRank = groups_.tensorRank;
  ctx.worldSize = groups_.dataWorld;
  ctx.comm = groups_.data;
  ctx.tensorComm = groups_.tensor;
  // A stage's program ends when what it sent has arrived (completeSends).
  return executor_->run(*p, ctx, loaded_.name(), error) &&
         (!groups_.pipeline || groups_.pipeline->completeSends(error));
}

std::vector<ArenaUsage> SessionImpl::arenaUsage() const {
  std::vector<ArenaUsage> usage;
  const std::vector<uint64_t> &executed = executor_->highWater();
  for (uint32_t i = 0; i < arenas_.size(); ++i) {
    const fb::Arena *a = plan_.arenas()->Get(i);
    ArenaUsage u;
    u.category = fb::categoryName(a->category());
    u.space = fb::spaceName(a->space());
    u.predictedBytes = a->bytes();
    // A transient arena is as large as the largest program needs it; the
    // programs this run executed predict what it wrote there.
    const bool transient = a->category() == fb::Category::activations ||
                           a->category() == fb::Category::comm_buffers;
    if (transient && i < ranPeaks_.size())
      u.predictedBytes = ranPeaks_[i];
    u.writtenBytes = std::max(written_[i], executed[i]);
    usage.push_back(u);
  }
  return usage;
}

} // namespace

// The tensor's bytes as this rank holds them (its shard, if sharded).
static bool checkStagedSize(const NamedTensor &t, size_t bytes,
                            const char *verb, std::string &error) {
  size_t want = size_t(t.ref.numel()) * dtypeSize(t.ref.dtype);
  if (bytes == want && !t.sharded && !t.tensorSplit())
    return true;
  error = std::string("cannot ") + verb + " '" + t.name + "': " +
          (t.sharded || t.tensorSplit()
               ? std::string("it is sharded (use the variable calls)")
               : std::to_string(bytes) + " bytes given, it holds " +
                     std::to_string(want));
  return false;
}

bool Session::writeTensor(const NamedTensor &t, const void *data, size_t bytes,
                          std::string &error) {
  if (!checkStagedSize(t, bytes, "write", error))
    return false;
  copyIn(t.ref.data, data, bytes);
  return true;
}

bool Session::readTensor(const NamedTensor &t, void *out, size_t bytes,
                         std::string &error) {
  if (!checkStagedSize(t, bytes, "read", error))
    return false;
  copyOut(out, t.ref.data, bytes);
  return true;
}

bool Session::gatherTensorParts(const float *part, size_t count, float *whole,
                                std::string &) {
  std::copy(part, part + count, whole);
  return true;
}

bool Session::readVariable(const NamedTensor &v, float *out,
                           std::string &error) {
  if (v.ref.dtype != DType::f32) {
    error = "variable '" + v.name + "' is " + dtypeName(v.ref.dtype) +
            "; only f32 variables can be read";
    return false;
  }
  if (v.sharded || v.tensorSplit()) {
    error = "variable '" + v.name + "' is sharded; cannot gather it here";
    return false;
  }
  copyOut(out, v.ref.data, size_t(v.numel()) * sizeof(float));
  return true;
}

void Session::writeVariable(const NamedTensor &v, const float *in) {
  if (!v.sharded)
    writeFloats(v.ref, 0, in, v.numel());
}

void Session::writeFloats(const TensorRef &t, int64_t first, const float *in,
                          int64_t n) {
  const size_t size = dtypeSize(t.dtype);
  uint8_t *dst = static_cast<uint8_t *>(t.data) + size_t(first) * size;
  if (t.dtype == DType::f32)
    return copyIn(dst, in, size_t(n) * sizeof(float));
  if (t.dtype != DType::f16 && t.dtype != DType::bf16)
    return;
  // Rounded as the initializer rounds: mixed precision's 16-bit parameters.
  std::vector<uint16_t> rounded(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    rounded[size_t(i)] =
        t.dtype == DType::f16 ? floatToF16(in[i]) : floatToBf16(in[i]);
  copyIn(dst, rounded.data(), rounded.size() * sizeof(uint16_t));
}

bool Session::readFloats(const NamedTensor &v, int64_t first, float *out,
                         int64_t n, std::string &error) {
  const TensorRef &t = v.ref;
  const DType dtype = t.dtype;
  if (dtype != DType::f32 && dtype != DType::f16 && dtype != DType::bf16 &&
      dtype != DType::f64) {
    error = "variable '" + v.name + "' is " + dtypeName(dtype) +
            "; only floating-point state converts to floats";
    return false;
  }
  const int64_t numel = t.numel();
  if (first < 0 || n < 0 || first > numel || n > numel - first) {
    error = "variable '" + v.name + "': cannot read " + std::to_string(n) +
            " elements from element " + std::to_string(first) + " of its " +
            std::to_string(numel);
    return false;
  }
  const size_t size = dtypeSize(dtype);
  const auto *src = static_cast<const uint8_t *>(t.data) + size_t(first) * size;
  if (dtype == DType::f32) {
    copyOut(out, src, size_t(n) * sizeof(float));
    return true;
  }
  std::vector<uint8_t> raw(size_t(n) * size);
  copyOut(raw.data(), src, raw.size());
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t *e = raw.data() + size_t(i) * size;
    if (dtype == DType::f64) {
      double d;
      std::memcpy(&d, e, sizeof d);
      out[i] = float(d);
      continue;
    }
    uint16_t h;
    std::memcpy(&h, e, sizeof h);
    out[i] = dtype == DType::f16 ? f16ToFloat(h) : bf16ToFloat(h);
  }
  return true;
}

void Session::copyIn(void *tensor, const void *host, size_t bytes) {
  if (bytes)
    std::memcpy(tensor, host, bytes);
}

void Session::copyOut(void *host, const void *tensor, size_t bytes) {
  if (bytes)
    std::memcpy(host, tensor, bytes);
}

std::unique_ptr<Session> Session::create(const LoadedPlan &plan,
                                         const SessionOptions &options,
                                         std::string &error) {
  auto session = std::make_unique<SessionImpl>(plan, options);
  if (!session->init(error))
    return nullptr;
  return session;
}

} // namespace dsc::rt
