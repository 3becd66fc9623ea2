//===- CheckpointIndex.cpp - a committed checkpoint, opened for reading ---===//
#include "runtime/tooling/CheckpointIndex.h"

#include "runtime/checkpoint/Safetensors.h"
#include "runtime/core/InputFile.h"
#include "runtime/core/Printable.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>

namespace dsc::rt {

using nlohmann::json;

const char *const kCheckpointManifest = "manifest.json";
const char *const kCheckpointFormat = "dsc-checkpoint-1";

bool CheckpointIndex::open(const std::string &path, std::string &error) {
  path_ = path;
  std::string text;
  const std::string where = path + "/" + kCheckpointManifest;
  if (!readRegularFile(where, text, error))
    return false;
  json m = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (m.is_discarded() || !m.is_object() ||
      m.value("format", "") != kCheckpointFormat ||
      !m["step"].is_number_unsigned() || !m["files"].is_array()) {
    error =
        where + ": not a dsc checkpoint manifest (" + kCheckpointFormat + ")";
    return false;
  }
  state_ = {};
  state_.step = m["step"].get<uint64_t>();
  state_.applied = m.value("applied", state_.step);
  state_.skipped = m.value("skipped", uint64_t(0));
  if (m.contains("loss_scaler")) {
    const json &s = m["loss_scaler"];
    state_.scaler =
        LossScaler::State{s.value("scale", 0.0), s.value("hysteresis", 0),
                          s.value("iteration", int64_t(0)),
                          s.value("last_overflow", int64_t(-1))};
  }
  seed_ = m.value("seed", uint64_t(0));
  model_ = m.value("model", "");
  planId_ = m.value("plan", "");
  worldSize_ = m.value("world_size", 0);

  for (const json &name : m["files"]) {
    if (!name.is_string() ||
        name.get<std::string>().find('/') != std::string::npos) {
      error = where + ": 'files' must name files in the checkpoint";
      return false;
    }
    const std::string file = path + "/" + name.get<std::string>();
    // Mapped: a reader touches only the ranges it copies.
    auto mapped = SafetensorsFile::map(file, error);
    if (!mapped)
      return false;
    auto it = mapped->metadata().find("shapes");
    json s = it == mapped->metadata().end()
                 ? json()
                 : json::parse(it->second, nullptr, false);
    if (!s.is_object()) {
      error = file + ": no 'shapes' metadata (not a dsc checkpoint file)";
      return false;
    }
    for (auto &[k, v] : s.items())
      if (v.is_array())
        shapes_[k] = v.get<std::vector<int64_t>>();
    for (const SafetensorsEntry &e : mapped->tensors()) {
      if (e.dtype != "F32") {
        error = file + ": tensor '" + printable(e.name) + "' is " + e.dtype +
                "; a dsc checkpoint holds F32";
        return false;
      }
      size_t at = e.name.rfind('@');
      std::string base =
          at == std::string::npos ? e.name : e.name.substr(0, at);
      int64_t first = 0;
      if (at != std::string::npos) {
        const std::string digits = e.name.substr(at + 1);
        char *end = nullptr;
        first = std::strtoll(digits.c_str(), &end, 10);
        if (digits.empty() || *end != '\0' || first < 0) {
          error = file + ": tensor '" + printable(e.name) +
                  "': expected NAME@FIRST with FIRST an element index";
          return false;
        }
      }
      fragments_[base].push_back({mapped.get(), &e, first});
    }
    files_.push_back(std::move(mapped));
  }
  return true;
}

bool CheckpointIndex::read(const std::string &name, int64_t begin, int64_t end,
                           float *out, std::string &error) const {
  int64_t covered = 0;
  auto it = fragments_.find(name);
  if (it != fragments_.end())
    for (const Fragment &f : it->second) {
      int64_t n = int64_t(f.entry->numel());
      int64_t lo = std::max(begin, f.first);
      int64_t hi = std::min(end, f.first + n);
      if (lo >= hi)
        continue;
      std::memcpy(out + (lo - begin),
                  f.file->data(*f.entry) + size_t(lo - f.first) * sizeof(float),
                  size_t(hi - lo) * sizeof(float));
      covered += hi - lo;
    }
  if (covered != end - begin) {
    error = path_ + ": the rank files do not hold all of '" + name + "'";
    return false;
  }
  return true;
}

} // namespace dsc::rt
