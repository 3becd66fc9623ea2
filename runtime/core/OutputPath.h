//===- OutputPath.h - writing an output path without destroying it -*- C++
//-*-===//
//
// How dsc and dsrun write a file the user named (-o, --export-weights,
// --dump-state): what is there must survive a failed write, and only a
// regular file may be replaced. A regular file (through a symbolic link to
// one, the link's target) or nothing: the bytes go to a new temporary file
// beside it, created exclusively (no existing file is truncated), synced
// and renamed over it. A character device or FIFO (/dev/null, a pipe): the
// bytes are written to it as it is; it is never renamed over. Anything
// else (a directory, a socket, a dangling link): one line, and nothing is
// touched. Header-only, POSIX.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_CORE_OUTPUTPATH_H
#define DSC_RUNTIME_CORE_OUTPUTPATH_H

#include <cerrno>
#include <climits>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <string>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace dsc {

struct OutputPath {
  bool direct = false; ///< a device or FIFO: write to `target` as is
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
  if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)) {
    out = {true, path};
    return true;
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

/// Opens the temporary file a replacing write goes through, beside
/// `target` and named after it and this process; -1 + one line on error.
inline int openTemporaryFor(const std::string &target, std::string &tmp,
                            std::string &error) {
  tmp = target + ".tmp." + std::to_string(long(::getpid()));
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0)
    error = tmp + ": cannot create: " + std::strerror(errno);
  return fd;
}

/// Opens a device or FIFO output for writing, without truncating it.
inline int openDirect(const std::string &target, std::string &error) {
  int fd = ::open(target.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd < 0)
    error = target + ": cannot open for writing: " + std::strerror(errno);
  return fd;
}

/// Writes `size` bytes to output `path` by the rules above; false + one
/// line, with the previous contents intact, on failure.
inline bool writeOutput(const std::string &path, const void *data, size_t size,
                        std::string &error) {
  OutputPath where;
  if (!classifyOutput(path, where, error))
    return false;
  std::string tmp;
  int fd = where.direct ? openDirect(where.target, error)
                        : openTemporaryFor(where.target, tmp, error);
  if (fd < 0)
    return false;
  const char *p = static_cast<const char *>(data);
  bool ok = true;
  for (size_t done = 0; ok && done < size;) {
    ssize_t n = ::write(fd, p + done, size - done);
    if (n < 0 && errno == EINTR)
      continue;
    ok = n > 0;
    done += ok ? size_t(n) : 0;
  }
  ok = ok && (where.direct || ::fsync(fd) == 0);
  int saved = errno;
  ok = ::close(fd) == 0 && ok;
  if (!ok) {
    error = (where.direct ? where.target : tmp) +
            ": write failed: " + std::strerror(saved ? saved : errno);
    if (!where.direct)
      ::unlink(tmp.c_str());
    return false;
  }
  if (!where.direct && ::rename(tmp.c_str(), where.target.c_str()) != 0) {
    error = path + ": cannot rename " + tmp +
            " into place: " + std::strerror(errno);
    ::unlink(tmp.c_str());
    return false;
  }
  return true;
}

} // namespace dsc

#endif // DSC_RUNTIME_CORE_OUTPUTPATH_H
