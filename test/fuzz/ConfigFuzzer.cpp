//===- ConfigFuzzer.cpp - libFuzzer target: ds_config.json ----------------===//
//
// Any bytes as a DeepSpeed config: refused with one line per problem, or
// accepted; an accepted config's canonical JSON (what the plan stores)
// parses back to the same canonical JSON, as Config.h promises.
//
//===----------------------------------------------------------------------===//

#include "compiler/config/Config.h"

#include <cstdlib>
#include <string>

using namespace dsc;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef text(reinterpret_cast<const char *>(data), size);
  for (int64_t worldSize : {1, 3}) {
    DsConfig config;
    std::string error;
    if (!parseDsConfig(text, "fuzz.json", worldSize, 4, config, error)) {
      if (error.empty())
        std::abort();
      continue;
    }
    std::string canonical = toJson(config);
    DsConfig again;
    if (!parseDsConfig(canonical, "canonical.json", worldSize, 4, again,
                       error) ||
        toJson(again) != canonical)
      std::abort(); // the stored config would not read back as written
  }
  return 0;
}
