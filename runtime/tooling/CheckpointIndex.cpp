//===- CheckpointIndex.cpp - a committed checkpoint, opened for reading ---===//
#include "runtime/tooling/CheckpointIndex.h"

#include "runtime/checkpoint/Checksum.h"
#include "runtime/checkpoint/Safetensors.h"
#include "runtime/core/Printable.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <set>

namespace dsc::rt {

using nlohmann::json;

namespace {

/// A rank file's own word on where it belongs: the format and the step it
/// was written at, against the manifest's.
bool checkShardMetadata(const SafetensorsFile &file, const std::string &path,
                        uint64_t step, std::string &error) {
  const auto &meta = file.metadata();
  auto format = meta.find("format");
  if (format == meta.end() || format->second != kCheckpointFormat) {
    error = path + ": not a " + kCheckpointFormat +
            " rank file (its metadata's format is " +
            (format == meta.end() ? "missing"
                                  : "'" + printable(format->second) + "'") +
            ")";
    return false;
  }
  auto saved = meta.find("step");
  if (saved == meta.end() || saved->second != std::to_string(step)) {
    error =
        path + ": written at step " +
        (saved == meta.end() ? "(none recorded)" : printable(saved->second)) +
        ", but the manifest's step is " + std::to_string(step) +
        " (a file from another checkpoint?)";
    return false;
  }
  return true;
}

/// The file's size against the manifest's: before the file is parsed, so
/// that a truncated file is named as such.
bool checkShardSize(const std::string &path, const ShardRecord &shard,
                    std::string &error) {
  std::error_code ec;
  uint64_t size = std::filesystem::file_size(path, ec);
  if (!ec && size != shard.sum.bytes) {
    error = path + ": " + std::to_string(size) +
            " bytes, but the manifest records " +
            std::to_string(shard.sum.bytes) + " (a damaged or replaced file)";
    return false;
  }
  return true; // a file that cannot be sized is named by the mapping
}

/// The file's XXH3-64 against the manifest's.
bool verifyShard(const std::string &path, const ShardRecord &shard,
                 std::string &error) {
  FileChecksum sum;
  if (!checksumFile(path, sum, error))
    return false;
  if (sum.bytes != shard.sum.bytes || sum.xxh3 != shard.sum.xxh3) {
    error = path + ": checksum mismatch: XXH3-64 " + checksumText(sum.xxh3) +
            ", the manifest records " + checksumText(shard.sum.xxh3) +
            " (a damaged or replaced file)";
    return false;
  }
  return true;
}

/// A rank file the manifest does not list: the directory holds another
/// world size's files (a copy gone wrong).
bool checkNoStrayRankFiles(const std::string &path, const CheckpointManifest &m,
                           std::string &error) {
  std::set<std::string> listed;
  for (const ShardRecord &s : m.files)
    listed.insert(s.name);
  std::error_code ec;
  for (const auto &e : std::filesystem::directory_iterator(path, ec)) {
    std::string name = e.path().filename().string();
    const std::string ext = ".safetensors";
    if (name.rfind("rank-", 0) == 0 && name.size() > ext.size() &&
        name.compare(name.size() - ext.size(), ext.size(), ext) == 0 &&
        !listed.count(name)) {
      error = path + "/" + printable(name) +
              ": a rank file the manifest does not list ($.world_size is " +
              std::to_string(m.worldSize) + ")";
      return false;
    }
  }
  return true;
}

} // namespace

bool CheckpointIndex::open(const std::string &path, std::string &error,
                           int verifier, int verifiers) {
  path_ = path;
  CheckpointManifest m;
  if (!readCheckpointManifest(path, m, error) ||
      !checkNoStrayRankFiles(path, m, error))
    return false;
  state_ = m.state;
  seed_ = m.seed;
  model_ = m.model;
  planId_ = m.plan;
  worldSize_ = m.worldSize;

  for (size_t r = 0; r < m.files.size(); ++r) {
    const std::string file = path + "/" + m.files[r].name;
    if (!checkShardSize(file, m.files[r], error))
      return false;
    // Mapped: a reader touches only the ranges it copies. The header is
    // read (and validated) first, so that a file from another step is
    // named as such; then this rank's share of the checksums.
    auto mapped = SafetensorsFile::map(file, error);
    if (!mapped || !checkShardMetadata(*mapped, file, m.state.step, error))
      return false;
    if (int(r % size_t(std::max(verifiers, 1))) == verifier &&
        !verifyShard(file, m.files[r], error))
      return false;
    auto it = mapped->metadata().find("shapes");
    json s = it == mapped->metadata().end()
                 ? json()
                 : json::parse(it->second, nullptr, false);
    if (!s.is_object()) {
      error = file + ": no 'shapes' metadata (not a dsc checkpoint file)";
      return false;
    }
    for (auto &[k, v] : s.items()) {
      if (!v.is_array())
        continue;
      auto shape = v.get<std::vector<int64_t>>();
      auto [at, fresh] = shapes_.emplace(k, shape);
      if (!fresh && at->second != shape) {
        error = file + ": '" + printable(k) + "' is " + formatShape(shape) +
                " here and " + formatShape(at->second) +
                " in an earlier rank file";
        return false;
      }
    }
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
      fragments_[base].push_back({mapped.get(), &e, first, r});
    }
    files_.push_back(std::move(mapped));
  }
  return checkNoOverlap(m, error);
}

// Each element is in one rank file: two writers of one variable (a save
// that did not agree on who writes it) are named, not read twice.
bool CheckpointIndex::checkNoOverlap(const CheckpointManifest &m,
                                     std::string &error) {
  for (auto &[name, pieces] : fragments_) {
    std::sort(
        pieces.begin(), pieces.end(),
        [](const Fragment &a, const Fragment &b) { return a.first < b.first; });
    for (size_t i = 1; i < pieces.size(); ++i) {
      const Fragment &a = pieces[i - 1], &b = pieces[i];
      if (a.first + int64_t(a.entry->numel()) <= b.first)
        continue;
      error = path_ + ": " + m.files[a.rankFile].name + " and " +
              m.files[b.rankFile].name + " both hold elements of '" +
              printable(name) + "' from " + std::to_string(b.first);
      return false;
    }
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
