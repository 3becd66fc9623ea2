//===- CpuCommon.cpp - shared helpers of the CPU kernels ------------------===//

#include "runtime/backends/cpu/CpuCommon.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>

#include <pthread.h>

namespace dsc::rt::cpu {

std::string listStr(const int64_t *values, size_t count) {
  std::string s = "[";
  for (size_t i = 0; i < count; ++i) {
    if (i)
      s += ", ";
    s += std::to_string(values[i]);
  }
  return s + "]";
}

bool sameShape(const TensorRef &a, const TensorRef &b) {
  return a.rank == b.rank && std::equal(a.shape, a.shape + a.rank, b.shape);
}

int64_t dimProduct(const TensorRef &t, int begin, int end) {
  int64_t n = 1;
  for (int d = begin; d < end; ++d)
    n *= t.shape[d];
  return n;
}

bool broadcastsTo(const TensorRef &in, const TensorRef &out) {
  if (in.rank > out.rank)
    return false;
  int lead = out.rank - in.rank;
  for (int d = 0; d < in.rank; ++d)
    if (in.shape[d] != 1 && in.shape[d] != out.shape[lead + d])
      return false;
  return true;
}

BroadcastLayout broadcastLayout(const TensorRef &out, const TensorRef *in0,
                                const TensorRef *in1) {
  const TensorRef *ins[2] = {in0, in1};
  BroadcastLayout l;
  l.rank = 0;
  int64_t inStride[2] = {1, 1}; // row-major stride of the current input dim
  int64_t tmpShape[kMaxRank], tmpStrides[2][kMaxRank];
  // Per output dim, innermost first: the input strides (0 where expanded).
  for (int d = out.rank - 1; d >= 0; --d) {
    for (int k = 0; k < 2; ++k) {
      const TensorRef *in = ins[k];
      int id = in ? d - (out.rank - in->rank) : -1;
      int64_t size = id >= 0 ? in->shape[id] : 1;
      tmpStrides[k][d] = size == 1 ? 0 : inStride[k];
      inStride[k] *= size;
    }
    tmpShape[d] = out.shape[d];
  }
  for (int d = 0; d < out.rank; ++d) {
    if (tmpShape[d] == 1)
      continue;
    bool merge = l.rank > 0;
    for (int k = 0; k < 2 && merge; ++k)
      merge = l.strides[k][l.rank - 1] == tmpStrides[k][d] * tmpShape[d];
    if (merge) {
      l.shape[l.rank - 1] *= tmpShape[d];
      for (int k = 0; k < 2; ++k)
        l.strides[k][l.rank - 1] = tmpStrides[k][d];
    } else {
      l.shape[l.rank] = tmpShape[d];
      for (int k = 0; k < 2; ++k)
        l.strides[k][l.rank] = tmpStrides[k][d];
      ++l.rank;
    }
  }
  if (l.rank == 0) {
    l.rank = 1;
    l.shape[0] = 1;
    l.strides[0][0] = l.strides[1][0] = 0;
  }
  return l;
}

bool lastDimRows(std::string &err, const TensorRef &x, const char *role,
                 int64_t &rows, int64_t &cols) {
  if (x.rank < 1)
    return fail(err, role, " needs rank >= 1, got a scalar");
  cols = x.shape[x.rank - 1];
  rows = dimProduct(x, 0, x.rank - 1);
  return true;
}

bool expectDType(std::string &err, const TensorRef &t, const char *role,
                 DType want) {
  if (t.dtype == want)
    return true;
  return fail(err, "unsupported dtype ", dtypeName(t.dtype), " for ", role,
              " (expected ", dtypeName(want), ")");
}

bool expectAllF32(const KernelArgs &args, std::string &err) {
  for (size_t i = 0; i < args.numInputs; ++i)
    if (args.inputs[i].dtype != DType::f32)
      return fail(err, "unsupported dtype ", dtypeName(args.inputs[i].dtype),
                  " for input ", i, " (expected f32)");
  for (size_t i = 0; i < args.numOutputs; ++i)
    if (args.outputs[i].dtype != DType::f32)
      return fail(err, "unsupported dtype ", dtypeName(args.outputs[i].dtype),
                  " for output ", i, " (expected f32)");
  return true;
}

bool expectIndexDType(std::string &err, const TensorRef &t, const char *role) {
  if (isIndexDType(t.dtype))
    return true;
  return fail(err, "unsupported dtype ", dtypeName(t.dtype), " for ", role,
              " (expected i32 or i64)");
}

bool scalarOperand(std::string &err, const TensorRef &t, const char *role,
                   float &value) {
  if (!expectDType(err, t, role, DType::f32))
    return false;
  if (t.numel() != 1)
    return fail(err, role, " must hold one value, got shape ", shapeStr(t));
  value = *t.f32();
  return true;
}

int kernelThreads() {
  static const int threads = [] {
    if (const char *env = std::getenv("DSC_CPU_THREADS")) {
      int n = std::atoi(env);
      if (n >= 1)
        return std::min(n, 64);
    }
    unsigned hw = std::thread::hardware_concurrency();
    return int(std::clamp(hw, 1u, 8u));
  }();
  return threads;
}

namespace {

// A fixed set of helper threads that run the chunks of one parallelFor at a
// time. A caller that finds the pool busy (another stream's kernel, or a
// nested call) runs its loop alone, so the pool never deadlocks.
class Pool {
public:
  static Pool &get() {
    static Pool *pool = new Pool(kernelThreads() - 1); // never destroyed
    return *pool;
  }

  /// Runs chunk(c) for c in [0, chunks); false if the pool is busy.
  bool run(int64_t chunks, const std::function<void(int64_t)> &chunk) {
    std::unique_lock<std::mutex> owner(busy_, std::try_to_lock);
    if (!owner.owns_lock() || workers_ == 0)
      return false;
    {
      std::lock_guard<std::mutex> lock(m_);
      job_ = &chunk;
      chunks_ = chunks;
      next_ = 0;
      done_ = 0;
      ++generation_;
    }
    wake_.notify_all();
    work();
    std::unique_lock<std::mutex> lock(m_);
    finished_.wait(lock, [&] { return done_ == chunks_ && active_ == 0; });
    job_ = nullptr;
    return true;
  }

private:
  explicit Pool(int workers) {
    for (int i = 0; i < workers; ++i) {
      pthread_t thread;
      if (pthread_create(&thread, nullptr, &Pool::main, this) != 0)
        break; // fewer helpers; the caller covers the rest
      pthread_detach(thread);
      ++workers_;
    }
  }

  static void *main(void *self) {
    static_cast<Pool *>(self)->serve();
    return nullptr;
  }

  void serve() {
    uint64_t seen = 0;
    std::unique_lock<std::mutex> lock(m_);
    for (;;) {
      wake_.wait(lock, [&] { return generation_ != seen; });
      seen = generation_;
      if (!job_)
        continue;
      ++active_;
      lock.unlock();
      work();
      lock.lock();
      if (--active_ == 0)
        finished_.notify_all();
    }
  }

  // Claims chunks until none is left; callable only while job_ is set.
  void work() {
    const std::function<void(int64_t)> *job;
    int64_t chunks;
    {
      std::lock_guard<std::mutex> lock(m_);
      job = job_;
      chunks = chunks_;
    }
    int64_t finishedHere = 0;
    for (int64_t c; (c = next_.fetch_add(1)) < chunks; ++finishedHere)
      (*job)(c);
    std::lock_guard<std::mutex> lock(m_);
    done_ += finishedHere;
    if (done_ == chunks_)
      finished_.notify_all();
  }

  std::mutex busy_;
  std::mutex m_;
  std::condition_variable wake_, finished_;
  const std::function<void(int64_t)> *job_ = nullptr;
  int64_t chunks_ = 0, done_ = 0;
  int active_ = 0, workers_ = 0;
  uint64_t generation_ = 0;
  std::atomic<int64_t> next_{0};
};

} // namespace

void parallelFor(int64_t n, int64_t grain,
                 const std::function<void(int64_t, int64_t)> &fn) {
  if (n <= 0)
    return;
  grain = std::max<int64_t>(grain, 1);
  int64_t chunks = std::min<int64_t>(kernelThreads(), (n + grain - 1) / grain);
  if (chunks <= 1) {
    fn(0, n);
    return;
  }
  // Boundaries depend on the chunk index only, so which thread runs a chunk
  // never changes a result.
  std::function<void(int64_t)> chunk = [&](int64_t c) {
    fn(n * c / chunks, n * (c + 1) / chunks);
  };
  if (!Pool::get().run(chunks, chunk))
    for (int64_t c = 0; c < chunks; ++c)
      chunk(c);
}

} // namespace dsc::rt::cpu
