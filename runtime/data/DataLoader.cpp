//===- DataLoader.cpp - token streams and deterministic batches -----------===//
#include "runtime/data/DataLoader.h"

#include "runtime/core/MappedFile.h"

#include "runtime/rng/Philox.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace dsc::rt {

namespace {

bool endsWith(const std::string &s, const char *suffix) {
  size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

// Sampling draws live on their own Philox stream, apart from every
// initializer (those are keyed by variable names).
const uint32_t kDataStream = rng::streamForName("dsrun.data");

} // namespace

std::unique_ptr<DataLoader> DataLoader::open(const std::string &path,
                                             uint32_t vocabSize, uint32_t batch,
                                             uint32_t seqLen,
                                             std::string &error) {
  bool tokenFile = endsWith(path, ".bin");
  std::unique_ptr<DataLoader> loader(new DataLoader());
  loader->batch_ = batch;
  loader->seqLen_ = seqLen;
  loader->mapping_ = MappedFile::open(path, "data file", error);
  if (!loader->mapping_)
    return nullptr;
  const uint64_t size = loader->mapping_->size();
  if (size == 0) {
    error = path + ": empty file";
    return nullptr;
  }
  loader->bytes_ = loader->mapping_->data();

  if (tokenFile) {
    if (size % 2 != 0) {
      error = path + ": " + std::to_string(size) +
              " bytes; a nanoGPT .bin file holds uint16 tokens, so its size "
              "must be even";
      return nullptr;
    }
    loader->width_ = 2;
    loader->numTokens_ = size / 2;
  } else {
    if (vocabSize < 256) {
      error = path + ": read as bytes (256 symbols), but the plan's " +
              "vocab_size is " + std::to_string(vocabSize) +
              "; use a nanoGPT .bin token file or a plan with vocab_size >= "
              "256";
      return nullptr;
    }
    loader->width_ = 1;
    loader->numTokens_ = size;
  }

  uint64_t need = uint64_t(seqLen) + 1;
  if (loader->numTokens_ < need) {
    error = path + ": " + std::to_string(loader->numTokens_) +
            (tokenFile ? " tokens" : " bytes") +
            ", but one sample needs seq_len + 1 = " + std::to_string(need);
    return nullptr;
  }

  if (tokenFile) {
    // One pass over the file: an out-of-vocabulary token would otherwise
    // surface as an embedding out of range somewhere in the middle of a run.
    // The maximum is a branch-free loop (billions of tokens take seconds);
    // only a failure looks for the position.
    const uint8_t *b = loader->bytes_;
    uint32_t maxToken = 0;
    for (uint64_t i = 0; i < loader->numTokens_; ++i)
      maxToken =
          std::max(maxToken, uint32_t(b[2 * i]) | uint32_t(b[2 * i + 1]) << 8);
    if (maxToken >= vocabSize) {
      uint64_t i = 0;
      while (loader->tokenAt(i) < vocabSize)
        ++i;
      error = path + ": token " + std::to_string(loader->tokenAt(i)) +
              " at position " + std::to_string(i) +
              " is outside the plan's vocabulary (vocab_size " +
              std::to_string(vocabSize) + ")";
      return nullptr;
    }
    loader->description_ =
        path + ": " + std::to_string(loader->numTokens_) + " uint16 tokens";
  } else {
    loader->description_ =
        path + ": " + std::to_string(loader->numTokens_) + " bytes as tokens";
  }
  return loader;
}

std::unique_ptr<DataLoader>
DataLoader::synthetic(uint32_t vocabSize, uint32_t batch, uint32_t seqLen) {
  std::unique_ptr<DataLoader> loader(new DataLoader());
  loader->batch_ = batch;
  loader->seqLen_ = seqLen;
  uint64_t n =
      std::max<uint64_t>(uint64_t(1) << 16, 4 * (uint64_t(seqLen) + 1));
  uint32_t v = std::max<uint32_t>(vocabSize, 1);
  loader->owned_.resize(n);
  for (uint64_t i = 0; i < n; ++i)
    loader->owned_[i] = i < 2 ? uint32_t(i % v)
                              : uint32_t((uint64_t(loader->owned_[i - 1]) +
                                          loader->owned_[i - 2]) %
                                         v);
  loader->width_ = 4;
  loader->numTokens_ = n;
  loader->description_ = "synthetic data: " + std::to_string(n) +
                         " tokens of x[i] = (x[i-1] + x[i-2]) mod " +
                         std::to_string(v);
  return loader;
}

std::unique_ptr<DataLoader>
DataLoader::splitTail(double fraction, uint32_t batch, std::string &error) {
  if (width_ > 2) {
    error = "--eval-split: needs --data (synthetic data has nothing to hold "
            "out)";
    return nullptr;
  }
  uint64_t tail = uint64_t(double(numTokens_) * fraction);
  uint64_t head = numTokens_ - tail, need = uint64_t(seqLen_) + 1;
  if (tail < need || head < need) {
    error = "--eval-split " + std::to_string(fraction) + ": " +
            std::to_string(head) + " training and " + std::to_string(tail) +
            " held-out tokens, but each part needs one sample (" +
            std::to_string(need) + " tokens)";
    return nullptr;
  }
  std::unique_ptr<DataLoader> out(new DataLoader());
  out->bytes_ = bytes_ + head * width_;
  out->width_ = width_;
  out->numTokens_ = tail; // no mapping of its own: this loader unmaps
  out->batch_ = batch;
  out->seqLen_ = seqLen_;
  out->description_ = "the last " + std::to_string(tail) + " of " +
                      std::to_string(numTokens_) + " tokens of " + description_;
  numTokens_ = head;
  return out;
}

DataLoader::~DataLoader() = default;

uint32_t DataLoader::tokenAt(uint64_t i) const {
  switch (width_) {
  case 1:
    return bytes_[i];
  case 2:
    return uint32_t(bytes_[2 * i]) | uint32_t(bytes_[2 * i + 1]) << 8;
  default:
    return owned_[i];
  }
}

uint64_t DataLoader::startOffset(const BatchKey &key, uint32_t row) const {
  uint64_t sample =
      (uint64_t(key.micro) * key.worldSize + key.rank) * batch_ + row;
  uint64_t lo = rng::bitsAt(key.seed, kDataStream, key.step, 2 * sample);
  uint64_t hi = rng::bitsAt(key.seed, kDataStream, key.step, 2 * sample + 1);
  uint64_t bits = hi << 32 | lo;
  // Multiply-shift maps 64 random bits onto [0, numStarts); the bias is below
  // numStarts / 2^64, far under anything a training run could observe.
  uint64_t numStarts = numTokens_ - seqLen_;
  return uint64_t((unsigned __int128)bits * numStarts >> 64);
}

void DataLoader::fill(const BatchKey &key, int32_t *tokens,
                      int32_t *targets) const {
  for (uint32_t row = 0; row < batch_; ++row) {
    uint64_t start = startOffset(key, row);
    int32_t *tok = tokens + uint64_t(row) * seqLen_;
    int32_t *tgt = targets + uint64_t(row) * seqLen_;
    uint32_t prev = tokenAt(start);
    for (uint32_t t = 0; t < seqLen_; ++t) {
      uint32_t next = tokenAt(start + t + 1);
      tok[t] = int32_t(prev);
      tgt[t] = int32_t(next);
      prev = next;
    }
  }
}

} // namespace dsc::rt
