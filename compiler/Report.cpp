//===- Report.cpp - dsc --report: a plan's memory and work ---------------===//

#include "compiler/Report.h"

#include "compiler/StepTimeline.h"
#include "compiler/plan/PlanModel.h"
#include "passes/BlockNames.h"
#include "passes/remat/RematPolicy.h"
#include "runtime/plan/ProgramNames.h"

#include "llvm/Support/Format.h"

#include <map>
#include <set>
#include <tuple>

using llvm::StringRef;

namespace dsc {

namespace {

/// A parameter's elements: the whole tensor's, what one rank of its
/// tensor-parallel group holds before ZeRO shards it (all of it unless
/// cut), and the whole tensor's again if it is cut (0 if not).
struct ParameterSize {
  uint64_t whole = 0, perTensorRank = 0, cut = 0;
};

ParameterSize parameterSize(const PlanVariable &v, int64_t tensorParallel) {
  uint64_t n = 1;
  for (int64_t d : v.shape)
    n *= uint64_t(d);
  if (v.splitDim < 0)
    return {n, n, 0};
  // A ZeRO share of a cut parameter lists the part's shape, the parameter
  // itself the whole one's (PlanModel.h).
  uint64_t tp = uint64_t(tensorParallel);
  return v.sharded ? ParameterSize{n * tp, n, n * tp}
                   : ParameterSize{n, n / tp, n};
}

/// Parameters: every element once, those one tensor rank holds, and the
/// cut ones'.
ParameterSize parameterTotals(const PlanModel &plan) {
  ParameterSize total;
  for (const PlanVariable &v : plan.variables)
    if (v.kind == 0) {
      ParameterSize s = parameterSize(v, plan.options.tensorParallel);
      total.whole += s.whole;
      total.perTensorRank += s.perTensorRank;
      total.cut += s.cut;
    }
  return total;
}

std::string rankList(int64_t first, int64_t stride, int64_t n) {
  std::string s = "{";
  for (int64_t i = 0; i < n; ++i)
    s += (i ? ", " : "") + std::to_string(first + i * stride);
  return s + "}";
}

/// The data x tensor mesh: its shape, each rank's coordinates, its groups
/// (the first few), the parameters a tensor rank holds, and per program
/// the collectives over each group.
void printMesh(const PlanModel &plan, llvm::raw_ostream &os) {
  const int64_t tp = plan.options.tensorParallel;
  // A pipeline stage's plan: its ranks' groups (the world is data x
  // pipeline x tensor, printPipelineReport's mesh).
  const int64_t p = plan.options.pipelineStages, s = plan.options.pipelineStage;
  const int64_t data = plan.options.worldSize / (tp * p);
  constexpr int64_t kShown = 4; // groups listed before "..."
  if (p == 1)
    os << "mesh: " << data << " data x " << tp
       << " tensor (tensor innermost): rank r is (data r / " << tp
       << ", tensor r % " << tp << ")\n";
  else
    os << "mesh of stage " << s << ": " << data << " data x " << tp
       << " tensor: rank r is (data r / " << p * tp << ", tensor r % " << tp
       << ")\n";
  os << "  tensor groups:";
  for (int64_t d = 0; d < std::min(data, kShown); ++d)
    os << " " << rankList((d * p + s) * tp, 1, tp);
  os << (data > kShown ? " ...\n" : "\n");
  if (data > 1) {
    os << "  data groups:";
    for (int64_t t = 0; t < std::min(tp, kShown); ++t)
      os << " " << rankList(s * tp + t, p * tp, data);
    os << (tp > kShown ? " ...\n" : "\n");
  }
  ParameterSize params = parameterTotals(plan);
  const uint64_t cut = params.cut;
  os << llvm::format("parameters per tensor rank: %llu cut / %lld + %llu "
                     "whole = %llu (%.1f%% of %llu)\n",
                     (unsigned long long)cut, (long long)tp,
                     (unsigned long long)(params.whole - cut),
                     (unsigned long long)params.perTensorRank,
                     100.0 * double(params.perTensorRank) /
                         double(std::max<uint64_t>(params.whole, 1)),
                     (unsigned long long)params.whole);
}

/// Per program, group and kind: how many collectives, and their message
/// bytes (the larger of input and output, as dsrun's comms_logger counts
/// them). Without tensor or sequence parallelism every group is the data
/// group, the world.
void printCollectives(const PlanModel &plan, llvm::raw_ostream &os) {
  os << "collectives per run, by group:\n";
  const char *group = plan.options.sequenceParallel > 1 ? "sequence" : "tensor";
  for (const PlanProgram &p : plan.programs) {
    // (group: 0 tensor or sequence, 1 data, 2 pipeline; kind)
    std::map<std::pair<int, std::string>, std::pair<unsigned, uint64_t>>
        traffic;
    for (const PlanInstr &i : p.instrs) {
      if (!StringRef(i.kernel).starts_with("comm."))
        continue;
      uint64_t message = 0;
      for (const std::vector<uint32_t> *ids : {&i.inputs, &i.outputs})
        for (uint32_t id : *ids)
          message = std::max(message, plan.buffers[id].bytes());
      // A pipeline's messages and its stages' collectives: "pipeline".
      const bool pipeline =
          i.pipelineGroup || i.kernel == "comm.send" || i.kernel == "comm.recv";
      const std::string kind = StringRef(i.kernel).drop_front(5).str();
      auto &[count, bytes] = traffic[{pipeline         ? 2
                                      : !i.tensorGroup ? 1
                                                       : 0,
                                      kind}];
      ++count;
      bytes += message;
    }
    for (const auto &[key, value] : traffic)
      os << llvm::format(
          "  %-13s %-8s %-15s x%-5u %14llu bytes\n", p.name.c_str(),
          key.first == 2   ? "pipeline"
          : key.first == 1 ? "data"
                           : group,
          key.second.c_str(), value.first, (unsigned long long)value.second);
  }
}

/// Each program played on the machine model: its compute, its
/// collectives, and the part of them the compute stream waits for.
void printTimeline(const PlanModel &plan, const MachineModel &machine,
                   llvm::raw_ostream &os) {
  os << "predicted per run on " << describe(machine) << ":\n";
  for (const PlanProgram &p : plan.programs) {
    ProgramTimeline t = playProgram(plan, p, machine);
    const double hidden =
        t.collectives > 0
            ? 100 * std::clamp(1 - t.exposed() / t.collectives, 0.0, 1.0)
            : 100.0;
    os << llvm::format("  %-13s %10.3f ms compute %10.3f ms collectives "
                       "%10.3f ms not hidden (%.0f%% hidden)\n",
                       p.name.c_str(), t.compute * 1e3, t.collectives * 1e3,
                       t.exposed() * 1e3, hidden);
  }
}

} // namespace

uint64_t parameterCount(const PlanModel &plan) {
  return parameterTotals(plan).whole;
}

void printReport(const PlanModel &plan, StringRef remat,
                 const MachineModel &machine, llvm::raw_ostream &os) {
  uint64_t params = parameterCount(plan);
  auto mib = [](uint64_t b) { return static_cast<double>(b) / (1 << 20); };
  os << "model " << plan.options.model << ": " << params << " parameters, "
     << "micro-batch " << plan.microBatch << " x " << plan.seqLen
     << " tokens, world size " << plan.options.worldSize << "\n";
  if (plan.options.tensorParallel > 1)
    printMesh(plan, os);
  if (const int64_t sp = plan.options.sequenceParallel; sp > 1)
    os << "mesh: " << plan.options.worldSize / sp << " data x " << sp
       << " sequence (Ulysses, sequence innermost): rank r holds tokens "
          "[(r % "
       << sp << ") L / " << sp << ", (r % " << sp << " + 1) L / " << sp
       << ") of its group's batch; data parallelism spans all "
       << plan.options.worldSize << " ranks\n";
  if (plan.options.worldSize > 1) {
    printCollectives(plan, os);
    printTimeline(plan, machine, os);
  }
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
      // A pipeline stage's micro_step runs the step's micro-batches.
      const bool stage = plan.options.pipelineStages > 1;
      os << llvm::format("remat: %s, %.6g GFLOP recomputed per %s "
                         "(%.1f%% of its FLOPs)",
                         mlir::ds::remat::appliedPolicy(remat).str().c_str(),
                         p.recomputedFlops / 1e9, stage ? "step" : "micro-step",
                         p.flops > 0 ? 100 * p.recomputedFlops / p.flops : 0.0);
      if (plan.options.accumulationSteps > 1 && !stage)
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
  // With tensor parallelism, ZeRO shards a tensor rank's parameters over
  // the data group.
  const int64_t tp = plan.options.tensorParallel;
  const uint64_t held = parameterTotals(plan).perTensorRank;
  const int64_t ranks = plan.options.worldSize / tp;
  if (held)
    os << llvm::format("  %-*s %14llu bytes = %.2f bytes x %llu parameters%s "
                       "/ %lld %sranks\n",
                       width + 6, (const char *)"total",
                       static_cast<unsigned long long>(stateBytes),
                       double(stateBytes) * double(ranks) / double(held),
                       static_cast<unsigned long long>(held),
                       tp > 1 ? " of a tensor rank" : "",
                       static_cast<long long>(ranks), tp > 1 ? "data " : "");
}

namespace {

/// "3-5": the transformer blocks whose parameters `plan` holds, as runs
/// ("0-1,4-5" for an interleaved stage's chunks; "-" for none).
std::string blocksOf(const PlanModel &plan) {
  std::set<int64_t> blocks;
  for (const PlanVariable &v : plan.variables)
    if (v.kind == 0)
      if (auto block = mlir::ds::blockOf(v.name))
        blocks.insert(block->second);
  if (blocks.empty())
    return "-";
  std::string out;
  for (auto it = blocks.begin(); it != blocks.end();) {
    int64_t first = *it, last = first;
    while (++it != blocks.end() && *it == last + 1)
      last = *it;
    out += (out.empty() ? "" : ",") + std::to_string(first) +
           (last > first ? "-" + std::to_string(last) : "");
  }
  return out;
}

} // namespace

void printPipelineReport(const std::vector<PlanModel> &stages, StringRef remat,
                         const MachineModel &machine, llvm::raw_ostream &os) {
  const PlanModel &first = stages.front();
  const int64_t p = int64_t(stages.size());
  const int64_t tp = std::max<int64_t>(1, first.options.tensorParallel);
  const int64_t replicas = first.options.worldSize / (p * tp);
  const int64_t m = first.options.accumulationSteps;
  auto mib = [](uint64_t b) { return static_cast<double>(b) / (1 << 20); };
  os << "model " << first.options.model << ": " << first.modelParameters
     << " parameters, micro-batch " << first.microBatch << " x " << first.seqLen
     << " tokens, world size " << first.options.worldSize << "\n";
  if (tp == 1)
    os << "mesh: " << replicas << " data x " << p
       << " pipeline (stages innermost): rank r runs stage r % " << p
       << " of replica r / " << p;
  else
    os << "mesh: " << replicas << " data x " << p << " pipeline x " << tp
       << " tensor (tensor innermost): rank r runs stage r / " << tp << " % "
       << p << " of replica r / " << p * tp;
  os << "; " << m << " micro-batches a step through each pipeline\n";
  PipelineTimeline t = playPipeline(stages, machine);
  os << "stage  blocks   parameters   GFLOP/step  activations  device "
        "total   step on "
     << machine.name << "\n";
  for (int64_t s = 0; s < p; ++s) {
    const PlanModel &plan = stages[size_t(s)];
    uint64_t device = 0, activations = 0;
    double flops = 0;
    for (uint64_t b : plan.arenaBytes)
      device += b;
    for (const PlanProgram &prog : plan.programs)
      if (prog.name == plan::kMicroStepProgram ||
          prog.name == plan::kMicroStepSyncProgram) {
        flops = std::max(flops, prog.flops);
        activations = std::max(activations, prog.activationBytes);
      }
    const double seconds =
        size_t(s) < t.stages.size() ? t.stages[size_t(s)].makespan : 0;
    os << llvm::format("%5lld  %-7s %11llu %12.3f %8.2f MiB %8.2f MiB "
                       "%9.3f ms\n",
                       (long long)s, blocksOf(plan).c_str(),
                       (unsigned long long)parameterCount(plan), flops / 1e9,
                       mib(activations), mib(device), seconds * 1e3);
  }
  // With equal stages and free messages, GPipe's and 1F1B's bubble is
  // (P - 1) / (M + P - 1) of the step; the interleaved schedule's V chunks
  // a stage shrink each fill and drain to 1 / V: (P - 1) / (V M + P - 1).
  const int64_t v = first.options.virtualStages;
  os << llvm::format("predicted on %s: step %.3f ms, bubble %.1f%% of the "
                     "stages' time (equal stages, free messages: %.1f%%)\n",
                     describe(machine).c_str(), t.makespan * 1e3,
                     100 * t.bubble(),
                     100.0 * double(p - 1) / double(v * m + p - 1));
  for (int64_t s = 0; s < p; ++s) {
    os << "stage " << s << " (ranks";
    const int64_t shown = std::min<int64_t>(replicas * tp, 4);
    for (int64_t i = 0; i < shown; ++i)
      os << " " << (i / tp * p + s) * tp + i % tp;
    os << (replicas * tp > shown ? " ...):\n" : "):\n");
    printReport(stages[size_t(s)], remat, machine, os);
  }
}

void printPlanReport(const PlanModel &plan,
                     const std::vector<PlanModel> &stages, StringRef remat,
                     const MachineModel &machine, llvm::raw_ostream &os) {
  if (stages.empty())
    printReport(plan, remat, machine, os);
  else
    printPipelineReport(stages, remat, machine, os);
}

} // namespace dsc
