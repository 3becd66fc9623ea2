//===- SafetensorsFuzzer.cpp - libFuzzer target: the safetensors reader ---===//
//
// Any bytes as a safetensors file (weights in, checkpoint shards): refused
// with one line, or every tensor's bytes lie inside the file and an F32
// tensor reads back.
//
//===----------------------------------------------------------------------===//

#include "runtime/checkpoint/Safetensors.h"

#include <cstdlib>
#include <string>
#include <vector>

using namespace dsc::rt;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string error;
  auto file = SafetensorsFile::parse(std::vector<uint8_t>(data, data + size),
                                     "fuzz.safetensors", error);
  if (!file) {
    if (error.empty() || error.find('\n') != std::string::npos)
      std::abort();
    return 0;
  }
  volatile uint8_t sink = 0;
  for (const SafetensorsEntry &e : file->tensors()) {
    const uint8_t *bytes = file->data(e);
    for (uint64_t i = e.begin; i < e.end; i += 4096)
      sink = sink + bytes[i - e.begin]; // inside the file, or ASan says so
    if (e.dtype == "F32" && e.numel() <= (1u << 16)) {
      std::vector<float> values(size_t(e.numel()));
      if (!file->readF32(e, values.data(), error))
        std::abort();
    }
  }
  return 0;
}
