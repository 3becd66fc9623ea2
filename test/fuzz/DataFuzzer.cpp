//===- DataFuzzer.cpp - libFuzzer target: the training data loader --------===//
//
// Any bytes as a data file, as text (bytes are tokens) and as a nanoGPT
// .bin token file, with a vocabulary, batch and sequence length taken from
// the input's first bytes: the loader refuses with one line or every batch
// it draws holds tokens below the vocabulary, at offsets inside the file.
//
//===----------------------------------------------------------------------===//

#include "runtime/data/DataLoader.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <unistd.h>

using namespace dsc::rt;

namespace {

std::string writeTemp(const char *suffix, const uint8_t *data, size_t size) {
  static const std::string dir = [] {
    const char *tmp = std::getenv("TMPDIR");
    return std::string(tmp ? tmp : "/tmp");
  }();
  std::string path =
      dir + "/dsc-fuzz-data-" + std::to_string(::getpid()) + suffix;
  std::FILE *f = std::fopen(path.c_str(), "wb");
  if (!f)
    std::abort();
  if (size && std::fwrite(data, 1, size, f) != size)
    std::abort();
  std::fclose(f);
  return path;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 4)
    return 0;
  const uint32_t vocab = 1 + (uint32_t(data[0]) | uint32_t(data[1]) << 8);
  const uint32_t batch = 1 + data[2] % 4, seqLen = 1 + data[3] % 32;
  data += 4;
  size -= 4;
  for (const char *suffix : {".txt", ".bin"}) {
    std::string path = writeTemp(suffix, data, size), error;
    auto loader = DataLoader::open(path, vocab, batch, seqLen, error);
    if (!loader) {
      if (error.empty() || error.find('\n') != std::string::npos)
        std::abort();
    } else {
      std::vector<int32_t> tokens(batch * seqLen), targets(batch * seqLen);
      for (uint32_t step = 1; step <= 3; ++step) {
        loader->fill(BatchKey{7, step, 0, 0, 1}, tokens.data(), targets.data());
        for (size_t i = 0; i < tokens.size(); ++i)
          if (tokens[i] < 0 || uint32_t(tokens[i]) >= vocab || targets[i] < 0 ||
              uint32_t(targets[i]) >= vocab)
            std::abort();
      }
    }
    ::unlink(path.c_str());
  }
  return 0;
}
