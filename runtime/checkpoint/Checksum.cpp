//===- Checksum.cpp - XXH3-64 of files and byte streams -------------------===//
#include "runtime/checkpoint/Checksum.h"

#include <xxhash.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace dsc::rt {

struct StreamChecksum::State {
  XXH3_state_t *xxh = nullptr;
};

StreamChecksum::StreamChecksum() : state_(new State) {
  state_->xxh = XXH3_createState();
  if (!state_->xxh)
    throw std::bad_alloc();
  XXH3_64bits_reset(state_->xxh);
}

StreamChecksum::~StreamChecksum() { XXH3_freeState(state_->xxh); }

void StreamChecksum::update(const void *data, size_t size) {
  XXH3_64bits_update(state_->xxh, data, size);
  bytes_ += size;
}

FileChecksum StreamChecksum::result() const {
  return {bytes_, XXH3_64bits_digest(state_->xxh)};
}

bool checksumFile(const std::string &path, FileChecksum &out,
                  std::string &error) {
  // Non-blocking: a FIFO put in a checkpoint is refused, not waited on.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    error = path + ": cannot open: " + std::strerror(errno);
    return false;
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    error = path + ": cannot read: not a regular file";
    ::close(fd);
    return false;
  }
  StreamChecksum sum;
  std::vector<unsigned char> piece(size_t(1) << 20);
  for (;;) {
    ssize_t n = ::read(fd, piece.data(), piece.size());
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      error = path + ": cannot read: " + std::strerror(errno);
      ::close(fd);
      return false;
    }
    if (n == 0)
      break;
    sum.update(piece.data(), size_t(n));
  }
  ::close(fd);
  out = sum.result();
  return true;
}

std::string checksumText(uint64_t hash) {
  char text[20];
  std::snprintf(text, sizeof text, "%016llx",
                static_cast<unsigned long long>(hash));
  return text;
}

bool parseChecksumText(const std::string &text, uint64_t &hash) {
  if (text.size() != 16)
    return false;
  hash = 0;
  for (char c : text) {
    int digit = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
    if (digit < 0)
      return false;
    hash = hash << 4 | uint64_t(digit);
  }
  return true;
}

} // namespace dsc::rt
