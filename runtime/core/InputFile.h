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

/// The bytes of `path`. False + one line: "PATH: cannot open: REASON" or
/// "PATH: cannot read: REASON" (not a regular file, a read error, a file
/// that shrank while read).
template <class Bytes>
bool readRegularFile(const std::string &path, Bytes &bytes,
                     std::string &error) {
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

} // namespace dsc::rt

#endif // DSC_RUNTIME_CORE_INPUTFILE_H
