//===- Safetensors.h - safetensors files, written and validated -*- C++ -*-===//
//
// The safetensors format (huggingface/safetensors): an 8-byte little-endian
// header length N, N bytes of JSON mapping each tensor name to
// {"dtype", "shape", "data_offsets": [begin, end]} (offsets relative to the
// data that follows) plus an optional "__metadata__" string map, then the
// data. A file is checked completely before any tensor is handed out: the
// header inside the file, known dtypes, sizes that match shapes, offsets in
// range, and a data section covered exactly once (no overlaps, no holes).
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_CHECKPOINT_SAFETENSORS_H
#define DSC_RUNTIME_CHECKPOINT_SAFETENSORS_H

#include "runtime/checkpoint/Checksum.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace dsc {
class MappedFile;
class OutputFile;
} // namespace dsc

namespace dsc::rt {

/// "[2, 3]": how errors print a shape.
std::string formatShape(const std::vector<int64_t> &shape);

/// A float32 tensor to write, row-major.
struct TensorToSave {
  std::string name;
  std::vector<int64_t> shape;
  const float *data = nullptr;
};

/// A safetensors file written tensor by tensor, so a caller holds one
/// tensor (or a piece of one) at a time: open() writes the header for
/// `tensors` (names and shapes; their data is not read), write() appends
/// floats in that order, a tensor's in one call or in pieces (the next
/// tensor starts once one has all its floats), commit() puts the file in
/// place as saveSafetensors does.
/// written() is the checksum of the bytes written so far (a checkpoint's
/// manifest records it without reading the file back).
class SafetensorsWriter {
public:
  SafetensorsWriter();
  ~SafetensorsWriter(); ///< abandons an uncommitted file
  bool open(const std::string &path, const std::vector<TensorToSave> &tensors,
            const std::map<std::string, std::string> &metadata,
            std::string &error);
  bool write(const float *data, uint64_t count, std::string &error);
  bool commit(std::string &error);
  FileChecksum written() const { return sum_.result(); }

private:
  bool put(const void *data, uint64_t size, std::string &error);

  std::unique_ptr<OutputFile> out_;
  StreamChecksum sum_;
  std::vector<uint64_t> sizes_; ///< floats per tensor
  size_t next_ = 0;             ///< the tensor being written
  uint64_t inTensor_ = 0;       ///< floats of it written so far
};

/// Writes `tensors` (in this order) and `metadata` to `path`. The bytes go to
/// `path`.tmp first, which is then renamed over `path`, so a failure never
/// leaves a truncated file under the final name. False + one line on error.
/// `written`, if given, receives the file's checksum.
bool saveSafetensors(const std::string &path,
                     const std::vector<TensorToSave> &tensors,
                     const std::map<std::string, std::string> &metadata,
                     std::string &error, FileChecksum *written = nullptr);

/// One tensor of a validated file.
struct SafetensorsEntry {
  std::string name;
  std::string dtype; ///< "F32", "BF16", ... as in the file
  std::vector<int64_t> shape;
  uint64_t begin = 0; ///< byte range in the data section
  uint64_t end = 0;

  uint64_t numel() const;
};

class SafetensorsFile {
public:
  /// Reads and validates `path`. Null + one line naming `path` on error.
  static std::unique_ptr<SafetensorsFile> read(const std::string &path,
                                               std::string &error);
  /// Maps and validates `path`: only the bytes a caller reads are read
  /// from disk (a checkpoint's rank files, of which a rank needs a part).
  static std::unique_ptr<SafetensorsFile> map(const std::string &path,
                                              std::string &error);
  /// Validates bytes already in memory; `what` names them in errors.
  static std::unique_ptr<SafetensorsFile> parse(std::vector<uint8_t> bytes,
                                                const std::string &what,
                                                std::string &error);

  ~SafetensorsFile();

  /// Every tensor, in data order.
  const std::vector<SafetensorsEntry> &tensors() const { return entries_; }
  const SafetensorsEntry *find(std::string_view name) const;
  const std::map<std::string, std::string> &metadata() const {
    return metadata_;
  }

  /// The entry's bytes (entry.end - entry.begin of them).
  const uint8_t *data(const SafetensorsEntry &entry) const {
    return base_ + dataStart_ + entry.begin;
  }
  /// Copies an F32 tensor into `out` (numel floats). False + error if the
  /// entry is not F32.
  bool readF32(const SafetensorsEntry &entry, float *out,
               std::string &error) const;

private:
  static std::unique_ptr<SafetensorsFile> parse(const uint8_t *bytes,
                                                uint64_t size,
                                                const std::string &what,
                                                std::string &error);

  std::string what_;
  const uint8_t *base_ = nullptr; ///< owned_'s or mapped_'s bytes
  std::vector<uint8_t> owned_;
  std::unique_ptr<MappedFile> mapped_;
  uint64_t dataStart_ = 0;
  std::vector<SafetensorsEntry> entries_;
  std::map<std::string, std::string> metadata_;
};

} // namespace dsc::rt

#endif // DSC_RUNTIME_CHECKPOINT_SAFETENSORS_H
