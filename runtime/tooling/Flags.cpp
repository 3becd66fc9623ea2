//===- Flags.cpp - dsrun's command line -----------------------------------===//
#include "runtime/tooling/Flags.h"

#include "runtime/core/ByteCount.h"
#include "runtime/core/NumberText.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <sstream>

namespace dsc::rt {

namespace {

enum class Value { Text, Positive, Unsigned, Bytes, Choice, Switch };

struct Flag {
  const char *name;
  const char *metavar;
  Value value;
  const char *help;
  // Exactly one destination, matching `value`.
  std::string DsrunOptions::*text = nullptr;
  uint64_t DsrunOptions::*number = nullptr;
  bool DsrunOptions::*on = nullptr;
  const char *choices = nullptr; ///< Value::Choice: "a|b"
  /// Numbers: the largest accepted (NumberText.h's parseCount).
  uint64_t max = std::numeric_limits<uint64_t>::max();
  /// Text: whether '' means something (a prompt) rather than a forgotten
  /// path.
  bool mayBeEmpty = false;
};

Flag textFlag(const char *name, const char *metavar,
              std::string DsrunOptions::*dest, const char *help) {
  Flag f{name, metavar, Value::Text, help};
  f.text = dest;
  return f;
}

Flag numberFlag(const char *name, const char *metavar, Value value,
                uint64_t DsrunOptions::*dest, const char *help,
                uint64_t max = std::numeric_limits<uint64_t>::max()) {
  Flag f{name, metavar, value, help};
  f.number = dest;
  f.max = max;
  return f;
}

const std::vector<Flag> &flagTable() {
  static const std::vector<Flag> flags = [] {
    using O = DsrunOptions;
    std::vector<Flag> t;
    t.push_back(textFlag("--data", "PATH", &O::data,
                         "training data: a nanoGPT .bin (uint16 tokens) or "
                         "any file read as bytes (default: synthetic)"));
    // Steps are numbered in 32 bits in the plan's programs and the keys of
    // dropout masks and batches.
    t.push_back(numberFlag("--steps", "N", Value::Unsigned, &O::steps,
                           "optimizer steps (default: the schedule's "
                           "total_num_steps; 0 with --resume: none)",
                           std::numeric_limits<uint32_t>::max()));
    t.push_back(numberFlag("--np", "N", Value::Positive, &O::np,
                           "ranks, started on this machine through mpirun; "
                           "must match the plan's world size (default 1; "
                           "under mpirun, the job's ranks)",
                           kMaxLocalRanks));
    Flag oversubscribe{"--oversubscribe", nullptr, Value::Switch,
                       "--np: start more ranks than this machine's cores "
                       "or memory hold (docs/multi-process.md)"};
    oversubscribe.on = &O::oversubscribe;
    t.push_back(oversubscribe);
    t.push_back(textFlag("--hostfile", "FILE", &O::hostfile,
                         "--np: mpirun's hostfile; the ranks start on its "
                         "hosts, which need the same paths "
                         "(docs/multi-process.md)"));
    t.push_back(textFlag("--backend", "NAME[:K=V,...]", &O::backend,
                         "where the plan runs: a registered backend, with "
                         "its options (cuda:graphs=off,tf32=on; default "
                         "cpu)"));
    t.push_back(numberFlag("--seed", "S", Value::Unsigned, &O::seed,
                           "seed for initialization, dropout and data "
                           "sampling (default 1337)"));
    t.push_back(numberFlag("--device-memory", "BYTES", Value::Bytes,
                           &O::deviceMemory,
                           "capacity of the device space, e.g. 8GiB "
                           "(default: unlimited)"));
    t.push_back(textFlag("--init-from", "W.safetensors", &O::initFrom,
                         "load parameters by name instead of initializing "
                         "them"));
    t.push_back(textFlag("--metrics", "FILE.jsonl", &O::metrics,
                         "one JSON object per optimizer step"));
    t.push_back(textFlag("--trace", "FILE.json", &O::trace,
                         "Chrome trace of every stream"));
    t.push_back(textFlag("--export-weights", "OUT.safetensors",
                         &O::exportWeights,
                         "write the trained parameters (nanoGPT names)"));
    t.push_back(textFlag("--dump-batch", "FILE", &O::dumpBatch,
                         "write every micro-batch rank 0 trains on (int32 "
                         "tokens, then targets), to replay the run elsewhere"));
    t.push_back(textFlag("--eval-data", "FILE", &O::evalData,
                         "held-out data (same formats as --data) for the "
                         "validation loss"));
    t.push_back(textFlag("--eval-split", "F", &O::evalSplit,
                         "hold out the last fraction F of --data as eval "
                         "data (instead of --eval-data)"));
    t.push_back(numberFlag("--eval-every", "K", Value::Positive, &O::evalEvery,
                           "evaluate every K steps and after the last "
                           "(needs --eval-data)"));
    t.push_back(numberFlag("--print-every", "K", Value::Positive,
                           &O::printEvery,
                           "a progress line every K steps (DeepSpeed's "
                           "steps_per_print; default: 20 lines a run)"));
    t.push_back(numberFlag("--eval-batches", "N", Value::Positive,
                           &O::evalBatches,
                           "held-out micro-batches per evaluation (default "
                           "20)",
                           std::numeric_limits<uint32_t>::max()));
    Flag evalOnly{"--eval-only", nullptr, Value::Switch,
                  "evaluate the initial (or --init-from) weights on "
                  "--eval-data and exit"};
    evalOnly.on = &O::evalOnly;
    t.push_back(evalOnly);
    t.push_back(numberFlag("--sample", "N", Value::Positive, &O::sample,
                           "generate N tokens from the initial (or "
                           "--init-from) weights and exit",
                           std::numeric_limits<uint32_t>::max()));
    Flag prompt = textFlag("--prompt", "TEXT", &O::prompt,
                           "--sample's context (default: a newline)");
    prompt.mayBeEmpty = true;
    t.push_back(prompt);
    t.push_back(textFlag("--temperature", "T", &O::temperature,
                         "--sample: 0 is greedy (default 1)"));
    t.push_back(numberFlag("--top-k", "K", Value::Unsigned, &O::topK,
                           "--sample: draw from the K likeliest tokens "
                           "(default: all)",
                           std::numeric_limits<uint32_t>::max()));
    t.push_back(textFlag("--debug-overflow-at", "STEP[,STEP...]",
                         &O::debugOverflowAt,
                         "debugging mixed precision: make these steps' "
                         "gradients non-finite (NaN in one element of a "
                         "gradient accumulator on every rank)"));
    t.push_back(textFlag("--dump-state", "PREFIX", &O::dumpState,
                         "debugging: at the end each rank writes every "
                         "variable it holds to PREFIX.rankR.safetensors"));
    t.push_back(textFlag("--save-dir", "DIR", &O::saveDir,
                         "directory for training checkpoints"));
    t.push_back(numberFlag("--save-every", "K", Value::Positive, &O::saveEvery,
                           "checkpoint every K steps (and after the last)"));
    t.push_back(numberFlag("--keep", "N", Value::Positive, &O::keep,
                           "keep only the newest N checkpoints (pruned after "
                           "each commit)"));
    Flag resume{"--resume", nullptr, Value::Switch,
                "continue from the latest checkpoint in --save-dir"};
    resume.on = &O::resume;
    t.push_back(resume);
    t.push_back(textFlag("--plan-name", "NAME", &O::planName,
                         "what messages call the plan instead of its path "
                         "(for a caller's temporary copy)"));
    Flag quietExport{"--quiet-export", nullptr, Value::Switch,
                     "write --export-weights without saying so (a caller's "
                     "temporary file)"};
    quietExport.on = &O::quietExport;
    t.push_back(quietExport);
    Flag help{"--help", nullptr, Value::Switch, "print this help"};
    help.on = &O::help;
    t.push_back(help);
    return t;
  }();
  return flags;
}

size_t editDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j)
    row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1,
                         diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

bool setValue(const Flag &flag, const std::string &value, DsrunOptions &options,
              std::string &error) {
  auto bad = [&](const char *expected) {
    error = std::string(flag.name) + ": expected " + expected + ", got '" +
            value + "'";
    return false;
  };
  uint64_t n = 0;
  options.given.insert(flag.name);
  switch (flag.value) {
  case Value::Text:
    if (value.empty() && !flag.mayBeEmpty)
      return bad(flag.metavar); // '' would silently mean "not given"
    options.*flag.text = value;
    return true;
  case Value::Choice: {
    std::vector<std::string> choices;
    for (const char *c = flag.choices; *c;) {
      const char *bar = std::strchr(c, '|');
      size_t len = bar ? size_t(bar - c) : std::strlen(c);
      choices.emplace_back(c, len);
      c += len + (bar ? 1 : 0);
    }
    if (std::find(choices.begin(), choices.end(), value) != choices.end()) {
      options.*flag.text = value;
      return true;
    }
    std::string expected;
    for (size_t k = 0; k < choices.size(); ++k)
      expected += std::string(k == 0                    ? ""
                              : k + 1 == choices.size() ? " or "
                                                        : ", ") +
                  choices[k];
    return bad(expected.c_str());
  }
  case Value::Positive:
  case Value::Unsigned: {
    uint64_t min = flag.value == Value::Positive ? 1 : 0;
    if (!parseCount(value, min, flag.max, n)) {
      // The familiar words while the range is the type's.
      if (flag.max == std::numeric_limits<uint64_t>::max())
        return bad(min ? "a positive integer" : "a non-negative integer");
      return bad(expectedCount(min, flag.max).c_str());
    }
    options.*flag.number = n;
    return true;
  }
  case Value::Bytes:
    if (!parseByteCount(value, n) || n == 0)
      return bad("a positive byte count such as 1073741824 or 8GiB");
    options.*flag.number = n;
    return true;
  case Value::Switch:
    options.*flag.on = true;
    return true;
  }
  return false;
}

} // namespace

bool parseDsrunFlags(const std::vector<std::string> &args,
                     DsrunOptions &options, std::string &error) {
  const std::vector<Flag> &flags = flagTable();
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string &arg = args[i];
    if (arg.size() < 2 || arg[0] != '-') {
      if (!options.plan.empty()) {
        error = "unexpected argument '" + arg + "' (the plan is '" +
                options.plan + "')";
        return false;
      }
      options.plan = arg;
      continue;
    }
    if (arg == "-h") {
      options.help = true;
      continue;
    }
    size_t eq = arg.find('=');
    std::string name = arg.substr(0, eq);
    auto flag = std::find_if(flags.begin(), flags.end(),
                             [&](const Flag &f) { return name == f.name; });
    if (flag == flags.end()) {
      error = "unknown flag '" + name + "'";
      const Flag *best = nullptr;
      size_t bestDistance = 3; // suggest only close misspellings
      for (const Flag &f : flags) {
        size_t d = editDistance(name, f.name);
        if (d < bestDistance) {
          bestDistance = d;
          best = &f;
        }
      }
      if (best)
        error += " (did you mean " + std::string(best->name) + "?)";
      return false;
    }
    if (flag->value == Value::Switch) {
      if (eq != std::string::npos) {
        error = name + ": takes no value, got '" + arg.substr(eq + 1) + "'";
        return false;
      }
      options.*flag->on = true;
      options.given.insert(flag->name);
      continue;
    }
    std::string value;
    if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
    } else if (i + 1 < args.size()) {
      value = args[++i];
    } else {
      error = name + ": missing value (" + flag->metavar + ")";
      return false;
    }
    if (!setValue(*flag, value, options, error))
      return false;
  }
  if (options.help)
    return true;
  if (options.plan.empty()) {
    error = "missing the plan file (usage: dsrun PLAN.dsplan [flags]; see "
            "dsrun --help)";
    return false;
  }
  return true;
}

std::vector<std::string> withoutDsrunFlag(const std::vector<std::string> &args,
                                          const std::string &name) {
  const std::vector<Flag> &flags = flagTable();
  std::vector<std::string> kept;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string &arg = args[i];
    std::string flagName = arg.substr(0, arg.find('='));
    auto flag = std::find_if(flags.begin(), flags.end(), [&](const Flag &f) {
      return arg.size() >= 2 && arg[0] == '-' && flagName == f.name;
    });
    // A value given as the next argument belongs to its flag.
    bool takesNext = flag != flags.end() && flag->value != Value::Switch &&
                     arg.find('=') == std::string::npos;
    if (flagName == name) {
      i += takesNext ? 1 : 0;
      continue;
    }
    kept.push_back(arg);
    if (takesNext && i + 1 < args.size())
      kept.push_back(args[++i]);
  }
  return kept;
}

bool checkDsrunFlags(const DsrunOptions &options, std::string &error) {
  if (options.saveDir.empty()) {
    if (options.saveEvery)
      error = "--save-every needs --save-dir (where to write checkpoints)";
    else if (options.keep)
      error = "--keep needs --save-dir (where the checkpoints are)";
    else if (options.resume)
      error = "--resume needs --save-dir (where the checkpoints are)";
  } else if (options.resume && !options.initFrom.empty()) {
    error = "--resume and --init-from both set the weights; give one";
  }
  if (error.empty() && !options.hostfile.empty() && options.np <= 1)
    error = "--hostfile goes with --np N (N > 1): it says where mpirun "
            "starts the ranks";
  // Sampling's settings without --sample would be silently ignored.
  for (const char *flag : {"--prompt", "--temperature", "--top-k"})
    if (error.empty() && options.wasGiven(flag) && !options.sample)
      error = std::string(flag) + " is a setting of --sample N (generate N "
                                  "tokens); give --sample too";
  if (error.empty() && options.wasGiven("--steps") && options.steps == 0 &&
      !options.resume)
    error = "--steps 0 trains nothing: it goes with --resume (e.g. to "
            "--export-weights a checkpoint's weights)";
  return error.empty();
}

std::string dsrunUsage() {
  std::string text = "usage: dsrun PLAN.dsplan [flags]\n\n"
                     "Trains with a plan compiled by dsc. Exit status: 0 "
                     "done, 1 training failed,\n2 bad input (plan, data, "
                     "flags).\n\n";
  // Descriptions start in column 36 and wrap at 80.
  const size_t indent = 36, width = 80;
  for (const Flag &f : flagTable()) {
    std::string line = std::string("  ") + f.name;
    if (f.metavar)
      line += std::string(" ") + f.metavar;
    line.resize(std::max(line.size() + 2, indent), ' ');
    std::string word;
    std::istringstream words(f.help);
    bool first = true;
    while (words >> word) {
      if (!first && line.size() + 1 + word.size() > width) {
        text += line + "\n";
        line = std::string(indent, ' ');
        first = true;
      }
      line += (first ? "" : " ") + word;
      first = false;
    }
    text += line + "\n";
  }
  return text;
}

} // namespace dsc::rt
