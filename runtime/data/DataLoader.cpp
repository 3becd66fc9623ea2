//===- DataLoader.cpp - token streams and deterministic batches -----------===//
#include "runtime/data/DataLoader.h"

#include "runtime/core/MappedFile.h"
#include "runtime/data/NpyFile.h"

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
  const bool npy = endsWith(path, ".npy"), bin = endsWith(path, ".bin");
  std::string kind;
  if (npy) {
    NpyArray array;
    std::string why;
    if (!readNpyHeader(loader->bytes_, size, array, why)) {
      error = path + ": " + why;
      return nullptr;
    }
    loader->bytes_ += array.offset;
    loader->width_ = array.width;
    loader->signed_ = array.isSigned;
    loader->numTokens_ = array.count;
    kind = std::string(array.isSigned ? "int" : "uint") +
           std::to_string(8 * array.width) + " tokens (.npy)";
  } else if (bin) {
    if (size % 2 != 0) {
      error = path + ": " + std::to_string(size) +
              " bytes; a nanoGPT .bin file holds uint16 tokens, so its size "
              "must be even";
      return nullptr;
    }
    loader->width_ = 2;
    loader->numTokens_ = size / 2;
    kind = "uint16 tokens";
  } else {
    if (vocabSize < 256) {
      error = path + ": read as bytes (256 symbols), but the plan's " +
              "vocab_size is " + std::to_string(vocabSize) +
              "; use a nanoGPT .bin or a .npy token file, or a plan with "
              "vocab_size >= 256";
      return nullptr;
    }
    loader->width_ = 1;
    loader->numTokens_ = size;
    kind = "bytes as tokens";
  }

  uint64_t need = uint64_t(seqLen) + 1;
  if (loader->numTokens_ < need) {
    error = path + ": " + std::to_string(loader->numTokens_) +
            (npy || bin ? " tokens" : " bytes") +
            ", but one sample needs seq_len + 1 = " + std::to_string(need);
    return nullptr;
  }
  if ((npy || bin) && !loader->checkVocabulary(path, vocabSize, error))
    return nullptr;
  loader->description_ =
      path + ": " + std::to_string(loader->numTokens_) + " " + kind;
  return loader;
}

// One pass over the file: an out-of-vocabulary token would otherwise
// surface as an embedding out of range somewhere in the middle of a run.
// The maximum is a branch-free loop (billions of tokens take seconds; a
// negative signed token reads as a huge one); only a failure looks for the
// position.
bool DataLoader::checkVocabulary(const std::string &path, uint32_t vocabSize,
                                 std::string &error) const {
  uint64_t maxToken = 0;
  for (uint64_t i = 0; i < numTokens_; ++i)
    maxToken = std::max(maxToken, rawTokenAt(i));
  if (maxToken < vocabSize)
    return true;
  uint64_t i = 0;
  while (rawTokenAt(i) < vocabSize)
    ++i;
  const uint64_t raw = rawTokenAt(i);
  const std::string value =
      signed_ && int64_t(raw << (64 - 8 * width_)) < 0
          ? std::to_string(int64_t(raw << (64 - 8 * width_)) >>
                           (64 - 8 * width_))
          : std::to_string(raw);
  error = path + ": token " + value + " at position " + std::to_string(i) +
          " is outside the plan's vocabulary (vocab_size " +
          std::to_string(vocabSize) + ")";
  return false;
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
  loader->numTokens_ = n;
  loader->description_ = "synthetic data: " + std::to_string(n) +
                         " tokens of x[i] = (x[i-1] + x[i-2]) mod " +
                         std::to_string(v);
  return loader;
}

std::unique_ptr<DataLoader>
DataLoader::splitTail(double fraction, uint32_t batch, std::string &error) {
  if (!owned_.empty()) {
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
  out->signed_ = signed_;
  out->numTokens_ = tail; // no mapping of its own: this loader unmaps
  out->batch_ = batch;
  out->seqLen_ = seqLen_;
  out->description_ = "the last " + std::to_string(tail) + " of " +
                      std::to_string(numTokens_) + " tokens of " + description_;
  numTokens_ = head;
  return out;
}

DataLoader::~DataLoader() = default;

uint64_t DataLoader::rawTokenAt(uint64_t i) const {
  const uint8_t *p = bytes_ + i * width_;
  switch (width_) {
  case 1:
    return p[0];
  case 2:
    return uint64_t(p[0]) | uint64_t(p[1]) << 8;
  default: {
    uint64_t v = 0;
    for (unsigned b = 0; b < width_; ++b)
      v |= uint64_t(p[b]) << (8 * b);
    return v;
  }
  }
}

uint32_t DataLoader::tokenAt(uint64_t i) const {
  // Checked against the vocabulary when opened: every token fits.
  return owned_.empty() ? uint32_t(rawTokenAt(i)) : owned_[i];
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
