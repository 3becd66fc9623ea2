//===- Flags.h - dsrun's command line ---------------------------*- C++ -*-===//
//
// One table lists every flag with its kind of value; parsing, --help and the
// error messages all come from it. Accepted forms: `--flag VALUE`,
// `--flag=VALUE`, and `--flag` for switches. Errors are one line without the
// "dsrun: " prefix, e.g. "--steps: expected a positive integer, got 'x'".
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_TOOLING_FLAGS_H
#define DSC_RUNTIME_TOOLING_FLAGS_H

#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace dsc::rt {

/// The most ranks `dsrun --np` starts on one machine (more: mpirun
/// --hostfile).
constexpr uint64_t kMaxLocalRanks = 4096;

struct DsrunOptions {
  std::string plan;
  std::string data; ///< empty: synthetic data
  /// Not given: the schedule's total_num_steps; 0 (with --resume): none.
  uint64_t steps = 0;
  uint64_t np = 1;
  /// --np may start more ranks than the machine's cores or memory hold.
  bool oversubscribe = false;
  std::string hostfile; ///< --np: mpirun's hostfile (the ranks' hosts)
  std::string backend = "cpu";
  uint64_t seed = 1337;
  uint64_t deviceMemory = 0; ///< not given: unlimited
  std::string initFrom;
  std::string metrics;
  std::string trace;
  std::string exportWeights;
  std::string dumpBatch;
  std::string evalData;    ///< held-out data, same formats as --data
  std::string evalSplit;   ///< "0.1": hold out the last 10% of --data
  uint64_t evalEvery = 0;  ///< evaluate every K steps (and after the last)
  uint64_t printEvery = 0; ///< a progress line every K steps; 0: ~20 a run
  uint64_t evalBatches = 20;
  bool evalOnly = false;         ///< evaluate the initial weights and exit
  uint64_t sample = 0;           ///< generate this many tokens and exit
  std::string prompt;            ///< --sample's context (bytes)
  std::string temperature = "1"; ///< parsed by dsrun: >= 0, 0 greedy
  uint64_t topK = 0;             ///< 0: every token
  std::string debugOverflowAt;   ///< "3" or "3,7": steps made to overflow
  std::string dumpState; ///< PREFIX: PREFIX.rankR.safetensors at the end
  std::string saveDir;
  uint64_t saveEvery = 0;
  uint64_t keep = 0;
  bool resume = false;
  /// A caller handing dsrun temporary files it removes afterwards (dsc.train,
  /// dsc-train): the name its messages give the plan instead of its path,
  /// and --export-weights written without the "wrote" line.
  std::string planName;
  bool quietExport = false;
  bool help = false;
  /// The flags the command line gave (by name, "--seed"), to tell a default
  /// from a value the user chose.
  std::set<std::string> given;
  bool wasGiven(const std::string &flag) const { return given.count(flag); }
};

/// Parses `args` (argv without the program name) into `options`. False + one
/// line on an unknown flag, a missing or malformed value, or a wrong number
/// of positional arguments.
bool parseDsrunFlags(const std::vector<std::string> &args,
                     DsrunOptions &options, std::string &error);

/// `args` (already accepted by parseDsrunFlags) without flag `name` and its
/// value, in either form (`--np 4`, `--np=4`); everything else in order.
std::vector<std::string> withoutDsrunFlag(const std::vector<std::string> &args,
                                          const std::string &name);

/// False + one line if flags that only go together do not (--save-every,
/// --keep and --resume need --save-dir; --resume and --init-from both set
/// the weights). Backends are checked against the registry when the run
/// starts.
bool checkDsrunFlags(const DsrunOptions &options, std::string &error);

/// The --help text, generated from the flag table.
std::string dsrunUsage();

} // namespace dsc::rt

#endif // DSC_RUNTIME_TOOLING_FLAGS_H
