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

// DeepSpeed's pydantic field names for the stage-3 keys read as them.
TEST(ConfigKeysTest, ZeroFieldNamesAreTheirKeysOtherNames) {
  DsConfig c = parseOk(R"({"zero_optimization": {"stage": 3,
      "prefetch_bucket_size": 1000, "param_persistence_threshold": 10,
      "max_live_parameters": 2000}})");
  EXPECT_EQ(c.zero.stage3PrefetchBucketSize, 1000);
  EXPECT_EQ(c.zero.stage3ParamPersistenceThreshold, 10);
  EXPECT_EQ(c.zero.stage3MaxLiveParameters, 2000);
  EXPECT_EQ(
      errorOf(R"({"zero_optimization": {"max_live_parameters": 1,
                  "stage3_max_live_parameters": 1}})"),
      "ds_config.json: $.zero_optimization.max_live_parameters: duplicates "
      "$.zero_optimization.stage3_max_live_parameters (its other name)");
}

// Keys whose DeepSpeed default is dsc's only behaviour: that value passes,
// another is refused by name.
TEST(ConfigKeysTest, PinnedValuesPassAndOthersAreRefused) {
  parseOk(R"({"managed_gradient_accumulation": true,
              "gradient_allreduce_op": "mean", "sequence_parallel_size": 1,
              "optimizer": {"type": "AdamW",
                            "params": {"fp32_optimizer_states": true}}})");
  expectErrors({
      {R"({"managed_gradient_accumulation": false})",
       "ds_config.json: $.managed_gradient_accumulation: false is not "
       "supported: the plan runs gradient_accumulation_steps micro-steps "
       "per optimizer step"},
      {R"({"gradient_allreduce_op": "sum"})",
       "ds_config.json: $.gradient_allreduce_op: \"sum\" is not supported: "
       "dsc averages gradients over the ranks"},
      {R"({"sequence_parallel_size": 2})",
       "ds_config.json: $.sequence_parallel_size: 2 is not supported yet: "
       "dsc has no sequence parallelism"},
      {R"({"optimizer": {"type": "AdamW",
                         "params": {"fp32_optimizer_states": false}}})",
       "ds_config.json: $.optimizer.params.fp32_optimizer_states: false is "
       "not supported: dsc keeps the moments in fp32"},
  });
}

TEST(ConfigKeysTest, KeysOfOneSectionAreListedOnce) {
  std::set<std::string> seen;
  for (const ConfigKey &k : configKeys())
    EXPECT_TRUE(seen.insert(std::string(k.section) + "." + k.key).second)
        << k.section << "." << k.key << " is listed twice";
}

} // namespace
