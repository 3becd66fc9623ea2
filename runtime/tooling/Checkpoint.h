//===- Checkpoint.h - training checkpoints: save, find, resume --*- C++ -*-===//
//
// dsrun --save-dir DIR --save-every K [--keep N] [--resume]
// (docs/checkpoints.md). A checkpoint is a directory DIR/step-NNNNNNNN holding
// one safetensors file per rank and manifest.json. Each rank writes what it
// holds of every parameter, master weight and Adam moment under the variable's
// logical name (per parameter, also for ZeRO's sharded groups): a whole tensor
// as NAME (rank 0 only, for state every rank holds; on a pipeline, the first
// rank of the lowest stage holding it), a part as NAME@FIRST (its
// first element in the flat tensor); the file's metadata records the step.
// The manifest (CheckpointManifest.h) holds the run's counters (steps,
// applied steps, the loss scaler), the seed, the plan's identity and each
// rank file's size and XXH3-64. The ranks write into
// DIR/step-NNNNNNNN.partial, hashing their files as they write them; after an
// all-gather of the checksums rank 0 writes the manifest there and renames the
// directory into place, then syncs DIR: that rename is the commit, so a
// directory named step-NNNNNNNN is always whole. An interrupted save leaves
// only a .partial that resuming ignores (and the next save removes); --keep
// renames a checkpoint to step-NNNNNNNN.pruning before deleting it, so a kill
// during pruning never leaves a step directory with part of its files.
//
// Loading verifies the rank files against the manifest, then reads, for every
// variable the plan holds on this rank, the elements it needs from whichever
// rank files have them: the same plan resumes bitwise, and a plan for another
// world size or ZeRO stage takes the same logical state with no conversion
// step.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_TOOLING_CHECKPOINT_H
#define DSC_RUNTIME_TOOLING_CHECKPOINT_H

#include "runtime/exec/Session.h"
#include "runtime/tooling/LossScaler.h"

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace dsc::rt {

class Communicator;

/// What a run has done besides its variables.
struct RunState {
  uint64_t step = 0;    ///< optimizer steps finished
  uint64_t applied = 0; ///< of them, the ones that updated the weights
  uint64_t skipped = 0; ///< overflowed (mixed precision)
  std::optional<LossScaler::State> scaler;
};

/// Who saves or loads: every rank takes part, in step.
struct CheckpointRun {
  Session *session = nullptr;
  Communicator *comm = nullptr; ///< null for one rank
  int rank = 0, worldSize = 1;
  /// A data x tensor mesh (tensor parallelism beside data-parallel
  /// replicas): sharded variables are gathered whole and written by the
  /// state's lead rank.
  bool mesh = false;
  /// The rank's place among the replicas its ZeRO shards are cut over
  /// (the rank itself without a pipeline).
  int shardRank = 0;
  /// Whether the rank writes the whole state it holds: rank 0, or on a
  /// pipeline each stage's first rank (replica 0, tensor rank 0).
  bool leadsState = true;
  /// A pipeline (PipelineState.h): the rank's variables a lower stage
  /// writes, and every stage's state, which a checkpoint must match.
  std::set<std::string> heldEarlier, pipelineState;
  uint64_t seed = 0;
  std::string model;   ///< the plan's model name
  uint64_t planId = 0; ///< planIdentity of the plan's bytes
};

/// A 64-bit FNV-1a of the plan file's bytes.
uint64_t planIdentity(const std::vector<uint8_t> &bytes);

/// Writes the checkpoint of `state` into `dir` (created if missing), every
/// rank its own file, and commits it; then, with keep > 0, removes all but
/// the newest `keep` committed checkpoints (never the one just written), and
/// removes what interrupted saves and prunes left. Collective. Sets `path` to
/// the committed directory. False + one line on error (the previous checkpoints
/// are untouched until the commit). A non-empty `clientState` (the Python
/// engine's, JSON) is committed with it as client_state.json.
bool saveCheckpoint(const CheckpointRun &run, const std::string &dir,
                    const RunState &state, uint64_t keep, std::string &path,
                    std::string &error, const std::string &clientState = "");

/// The newest committed checkpoint in `dir`, "" if there is none; each
/// uncommitted leftover adds a line to `notes`. Committed: named exactly
/// step-NNNNNNNN, with a manifest.json and every rank file it lists (a
/// manifest that does not validate still counts, so that loading names its
/// fault); never a .partial, .old or .pruning directory. False + one line
/// if `dir` cannot be read (a missing `dir` has no checkpoint: true, "").
bool findLatestCheckpoint(const std::string &dir, std::string &path,
                          std::vector<std::string> &notes, std::string &error);

/// --resume continues the run of the newest checkpoint in `dir`, seed
/// included (batches and dropout masks are drawn by seed and step): sets
/// `seed` to the manifest's; a `seed` the user gave (`given`) that differs
/// is refused with one line rather than silently changing the run. No
/// checkpoint yet: `seed` stays. False + one line (a manifest that does not
/// validate, too).
bool resumedSeed(const std::string &dir, bool given, uint64_t &seed,
                 std::string &error);

/// Loads the checkpoint at `path` into the session and `state`: every
/// parameter, master and moment of the plan must be there with its shape,
/// and every one of the checkpoint's must be in the plan (otherwise one
/// line naming the first that is not and how many more). Local reads; each
/// rank verifies its share of the rank files' checksums
/// (CheckpointIndex::open). `notes` says when the plan is not the one that
/// saved it.
bool loadCheckpoint(const CheckpointRun &run, const std::string &path,
                    RunState &state, std::vector<std::string> &notes,
                    std::string &error);

} // namespace dsc::rt

#endif // DSC_RUNTIME_TOOLING_CHECKPOINT_H
