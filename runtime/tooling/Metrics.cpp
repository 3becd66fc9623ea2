//===- Metrics.cpp - what dsrun reports per step and at the end -----------===//
#include "runtime/tooling/Metrics.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <map>

namespace dsc::rt {

namespace {

std::string printf1(const char *format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), format, v);
  return buf;
}

// Sums arenas that share a key (category or space).
nlohmann::json sumBy(const std::vector<ArenaUsage> &memory,
                     std::string ArenaUsage::*key,
                     uint64_t ArenaUsage::*bytes) {
  std::map<std::string, uint64_t> sums;
  for (const ArenaUsage &a : memory)
    sums[a.*key] += a.*bytes;
  return nlohmann::json(sums);
}

uint64_t totalWritten(const std::vector<ArenaUsage> &memory) {
  uint64_t total = 0;
  for (const ArenaUsage &a : memory)
    total += a.writtenBytes;
  return total;
}

} // namespace

std::string formatBytes(uint64_t bytes) {
  static const char *units[] = {"KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024)
    return std::to_string(bytes) + " B";
  double v = double(bytes) / 1024;
  int unit = 0;
  while (v >= 1024 && unit < 3) {
    v /= 1024;
    ++unit;
  }
  return printf1("%.1f ", v) + units[unit];
}

std::string formatRate(double perSecond) {
  if (perSecond < 1e3)
    return printf1("%.0f", perSecond);
  if (perSecond < 1e6)
    return printf1("%.1fk", perSecond / 1e3);
  if (perSecond < 1e9)
    return printf1("%.1fM", perSecond / 1e6);
  return printf1("%.1fG", perSecond / 1e9);
}

std::string metricsJson(const StepRecord &r) {
  // ordered_json keeps the scalars first, in the order people read them.
  nlohmann::ordered_json j;
  j["step"] = r.step;
  j["loss"] = r.loss;
  j["lr"] = r.lr;
  if (r.hasBeta1)
    j["beta1"] = r.beta1;
  j["grad_norm"] = r.gradNorm;
  j["loss_scale"] = r.lossScale;
  j["skipped"] = r.skipped;
  if (r.hasValLoss)
    j["val_loss"] = r.valLoss;
  if (r.hasTimes) {
    j["forward_ms"] = r.forwardMs;
    j["backward_ms"] = r.backwardMs;
    j["optimizer_ms"] = r.optimizerMs;
    j["comm_ms"] = r.commMs;
  }
  if (r.hasBubble)
    j["bubble"] = r.bubble;
  j["tokens"] = r.tokens;
  j["tokens_per_s"] = r.tokensPerS;
  j["step_s"] = r.stepS;
  j["rank"] = r.rank;
  j["world_size"] = r.worldSize;
  j["rss_baseline_bytes"] = r.rssBaselineBytes;
  j["rss_peak_bytes"] = r.rssPeakBytes;
  if (r.hasDevice) {
    j["device_baseline_bytes"] = r.device.baseline;
    j["device_peak_bytes"] = r.device.used;
    j["device_total_bytes"] = r.device.total;
  }
  j["plan_written_bytes"] =
      sumBy(r.memory, &ArenaUsage::category, &ArenaUsage::writtenBytes);
  j["predicted_bytes"] =
      sumBy(r.memory, &ArenaUsage::category, &ArenaUsage::predictedBytes);
  j["plan_written_bytes_per_space"] =
      sumBy(r.memory, &ArenaUsage::space, &ArenaUsage::writtenBytes);
  j["predicted_bytes_per_space"] =
      sumBy(r.memory, &ArenaUsage::space, &ArenaUsage::predictedBytes);
  // With offload, each space by category (what lives where).
  if (std::any_of(r.memory.begin(), r.memory.end(),
                  [](const ArenaUsage &a) { return a.space != "device"; })) {
    for (const char *space : {"device", "host"}) {
      std::vector<ArenaUsage> in;
      std::copy_if(r.memory.begin(), r.memory.end(), std::back_inserter(in),
                   [&](const ArenaUsage &a) { return a.space == space; });
      j["plan_written_bytes_by_space"][space] =
          sumBy(in, &ArenaUsage::category, &ArenaUsage::writtenBytes);
      j["predicted_bytes_by_space"][space] =
          sumBy(in, &ArenaUsage::category, &ArenaUsage::predictedBytes);
    }
  }
  return j.dump(-1, ' ', false,
                nlohmann::ordered_json::error_handler_t::replace);
}

// "2^16" for a power of two (every dynamic scale), else the number.
static std::string scaleText(double scale) {
  int e = 0;
  if (scale > 0 && std::frexp(scale, &e) == 0.5)
    return "2^" + std::to_string(e - 1);
  return printf1("%g", scale);
}

std::string progressLine(const StepRecord &r, uint64_t totalSteps) {
  return "step " + std::to_string(r.step) + "/" + std::to_string(totalSteps) +
         "  loss " + printf1("%.4f", r.loss) +
         (r.hasValLoss ? "  val " + printf1("%.4f", r.valLoss) : "") + "  lr " +
         printf1("%.1e", r.lr) + "  " + formatRate(r.tokensPerS) +
         " tok/s  mem " + formatBytes(totalWritten(r.memory)) +
         (r.hasDevice ? "  gpu " + formatBytes(r.device.used) : "") +
         (r.lossScale != 1 ? "  scale " + scaleText(r.lossScale) : "") +
         (r.skippedSteps ? "  skipped " + std::to_string(r.skippedSteps) : "");
}

std::string memoryLine(const StepRecord &r) {
  // Per space, categories in the plan's order (their first arena's).
  std::vector<std::pair<std::string, uint64_t>> parts;
  for (const char *space : {"device", "host"})
    for (const ArenaUsage &a : r.memory) {
      if (a.space != space || a.predictedBytes == 0)
        continue;
      const std::string label =
          a.space == "device" ? a.category : a.space + " " + a.category;
      auto it = std::find_if(parts.begin(), parts.end(),
                             [&](const auto &p) { return p.first == label; });
      if (it == parts.end())
        parts.push_back({label, a.writtenBytes});
      else
        it->second += a.writtenBytes;
    }
  std::string line = "memory";
  for (const auto &[label, bytes] : parts)
    line += " | " + label + " " + formatBytes(bytes);
  line += " | process peak " + formatBytes(r.rssPeakBytes);
  if (r.hasDevice)
    line += " | gpu " + formatBytes(r.device.used) + " of " +
            formatBytes(r.device.total);
  return line;
}

std::string summaryText(const RunSummary &s) {
  double rate = s.seconds > 0 ? double(s.tokens) / s.seconds : 0;
  std::string text =
      "done: " + std::to_string(s.steps) +
      (s.steps == 1 ? " step in " : " steps in ") +
      printf1(s.seconds < 10 ? "%.3f" : "%.1f", s.seconds) + " s, final loss " +
      printf1("%.4f", s.finalLoss) + ", " + formatRate(rate) + " tok/s" +
      (s.hasBubble ? ", pipeline bubble " +
                         printf1("%.1f", 100 * s.meanBubble) + "% measured"
                   : "") +
      "\n";
  if (s.skippedSteps || s.lossScaling)
    text += "skipped " + std::to_string(s.skippedSteps) +
            (s.skippedSteps == 1 ? " step" : " steps") +
            " whose gradients were not finite (no update; the LR schedule "
            "and Adam's step count did not advance)" +
            (s.lossScaling ? "; final loss scale " + scaleText(s.finalLossScale)
                           : "") +
            "\n";
  // One row per (space, category) in the plan's arena order.
  struct Row {
    std::string label;
    uint64_t written = 0, predicted = 0;
  };
  std::vector<Row> rows;
  Row total{"total"};
  for (const ArenaUsage &a : s.memory) {
    std::string label =
        a.category + (a.space == "device" ? "" : " (" + a.space + ")");
    auto row = std::find_if(rows.begin(), rows.end(),
                            [&](const Row &r) { return r.label == label; });
    if (row == rows.end())
      row = rows.insert(rows.end(), Row{label});
    row->written += a.writtenBytes;
    row->predicted += a.predictedBytes;
    total.written += a.writtenBytes;
    total.predicted += a.predictedBytes;
  }
  if (rows.empty())
    return text;
  rows.push_back(total);
  char line[160];
  std::snprintf(line, sizeof(line), "  %-26s %12s %12s\n", "arena bytes",
                "written", "predicted");
  text += line;
  for (const Row &r : rows) {
    std::snprintf(line, sizeof(line), "  %-26s %12s %12s\n", r.label.c_str(),
                  formatBytes(r.written).c_str(),
                  formatBytes(r.predicted).c_str());
    text += line;
  }
  if (s.rssPeakBytes > 0) {
    // The operating system's view: what the process really held at most.
    uint64_t growth = s.rssPeakBytes > s.rssBaselineBytes
                          ? s.rssPeakBytes - s.rssBaselineBytes
                          : 0;
    text += "  process peak resident " + formatBytes(s.rssPeakBytes) + " = " +
            formatBytes(s.rssBaselineBytes) + " before the arenas + " +
            formatBytes(growth) + " (arenas total " +
            formatBytes(total.predicted) + ")\n";
  }
  if (s.hasDevice) {
    // The driver's view of the whole device (other processes included).
    uint64_t arenas = 0;
    for (const ArenaUsage &a : s.memory)
      if (a.space == "device")
        arenas += a.predictedBytes;
    const uint64_t growth = s.device.used > s.device.baseline
                                ? s.device.used - s.device.baseline
                                : 0;
    text += "  device peak in use " + formatBytes(s.device.used) + " of " +
            formatBytes(s.device.total) + " = " +
            formatBytes(s.device.baseline) + " before the arenas + " +
            formatBytes(growth) + " (device arenas " + formatBytes(arenas) +
            ")\n";
  }
  return text;
}

} // namespace dsc::rt
