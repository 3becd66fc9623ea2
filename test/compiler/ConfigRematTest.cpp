//===- ConfigRematTest.cpp - activation_checkpointing: dsc's remat keys ---===//
#include "ConfigTestSupport.h"

#include "llvm/ADT/STLExtras.h"

namespace {

using namespace dsc::configtest;

/// Notes about activation_checkpointing (others say how the batch sizes
/// were resolved).
size_t rematNotes(const DsConfig &c) {
  return llvm::count_if(c.notes, [](const std::string &n) {
    return llvm::StringRef(n).contains("activation_checkpointing");
  });
}

TEST(ConfigRematTest, PolicyKeysParseAndRoundTrip) {
  DsConfig c = parseOk(R"({"activation_checkpointing": {"remat": "auto",
      "activation_memory": 67108864}})");
  EXPECT_EQ(c.activationCheckpointing.remat, "auto");
  EXPECT_EQ(c.activationCheckpointing.activationMemory, 67108864);
  EXPECT_EQ(c.activationCheckpointing.rematEvery, 1);
  EXPECT_EQ(rematNotes(c), 0u);
  DsConfig again = parseOk(toJson(c));
  EXPECT_EQ(again, c);

  c = parseOk(R"({"activation_checkpointing": {"remat": "layers",
      "remat_every": 3}})");
  EXPECT_EQ(c.activationCheckpointing.remat, "layers");
  EXPECT_EQ(c.activationCheckpointing.rematEvery, 3);
  EXPECT_NE(c, parseOk("{}"));

  // Defaults: no recomputation.
  c = parseOk("{}");
  EXPECT_EQ(c.activationCheckpointing.remat, "none");
  EXPECT_EQ(c.activationCheckpointing.activationMemory, 0);
}

TEST(ConfigRematTest, BadPolicyValues) {
  expectErrors({
      {R"({"activation_checkpointing": {"remat": "full"}})",
       "ds_config.json: $.activation_checkpointing.remat: unsupported value "
       "'full' (supported: none, layers, selective, auto)"},
      {R"({"activation_checkpointing": {"remat": true}})",
       "ds_config.json: $.activation_checkpointing.remat: expected a string, "
       "got a boolean"},
      {R"({"activation_checkpointing": {"remat_every": 0}})",
       "ds_config.json: $.activation_checkpointing.remat_every: must be >= 1, "
       "got 0"},
      {R"({"activation_checkpointing": {"activation_memory": -1}})",
       "ds_config.json: $.activation_checkpointing.activation_memory: must be "
       ">= 0, got -1"},
      {R"({"activation_checkpointing": {"remat_evry": 2}})",
       "ds_config.json: $.activation_checkpointing.remat_evry: unknown key "
       "(did you mean 'remat_every'?)"},
  });
}

// DeepSpeed's tuning of its checkpointing runtime changes nothing in a
// compiled plan: each set key gets a note saying so, not silence.
TEST(ConfigRematTest, DeepSpeedRuntimeKeysAreNoted) {
  DsConfig c = parseOk(R"({"activation_checkpointing": {
      "contiguous_memory_optimization": true, "number_checkpoints": 4,
      "synchronize_checkpoint_boundary": true, "profile": true}})");
  ASSERT_EQ(rematNotes(c), 4u);
  EXPECT_EQ(c.notes[c.notes.size() - 4],
            "ds_config.json: $.activation_checkpointing."
            "contiguous_memory_optimization: has no effect in dsc: "
            "activations are placed at compile time (--report shows them); "
            "the policy is activation_checkpointing.remat");
  EXPECT_EQ(c.notes[c.notes.size() - 3],
            "ds_config.json: $.activation_checkpointing."
            "number_checkpoints: has no effect in dsc: the policy "
            "(activation_checkpointing.remat) decides what is "
            "kept");
  // Left at their defaults they say nothing.
  c = parseOk(R"({"activation_checkpointing": {"profile": false,
      "number_checkpoints": null}})");
  EXPECT_EQ(rematNotes(c), 0u);
}

} // namespace
