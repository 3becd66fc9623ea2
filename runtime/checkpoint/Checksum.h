//===- Checksum.h - XXH3-64 of files and byte streams -----------*- C++ -*-===//
//
// A checkpoint's manifest records each rank file's XXH3-64 (xxHash, from
// Debian's libxxhash) and byte count, and a reader compares them before it
// uses a weight (docs/checkpoints.md). XXH3 is not a defence against someone
// who forges a file; it catches a flipped bit, a torn copy and a file taken
// from another checkpoint, at memory speed.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_CHECKPOINT_CHECKSUM_H
#define DSC_RUNTIME_CHECKPOINT_CHECKSUM_H

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace dsc::rt {

/// What a manifest records of one file.
struct FileChecksum {
  uint64_t bytes = 0;
  uint64_t xxh3 = 0;
};

/// XXH3-64 over bytes fed in any number of pieces.
class StreamChecksum {
public:
  StreamChecksum();
  ~StreamChecksum();
  StreamChecksum(const StreamChecksum &) = delete;
  StreamChecksum &operator=(const StreamChecksum &) = delete;

  void update(const void *data, size_t size);
  /// The bytes so far and their hash.
  FileChecksum result() const;

private:
  struct State;
  std::unique_ptr<State> state_;
  uint64_t bytes_ = 0;
};

/// The checksum of the regular file at `path`, read in pieces (the file is
/// not made resident, whatever its size). False + one line naming `path`.
bool checksumFile(const std::string &path, FileChecksum &out,
                  std::string &error);

/// 16 lower-case hex digits, and back (exactly 16 hex digits, any case).
std::string checksumText(uint64_t hash);
bool parseChecksumText(const std::string &text, uint64_t &hash);

} // namespace dsc::rt

#endif // DSC_RUNTIME_CHECKPOINT_CHECKSUM_H
