//===- MappedFile.cpp - a regular file mapped read-only -------------------===//
#include "runtime/core/MappedFile.h"

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <mutex>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace dsc {
namespace {

// The handler's table: fixed-size and read with atomics so a signal handler
// may read it. A checkpoint of many ranks maps a file per rank; past the
// table's size a file is still mapped, only without the one-line message.
struct Watched {
  std::atomic<const char *> begin{nullptr}, end{nullptr};
  char line[640] = {};
};
constexpr int kSlots = 256;
Watched watched[kSlots];
std::mutex slotsMutex; // taking and freeing slots; never in the handler
struct sigaction previousBus;

void onBus(int sig, siginfo_t *info, void *context) {
  const char *at = static_cast<const char *>(info->si_addr);
  for (Watched &w : watched) {
    const char *b = w.begin.load(), *e = w.end.load();
    if (b && at >= b && at < e) {
      ssize_t ignored = ::write(2, w.line, std::strlen(w.line));
      (void)ignored;
      ::_exit(2);
    }
  }
  // Not ours: what SIGBUS would have done.
  sigaction(sig, &previousBus, nullptr);
  (void)context;
  ::raise(sig);
}

int watch(const void *data, uint64_t size, const std::string &path,
          const char *kind) {
  static bool installed = [] {
    struct sigaction action {};
    action.sa_sigaction = onBus;
    action.sa_flags = SA_SIGINFO;
    sigemptyset(&action.sa_mask);
    sigaction(SIGBUS, &action, &previousBus);
    return true;
  }();
  (void)installed;
  std::lock_guard<std::mutex> lock(slotsMutex);
  for (int i = 0; i < kSlots; ++i) {
    Watched &w = watched[i];
    if (w.begin.load())
      continue;
    std::snprintf(w.line, sizeof w.line,
                  "dsrun: %s: the %s changed under the run (it is shorter "
                  "now); stopping\n",
                  path.c_str(), kind);
    w.end.store(static_cast<const char *>(data) + size);
    w.begin.store(static_cast<const char *>(data));
    return i;
  }
  return -1;
}

} // namespace

std::unique_ptr<MappedFile> MappedFile::open(const std::string &path,
                                             const char *kind,
                                             std::string &error) {
  // O_NONBLOCK: opening a FIFO for reading would wait for a writer.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    error = path + ": cannot open: " + std::strerror(errno);
    return nullptr;
  }
  std::unique_ptr<MappedFile> file(new MappedFile());
  struct stat st;
  bool ok = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  if (!ok)
    error = path + ": not a regular file";
  if (ok && st.st_size > 0) {
    void *data =
        ::mmap(nullptr, size_t(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
    if (data == MAP_FAILED) {
      error = path + ": cannot map: " + std::strerror(errno);
      ok = false;
    } else {
      file->data_ = data;
      file->size_ = uint64_t(st.st_size);
      file->watchSlot_ = watch(data, file->size_, path, kind);
    }
  }
  ::close(fd);
  return ok ? std::move(file) : nullptr;
}

MappedFile::~MappedFile() {
  if (watchSlot_ >= 0) {
    std::lock_guard<std::mutex> lock(slotsMutex);
    watched[watchSlot_].begin.store(nullptr);
    watched[watchSlot_].end.store(nullptr);
  }
  if (data_)
    ::munmap(data_, size_);
}

} // namespace dsc
