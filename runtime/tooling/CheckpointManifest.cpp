//===- CheckpointManifest.cpp - a checkpoint's manifest.json --------------===//
#include "runtime/tooling/CheckpointManifest.h"

#include "runtime/core/InputFile.h"
#include "runtime/core/JsonSyntax.h"
#include "runtime/core/Printable.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <set>

namespace dsc::rt {

const char *const kCheckpointManifest = "manifest.json";
const char *const kClientStateFile = "client_state.json";
const char *const kCheckpointFormat = "dsc-checkpoint-2";

namespace {

using Json = nlohmann::json;

/// The first format; its manifests list the rank files without checksums.
constexpr const char *kUnverifiedFormat = "dsc-checkpoint-1";
/// A manifest holds a few hundred bytes per rank; a larger file is not one.
constexpr uint64_t kMaxManifestBytes = 16 << 20;
/// More ranks than any job here starts; keeps world_size an int.
constexpr uint64_t kMaxWorldSize = 1 << 20;
/// The manifest nests three levels; more is not a manifest.
constexpr size_t kMaxDepth = 8;

/// A value as a message shows it: JSON, cut short.
std::string shown(const Json &v) {
  return printable(v.dump(-1, ' ', false, Json::error_handler_t::replace), 40);
}

/// Reads one object's fields, each failure one line naming the field.
class Fields {
public:
  Fields(const Json &object, std::string path, const std::string &where,
         std::string &error)
      : object_(object), path_(std::move(path)), where_(where), error_(error) {}

  bool fail(const std::string &field, const std::string &what) {
    error_ = where_ + ": " + path_ + (field.empty() ? "" : "." + field) + ": " +
             what;
    return false;
  }
  /// Every key must be one of `known`.
  bool onlyKeys(const std::set<std::string> &known) {
    for (const auto &[key, value] : object_.items())
      if (!known.count(key))
        return fail(printable(key), "unknown key");
    return true;
  }
  const Json *find(const std::string &key) {
    auto it = object_.find(key);
    return it == object_.end() ? nullptr : &*it;
  }
  const Json *need(const std::string &key) {
    const Json *v = find(key);
    if (!v)
      fail(key, "required key is missing");
    return v;
  }
  bool count(const std::string &key, uint64_t &out) {
    const Json *v = need(key);
    if (!v)
      return false;
    if (!v->is_number_unsigned())
      return fail(key, "expected an integer >= 0, got " + shown(*v));
    out = v->get<uint64_t>();
    return true;
  }
  bool integer(const std::string &key, int64_t min, int64_t &out) {
    const Json *v = need(key);
    if (!v)
      return false;
    if (v->is_number_unsigned() && v->get<uint64_t>() <= uint64_t(INT64_MAX))
      out = int64_t(v->get<uint64_t>());
    else if (v->is_number_integer() && !v->is_number_unsigned())
      out = v->get<int64_t>();
    else
      return fail(key, "expected an integer, got " + shown(*v));
    if (out < min)
      return fail(key, "must be >= " + std::to_string(min) + ", got " +
                           std::to_string(out));
    return true;
  }
  bool text(const std::string &key, std::string &out) {
    const Json *v = need(key);
    if (!v)
      return false;
    if (!v->is_string())
      return fail(key, "expected a string, got " + shown(*v));
    out = v->get<std::string>();
    return true;
  }
  bool hash(const std::string &key, uint64_t &out) {
    std::string digits;
    if (!text(key, digits))
      return false;
    if (!parseChecksumText(digits, out))
      return fail(key,
                  "expected 16 hex digits, got \"" + printable(digits) + "\"");
    return true;
  }

private:
  const Json &object_;
  std::string path_;
  const std::string &where_;
  std::string &error_;
};

bool readFormat(Fields &f) {
  std::string format;
  if (!f.text("format", format))
    return false;
  if (format == kUnverifiedFormat)
    return f.fail("format", std::string("\"") + kUnverifiedFormat +
                                "\" is an older dsrun's checkpoint, without "
                                "checksums of its rank files; this dsrun "
                                "reads \"" +
                                kCheckpointFormat + "\"");
  if (format != kCheckpointFormat)
    return f.fail("format", std::string("expected \"") + kCheckpointFormat +
                                "\", got \"" + printable(format) + "\"");
  return true;
}

/// step, applied and skipped: every step either updated the weights or
/// was skipped for overflow.
bool readCounters(Fields &f, uint64_t dirStep, RunState &s) {
  if (!f.count("step", s.step))
    return false;
  if (s.step != dirStep)
    return f.fail("step", std::to_string(s.step) + ", but the directory is " +
                              checkpointStepName(dirStep) +
                              " (a manifest from another checkpoint?)");
  if (!f.count("applied", s.applied))
    return false;
  if (s.applied > s.step)
    return f.fail("applied", "must be <= $.step (" + std::to_string(s.step) +
                                 "), got " + std::to_string(s.applied));
  if (!f.count("skipped", s.skipped))
    return false;
  if (s.skipped != s.step - s.applied)
    return f.fail("skipped", "$.applied (" + std::to_string(s.applied) +
                                 ") + $.skipped (" + std::to_string(s.skipped) +
                                 ") must equal $.step (" +
                                 std::to_string(s.step) + ")");
  return true;
}

bool readScaler(const Json &value, const std::string &where, RunState &s,
                std::string &error) {
  Fields f(value, "$.loss_scaler", where, error);
  if (!value.is_object())
    return f.fail("", "expected an object, got " + shown(value));
  LossScaler::State scaler;
  int64_t hysteresis = 0;
  const Json *scale = f.need("scale");
  if (!f.onlyKeys({"scale", "hysteresis", "iteration", "last_overflow"}) ||
      !scale)
    return false;
  if (!scale->is_number() || !std::isfinite(scale->get<double>()) ||
      !(scale->get<double>() > 0))
    return f.fail("scale",
                  "expected a finite number > 0, got " + shown(*scale));
  scaler.scale = scale->get<double>();
  if (!f.integer("hysteresis", 0, hysteresis) ||
      !f.integer("iteration", 0, scaler.iteration) ||
      !f.integer("last_overflow", -1, scaler.lastOverflow))
    return false;
  if (hysteresis > INT32_MAX)
    return f.fail("hysteresis", "must be <= " + std::to_string(INT32_MAX) +
                                    ", got " + std::to_string(hysteresis));
  scaler.hysteresis = int(hysteresis);
  s.scaler = scaler;
  return true;
}

/// One entry per rank, rank r's file at index r.
bool readFiles(Fields &f, const Json &files, const std::string &where,
               CheckpointManifest &m, std::string &error) {
  if (!files.is_array())
    return f.fail("files", "expected an array, got " + shown(files));
  if (files.size() != size_t(m.worldSize))
    return f.fail("files", "lists " + std::to_string(files.size()) +
                               (files.size() == 1 ? " file" : " files") +
                               ", but $.world_size is " +
                               std::to_string(m.worldSize));
  for (size_t r = 0; r < files.size(); ++r) {
    const Json &entry = files[r];
    Fields file(entry, "$.files[" + std::to_string(r) + "]", where, error);
    if (!entry.is_object())
      return file.fail("", "expected an object with name, bytes and xxh3, "
                           "got " +
                               shown(entry));
    ShardRecord shard;
    if (!file.onlyKeys({"name", "bytes", "xxh3"}) ||
        !file.text("name", shard.name) ||
        !file.count("bytes", shard.sum.bytes) ||
        !file.hash("xxh3", shard.sum.xxh3))
      return false;
    std::string expected = checkpointRankFile(int(r), m.worldSize);
    if (shard.name != expected)
      return file.fail("name", "expected \"" + expected + "\", got \"" +
                                   printable(shard.name) + "\"");
    m.files.push_back(std::move(shard));
  }
  return true;
}

} // namespace

std::string checkpointStepName(uint64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "step-%08llu",
                static_cast<unsigned long long>(step));
  return name;
}

bool parseCheckpointStepName(const std::string &name, uint64_t &step) {
  if (name.size() < 13 || name.size() > 25 || name.compare(0, 5, "step-"))
    return false;
  step = 0;
  for (size_t i = 5; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9' ||
        __builtin_mul_overflow(step, uint64_t(10), &step) ||
        __builtin_add_overflow(step, uint64_t(name[i] - '0'), &step))
      return false;
  }
  return checkpointStepName(step) == name; // the one spelling of that step
}

std::string checkpointRankFile(int rank, int worldSize) {
  char name[64];
  std::snprintf(name, sizeof name, "rank-%05d-of-%05d.safetensors", rank,
                worldSize);
  return name;
}

std::string manifestText(const CheckpointManifest &m) {
  Json j;
  j["format"] = kCheckpointFormat;
  j["step"] = m.state.step;
  j["applied"] = m.state.applied;
  j["skipped"] = m.state.skipped;
  j["seed"] = m.seed;
  j["world_size"] = m.worldSize;
  j["model"] = m.model;
  j["plan"] = m.plan;
  if (m.state.scaler)
    j["loss_scaler"] = {{"scale", m.state.scaler->scale},
                        {"hysteresis", m.state.scaler->hysteresis},
                        {"iteration", m.state.scaler->iteration},
                        {"last_overflow", m.state.scaler->lastOverflow}};
  Json files = Json::array();
  for (const ShardRecord &s : m.files)
    files.push_back({{"name", s.name},
                     {"bytes", s.sum.bytes},
                     {"xxh3", checksumText(s.sum.xxh3)}});
  j["files"] = files;
  return j.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

bool parseCheckpointManifest(const std::string &text, const std::string &where,
                             uint64_t dirStep, CheckpointManifest &m,
                             std::string &error) {
  m = {};
  // Duplicate keys and deep nesting first (JsonSyntax.h): nlohmann::json
  // keeps the last of duplicate keys without a word.
  JsonSyntaxRules rules;
  rules.maxDepth = kMaxDepth;
  std::string path, what;
  if (!checkJsonSyntax(text, rules, path, what)) {
    error = where + ": " + path + ": " + what;
    return false;
  }
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  Fields f(j, "$", where, error);
  if (!j.is_object())
    return f.fail("", "expected an object, got " + shown(j));
  uint64_t worldSize = 0;
  const Json *files = nullptr;
  if (!f.onlyKeys({"format", "step", "applied", "skipped", "seed", "world_size",
                   "model", "plan", "loss_scaler", "files"}) ||
      !readFormat(f) || !readCounters(f, dirStep, m.state) ||
      !f.count("seed", m.seed) || !f.count("world_size", worldSize))
    return false;
  if (worldSize < 1 || worldSize > kMaxWorldSize)
    return f.fail("world_size",
                  worldSize < 1
                      ? "must be >= 1, got 0"
                      : "must be <= " + std::to_string(kMaxWorldSize) +
                            ", got " + std::to_string(worldSize));
  m.worldSize = int(worldSize);
  uint64_t plan = 0;
  if (!f.text("model", m.model) || !f.hash("plan", plan))
    return false;
  m.plan = checksumText(plan);
  if (const Json *scaler = f.find("loss_scaler"))
    if (!readScaler(*scaler, where, m.state, error))
      return false;
  return (files = f.need("files")) && readFiles(f, *files, where, m, error);
}

bool readCheckpointManifest(const std::string &stepDir, CheckpointManifest &m,
                            std::string &error) {
  const std::string where = stepDir + "/" + kCheckpointManifest;
  uint64_t dirStep = 0;
  std::string name =
      std::filesystem::path(stepDir).lexically_normal().filename().string();
  if (name.empty()) // "ck/step-00000003/"
    name = std::filesystem::path(stepDir)
               .lexically_normal()
               .parent_path()
               .filename()
               .string();
  if (!parseCheckpointStepName(name, dirStep)) {
    error = stepDir + ": not a checkpoint directory (step-NNNNNNNN)";
    return false;
  }
  std::string text;
  return readRegularFile(where, text, error, kMaxManifestBytes) &&
         parseCheckpointManifest(text, where, dirStep, m, error);
}

} // namespace dsc::rt
