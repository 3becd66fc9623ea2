//===- CheckpointIndex.h - a committed checkpoint, opened for reading -*- C++
//-*-===//
//
// What resuming and exporting share: the manifest read and validated
// (CheckpointManifest.h), every rank file mapped (runtime/core/MappedFile.h:
// only the ranges read are read from disk) and checked against it (its
// format and step, its size and XXH3-64) before anything is read from it,
// and every variable's fragments indexed by logical name, so a caller
// copies any element range of any variable without holding a file or a
// whole variable in memory. docs/checkpoints.md has the layout.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_TOOLING_CHECKPOINTINDEX_H
#define DSC_RUNTIME_TOOLING_CHECKPOINTINDEX_H

#include "runtime/checkpoint/Safetensors.h"
#include "runtime/tooling/Checkpoint.h"
#include "runtime/tooling/CheckpointManifest.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace dsc::rt {

class CheckpointIndex {
public:
  /// Opens the committed checkpoint at `path` (a step directory). False +
  /// one line naming the file on error. The rank files' checksums are
  /// verified here, before any weight is read: all of them, or, when the
  /// ranks of a job open the same checkpoint, rank `verifier` of
  /// `verifiers` verifies files verifier, verifier + verifiers, ... (each
  /// file once in the job; a failure on any rank stops every rank before
  /// training, DsrunMain's agreeToStart).
  bool open(const std::string &path, std::string &error, int verifier = 0,
            int verifiers = 1);

  const std::string &path() const { return path_; }
  const RunState &state() const { return state_; }
  uint64_t seed() const { return seed_; }
  const std::string &model() const { return model_; }
  const std::string &planId() const { return planId_; } ///< 16 hex digits
  int worldSize() const { return worldSize_; }
  /// Every variable's whole shape, by logical name.
  const std::map<std::string, std::vector<int64_t>> &shapes() const {
    return shapes_;
  }

  /// Copies elements [begin, end) of the flattened variable `name` into
  /// `out`; false + one line when the rank files do not hold all of them.
  bool read(const std::string &name, int64_t begin, int64_t end, float *out,
            std::string &error) const;

private:
  bool checkNoOverlap(const CheckpointManifest &m, std::string &error);

  struct Fragment {
    const SafetensorsFile *file;
    const SafetensorsEntry *entry;
    int64_t first;   ///< its first element in the flattened variable
    size_t rankFile; ///< its file's index in the manifest's list
  };

  std::string path_;
  RunState state_;
  uint64_t seed_ = 0;
  std::string model_, planId_;
  int worldSize_ = 0;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, std::vector<Fragment>> fragments_;
  std::map<std::string, std::vector<int64_t>> shapes_;
};

} // namespace dsc::rt

#endif // DSC_RUNTIME_TOOLING_CHECKPOINTINDEX_H
