//===- DataLoader.h - token streams and deterministic batches ---*- C++ -*-===//
//
// dsrun's training data: a token sequence (a nanoGPT .bin file, a NumPy
// .npy array, any other file read as bytes, or a synthetic sequence) and
// batches drawn from it as a pure function of (seed, step, micro-step, rank).
// Files are memory-mapped, so a corpus of billions of tokens costs no resident
// memory until it is read.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_DATA_DATALOADER_H
#define DSC_RUNTIME_DATA_DATALOADER_H

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dsc {
class MappedFile;
}

namespace dsc::rt {

/// Which micro-batch to draw. Row `row` of rank `rank`'s micro-step `micro`
/// is sample (micro * worldSize + rank) * batch + row of the optimizer step,
/// so a step draws the same samples however its global batch is split into
/// ranks and micro-steps (what makes the ZeRO/world-size equivalence exact).
struct BatchKey {
  uint64_t seed = 0;
  uint32_t step = 0;
  uint32_t micro = 0;
  uint32_t rank = 0;
  uint32_t worldSize = 1;
};

class DataLoader {
public:
  /// Opens `path`: a name ending in ".bin" holds nanoGPT's little-endian
  /// uint16 tokens; one ending in ".npy" an array of integers as its header
  /// declares (numpy.save; NpyFile.h); anything else is read as bytes (256
  /// symbols). Checks the
  /// tokens against the plan's `vocabSize` and that one sample (`seqLen` + 1
  /// tokens) fits. Returns null and one line naming `path` on failure.
  static std::unique_ptr<DataLoader> open(const std::string &path,
                                          uint32_t vocabSize, uint32_t batch,
                                          uint32_t seqLen, std::string &error);

  /// A deterministic sequence for runs without data: x[i] = (x[i-1] +
  /// x[i-2]) mod vocabSize, learnable only by looking two tokens back.
  static std::unique_ptr<DataLoader> synthetic(uint32_t vocabSize,
                                               uint32_t batch, uint32_t seqLen);

  /// Splits off the last `fraction` (0 < fraction < 1) of a file's tokens
  /// as held-out data (dsrun --eval-split): this loader keeps the first
  /// part, the returned one reads the rest from the same mapping and must
  /// not outlive this one. Null + one line when either part is shorter
  /// than one sample or the data is synthetic.
  /// The held-out loader draws `batch` rows per batch (the eval
  /// program's).
  std::unique_ptr<DataLoader> splitTail(double fraction, uint32_t batch,
                                        std::string &error);

  ~DataLoader();
  DataLoader(const DataLoader &) = delete;
  DataLoader &operator=(const DataLoader &) = delete;

  uint64_t numTokens() const { return numTokens_; }
  uint32_t batch() const { return batch_; }
  uint32_t seqLen() const { return seqLen_; }
  /// One line for the log: where the tokens come from and how many there are.
  const std::string &description() const { return description_; }

  /// Token `i` of the sequence (i < numTokens()).
  uint32_t tokenAt(uint64_t i) const;

  /// Start of sample `row` of `key`'s micro-batch, uniform in
  /// [0, numTokens() - seqLen() - 1].
  uint64_t startOffset(const BatchKey &key, uint32_t row) const;

  /// Fills `tokens` and `targets` ([batch, seqLen] each, row-major) with
  /// data[s : s + seqLen] and data[s + 1 : s + seqLen + 1] per row.
  void fill(const BatchKey &key, int32_t *tokens, int32_t *targets) const;

private:
  DataLoader() = default;

  /// Token i's bits as stored (a file's; not for synthetic data).
  uint64_t rawTokenAt(uint64_t i) const;
  bool checkVocabulary(const std::string &path, uint32_t vocabSize,
                       std::string &error) const;

  // File tokens are little-endian integers of `width_` (1, 2, 4 or 8) bytes
  // in a read-only mapping, signed in some .npy files; synthetic ones live
  // in `owned_`.
  const uint8_t *bytes_ = nullptr;
  unsigned width_ = 1;
  bool signed_ = false;
  uint64_t numTokens_ = 0;
  std::unique_ptr<MappedFile> mapping_;
  std::vector<uint32_t> owned_;

  uint32_t batch_ = 1;
  uint32_t seqLen_ = 1;
  std::string description_;
};

} // namespace dsc::rt

#endif // DSC_RUNTIME_DATA_DATALOADER_H
