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
    EXPECT_EQ(errorOf(configWith(k, "{\"enabled\": true}")),
              std::string("ds_config.json: ") + k.section + "." + k.key +
                  ": not supported yet (" + k.note + ")");
    parseOk(configWith(k, "false"));
    parseOk(configWith(k, "{\"enabled\": false}"));
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
      {R"({"optimizer": {"type": "AdamW",
                         "params": {"fp32_optimizer_states": false}}})",
       "ds_config.json: $.optimizer.params.fp32_optimizer_states: false is "
       "not supported: dsc keeps the optimizer's state in fp32"},
  });
}

// sequence_parallel_size (Ulysses): groups of S ranks share a batch, so
// the batch triple counts world / S replicas; S divides the world and does
// not stand beside tensor_parallel yet.
TEST(ConfigKeysTest, SequenceParallelSizeGroupsTheRanks) {
  DsConfig c = parseOk(R"({"sequence_parallel_size": 2,
                           "train_batch_size": 16,
                           "train_micro_batch_size_per_gpu": 4})",
                       /*worldSize=*/4);
  EXPECT_EQ(c.sequenceParallelSize, 2);
  EXPECT_EQ(c.gradientAccumulationSteps, 2); // 16 = 4 x 2 x (4 / 2)
  EXPECT_EQ(errorOf(R"({"sequence_parallel_size": 3})", 4),
            "ds_config.json: $.sequence_parallel_size: 3 does not divide the "
            "world size 4");
  EXPECT_EQ(errorOf(R"({"sequence_parallel_size": 0})", 4),
            "ds_config.json: $.sequence_parallel_size: must be >= 1, got 0");
  EXPECT_EQ(errorOf(R"({"sequence_parallel_size": 2,
                        "tensor_parallel": {"autotp_size": 2}})",
                    4),
            "ds_config.json: $.sequence_parallel_size: Ulysses sequence "
            "parallelism beside tensor_parallel is not supported yet: use "
            "one of them");
}

TEST(ConfigKeysTest, MicroBatchChunksDivideTheMicroBatch) {
  DsConfig c = parseOk(R"({"tensor_parallel": {"autotp_size": 2,
                                                "micro_batch_chunks": 2},
                           "train_batch_size": 8,
                           "train_micro_batch_size_per_gpu": 4})",
                       /*worldSize=*/4);
  EXPECT_EQ(c.microBatchChunks, 2);
  EXPECT_EQ(c.gradientAccumulationSteps, 1); // 8 = 4 x 1 x (4 / 2)
  EXPECT_EQ(errorOf(R"({"tensor_parallel": {"autotp_size": 2,
                                            "micro_batch_chunks": 3},
                        "train_micro_batch_size_per_gpu": 4})",
                    2),
            "ds_config.json: $.tensor_parallel.micro_batch_chunks: 3 chunks "
            "do not divide the micro-batch of 4 samples");
  EXPECT_EQ(errorOf(R"({"tensor_parallel": {"micro_batch_chunks": 2}})", 2),
            "ds_config.json: $.tensor_parallel.micro_batch_chunks: needs a "
            "tensor-parallel group (autotp_size > 1)");
}

// Hugging Face's ZeRO-2 and ZeRO-3 example configs (transformers'
// DeepSpeed docs), "auto" everywhere its Trainer fills in: they compile, and
// "auto" takes TrainingArguments' defaults where the Trainer would.
TEST(ConfigKeysTest, HuggingFaceExampleConfigsParse) {
  const std::string common = R"(
      "fp16": {"enabled": "auto", "loss_scale": 0, "loss_scale_window": 1000,
               "initial_scale_power": 16, "hysteresis": 2,
               "min_loss_scale": 1},
      "optimizer": {"type": "AdamW", "params": {"lr": "auto",
                    "betas": "auto", "eps": "auto", "weight_decay": "auto"}},
      "scheduler": {"type": "WarmupLR", "params": {"warmup_min_lr": "auto",
                    "warmup_max_lr": "auto", "warmup_num_steps": "auto"}},
      "gradient_accumulation_steps": "auto", "gradient_clipping": "auto",
      "steps_per_print": 2000, "train_batch_size": "auto",
      "train_micro_batch_size_per_gpu": "auto",
      "wall_clock_breakdown": false)";
  DsConfig zero2 = parseOk("{" + common + R"(, "zero_optimization": {
      "stage": 2, "offload_optimizer": {"device": "cpu", "pin_memory": true},
      "allgather_partitions": true, "allgather_bucket_size": 2e8,
      "overlap_comm": true, "reduce_scatter": true,
      "reduce_bucket_size": 2e8, "contiguous_gradients": true}})");
  EXPECT_EQ(zero2.optimizer.lr, 5e-5);
  EXPECT_EQ(zero2.scheduler.warmupMaxLr, 5e-5);
  EXPECT_EQ(zero2.scheduler.warmupNumSteps, 0);
  EXPECT_EQ(zero2.gradientClipping, 1.0);
  EXPECT_EQ(zero2.optimizer.weightDecay, 0.0);
  EXPECT_FALSE(zero2.fp16.enabled);
  EXPECT_EQ(zero2.zero.stage, 2);
  EXPECT_EQ(zero2.zero.offloadOptimizer, "cpu");
  EXPECT_EQ(zero2.zero.reduceBucketSize, 200000000);
  DsConfig zero3 = parseOk("{" + common + R"(, "zero_optimization": {
      "stage": 3, "offload_optimizer": {"device": "cpu", "pin_memory": true},
      "offload_param": {"device": "cpu", "pin_memory": true},
      "overlap_comm": true, "contiguous_gradients": true,
      "sub_group_size": 1e9, "reduce_bucket_size": "auto",
      "stage3_prefetch_bucket_size": "auto",
      "stage3_param_persistence_threshold": "auto",
      "stage3_max_live_parameters": 1e9, "stage3_max_reuse_distance": 1e9,
      "stage3_gather_16bit_weights_on_model_save": true}})");
  EXPECT_EQ(zero3.zero.stage, 3);
  EXPECT_EQ(zero3.zero.offloadParam, "cpu");
  EXPECT_EQ(zero3.optimizer.lr, 5e-5);
}

TEST(ConfigKeysTest, KeysOfOneSectionAreListedOnce) {
  std::set<std::string> seen;
  for (const ConfigKey &k : configKeys())
    EXPECT_TRUE(seen.insert(std::string(k.section) + "." + k.key).second)
        << k.section << "." << k.key << " is listed twice";
}

} // namespace
