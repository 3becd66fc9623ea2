//===- InputFile.h - a whole regular file read into memory ------*- C++ -*-===//
//
// Plans, safetensors files and checkpoint manifests are read whole, and only
// from regular files: a FIFO or a device would block or never end (opened
// non-blocking, so a FIFO is refused rather than waited on). Header-only,
// POSIX and the standard library.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_CORE_INPUTFILE_H
#define DSC_RUNTIME_CORE_INPUTFILE_H

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace dsc::rt {

/// "16 MiB", "2 GiB": a read limit in a message.
inline std::string sizeLimitText(uint64_t bytes) {
  const char *units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (u < 4 && bytes >= 1024 && bytes % 1024 == 0) {
    bytes /= 1024;
    ++u;
  }
  return std::to_string(bytes) + " " + units[u];
}

/// The bytes of `path`. False + one line: "PATH: cannot open: REASON" or
/// "PATH: cannot read: REASON" (not a regular file, a read error, a file
/// that shrank while read).
/// With `maxBytes` (0: none), a larger file is "PATH: cannot read: larger
/// than 16 MiB" before anything is read: a wrong path (a disk image) must
/// not exhaust memory.
template <class Bytes>
bool readRegularFile(const std::string &path, Bytes &bytes, std::string &error,
                     uint64_t maxBytes = 0) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    error = path + ": cannot open: " + std::strerror(errno);
    return false;
  }
  struct stat st;
  std::string problem;
  if (::fstat(fd, &st) != 0) {
    problem = std::strerror(errno);
  } else if (!S_ISREG(st.st_mode)) {
    problem = "not a regular file";
  } else if (maxBytes && uint64_t(st.st_size) > maxBytes) {
    problem = "larger than " + sizeLimitText(maxBytes);
  } else {
    bytes.resize(size_t(st.st_size));
    size_t done = 0;
    while (done < bytes.size()) {
      ssize_t got = ::read(fd, &bytes[done], bytes.size() - done);
      if (got < 0 && errno == EINTR)
        continue;
      if (got <= 0) {
        problem = got < 0 ? std::strerror(errno) : "file shrank while read";
        break;
      }
      done += size_t(got);
    }
  }
  ::close(fd);
  if (!problem.empty()) {
    error = path + ": cannot read: " + problem;
    return false;
  }
  return true;
}

/// `path`, or standard input for "-", read whole by the rules above (a
/// pipe on standard input is read to its end, up to `maxBytes`).
template <class Bytes>
bool readWholeInput(const std::string &path, Bytes &bytes, std::string &error,
                    uint64_t maxBytes) {
  if (path != "-")
    return readRegularFile(path, bytes, error, maxBytes);
  bytes.clear();
  char chunk[65536];
  for (;;) {
    ssize_t got = ::read(STDIN_FILENO, chunk, sizeof chunk);
    if (got < 0 && errno == EINTR)
      continue;
    if (got < 0) {
      error =
          std::string("standard input: cannot read: ") + std::strerror(errno);
      return false;
    }
    if (got == 0)
      return true;
    if (bytes.size() + size_t(got) > maxBytes) {
      error =
          "standard input: cannot read: larger than " + sizeLimitText(maxBytes);
      return false;
    }
    bytes.insert(bytes.end(), chunk, chunk + got);
  }
}

} // namespace dsc::rt

#endif // DSC_RUNTIME_CORE_INPUTFILE_H
