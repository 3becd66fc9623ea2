//===- ConfigKeysTest.cpp - every key of the table as the reader takes it -===//
//
// The reader takes its known keys from ConfigKeys.cpp's table, so these
// walk the table: each key that works, has no effect or is refused is
// known (never "unknown key" or "not supported yet"); each DeepSpeed key
// dsc lacks is refused with the table's note, and accepted switched off.
//
//===----------------------------------------------------------------------===//
#include "compiler/config/ConfigKeys.h"
#include "test/compiler/ConfigTestSupport.h"

#include "llvm/ADT/SmallVector.h"

#include <set>

using namespace dsc::configtest;
using dsc::config::ConfigKey;
using dsc::config::configKeys;
using dsc::config::KeyState;

namespace {

/// A config holding `value` at key k, with what its section needs around
/// it (a scheduler type that takes a params key).
std::string configWith(const ConfigKey &k, const std::string &value) {
  llvm::SmallVector<llvm::StringRef, 4> path;
  llvm::StringRef(k.section).split(path, '.');
  std::string open, close;
  for (size_t i = 1; i < path.size(); ++i) {
    open += "{\"" + path[i].str() + "\": ";
    close += "}";
  }
  std::string inner = "{\"" + std::string(k.key) + "\": " + value + "}";
  if (llvm::StringRef(k.section) == "$.scheduler.params") {
    llvm::StringRef type = k.only ? llvm::StringRef(k.only).split(' ').first
                                  : llvm::StringRef("WarmupLR");
    return "{\"scheduler\": {\"type\": \"" + type.str() +
           "\", \"params\": " + inner + "}}";
  }
  if (llvm::StringRef(k.section) == "$.optimizer.params")
    return "{\"optimizer\": {\"type\": \"AdamW\", \"params\": " + inner + "}}";
  return open + inner + close;
}

std::string parseError(const std::string &text) {
  DsConfig config;
  std::string error;
  parseDsConfig(text, kFile, 1, 4, config, error);
  return error;
}

TEST(ConfigKeysTest, EveryKnownKeyIsKnownToTheReader) {
  int checked = 0;
  for (const ConfigKey &k : configKeys()) {
    if (k.state == KeyState::NotSupported)
      continue;
    const std::string at = std::string(k.section) + "." + k.key + ": ";
    // The value may be of the wrong type; the key must still be known.
    for (const char *value : {"null", "1", "true"}) {
      std::string error = parseError(configWith(k, value));
      EXPECT_EQ(error.find(at + "unknown key"), std::string::npos) << error;
      EXPECT_EQ(error.find(at + "not supported yet"), std::string::npos)
          << error;
    }
    ++checked;
  }
  EXPECT_GT(checked, 90);
}

TEST(ConfigKeysTest, DeepSpeedKeysDscLacksAreRefusedUnlessOff) {
  int checked = 0;
  for (const ConfigKey &k : configKeys()) {
    if (k.state != KeyState::NotSupported)
      continue;
    SCOPED_TRACE(std::string(k.section) + "." + k.key);
    EXPECT_EQ(parseError(configWith(k, "{\"enabled\": true}")),
              std::string("ds_config.json: ") + k.section + "." + k.key +
                  ": not supported yet (" + k.note + ")");
    EXPECT_EQ(parseError(configWith(k, "false")), "");
    EXPECT_EQ(parseError(configWith(k, "{\"enabled\": false}")), "");
    ++checked;
  }
  EXPECT_GT(checked, 20);
}

TEST(ConfigKeysTest, KeysOfOneSectionAreListedOnce) {
  std::set<std::string> seen;
  for (const ConfigKey &k : configKeys())
    EXPECT_TRUE(seen.insert(std::string(k.section) + "." + k.key).second)
        << k.section << "." << k.key << " is listed twice";
}

} // namespace
