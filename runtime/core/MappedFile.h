//===- MappedFile.h - a regular file mapped read-only -----------*- C++ -*-===//
//
// Data files and checkpoint shards are mapped rather than read: only the
// pages a run touches are read from disk, and they stay reclaimable page
// cache. A mapped file that shrinks under the run (truncated, rewritten)
// turns reads past its new end into SIGBUS; while a MappedFile lives, a
// SIGBUS handler recognises its addresses and ends the process with one line
// naming the file, as bad input (exit 2), instead of dying of the signal.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_CORE_MAPPEDFILE_H
#define DSC_RUNTIME_CORE_MAPPEDFILE_H

#include <cstdint>
#include <memory>
#include <string>

namespace dsc {

class MappedFile {
public:
  /// Maps `path` (a regular file; a FIFO is refused, not waited on). `kind`
  /// names it in the SIGBUS line ("data file", "checkpoint file"). Null +
  /// one line naming `path` on error. An empty file maps to no bytes.
  static std::unique_ptr<MappedFile> open(const std::string &path,
                                          const char *kind, std::string &error);
  ~MappedFile();
  MappedFile(const MappedFile &) = delete;
  MappedFile &operator=(const MappedFile &) = delete;

  const uint8_t *data() const { return static_cast<const uint8_t *>(data_); }
  uint64_t size() const { return size_; }

private:
  MappedFile() = default;
  void *data_ = nullptr;
  uint64_t size_ = 0;
  int watchSlot_ = -1; ///< its entry in the SIGBUS handler's table, if any
};

} // namespace dsc

#endif // DSC_RUNTIME_CORE_MAPPEDFILE_H
