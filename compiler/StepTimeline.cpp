//===- StepTimeline.cpp - a plan's streams played against a machine model -===//

#include "compiler/StepTimeline.h"

#include "compiler/plan/PlanModel.h"
#include "runtime/plan/ProgramNames.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

namespace dsc {

namespace {

// plan.fbs's streams.
enum StreamIndex { kCompute = 0, kComm = 1, kH2D = 2, kD2H = 3 };

/// Presets. h100: an H100 SXM at about 40% of its 989 TFLOP/s dense bf16
/// peak, HBM3, NCCL's bus bandwidth over NVLink 4 and a PCIe 5 link to the
/// host as training sustains them. cpu: one rank of this project's
/// two-core machines (AVX-512 fp32, MPI over shared memory).
bool preset(llvm::StringRef name, MachineModel &m) {
  if (name == "h100")
    m = {"h100", 400e12, 3350e9, 400e9, 25e9, 10e-6};
  else if (name == "cpu")
    m = {"cpu", 100e9, 20e9, 5e9, 20e9, 20e-6};
  else
    return false;
  return true;
}

/// A ring's bytes on the wire per byte of message (NCCL's bus factors).
double busFactor(llvm::StringRef kind, int64_t ranks) {
  const double n = double(ranks);
  if (kind == "all_reduce")
    return 2 * (n - 1) / n;
  if (kind == "broadcast")
    return 1;
  return (n - 1) / n; // all_gather, reduce_scatter, all_to_all
}

double instructionSeconds(const PlanModel &plan, const PlanInstr &in,
                          const MachineModel &m) {
  llvm::StringRef kernel(in.kernel);
  uint64_t message = 0, touched = 0;
  std::set<uint32_t> seen;
  for (const std::vector<uint32_t> *ids : {&in.inputs, &in.outputs})
    for (uint32_t id : *ids) {
      uint64_t bytes = plan.buffers[id].bytes();
      message = std::max(message, bytes);
      if (seen.insert(id).second)
        touched += bytes;
    }
  if (kernel.consume_front("comm.")) {
    // A tensor-group collective runs over the tensor (or Ulysses) group;
    // the rest over the data group (the world / T; Ulysses: the world).
    const int64_t tp = std::max<int64_t>(plan.options.tensorParallel, 1);
    const int64_t group = std::max(tp, plan.options.sequenceParallel);
    const int64_t ranks =
        in.tensorGroup ? group
                       : std::max<int64_t>(plan.options.worldSize / tp, 1);
    if (ranks < 2)
      return 0;
    return m.latency + double(message) * busFactor(kernel, ranks) / m.link;
  }
  if (in.stream == kH2D || in.stream == kD2H)
    return double(touched) / m.hostLink;
  return std::max(in.flops / m.flops, double(touched) / m.memory);
}

} // namespace

bool parseMachine(llvm::StringRef text, MachineModel &machine,
                  std::string &error) {
  llvm::SmallVector<llvm::StringRef> fields;
  text.split(fields, ',');
  if (!preset(fields.front().trim(), machine)) {
    error = "--machine: '" + fields.front().trim().str() +
            "' is not a machine (h100 or cpu, then ,key=value: tflops, "
            "mem_gbps, link_gbps, host_gbps, latency_us)";
    return false;
  }
  for (llvm::StringRef field : llvm::ArrayRef(fields).drop_front()) {
    auto [key, value] = field.trim().split('=');
    double v = 0;
    double *slot = llvm::StringSwitch<double *>(key)
                       .Case("tflops", &machine.flops)
                       .Case("mem_gbps", &machine.memory)
                       .Case("link_gbps", &machine.link)
                       .Case("host_gbps", &machine.hostLink)
                       .Case("latency_us", &machine.latency)
                       .Default(nullptr);
    if (!slot || value.getAsDouble(v) || !std::isfinite(v) || v < 0 ||
        (v == 0 && key != "latency_us")) {
      error = "--machine: '" + field.trim().str() +
              "' is not key=value with a key of tflops, mem_gbps, link_gbps, "
              "host_gbps or latency_us and a positive number";
      return false;
    }
    const double scale = key == "tflops"       ? 1e12
                         : key == "latency_us" ? 1e-6
                                               : 1e9;
    *slot = v * scale;
  }
  if (fields.size() > 1)
    machine.name += " (modified)";
  return true;
}

std::string describe(const MachineModel &m) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << llvm::format("%s: %g TFLOP/s, %g GB/s memory, %g GB/s link, %g us "
                     "latency",
                     m.name.c_str(), m.flops / 1e12, m.memory / 1e9,
                     m.link / 1e9, m.latency * 1e6);
  return s;
}

namespace {

/// A pipeline's message: (from stage, to stage, transfer, micro-batch).
using MessageKey = std::tuple<int64_t, int64_t, int64_t, int64_t>;
using MessageTimes = std::map<MessageKey, double>;

/// playProgram's loop; on a pipeline stage `stage` a receive waits for
/// `arrivals` and a send's end goes into `departures`.
ProgramTimeline play(const PlanModel &plan, const PlanProgram &program,
                     const MachineModel &machine, int64_t stage,
                     const MessageTimes *arrivals, MessageTimes *departures) {
  ProgramTimeline t;
  std::array<double, 4> clock{};
  std::vector<double> recordedAt(program.numEvents, 0.0);
  for (const PlanInstr &in : program.instrs) {
    if (in.kernel.empty())
      continue; // a marker where the program needs an async result
    const int s = std::min<int>(in.stream, 3);
    double start = clock[s];
    for (uint32_t e : in.wait)
      if (e < recordedAt.size())
        start = std::max(start, recordedAt[e]);
    const bool send = in.kernel == "comm.send", recv = in.kernel == "comm.recv";
    double seconds = 0;
    if (send) {
      seconds = machine.latency +
                double(plan.buffers[in.inputs[0]].bytes()) / machine.link;
    } else if (recv) {
      auto it = arrivals ? arrivals->find({in.intAttrs[0], stage,
                                           in.intAttrs[1], in.intAttrs[2]})
                         : MessageTimes::const_iterator();
      if (arrivals && it != arrivals->end())
        start = std::max(start, it->second);
    } else {
      seconds = instructionSeconds(plan, in, machine);
    }
    clock[s] = start + seconds;
    if (send && departures)
      (*departures)[{stage, in.intAttrs[0], in.intAttrs[1], in.intAttrs[2]}] =
          clock[s];
    for (uint32_t e : in.record)
      if (e < recordedAt.size())
        recordedAt[e] = clock[s];
    if (s == kCompute)
      t.compute += seconds;
    else if (s == kComm)
      t.collectives += seconds;
  }
  t.makespan = *std::max_element(clock.begin(), clock.end());
  return t;
}

/// The program a pipeline stage runs once a step: micro_step_sync where
/// ZeRO made one (a step is one run, its last), else micro_step.
const PlanProgram *stepProgram(const PlanModel &plan) {
  const PlanProgram *step = nullptr;
  for (const PlanProgram &p : plan.programs) {
    if (p.name == plan::kMicroStepSyncProgram)
      return &p;
    if (p.name == plan::kMicroStepProgram)
      step = &p;
  }
  return step;
}

} // namespace

ProgramTimeline playProgram(const PlanModel &plan, const PlanProgram &program,
                            const MachineModel &machine) {
  return play(plan, program, machine, 0, nullptr, nullptr);
}

double PipelineTimeline::bubble() const {
  double compute = 0;
  for (const ProgramTimeline &s : stages)
    compute += s.compute;
  const double span = makespan * double(stages.size());
  return span > 0 ? std::clamp(1 - compute / span, 0.0, 1.0) : 0.0;
}

PipelineTimeline playPipeline(const std::vector<PlanModel> &stages,
                              const MachineModel &machine) {
  PipelineTimeline t;
  MessageTimes arrivals;
  // Each round plays every stage against the previous round's messages;
  // their times only grow, and a schedule that completes settles within
  // as many rounds as it has messages in a chain.
  for (int round = 0; round < 4096; ++round) {
    MessageTimes departures;
    t.stages.clear();
    for (auto [s, plan] : llvm::enumerate(stages))
      if (const PlanProgram *p = stepProgram(plan))
        t.stages.push_back(
            play(plan, *p, machine, int64_t(s), &arrivals, &departures));
    if (departures == arrivals)
      break;
    arrivals = std::move(departures);
  }
  t.makespan = 0;
  for (const ProgramTimeline &s : t.stages)
    t.makespan = std::max(t.makespan, s.makespan);
  return t;
}

} // namespace dsc
