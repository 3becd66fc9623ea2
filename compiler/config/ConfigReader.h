//===- ConfigReader.h - checked access to a ds_config.json --------*- C++
//-*-===//
//
// Private to compiler/config: the Reader (file name, error, notes) and the
// Section (one JSON object at a JSON path) that Config.cpp's section readers
// use, so every check names the JSON path and what is wrong in one line.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_COMPILER_CONFIG_CONFIGREADER_H
#define DSC_COMPILER_CONFIG_CONFIGREADER_H

#include "compiler/config/Config.h"
#include "compiler/config/ConfigKeys.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

namespace dsc::config {

using llvm::StringRef;
using llvm::Twine;
namespace json = llvm::json;

//===----------------------------------------------------------------------===//
// Formatting
//===----------------------------------------------------------------------===//

/// The shortest decimal that reads back as `v`.
inline std::string formatNumber(double v) {
  if (std::isnan(v))
    return "nan";
  if (std::isinf(v))
    return v < 0 ? "-inf" : "inf";
  char buf[40];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof(buf), "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v)
      break;
  }
  return buf;
}

inline std::string formatNumber(int64_t v) { return std::to_string(v); }

/// `s` with control characters, quotes and backslashes escaped, so that a
/// message stays on one line.
inline std::string escape(StringRef s) {
  std::string out;
  for (char c : s) {
    unsigned char u = static_cast<unsigned char>(c);
    if (c == '\'' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (u < 0x20 || u == 0x7f) {
      out += "\\x";
      out += llvm::hexdigit(u >> 4, /*LowerCase=*/true);
      out += llvm::hexdigit(u & 15, /*LowerCase=*/true);
    } else {
      out += c;
    }
  }
  return out;
}

inline std::string quote(StringRef s) { return "'" + escape(s) + "'"; }

/// JSONPath of member `key` of the object at `parent`: $.a.b, or $['a b']
/// when the key is not an identifier.
inline std::string childPath(StringRef parent, StringRef key) {
  bool identifier =
      !key.empty() && (llvm::isAlpha(key[0]) || key[0] == '_') &&
      llvm::all_of(key, [](char c) { return llvm::isAlnum(c) || c == '_'; });
  if (identifier)
    return (parent + "." + key).str();
  return (parent + "[" + quote(key) + "]").str();
}

inline std::string elementPath(StringRef parent, size_t index) {
  return (parent + "[" + Twine(index) + "]").str();
}

/// "a number", "an object", ... as in "expected X, got Y".
inline const char *kindName(const json::Value &v) {
  switch (v.kind()) {
  case json::Value::Null:
    return "null";
  case json::Value::Boolean:
    return "a boolean";
  case json::Value::Number:
    return "a number";
  case json::Value::String:
    return "a string";
  case json::Value::Array:
    return "an array";
  case json::Value::Object:
    return "an object";
  }
  return "a value";
}

inline bool isAuto(const json::Value &v) {
  std::optional<StringRef> s = v.getAsString();
  return s && *s == "auto";
}

//===----------------------------------------------------------------------===//
// Reading
//===----------------------------------------------------------------------===//

/// Holds the file name, the problems and the notes. Every check reports
/// through fail() and returns its result: checks of one key chain with &&
/// (a later one reads what an earlier one parsed), checks of different keys
/// run through all(), so one run reports every key's problem, one line each
/// ("FILE: PATH: what"), at most kMaxProblems of them.
class Reader {
public:
  static constexpr size_t kMaxProblems = 20;

  Reader(StringRef fileName, std::vector<std::string> &notes,
         std::string &error)
      : fileName(fileName), notes(notes), error(error) {}

  bool fail(StringRef path, const Twine &what) {
    ++problems;
    if (problems <= kMaxProblems) {
      if (!error.empty())
        error += '\n';
      error += (fileName + ": " + path + ": " + what).str();
    } else if (problems == kMaxProblems + 1) {
      error += "\n" + fileName.str() + ": more problems not shown";
    }
    return false;
  }

  /// True when every check passed; a braced list evaluates every element,
  /// in order, so each check reports its own problem.
  static bool all(std::initializer_list<bool> checks) {
    return std::all_of(checks.begin(), checks.end(), [](bool b) { return b; });
  }

  size_t problemCount() const { return problems; }

  void note(StringRef path, const Twine &what) {
    notes.push_back((fileName + ": " + path + ": " + what).str());
  }

  template <typename T> bool atLeast(StringRef path, T value, T min) {
    if (value >= min)
      return true;
    return fail(path, "must be >= " + formatNumber(min) + ", got " +
                          formatNumber(value));
  }

  template <typename T> bool atMost(StringRef path, T value, T max) {
    if (value <= max)
      return true;
    return fail(path, "must be <= " + formatNumber(max) + ", got " +
                          formatNumber(value));
  }

  /// Converts a JSON number to an integer: integral doubles such as 5e8 are
  /// accepted.
  bool toInteger(StringRef path, const json::Value &v, int64_t &out) {
    if (v.kind() != json::Value::Number)
      return fail(path, Twine("expected an integer, got ") + kindName(v));
    double d = *v.getAsNumber();
    // Beyond this, doubles no longer convert to int64_t safely.
    if (!std::isfinite(d) || std::fabs(d) >= 9.0e18)
      return fail(path, "integer out of range: " + formatNumber(d));
    std::optional<int64_t> i = v.getAsInteger();
    if (!i)
      return fail(path, "expected an integer, got " + formatNumber(d));
    out = *i;
    return true;
  }

  bool toNumber(StringRef path, const json::Value &v, double &out) {
    std::optional<double> d = v.getAsNumber();
    if (!d)
      return fail(path, Twine("expected a number, got ") + kindName(v));
    if (!std::isfinite(*d))
      return fail(path, "expected a finite number, got " + formatNumber(*d));
    // -0 is 0: the canonical JSON writes it as "-0", which reads back as
    // the integer 0 (ConfigFuzzer found the round trip change).
    out = *d == 0 ? 0.0 : *d;
    return true;
  }

private:
  StringRef fileName;
  std::vector<std::string> &notes;
  std::string &error;
  size_t problems = 0;
};

/// Whether a feature's value switches it off: `false`, null, or an object
/// with "enabled": false.
inline bool isSwitchedOff(const json::Value &v) {
  // null is DeepSpeed's None: the key left at its default, asking nothing.
  if (v.kind() == json::Value::Null)
    return true;
  if (std::optional<bool> b = v.getAsBoolean())
    return !*b;
  const json::Object *o = v.getAsObject();
  const json::Value *enabled = o ? o->get("enabled") : nullptr;
  std::optional<bool> on = enabled ? enabled->getAsBoolean() : std::nullopt;
  return on && !*on;
}

/// One JSON object of the config (or an absent one, read as all defaults)
/// at a JSON path. Readers leave their output alone when the key is absent;
/// that output holds the default on entry.
class Section {
public:
  Section(Reader &r, const json::Object *object, std::string path)
      : r(r), object(object), path(std::move(path)) {}

  bool present() const { return object; }
  const json::Value *get(StringRef key) const {
    return object ? object->get(key) : nullptr;
  }
  std::string at(StringRef key) const { return childPath(path, key); }

  /// Checks the section's keys (in sorted order) against the key table
  /// (ConfigKeys.h; for a scheduler's params, the keys `schedulerType`
  /// takes): reports a key of DeepSpeed's that dsc does not implement yet
  /// unless it is switched off, or an unknown one with the closest known
  /// key when it is close; notes why a key that has no effect in dsc has
  /// none, unless it is switched off (false, null or "enabled": false) or
  /// "auto" (whose resolution has a note of its own).
  bool checkKeys(StringRef schedulerType = {}) {
    if (!object)
      return true;
    std::vector<StringRef> known = knownConfigKeys(path, schedulerType);
    std::vector<StringRef> keys;
    for (const auto &kv : *object)
      keys.push_back(kv.first);
    llvm::sort(keys);
    bool ok = true;
    for (StringRef key : keys)
      ok &= checkKey(key, known);
    return ok;
  }

private:
  bool checkKey(StringRef key, llvm::ArrayRef<StringRef> known) {
    if (llvm::is_contained(known, key)) {
      const json::Value &v = *object->get(key);
      if (const char *why = noEffectConfigKey(path, key))
        if (v.kind() != json::Value::Null && !isSwitchedOff(v) && !isAuto(v))
          r.note(at(key), Twine("has no effect in dsc: ") + why);
      return true;
    }
    if (const char *instead = unsupportedDeepSpeedKey(path, key)) {
      // A feature switched off asks nothing of dsc: accepted, as DeepSpeed
      // accepts it (configs are shared between runs and tools).
      if (isSwitchedOff(*object->get(key)))
        return true;
      return r.fail(at(key), Twine("not supported yet (") + instead + ")");
    }
    StringRef best;
    unsigned bestDistance = ~0u;
    for (StringRef candidate : known) {
      unsigned d = key.edit_distance_insensitive(candidate);
      if (d < bestDistance) {
        bestDistance = d;
        best = candidate;
      }
    }
    // Close means a few edits, fewer for short keys: "lr" is not a
    // misspelling of "xy".
    unsigned limit = std::max<size_t>(1, std::min<size_t>(3, key.size() / 3));
    if (bestDistance <= limit)
      return r.fail(at(key), "unknown key (did you mean " + quote(best) + "?)");
    return r.fail(at(key), "unknown key");
  }

public:
  /// Reads a nested object; absent reads as an empty section.
  bool section(StringRef key, std::optional<Section> &out) {
    const json::Value *v = get(key);
    const json::Object *o = nullptr;
    if (v) {
      o = v->getAsObject();
      if (!o)
        return r.fail(at(key),
                      Twine("expected an object, got ") + kindName(*v));
    }
    out.emplace(r, o, at(key));
    return true;
  }

  bool number(StringRef key, double &out) {
    const json::Value *v = get(key);
    if (!v)
      return true;
    if (isAuto(*v)) {
      resolveAuto(key, out);
      return true;
    }
    return r.toNumber(at(key), *v, out);
  }

  bool integer(StringRef key, int64_t &out) {
    const json::Value *v = get(key);
    if (!v)
      return true;
    if (isAuto(*v)) {
      resolveAuto(key, out);
      return true;
    }
    return r.toInteger(at(key), *v, out);
  }

  bool boolean(StringRef key, bool &out) {
    const json::Value *v = get(key);
    if (!v)
      return true;
    if (isAuto(*v)) {
      noteAuto(key, out ? "true" : "false");
      return true;
    }
    std::optional<bool> b = v->getAsBoolean();
    if (!b)
      return r.fail(at(key), Twine("expected a boolean, got ") + kindName(*v));
    out = *b;
    return true;
  }

  /// A string from `choices`; "auto" only when `allowAuto`.
  bool choice(StringRef key, llvm::ArrayRef<StringRef> choices,
              std::string &out, bool allowAuto) {
    const json::Value *v = get(key);
    if (!v)
      return true;
    if (allowAuto && isAuto(*v)) {
      noteAuto(key, quote(out));
      return true;
    }
    std::optional<StringRef> s = v->getAsString();
    if (!s)
      return r.fail(at(key), Twine("expected a string, got ") + kindName(*v));
    if (!llvm::is_contained(choices, *s))
      return r.fail(at(key), "unsupported value " + quote(*s) +
                                 " (supported: " + llvm::join(choices, ", ") +
                                 ")");
    out = s->str();
    return true;
  }

  /// A boolean that dsc supports with one value only.
  bool onlyBoolean(StringRef key, bool supported, StringRef why) {
    bool value = supported;
    if (!boolean(key, value))
      return false;
    if (value != supported)
      return r.fail(at(key), Twine(value ? "true" : "false") +
                                 " is not supported: " + why);
    return true;
  }

  /// Type-checks a key that is accepted and ignored.
  bool ignoredNumber(StringRef key) {
    const json::Value *v = get(key);
    double unused;
    return !v || isAuto(*v) || r.toNumber(at(key), *v, unused);
  }
  bool ignoredInteger(StringRef key) {
    const json::Value *v = get(key);
    int64_t unused;
    return !v || isAuto(*v) || r.toInteger(at(key), *v, unused);
  }
  bool ignoredBoolean(StringRef key) {
    const json::Value *v = get(key);
    if (!v || isAuto(*v) || v->getAsBoolean())
      return true;
    return r.fail(at(key), Twine("expected a boolean, got ") + kindName(*v));
  }

  bool ignoredString(StringRef key) {
    const json::Value *v = get(key);
    if (!v || v->getAsString())
      return true;
    return r.fail(at(key), Twine("expected a string, got ") + kindName(*v));
  }

private:
  /// "auto" at a number: Hugging Face's TrainingArguments default where its
  /// Trainer would fill the key (ConfigKeys.h), else `out`'s default.
  template <class T> void resolveAuto(StringRef key, T &out) {
    if (const HuggingFaceAuto *hf = huggingFaceAuto(at(key))) {
      out = T(hf->value);
      r.note(at(key), "\"auto\" resolved to " + formatNumber(out) +
                          " (Hugging Face TrainingArguments' default " +
                          hf->argument + ")");
      return;
    }
    noteAuto(key, formatNumber(out));
  }

  void noteAuto(StringRef key, const Twine &value) {
    r.note(at(key), "\"auto\" resolved to " + value + " (default)");
  }

  Reader &r;
  const json::Object *object;
  std::string path;
};

/// DeepSpeed's monitor sections (tensorboard, csv_monitor, wandb), checked
/// here and written by the Python side (ConfigMonitors.cpp).
bool readMonitors(Reader &r, Section &root);

/// The pipeline section: stages (for now all the world's ranks), the
/// partition and dsc's schedule (ConfigPipeline.cpp).
bool readPipeline(Reader &r, Section &root, int64_t worldSize, DsConfig &c);
/// What a pipeline does not compose with yet, refused by name.
bool checkPipelineComposition(Reader &r, Section &root, const DsConfig &c);

/// The optimizer section (ConfigOptimizer.cpp).
bool readOptimizer(Reader &r, Section &root, DsConfig::Optimizer &o);

/// The scheduler section, its params read against optimizer `o`'s lr;
/// OneCycle's cycle_momentum sets `o`'s beta2 to 0.99 as DeepSpeed does
/// (ConfigScheduler.cpp).
bool readScheduler(Reader &r, Section &root, DsConfig::Optimizer &o,
                   DsConfig::Scheduler &s);

/// flops_profiler (ConfigMonitors.cpp).
bool readFlopsProfiler(Reader &r, Section &root, DsConfig::FlopsProfiler &p);
/// comms_logger (ConfigMonitors.cpp).
bool readCommsLogger(Reader &r, Section &root, DsConfig::CommsLogger &c);

} // namespace dsc::config

#endif // DSC_COMPILER_CONFIG_CONFIGREADER_H
