//===- CpuCommon.cpp - shared helpers of the CPU kernels ------------------===//

#include "runtime/backends/cpu/CpuCommon.h"

#include "runtime/core/NumberText.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>

#include <pthread.h>

namespace dsc::rt::cpu {

bool scalarOperand(std::string &err, const TensorRef &t, const char *role,
                   float &value) {
  if (!expectDType(err, t, role, DType::f32))
    return false;
  if (t.numel() != 1)
    return fail(err, role, " must hold one value, got shape ", shapeStr(t));
  value = *t.f32();
  return true;
}

bool kernelThreadsFromEnv(int &threads, std::string &error) {
  unsigned hw = std::thread::hardware_concurrency();
  uint64_t n = std::clamp(hw, 1u, 8u);
  if (!envCount("DSC_CPU_THREADS", 1, kMaxKernelThreads, n, error))
    return false;
  threads = int(n);
  return true;
}

int kernelThreads() {
  static const int threads = [] {
    int n = 1;
    std::string ignored; // the backend refused a bad value when created
    return kernelThreadsFromEnv(n, ignored) ? n : 1;
  }();
  return threads;
}

namespace {

// A fixed set of helper threads that run the chunks of one parallelFor at a
// time, unless GNU OpenMP's team does (OpenMpTeam.cpp). A caller that finds
// the pool busy (another stream's kernel, or a nested call) runs its loop
// alone, so the pool never deadlocks.
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
  const TeamRun team = runOnOpenMpTeam(chunks, chunk);
  if (team == TeamRun::Ran)
    return;
  if (team == TeamRun::Busy || !Pool::get().run(chunks, chunk))
    for (int64_t c = 0; c < chunks; ++c)
      chunk(c);
}

double sumInRowBlocks(int64_t rows,
                      const std::function<double(int64_t)> &term) {
  const int64_t blockRows = std::max<int64_t>(8, (rows + 63) / 64);
  const int64_t blocks = (rows + blockRows - 1) / blockRows;
  std::vector<double> part(size_t(blocks), 0.0);
  parallelFor(blocks, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      double total = 0;
      for (int64_t r = b * blockRows; r < std::min(rows, (b + 1) * blockRows);
           ++r)
        total += term(r);
      part[size_t(b)] = total;
    }
  });
  double total = 0;
  for (double p : part)
    total += p;
  return total;
}

bool countTargets(std::string &err, const TensorRef &targets, int64_t V,
                  int64_t ignore, int64_t &count) {
  count = 0;
  for (int64_t r = 0, n = targets.numel(); r < n; ++r) {
    const int64_t t = indexAt(targets, r);
    if (t == ignore)
      continue;
    if (t < 0 || t >= V)
      return fail(err, "target ", t, " at position ", r, " is outside [0, ", V,
                  ") and is not the ignore index ", ignore);
    ++count;
  }
  return true;
}

} // namespace dsc::rt::cpu
