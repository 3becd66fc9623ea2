//===- OpenMpTeam.cpp - parallelFor on GNU OpenMP's team, loaded at use -===//
//
// oneDNN (bf16 products) and oneMKL (f32 products, as Blas.cpp loads it)
// run on GNU OpenMP's thread team. With dsc's kernels on a pool of their
// own between those GEMMs, every switch woke one set of threads while the
// other spun or slept: on 2 cores a bf16 matmul plus its GELU epilogue
// took 1.30 ms against 0.31 + 0.75 ms for the two alone, and cutting the
// product into row blocks (more switches) made it slower still. On one
// team a kernel after a GEMM starts on threads that are still awake: the
// small GPT's bf16 step 0.82-0.87x, its fp32 step with oneMKL 0.85-0.88x
// (bench/RESULTS.md).
//
// By default (DSC_CPU_POOL=auto) the kernels move to the team when a GEMM
// library on it is first used (shareOpenMpTeam: oneDNN's first
// product, oneMKL's loading); with OpenBLAS, whose own pthreads run the f32
// GEMMs of a default install, they stay on dsc's pool (CpuCommon.cpp),
// where the team measured no faster (0.99x) and 1.02-1.04x on 2 ranks of 2
// cores. `openmp` always takes the team, `threads` never.
//
// The library is loaded with dlopen, after GOMP_SPINCOUNT is shortened
// (shortenOpenMpSpin: libgomp reads it when it loads; the default
// 300000-round spin starved OpenBLAS's threads), and driven through
// GOMP_parallel, the entry point GCC compiles `#pragma omp parallel` to.
//
//===----------------------------------------------------------------------===//

#include "runtime/backends/cpu/CpuCommon.h"

#include <atomic>
#include <cstdlib>
#include <dlfcn.h>
#include <mutex>

namespace dsc::rt::cpu {

bool cpuPoolChoiceFromEnv(std::string &choice, std::string &error) {
  const char *value = std::getenv("DSC_CPU_POOL");
  choice = value && *value ? value : "auto";
  if (choice == "auto" || choice == "openmp" || choice == "threads")
    return true;
  error =
      "DSC_CPU_POOL: expected auto, openmp or threads, got '" + choice + "'";
  return false;
}

namespace {

struct Gomp {
  void (*parallel)(void (*)(void *), void *, unsigned, unsigned) = nullptr;
};

/// DSC_CPU_POOL's value ("auto" for a bad one, which stopped the backend).
const std::string &poolChoice() {
  static const std::string choice = [] {
    std::string c, ignored;
    return cpuPoolChoiceFromEnv(c, ignored) ? c : std::string("auto");
  }();
  return choice;
}

std::atomic<bool> teamShared{false};

const Gomp &gomp() {
  static const Gomp g = [] {
    Gomp loaded;
    if (poolChoice() == "threads")
      return loaded;
    shortenOpenMpSpin();
    void *lib = dlopen("libgomp.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib)
      return loaded;
    loaded.parallel = reinterpret_cast<decltype(loaded.parallel)>(
        dlsym(lib, "GOMP_parallel"));
    return loaded;
  }();
  return g;
}

/// One parallelFor on the team: each thread claims chunks until none is
/// left (which thread runs a chunk never changes a result).
struct TeamJob {
  const std::function<void(int64_t)> *chunk;
  int64_t chunks;
  std::atomic<int64_t> next{0};
};

void runTeamJob(void *data) {
  auto &job = *static_cast<TeamJob *>(data);
  for (int64_t c; (c = job.next.fetch_add(1)) < job.chunks;)
    (*job.chunk)(c);
}

} // namespace

void shareOpenMpTeam() { teamShared.store(true, std::memory_order_relaxed); }

bool openMpTeamLoads() { return gomp().parallel != nullptr; }

std::string cpuPoolLabel() {
  if (!openMpTeamLoads())
    return "dsc's own threads";
  return poolChoice() == "openmp" || teamShared.load()
             ? "GNU OpenMP's team"
             : "dsc's own threads (GNU OpenMP's team once a GEMM library "
               "runs on it)";
}

TeamRun runOnOpenMpTeam(int64_t chunks,
                        const std::function<void(int64_t)> &chunk) {
  if (poolChoice() == "auto" && !teamShared.load(std::memory_order_relaxed))
    return TeamRun::Unavailable;
  const Gomp &g = gomp();
  if (!g.parallel)
    return TeamRun::Unavailable;
  // One loop on the team at a time: another stream's kernel, or a loop
  // nested in a chunk, runs alone on its caller's thread.
  static std::mutex busy;
  std::unique_lock<std::mutex> owner(busy, std::try_to_lock);
  if (!owner.owns_lock())
    return TeamRun::Busy;
  TeamJob job;
  job.chunk = &chunk;
  job.chunks = chunks;
  g.parallel(&runTeamJob, &job, unsigned(chunks), 0);
  return TeamRun::Ran;
}

} // namespace dsc::rt::cpu
