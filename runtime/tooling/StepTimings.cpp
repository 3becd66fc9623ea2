//===- StepTimings.cpp - wall_clock_breakdown and comms_logger ------------===//
#include "runtime/tooling/StepTimings.h"

#include "runtime/plan/ProgramNames.h"

#include <algorithm>
#include <string_view>

namespace dsc::rt {

namespace {

namespace fb = dsc::plan;

uint64_t bufferBytes(const fb::Plan &plan, uint32_t id) {
  const fb::Buffer *b = plan.buffers()->Get(id);
  uint64_t n = fb::dtypeSize(b->dtype());
  if (b->shape())
    for (int64_t d : *b->shape())
      n *= uint64_t(d);
  return n;
}

uint64_t largestOperand(const fb::Plan &plan, const fb::Instr &in) {
  uint64_t bytes = 0;
  for (const auto *ids : {in.inputs(), in.outputs()})
    if (ids)
      for (uint32_t id : *ids)
        bytes = std::max(bytes, bufferBytes(plan, id));
  return bytes;
}

/// "1.50 MiB": bytes with a binary prefix.
std::string sizeText(uint64_t bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = double(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), u ? "%.2f %s" : "%.0f %s", v, units[u]);
  return buf;
}

/// Gigabits per second for `bytes` in `ms` milliseconds.
double gbps(uint64_t bytes, double ms) {
  return ms > 0 ? double(bytes) * 8 / (ms * 1e-3) / 1e9 : 0;
}

} // namespace

TimingPlan timingPlanOf(const fb::Plan &plan) {
  TimingPlan t;
  t.breakdown = plan.wall_clock_breakdown();
  t.worldSize = std::max<uint32_t>(1, plan.world_size());
  t.tensorParallel = std::max<uint32_t>(1, plan.tensor_parallel());
  t.sequenceParallel = std::max<uint32_t>(1, plan.sequence_parallel());
  if (const fb::CommsLogger *l = plan.comms_logger()) {
    t.logComms = true;
    t.verboseComms = l->verbose();
    t.allOps = l->all_ops();
    if (l->ops())
      for (const flatbuffers::String *op : *l->ops())
        t.ops.insert(op->str());
  }
  constexpr std::string_view kComm = "comm.";
  for (const fb::Program *p : *plan.programs()) {
    const std::string name = p->name()->str();
    const bool micro =
        name == fb::kMicroStepProgram || name == fb::kMicroStepSyncProgram;
    const bool hasLoss = micro && p->outputs() && p->outputs()->size() > 0;
    const uint32_t loss = hasLoss ? p->outputs()->Get(0) : 0;
    for (uint32_t i = 0; i < p->instrs()->size(); ++i) {
      const fb::Instr &in = *p->instrs()->Get(i);
      const std::string_view kernel = in.kernel()->string_view();
      if (kernel.substr(0, kComm.size()) == kComm)
        t.collectives[name][i] = {std::string(kernel.substr(kComm.size())),
                                  largestOperand(plan, in), in.tensor_group()};
      if (hasLoss && in.outputs())
        for (uint32_t id : *in.outputs())
          if (id == loss)
            t.lossInstr[name] = i; // the last writer
    }
  }
  return t;
}

double busFactor(const std::string &op, uint32_t ranks) {
  const double n = std::max<uint32_t>(1, ranks);
  if (op == "all_reduce")
    return 2 * (n - 1) / n;
  if (op == "all_gather" || op == "reduce_scatter" || op == "all_to_all")
    return (n - 1) / n;
  return 1;
}

std::string breakdownLine(const StepBreakdown &b) {
  char buf[160];
  std::snprintf(buf, sizeof(buf),
                "time (ms) | fwd: %.2f | bwd: %.2f | step: %.2f | comm: %.2f",
                b.forwardMs, b.backwardMs, b.optimizerMs, b.commMs);
  return buf;
}

bool StepTimings::logged(const std::string &op) const {
  return plan_.logComms && (plan_.allOps || plan_.ops.count(op));
}

void StepTimings::add(const std::vector<TraceRecord> &records,
                      std::FILE *verbose) {
  // The records of each program apart (a run's own, but an evaluation's
  // runs may be waiting in the trace when a micro-step's are taken).
  std::map<std::string_view, std::vector<TraceRecord>> byProgram;
  for (const TraceRecord &r : records)
    byProgram[r.program].push_back(r);
  for (const auto &[program, run] : byProgram)
    addRun(program, run, verbose);
}

void StepTimings::addRun(std::string_view program,
                         const std::vector<TraceRecord> &records,
                         std::FILE *verbose) {
  int64_t begin = records.front().beginNs, end = records.front().endNs;
  for (const TraceRecord &r : records) {
    begin = std::min(begin, r.beginNs);
    end = std::max(end, r.endNs);
  }
  auto loss = plan_.lossInstr.find(program);
  auto collectives = plan_.collectives.find(program);
  for (const TraceRecord &r : records) {
    const double ms = double(r.endNs - r.beginNs) * 1e-6;
    currentModules_[std::string(r.loc)] += ms;
    if (loss != plan_.lossInstr.end() && r.instr == loss->second) {
      current_.forwardMs += double(r.endNs - begin) * 1e-6;
      current_.backwardMs += double(end - r.endNs) * 1e-6;
    }
    if (collectives == plan_.collectives.end())
      continue;
    auto c = collectives->second.find(r.instr);
    if (c == collectives->second.end())
      continue;
    current_.commMs += ms;
    if (!logged(c->second.op))
      continue;
    Sizes &s = comms_[{c->second.op, c->second.tensorGroup, c->second.bytes}];
    ++s.count;
    s.totalMs += ms;
    if (verbose && plan_.verboseComms) {
      const double algbw = gbps(c->second.bytes, ms);
      std::fprintf(verbose,
                   "comm op: %s | time (ms): %.3f | msg size: %s | algbw "
                   "(Gbps): %.2f | busbw (Gbps): %.2f\n",
                   c->second.op.c_str(), ms, sizeText(c->second.bytes).c_str(),
                   algbw,
                   algbw * busFactor(c->second.op,
                                     plan_.groupRanks(c->second.tensorGroup)));
    }
  }
  if (program == plan::kApplyProgram)
    current_.optimizerMs += double(end - begin) * 1e-6;
}

StepBreakdown StepTimings::takeBreakdown() {
  StepBreakdown b = current_;
  current_ = {};
  modules_ = std::move(currentModules_);
  currentModules_.clear();
  return b;
}

std::string StepTimings::commsSummary() const {
  if (!plan_.logComms || comms_.empty())
    return "";
  std::string text = "comms (each collective this rank ran, by operation "
                     "and message size):\n";
  char buf[200];
  std::snprintf(buf, sizeof(buf), "  %-19s %12s %8s %12s %10s %12s %12s\n",
                "op", "message", "count", "total ms", "avg ms", "algbw Gbps",
                "busbw Gbps");
  text += buf;
  // On a tensor- or sequence-parallel plan each operation is named with
  // its group.
  const uint32_t tp = std::max(plan_.tensorParallel, plan_.sequenceParallel);
  const char *group = plan_.sequenceParallel > 1 ? " sequence" : " tensor";
  for (const auto &[key, s] : comms_) {
    const auto &[op, tensor, bytes] = key;
    const double avg = s.totalMs / double(s.count);
    const double algbw = gbps(bytes, avg);
    const uint32_t ranks = plan_.groupRanks(tensor);
    const std::string label = tp > 1 ? op + (tensor ? group : " data") : op;
    std::snprintf(buf, sizeof(buf),
                  "  %-19s %12s %8llu %12.3f %10.3f %12.2f %12.2f\n",
                  label.c_str(), sizeText(bytes).c_str(),
                  static_cast<unsigned long long>(s.count), s.totalMs, avg,
                  algbw, algbw * busFactor(op, ranks));
    text += buf;
  }
  return text;
}

} // namespace dsc::rt
