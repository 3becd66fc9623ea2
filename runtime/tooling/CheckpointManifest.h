//===- CheckpointManifest.h - a checkpoint's manifest.json ------*- C++ -*-===//
//
// The manifest is what makes a step directory a checkpoint: the run's
// counters, its seed, the plan's identity and, for every rank file, its
// byte count and XXH3-64 (docs/checkpoints.md lists the fields). It is read
// as strictly as a ds_config.json: duplicate keys, unknown keys, a value of
// the wrong kind or out of range, a step other than its directory's, are
// one line naming the file and the field ("M: $.applied: must be <= $.step
// (6), got 7"), so that a manifest copied from another step or edited by
// hand is refused before any weight is read.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_TOOLING_CHECKPOINTMANIFEST_H
#define DSC_RUNTIME_TOOLING_CHECKPOINTMANIFEST_H

#include "runtime/checkpoint/Checksum.h"
#include "runtime/tooling/Checkpoint.h"

#include <cstdint>
#include <string>
#include <vector>

namespace dsc::rt {

/// The manifest's name in a step directory, and the format it and the
/// rank files' metadata declare.
extern const char *const kCheckpointManifest;
/// The Python engine's client_state, JSON, beside the manifest (not listed
/// in it: no rank reads it).
extern const char *const kClientStateFile;
extern const char *const kCheckpointFormat;

/// One rank file as the manifest records it.
struct ShardRecord {
  std::string name; ///< rank-RRRRR-of-NNNNN.safetensors
  FileChecksum sum;
};

struct CheckpointManifest {
  RunState state;
  uint64_t seed = 0;
  int worldSize = 0;
  std::string model;
  std::string plan;               ///< the plan's identity, 16 hex digits
  std::vector<ShardRecord> files; ///< rank r's file at index r
};

/// "step-00000012": a committed checkpoint's directory name.
std::string checkpointStepName(uint64_t step);
/// The step of a committed checkpoint's directory name: "step-" and at
/// least 8 digits, exactly as checkpointStepName writes it (no suffix, no
/// sign, no extra leading zero). False for anything else.
bool parseCheckpointStepName(const std::string &name, uint64_t &step);
/// "rank-00001-of-00004.safetensors".
std::string checkpointRankFile(int rank, int worldSize);

/// The manifest as saveCheckpoint writes it (2-space JSON, a final newline).
std::string manifestText(const CheckpointManifest &manifest);

/// Validates `text` (the manifest of a directory whose name says `dirStep`)
/// into `manifest`. False + one line "WHERE: $.FIELD: what is wrong".
bool parseCheckpointManifest(const std::string &text, const std::string &where,
                             uint64_t dirStep, CheckpointManifest &manifest,
                             std::string &error);

/// Reads and validates `stepDir`/manifest.json; the directory's name must
/// be a committed step's. False + one line naming the file.
bool readCheckpointManifest(const std::string &stepDir,
                            CheckpointManifest &manifest, std::string &error);

} // namespace dsc::rt

#endif // DSC_RUNTIME_TOOLING_CHECKPOINTMANIFEST_H
