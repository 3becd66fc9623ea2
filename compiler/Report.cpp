//===- Report.cpp - dsc --report: a plan's memory and work ---------------===//

#include "compiler/Report.h"

#include "compiler/plan/PlanModel.h"
#include "passes/remat/RematPolicy.h"
#include "runtime/plan/ProgramNames.h"

#include "llvm/Support/Format.h"

#include <map>
#include <set>
#include <tuple>

using llvm::StringRef;

namespace dsc {

uint64_t parameterCount(const PlanModel &plan) {
  uint64_t params = 0;
  for (const PlanVariable &v : plan.variables)
    if (v.kind == 0) {
      uint64_t n = 1;
      for (int64_t d : v.shape)
        n *= d;
      params += n;
    }
  return params;
}

void printReport(const PlanModel &plan, StringRef remat,
                 llvm::raw_ostream &os) {
  uint64_t params = parameterCount(plan);
  auto mib = [](uint64_t b) { return static_cast<double>(b) / (1 << 20); };
  os << "model " << plan.options.model << ": " << params << " parameters, "
     << "micro-batch " << plan.microBatch << " x " << plan.seqLen
     << " tokens, world size " << plan.options.worldSize << "\n";
  // The host's arenas exist with offload only.
  for (Space space : {Space::Device, Space::Host}) {
    const auto &arenas =
        space == Space::Host ? plan.hostArenaBytes : plan.arenaBytes;
    if (space == Space::Host && !plan.hasHostArenas())
      continue;
    os << "per-rank memory (" << (space == Space::Host ? "host" : "device")
       << "):\n";
    uint64_t total = 0;
    for (int c = 0; c < kNumCategories; ++c) {
      uint64_t bytes = arenas[c];
      total += bytes;
      os << llvm::format("  %-16s %14llu bytes %10.2f MiB\n",
                         categoryName(static_cast<Category>(c)).str().c_str(),
                         static_cast<unsigned long long>(bytes), mib(bytes));
    }
    os << llvm::format("  %-16s %14llu bytes %10.2f MiB\n",
                       (const char *)"total",
                       static_cast<unsigned long long>(total), mib(total));
  }
  // Each program's own activation peak: the arena holds the largest (eval
  // runs with a smaller one than the step whose backward keeps them).
  for (const PlanProgram &p : plan.programs)
    os << llvm::format("%-15s %6zu kernels %12.3f GFLOP %12.3f MB to "
                       "collectives %10.2f MiB activations\n",
                       p.name.c_str(), p.instrs.size(), p.flops / 1e9,
                       p.commBytes / 1e6, mib(p.activationBytes));
  // What the remat policy costs: the backward's recomputation.
  for (const PlanProgram &p : plan.programs)
    if (p.name == plan::kMicroStepProgram) {
      os << llvm::format("remat: %s, %.6g GFLOP recomputed per micro-step "
                         "(%.1f%% of its FLOPs)",
                         mlir::ds::remat::appliedPolicy(remat).str().c_str(),
                         p.recomputedFlops / 1e9,
                         p.flops > 0 ? 100 * p.recomputedFlops / p.flops : 0.0);
      if (plan.options.accumulationSteps > 1)
        os << llvm::format(
            ", %.6g GFLOP per step of %lld micro-steps",
            p.recomputedFlops * 1e-9 * plan.options.accumulationSteps,
            static_cast<long long>(plan.options.accumulationSteps));
      os << "\n";
    }
  // Model state by dtype: the distinct buffers of the variables (members of
  // a ZeRO-3 group share their group's shard), so mixed precision shows
  // its 16-bit parameters beside fp32 master weights and moments.
  // (space, category, dtype)
  std::map<std::tuple<int, int, int>, uint64_t> state;
  std::set<uint32_t> seen;
  for (const PlanVariable &v : plan.variables)
    if (seen.insert(v.buffer).second) {
      const PlanBuffer &b = plan.buffers[v.buffer];
      state[{static_cast<int>(b.space), static_cast<int>(b.arena),
             static_cast<int>(b.dtype)}] += b.bytes();
    }
  os << "model state by dtype:\n";
  uint64_t stateBytes = 0;
  auto labelOf = [](const std::tuple<int, int, int> &key) {
    auto [space, category, dtype] = key;
    std::string name = categoryName(static_cast<Category>(category)).str();
    return space == static_cast<int>(Space::Host) ? name + "@host" : name;
  };
  int width = 16;
  for (const auto &entry : state)
    width = std::max(width, int(labelOf(entry.first).size()));
  for (const auto &[key, bytes] : state) {
    auto dtype = std::get<2>(key);
    os << llvm::format("  %-*s %-5s %14llu bytes %10.2f MiB\n", width,
                       labelOf(key).c_str(),
                       dtypeName(static_cast<DType>(dtype)),
                       static_cast<unsigned long long>(bytes), mib(bytes));
    stateBytes += bytes;
  }
  // ZeRO's accounting: K bytes per parameter over N ranks (fp32 Adam: K =
  // 16; mixed precision: 2 + 2 + 12 = 16 too, stage 0 holds all of it).
  if (params)
    os << llvm::format("  %-*s %14llu bytes = %.2f bytes x %llu parameters "
                       "/ %lld ranks\n",
                       width + 6, (const char *)"total",
                       static_cast<unsigned long long>(stateBytes),
                       double(stateBytes) * double(plan.options.worldSize) /
                           double(params),
                       static_cast<unsigned long long>(params),
                       static_cast<long long>(plan.options.worldSize));
}

} // namespace dsc
