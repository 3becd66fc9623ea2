//===- OutputPath.h - writing an output path without destroying it -*- C++
//-*-===//
//
// How dsc and dsrun write a file the user named (-o, --export-weights,
// --dump-state): what is there must survive a failed write, and only a
// regular file may be replaced. A regular file (through a symbolic link to
// one, the link's target) or nothing: the bytes go to a new temporary file
// beside it, created exclusively (no existing file is truncated), synced
// and renamed over it. The null device: the bytes are written to it; it is
// never renamed over. Anything else (a FIFO, which would block until a
// reader comes, another device, a directory, a socket, a dangling link):
// one line, and nothing is touched. Which outputs may share a file with an
// input is PathRules.h's. Header-only, POSIX.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_CORE_OUTPUTPATH_H
#define DSC_RUNTIME_CORE_OUTPUTPATH_H

#include "runtime/core/PathRules.h"

#include <cerrno>
#include <climits>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace dsc {

struct OutputPath {
  bool direct = false; ///< the null device: write to `target` as is
  std::string target;  ///< what to write to, or to rename over
};

/// Classifies `path`; false + one line naming it when it may not be
/// written.
inline bool classifyOutput(const std::string &path, OutputPath &out,
                           std::string &error) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    struct stat link;
    if (errno == ENOENT && ::lstat(path.c_str(), &link) == 0) {
      error = path + ": a symbolic link to nothing; refusing to replace it";
      return false;
    }
    if (errno != ENOENT) {
      error = path + ": " + std::strerror(errno);
      return false;
    }
    out = {false, path};
    return true;
  }
  if (isNullDevice(st)) {
    out = {true, path};
    return true;
  }
  if (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) {
    error = path + (S_ISFIFO(st.st_mode) ? ": is a FIFO" : ": is a device") +
            "; outputs must be regular files or /dev/null";
    return false;
  }
  if (!S_ISREG(st.st_mode)) {
    error =
        path +
        (S_ISDIR(st.st_mode) ? ": is a directory" : ": is not a regular file") +
        "; refusing to replace it";
    return false;
  }
  char resolved[PATH_MAX];
  out = {false, ::realpath(path.c_str(), resolved) ? resolved : path};
  return true;
}

/// One output written by the rules above: open(), write(), then commit()
/// (sync, close, rename into place). An output not committed, and any
/// failure, leaves what was at the path untouched (the temporary removed).
class OutputFile {
public:
  OutputFile() = default;
  OutputFile(const OutputFile &) = delete;
  OutputFile &operator=(const OutputFile &) = delete;
  ~OutputFile() { abandon(); }

  /// Classifies `path` and opens the temporary (beside the target, named
  /// after it and this process, created exclusively) or the device; false
  /// + one line on error.
  bool open(const std::string &path, std::string &error) {
    if (!classifyOutput(path, where_, error))
      return false;
    path_ = path;
    if (where_.direct) {
      fd_ = ::open(where_.target.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
      if (fd_ < 0)
        error = where_.target +
                ": cannot open for writing: " + std::strerror(errno);
    } else {
      tmp_ = where_.target + ".tmp." + std::to_string(long(::getpid()));
      fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
      if (fd_ < 0) {
        error = tmp_ + ": cannot create: " + std::strerror(errno);
        tmp_.clear();
      }
    }
    return fd_ >= 0;
  }

  /// Appends `size` bytes; false + one line on error.
  bool write(const void *data, size_t size, std::string &error) {
    const char *p = static_cast<const char *>(data);
    for (size_t done = 0; done < size;) {
      ssize_t n = ::write(fd_, p + done, size - done);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0) {
        error = writingTo() +
                ": write failed: " + std::strerror(n < 0 ? errno : EIO);
        return false;
      }
      done += size_t(n);
    }
    return true;
  }

  /// Makes the bytes the path's: a replaced file is synced first (a rename
  /// is atomic only for bytes on disk). False + one line on error.
  bool commit(std::string &error) {
    bool ok = where_.direct || ::fsync(fd_) == 0;
    int saved = errno;
    ok = ::close(fd_) == 0 && ok;
    fd_ = -1;
    if (!ok) {
      error = writingTo() +
              ": write failed: " + std::strerror(saved ? saved : errno);
      return false;
    }
    if (!where_.direct && ::rename(tmp_.c_str(), where_.target.c_str()) != 0) {
      error = path_ + ": cannot rename " + tmp_ +
              " into place: " + std::strerror(errno);
      return false;
    }
    tmp_.clear(); // it is the target now
    return true;
  }

private:
  const std::string &writingTo() const {
    return where_.direct ? where_.target : tmp_;
  }
  void abandon() {
    if (fd_ >= 0)
      ::close(fd_);
    fd_ = -1;
    if (!tmp_.empty())
      ::unlink(tmp_.c_str());
    tmp_.clear();
  }

  OutputPath where_;
  std::string path_, tmp_;
  int fd_ = -1;
};

/// An output written as the run goes (metrics, traces, batch dumps): the
/// same kinds of path as above, opened in place (truncated) rather than
/// through a temporary. Null + one line on error.
inline std::FILE *openStreamOutput(const std::string &path,
                                   std::string &error) {
  OutputPath where;
  if (!classifyOutput(path, where, error))
    return nullptr;
  std::FILE *f = std::fopen(path.c_str(), where.direct ? "a" : "w");
  if (!f)
    error = path + ": cannot open for writing: " + std::strerror(errno);
  return f;
}

/// Writes `size` bytes to output `path` by the rules above; false + one
/// line, with the previous contents intact, on failure.
inline bool writeOutput(const std::string &path, const void *data, size_t size,
                        std::string &error) {
  OutputFile out;
  return out.open(path, error) && out.write(data, size, error) &&
         out.commit(error);
}

} // namespace dsc

#endif // DSC_RUNTIME_CORE_OUTPUTPATH_H
