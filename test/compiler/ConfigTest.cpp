//===- ConfigTest.cpp - ds_config.json parsing and validation -------------===//

#include "test/compiler/ConfigTestSupport.h"

#include "llvm/Support/JSON.h"

using namespace dsc::configtest;

namespace {

//===----------------------------------------------------------------------===//
// Defaults and the batch triple
//===----------------------------------------------------------------------===//

TEST(ConfigTest, EmptyConfigGivesDefaults) {
  DsConfig c = parseOk("{}", /*worldSize=*/2, /*defaultMicroBatch=*/4);
  EXPECT_EQ(c.microBatchSize, 4);
  EXPECT_EQ(c.gradientAccumulationSteps, 1);
  EXPECT_EQ(c.trainBatchSize, 8);
  EXPECT_EQ(c.gradientClipping, 0.0);
  EXPECT_EQ(c.optimizer.type, "AdamW");
  EXPECT_EQ(c.optimizer.lr, 1e-3);
  EXPECT_EQ(c.optimizer.beta1, 0.9);
  EXPECT_EQ(c.optimizer.beta2, 0.999);
  EXPECT_EQ(c.optimizer.eps, 1e-8);
  EXPECT_EQ(c.optimizer.weightDecay, 0.01);
  EXPECT_EQ(c.scheduler.type, "constant");
  EXPECT_FALSE(c.fp16.enabled);
  EXPECT_EQ(c.fp16.initialScalePower, 16);
  EXPECT_FALSE(c.bf16.enabled);
  EXPECT_EQ(c.zero.stage, 0);
  EXPECT_EQ(c.zero.offloadOptimizer, "none");
  EXPECT_EQ(c.zero.offloadParam, "none");
  EXPECT_EQ(c.activationCheckpointing.numberCheckpoints, -1);
  EXPECT_EQ(c.notes, std::vector<std::string>{
                         "ds_config.json: $.train_micro_batch_size_per_gpu: "
                         "not given; using 4 (dsc's default micro batch)"});
  // Every default equals a default-constructed config but the batch.
  DsConfig d;
  d.trainBatchSize = 8;
  d.microBatchSize = 4;
  d.gradientAccumulationSteps = 1;
  EXPECT_EQ(c, d);
}

TEST(ConfigTest, BatchTripleDerivesEachMember) {
  struct Case {
    const char *json;
    int64_t world, train, micro, accum;
  };
  const Case cases[] = {
      // Micro batch and accumulation give the train batch.
      {R"({"train_micro_batch_size_per_gpu": 4,
           "gradient_accumulation_steps": 2})",
       2, 16, 4, 2},
      // Train batch and micro batch give the accumulation steps.
      {R"({"train_batch_size": 32, "train_micro_batch_size_per_gpu": 4})", 2,
       32, 4, 4},
      // Train batch and accumulation give the micro batch.
      {R"({"train_batch_size": 32, "gradient_accumulation_steps": 2})", 2, 32,
       8, 2},
      // Train batch alone: no accumulation.
      {R"({"train_batch_size": 32})", 4, 32, 8, 1},
      // Micro batch alone: no accumulation.
      {R"({"train_micro_batch_size_per_gpu": 3})", 2, 6, 3, 1},
      // Accumulation alone: dsc's default micro batch (4).
      {R"({"gradient_accumulation_steps": 3})", 2, 24, 4, 3},
      // All three, consistent; integral floats are integers.
      {R"({"train_batch_size": 48, "train_micro_batch_size_per_gpu": 4.0,
           "gradient_accumulation_steps": 4})",
       3, 48, 4, 4},
      {R"({"train_batch_size": 4, "train_micro_batch_size_per_gpu": 4,
           "gradient_accumulation_steps": 1})",
       1, 4, 4, 1},
  };
  for (const Case &k : cases) {
    SCOPED_TRACE(k.json);
    DsConfig c = parseOk(k.json, k.world);
    EXPECT_EQ(c.trainBatchSize, k.train);
    EXPECT_EQ(c.microBatchSize, k.micro);
    EXPECT_EQ(c.gradientAccumulationSteps, k.accum);
    EXPECT_EQ(c.trainBatchSize,
              c.microBatchSize * c.gradientAccumulationSteps * k.world);
  }
}

TEST(ConfigTest, BatchTripleAutoIsResolvedAndNoted) {
  DsConfig c = parseOk(R"({"train_batch_size": "auto",
                           "train_micro_batch_size_per_gpu": 4,
                           "gradient_accumulation_steps": 2})",
                       2);
  EXPECT_EQ(c.trainBatchSize, 16);
  EXPECT_EQ(c.notes,
            std::vector<std::string>{
                "ds_config.json: $.train_batch_size: \"auto\" resolved to 16 "
                "(train_batch_size 16 = train_micro_batch_size_per_gpu 4 * "
                "gradient_accumulation_steps 2 * world size 2)"});

  c = parseOk(R"({"train_batch_size": 32,
                  "train_micro_batch_size_per_gpu": "auto",
                  "gradient_accumulation_steps": 2})",
              2);
  EXPECT_EQ(c.microBatchSize, 8);
  EXPECT_EQ(c.notes,
            std::vector<std::string>{
                "ds_config.json: $.train_micro_batch_size_per_gpu: \"auto\" "
                "resolved to 8 (train_batch_size 32 = "
                "train_micro_batch_size_per_gpu 8 * "
                "gradient_accumulation_steps 2 * world size 2)"});

  c = parseOk(R"({"train_batch_size": "auto",
                  "train_micro_batch_size_per_gpu": "auto",
                  "gradient_accumulation_steps": "auto"})",
              2, /*defaultMicroBatch=*/3);
  EXPECT_EQ(c.microBatchSize, 3);
  EXPECT_EQ(c.gradientAccumulationSteps, 1);
  EXPECT_EQ(c.trainBatchSize, 6);
  EXPECT_EQ(c.notes,
            (std::vector<std::string>{
                "ds_config.json: $.train_batch_size: \"auto\" resolved to 6 "
                "(train_batch_size 6 = train_micro_batch_size_per_gpu 3 * "
                "gradient_accumulation_steps 1 * world size 2)",
                "ds_config.json: $.train_micro_batch_size_per_gpu: \"auto\" "
                "resolved to 3 (dsc's default micro batch)",
                "ds_config.json: $.gradient_accumulation_steps: \"auto\" "
                "resolved to 1 (train_batch_size 6 = "
                "train_micro_batch_size_per_gpu 3 * "
                "gradient_accumulation_steps 1 * world size 2)"}));
}

TEST(ConfigTest, BatchTripleErrors) {
  expectErrors({
      {R"({"train_batch_size": 32, "train_micro_batch_size_per_gpu": 4,
           "gradient_accumulation_steps": 2})",
       "ds_config.json: $.train_batch_size: 32 != "
       "train_micro_batch_size_per_gpu 4 * gradient_accumulation_steps 2 * "
       "world size 2 (= 16)",
       2},
      {R"({"train_batch_size": 30, "train_micro_batch_size_per_gpu": 4})",
       "ds_config.json: $.train_batch_size: 30 is not divisible by "
       "train_micro_batch_size_per_gpu 4 * world size 2 (= 8), so "
       "gradient_accumulation_steps cannot be derived",
       2},
      {R"({"train_batch_size": 30, "gradient_accumulation_steps": 4})",
       "ds_config.json: $.train_batch_size: 30 is not divisible by "
       "gradient_accumulation_steps 4 * world size 2 (= 8), so "
       "train_micro_batch_size_per_gpu cannot be derived",
       2},
      {R"({"train_batch_size": 30})",
       "ds_config.json: $.train_batch_size: 30 is not divisible by world "
       "size 4, so train_micro_batch_size_per_gpu cannot be derived",
       4},
      {R"({"train_batch_size": 0})",
       "ds_config.json: $.train_batch_size: must be >= 1, got 0"},
      {R"({"train_micro_batch_size_per_gpu": -2})",
       "ds_config.json: $.train_micro_batch_size_per_gpu: must be >= 1, got "
       "-2"},
      {R"({"gradient_accumulation_steps": 2.5})",
       "ds_config.json: $.gradient_accumulation_steps: expected an integer, "
       "got 2.5"},
      {R"({"train_batch_size": "32"})",
       "ds_config.json: $.train_batch_size: expected an integer, got a "
       "string"},
      {R"({"train_batch_size": 1e19})",
       "ds_config.json: $.train_batch_size: integer out of range: 1e+19"},
      {R"({"train_micro_batch_size_per_gpu": 4000000000,
           "gradient_accumulation_steps": 4000000000})",
       "ds_config.json: $.train_batch_size: batch size overflows: "
       "4000000000 * 4000000000"},
      {"{}", "ds_config.json: $: world size must be >= 1, got 0", 0},
  });
}

//===----------------------------------------------------------------------===//
// Error kinds
//===----------------------------------------------------------------------===//

TEST(ConfigTest, InvalidJsonNamesLineAndColumn) {
  expectErrors({
      {"{\n  \"fp16\": {\"enabled\" true}\n}",
       "ds_config.json: $: invalid JSON at line 2, column 22: Expected : "
       "after object key"},
      {"{\"train_batch_size\": 8,}",
       "ds_config.json: $: invalid JSON at line 1, column 24: Expected "
       "object key"},
      {"", "ds_config.json: $: invalid JSON at line 1, column 1: Unexpected "
           "EOF"},
      {"{\"fp16\": {}", "ds_config.json: $: invalid JSON at line 1, column "
                        "11: Expected , or } after object property"},
      {"{\"lr\": 1e}", "ds_config.json: $: invalid JSON at line 1, column "
                       "9: Invalid JSON value (number?)"},
      {"[1, 2]", "ds_config.json: $: expected an object, got an array"},
  });
}

// DeepSpeed's loader refuses duplicate keys (llvm::json would keep the last
// silently), and a file nested absurdly deep is one line, not a crash.
TEST(ConfigTest, DuplicateKeysAndDeepNesting) {
  expectErrors({
      {R"({"gradient_clipping": 1.0, "gradient_clipping": 2.0})",
       "ds_config.json: $: duplicate key \"gradient_clipping\" (DeepSpeed "
       "refuses duplicate keys; which one is meant?)"},
      {R"({"optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "lr": 2e-3}}})",
       "ds_config.json: $.optimizer.params: duplicate key \"lr\" (DeepSpeed "
       "refuses duplicate keys; which one is meant?)"},
      {R"({"x": [{"a": 1}, {"a": 1, "a": 2}]})",
       "ds_config.json: $.x[1]: duplicate key \"a\" (DeepSpeed refuses "
       "duplicate keys; which one is meant?)"},
  });
  // The path names the container one level too deep (runtime/core/
  // JsonSyntax.h, shared with checkpoint manifests).
  std::string deep = std::string(50000, '[') + std::string(50000, ']');
  std::string deepPath = "$";
  for (int i = 0; i < 64; ++i)
    deepPath += "[0]";
  EXPECT_EQ(errorOf(deep), "ds_config.json: " + deepPath +
                               ": nested more than 64 levels deep");
  std::string objects, objectsPath = "$";
  for (int i = 0; i < 100; ++i)
    objects += "{\"k\": ";
  for (int i = 0; i < 64; ++i)
    objectsPath += ".k";
  objects += "1" + std::string(100, '}');
  EXPECT_EQ(errorOf(objects), "ds_config.json: " + objectsPath +
                                  ": nested more than 64 levels deep");
  // The same key in different objects is no duplicate.
  parseOk(R"({"fp16": {"enabled": false}, "bf16": {"enabled": false}})");
}

TEST(ConfigTest, UnknownKeysSuggestTheKeyMeant) {
  expectErrors({
      {R"({"zero_optimisation": {"stage": 1}})",
       "ds_config.json: $.zero_optimisation: unknown key (did you mean "
       "'zero_optimization'?)"},
      {R"({"zero_optimization": {"stage3_prefech_bucket_size": 1}})",
       "ds_config.json: $.zero_optimization.stage3_prefech_bucket_size: "
       "unknown key (did you mean 'stage3_prefetch_bucket_size'?)"},
      {R"({"Train_Batch_Size": 8})",
       "ds_config.json: $.Train_Batch_Size: unknown key (did you mean "
       "'train_batch_size'?)"},
      {R"({"optimizer": {"type": "AdamW", "params": {"betas1": 0.9}}})",
       "ds_config.json: $.optimizer.params.betas1: unknown key (did you mean "
       "'betas'?)"},
      // Far from every key: no suggestion.
      // DeepSpeed's own keys that dsc lacks are not typos.
      {R"({"comet": {"enabled": true}})",
       "ds_config.json: $.comet: not supported yet (dsc writes tensorboard, "
       "csv_monitor and wandb (through dsc-train and dsc.train), and dsrun "
       "--metrics every step's loss, lr, grad norm, loss scale, tokens/s and "
       "memory as JSON lines)"},
      {R"({"zero_optimization": {"cpu_offload": true}})",
       "ds_config.json: $.zero_optimization.cpu_offload: not supported yet "
       "(DeepSpeed's old name; write offload_optimizer {\"device\": "
       "\"cpu\"} (docs/offload.md))"},
      {R"({"optimizer": {"type": "AdamW", "params": {"amsgrad": true}}})",
       "ds_config.json: $.optimizer.params.amsgrad: not supported yet (dsc's "
       "AdamW and Lamb keep no maximum of the second moments)"},
      {R"({"tensorbord": {"enabled": true}})",
       "ds_config.json: $.tensorbord: unknown key (did you mean "
       "'tensorboard'?)"},
      {R"({"optimizer": {"type": "AdamW", "params": {"xy": 1}}})",
       "ds_config.json: $.optimizer.params.xy: unknown key"},
      // A parameter of another scheduler.
      {R"({"scheduler": {"type": "WarmupLR",
                         "params": {"total_num_steps": 10}}})",
       "ds_config.json: $.scheduler.params.total_num_steps: unknown key"},
      // Keys that are not identifiers are quoted; the message stays one line.
      {R"({"my key": 1})", "ds_config.json: $['my key']: unknown key"},
      {"{\"a\\nb'\": 1}", "ds_config.json: $['a\\nb\\'']: unknown key"},
      // The first unknown key in sorted order.
  });
}

TEST(ConfigTest, WrongTypesNameExpectedAndActual) {
  expectErrors({
      {R"({"optimizer": {"type": "AdamW", "params": {"lr": "0.001"}}})",
       "ds_config.json: $.optimizer.params.lr: expected a number, got a "
       "string"},
      {R"({"fp16": {"enabled": 1}})",
       "ds_config.json: $.fp16.enabled: expected a boolean, got a number"},
      {R"({"zero_optimization": []})",
       "ds_config.json: $.zero_optimization: expected an object, got an "
       "array"},
      {R"({"gradient_clipping": null})",
       "ds_config.json: $.gradient_clipping: expected a number, got null"},
      {R"({"gradient_clipping": true})",
       "ds_config.json: $.gradient_clipping: expected a number, got a "
       "boolean"},
      {R"({"optimizer": {"type": "AdamW", "params": {"betas": 0.9}}})",
       "ds_config.json: $.optimizer.params.betas: expected an array of 2 "
       "numbers, got a number"},
      {R"({"optimizer": {"type": "AdamW", "params": {"betas": [0.9]}}})",
       "ds_config.json: $.optimizer.params.betas: expected 2 numbers, got 1"},
      {R"({"optimizer": {"type": "AdamW", "params": {"betas": [0.9, "x"]}}})",
       "ds_config.json: $.optimizer.params.betas[1]: expected a number, got "
       "a string"},
      {R"({"optimizer": {"type": "AdamW", "params": []}})",
       "ds_config.json: $.optimizer.params: expected an object, got an "
       "array"},
      {R"({"scheduler": {"type": 5}})",
       "ds_config.json: $.scheduler.type: expected a string, got a number"},
      {R"({"zero_optimization": {"stage": "3"}})",
       "ds_config.json: $.zero_optimization.stage: expected an integer, got "
       "a string"},
      {R"({"zero_optimization": {"reduce_bucket_size": 2.5e0}})",
       "ds_config.json: $.zero_optimization.reduce_bucket_size: expected an "
       "integer, got 2.5"},
      {R"({"zero_optimization": {"offload_param": {"device": true}}})",
       "ds_config.json: $.zero_optimization.offload_param.device: expected a "
       "string, got a boolean"},
      {R"({"steps_per_print": "x"})",
       "ds_config.json: $.steps_per_print: expected an integer, got a "
       "string"},
      {R"({"wall_clock_breakdown": 0})",
       "ds_config.json: $.wall_clock_breakdown: expected a boolean, got a "
       "number"},
      {R"({"gradient_predivide_factor": []})",
       "ds_config.json: $.gradient_predivide_factor: expected a number, got "
       "an array"},
  });
}

TEST(ConfigTest, OutOfRangeValues) {
  expectErrors({
      {R"({"zero_optimization": {"stage": 4}})",
       "ds_config.json: $.zero_optimization.stage: must be 0, 1, 2 or 3, got "
       "4"},
      {R"({"optimizer": {"type": "AdamW", "params": {"lr": -1e-3}}})",
       "ds_config.json: $.optimizer.params.lr: must be >= 0, got -0.001"},
      {R"({"optimizer": {"type": "AdamW", "params": {"lr": 1e400}}})",
       "ds_config.json: $.optimizer.params.lr: expected a finite number, got "
       "inf"},
      {R"({"optimizer": {"type": "AdamW", "params": {"eps": -1}}})",
       "ds_config.json: $.optimizer.params.eps: must be > 0, got -1"},
      {R"({"optimizer": {"type": "AdamW", "params": {"eps": 0}}})",
       "ds_config.json: $.optimizer.params.eps: must be > 0, got 0"},
      {R"({"optimizer": {"type": "AdamW", "params": {"weight_decay": -0.1}}})",
       "ds_config.json: $.optimizer.params.weight_decay: must be >= 0, got "
       "-0.1"},
      {R"({"optimizer": {"type": "AdamW", "params": {"betas": [0.9, 1]}}})",
       "ds_config.json: $.optimizer.params.betas[1]: must be in [0, 1), got "
       "1"},
      {R"({"gradient_clipping": -1})",
       "ds_config.json: $.gradient_clipping: must be >= 0, got -1"},
      {R"({"fp16": {"loss_scale": -2}})",
       "ds_config.json: $.fp16.loss_scale: must be >= 0, got -2"},
      {R"({"fp16": {"initial_scale_power": 200}})",
       "ds_config.json: $.fp16.initial_scale_power: must be <= 127, got 200"},
      {R"({"fp16": {"loss_scale_window": 0}})",
       "ds_config.json: $.fp16.loss_scale_window: must be >= 1, got 0"},
      {R"({"fp16": {"hysteresis": 0}})",
       "ds_config.json: $.fp16.hysteresis: must be >= 1, got 0"},
      {R"({"fp16": {"min_loss_scale": 0}})",
       "ds_config.json: $.fp16.min_loss_scale: must be > 0, got 0"},
      {R"({"zero_optimization": {"reduce_bucket_size": 0}})",
       "ds_config.json: $.zero_optimization.reduce_bucket_size: must be >= 1, "
       "got 0"},
      {R"({"zero_optimization": {"stage3_max_live_parameters": -1}})",
       "ds_config.json: $.zero_optimization.stage3_max_live_parameters: must "
       "be >= 0, got -1"},
      {R"({"activation_checkpointing": {"number_checkpoints": 0}})",
       "ds_config.json: $.activation_checkpointing.number_checkpoints: must "
       "be >= 1, got 0"},
  });
}

//===----------------------------------------------------------------------===//
// Sections
//===----------------------------------------------------------------------===//

TEST(ConfigTest, ZeroParsesEveryKey) {
  DsConfig c = parseOk(R"({"zero_optimization": {
      "stage": 3,
      "offload_optimizer": {"device": "cpu", "pin_memory": true},
      "offload_param": {"device": "cpu"},
      "reduce_bucket_size": 5e8,
      "contiguous_gradients": false,
      "overlap_comm": true,
      "stage3_prefetch_bucket_size": 1e7,
      "stage3_param_persistence_threshold": 1e4,
      "stage3_max_live_parameters": 2e9,
      "allgather_partitions": true, "allgather_bucket_size": 2e8,
      "reduce_scatter": true, "round_robin_gradients": false,
      "sub_group_size": 1e9, "stage3_max_reuse_distance": 1e9,
      "stage3_gather_16bit_weights_on_model_save": true,
      "ignore_unused_parameters": true}})");
  EXPECT_EQ(c.zero.stage, 3);
  EXPECT_EQ(c.zero.offloadOptimizer, "cpu");
  EXPECT_EQ(c.zero.offloadParam, "cpu");
  EXPECT_EQ(c.zero.reduceBucketSize, 500000000);
  EXPECT_FALSE(c.zero.contiguousGradients);
  EXPECT_TRUE(c.zero.overlapComm);
  EXPECT_EQ(c.zero.stage3PrefetchBucketSize, 10000000);
  EXPECT_EQ(c.zero.stage3ParamPersistenceThreshold, 10000);
  EXPECT_EQ(c.zero.stage3MaxLiveParameters, 2000000000);

  c = parseOk(R"({"zero_optimization": {"stage": 1,
                  "offload_optimizer": {"device": "cpu"},
                  "offload_param": {"device": "none"}}})");
  EXPECT_EQ(c.zero.stage, 1);
  EXPECT_EQ(c.zero.offloadOptimizer, "cpu");
  EXPECT_EQ(c.zero.offloadParam, "none");
  EXPECT_EQ(c.zero.reduceBucketSize, 500000000);
  EXPECT_EQ(c.zero.stage3PrefetchBucketSize, 50000000);
  EXPECT_EQ(c.zero.stage3ParamPersistenceThreshold, 100000);
  EXPECT_EQ(c.zero.stage3MaxLiveParameters, 1000000000);
}

TEST(ConfigTest, ZeroErrors) {
  expectErrors({
      {R"({"zero_optimization": {"stage": -1}})",
       "ds_config.json: $.zero_optimization.stage: must be 0, 1, 2 or 3, got "
       "-1"},
      {R"({"zero_optimization": {"reduce_scatter": "yes"}})",
       "ds_config.json: $.zero_optimization.reduce_scatter: expected a "
       "boolean, got a string"},
  });
}

TEST(ConfigTest, ActivationCheckpointingParsesEveryKey) {
  DsConfig c = parseOk(R"({"activation_checkpointing": {
      "partition_activations": true, "cpu_checkpointing": true,
      "contiguous_memory_optimization": true, "number_checkpoints": 4,
      "synchronize_checkpoint_boundary": true, "profile": true}})");
  const auto &a = c.activationCheckpointing;
  EXPECT_TRUE(a.partitionActivations);
  EXPECT_TRUE(a.cpuCheckpointing);
  EXPECT_TRUE(a.contiguousMemoryOptimization);
  EXPECT_EQ(a.numberCheckpoints, 4);
  EXPECT_TRUE(a.synchronizeCheckpointBoundary);
  EXPECT_TRUE(a.profile);

  c = parseOk(R"({"activation_checkpointing": {"number_checkpoints": null}})");
  EXPECT_EQ(c.activationCheckpointing.numberCheckpoints, -1);
  EXPECT_FALSE(c.activationCheckpointing.partitionActivations);
}

TEST(ConfigTest, GradientClippingAndIgnoredKeys) {
  DsConfig c = parseOk(R"({"gradient_clipping": 1.0, "steps_per_print": 10,
      "wall_clock_breakdown": false, "dump_state": false,
      "prescale_gradients": true, "gradient_predivide_factor": 2.0,
      "zero_allow_untested_optimizer": true,
      "train_micro_batch_size_per_gpu": 2})");
  EXPECT_EQ(c.gradientClipping, 1.0);
  // Each key that changes nothing in dsc says why, unless it is off.
  const std::string comm =
      ": has no effect in dsc: it tunes how DeepSpeed groups its "
      "collectives; dsc's plan fixes every collective and its buffer at "
      "compile time";
  EXPECT_EQ(c.notes,
            (std::vector<std::string>{
                "ds_config.json: $.gradient_predivide_factor" + comm,
                "ds_config.json: $.prescale_gradients" + comm,
                "ds_config.json: $.zero_allow_untested_optimizer: has no "
                "effect in dsc: dsc's optimizers are its own, each tested "
                "under every ZeRO stage"}));
  DsConfig plain = parseOk(R"({"gradient_clipping": 1.0,
                               "train_micro_batch_size_per_gpu": 2})");
  EXPECT_EQ(c, plain);
}

// DeepSpeed features dsc lacks, switched off: accepted without a word, as
// DeepSpeed accepts them; switched on (or configured without "enabled":
// false), refused by name.
TEST(ConfigTest, SwitchedOffFeaturesAreAccepted) {
  DsConfig c = parseOk(R"({"train_micro_batch_size_per_gpu": 2,
      "flops_profiler": {"enabled": false, "profile_step": 1},
      "comms_logger": {"enabled": false}, "memory_breakdown": false,
      "amp": {"enabled": false, "opt_level": "O1"},
      "curriculum_learning": {"enabled": false},
      "comet": {"enabled": false}, "autotuning": {"enabled": false},
      "zero_optimization": {"stage": 1, "cpu_offload": false,
                            "zero_quantized_weights": false,
                            "zero_quantized_gradients": false},
      "optimizer": {"type": "AdamW", "params": {"amsgrad": false}},
      "fp16": {"fp16_master_weights_and_grads": false}})");
  EXPECT_TRUE(c.notes.empty());
  DsConfig plain = parseOk(R"({"train_micro_batch_size_per_gpu": 2,
      "zero_optimization": {"stage": 1},
      "optimizer": {"type": "AdamW"}})");
  EXPECT_EQ(c, plain);
  EXPECT_EQ(errorOf(R"({"amp": {"opt_level": "O1"}})"),
            "ds_config.json: $.amp: not supported yet (use bf16 or fp16 "
            "(docs/precision.md))");
  EXPECT_EQ(errorOf(R"({"amp": {"enabled": "false"}})"),
            "ds_config.json: $.amp: not supported yet (use bf16 or fp16 "
            "(docs/precision.md))");
}

// The checks across sections report with the others, not after they are
// fixed: a batch error and fp16 + bf16 in one run.
TEST(ConfigTest, CrossSectionProblemsComeInTheSameRun) {
  DsConfig config;
  std::string error;
  EXPECT_FALSE(parseDsConfig(
      R"({"train_batch_size": 7, "train_micro_batch_size_per_gpu": 2,
          "gradient_accumulation_steps": 2, "fp16": {"enabled": true},
          "bf16": {"enabled": true}, "communication_data_type": "fp16"})",
      kFile, 1, 4, config, error));
  EXPECT_EQ(error,
            "ds_config.json: $.train_batch_size: 7 != "
            "train_micro_batch_size_per_gpu 2 * gradient_accumulation_steps "
            "2 * world size 1 (= 4)\n"
            "ds_config.json: $.bf16.enabled: fp16 and bf16 cannot both be "
            "enabled");
  EXPECT_EQ(errorOf(R"({"communication_data_type": "bf16"})"),
            "ds_config.json: $.communication_data_type: \"bf16\" needs "
            "bf16.enabled: dsc communicates in the model's dtype or in fp32");
}

// torch.compile's section and torch.optim's `fused` are accepted with a
// note saying why they change nothing in dsc.
TEST(ConfigTest, CompileAndFusedAreNotedAsWithoutEffect) {
  DsConfig c = parseOk(R"({"train_micro_batch_size_per_gpu": 2,
      "compile": {"deepcompile": true},
      "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "fused": true}}})");
  ASSERT_EQ(c.notes.size(), 2u);
  EXPECT_EQ(c.notes[0], "ds_config.json: $.compile: has no effect in dsc: dsc "
                        "compiles the whole training step ahead of time, not "
                        "through torch.compile");
  EXPECT_EQ(c.notes[1], "ds_config.json: $.optimizer.params.fused: has no "
                        "effect in dsc: dsc's AdamW is always one fused "
                        "kernel over flat buffers");
  EXPECT_TRUE(parseOk(R"({"train_micro_batch_size_per_gpu": 2,
                          "compile": {"enabled": false}})")
                  .notes.empty());
  EXPECT_EQ(errorOf(R"({"compile": true})"),
            "ds_config.json: $.compile: expected an object, got a boolean");
  EXPECT_EQ(errorOf(R"({"optimizer": {"type": "AdamW",
                                      "params": {"fused": 1}}})"),
            "ds_config.json: $.optimizer.params.fused: expected a boolean, "
            "got a number");
}

TEST(ConfigTest, AutoValuesResolveToDefaults) {
  // A Hugging Face style config: "auto" wherever the trainer would fill in.
  DsConfig c = parseOk(R"({
      "train_micro_batch_size_per_gpu": 2,
      "gradient_clipping": "auto",
      "optimizer": {"type": "AdamW", "params": {"lr": 5e-4, "betas": "auto",
                    "eps": "auto", "weight_decay": "auto"}},
      "scheduler": {"type": "WarmupDecayLR", "params": {
          "total_num_steps": 100, "warmup_min_lr": "auto",
          "warmup_max_lr": "auto", "warmup_num_steps": "auto"}},
      "fp16": {"enabled": "auto", "loss_scale": 0},
      "bf16": {"enabled": "auto"},
      "zero_optimization": {"stage": 2, "reduce_bucket_size": "auto",
                            "overlap_comm": "auto"}})");
  // Where Hugging Face's Trainer would fill the key, its TrainingArguments
  // default (max_grad_norm 1, weight_decay 0, warmup_steps 0); else
  // DeepSpeed's.
  EXPECT_EQ(c.gradientClipping, 1.0);
  EXPECT_EQ(c.optimizer.beta2, 0.999);
  EXPECT_EQ(c.optimizer.weightDecay, 0.0);
  EXPECT_EQ(c.scheduler.warmupMaxLr, 5e-4); // the optimizer's lr
  EXPECT_EQ(c.scheduler.warmupNumSteps, 0);
  EXPECT_FALSE(c.fp16.enabled);
  EXPECT_EQ(c.zero.reduceBucketSize, 500000000);
  // The full list, in the order the sections are read.
  std::vector<std::string> expected = {
      "ds_config.json: $.gradient_clipping: \"auto\" resolved to 1 (Hugging "
      "Face TrainingArguments' default max_grad_norm)",
      "ds_config.json: $.optimizer.params.eps: \"auto\" resolved to 1e-08 "
      "(Hugging Face TrainingArguments' default adam_epsilon)",
      "ds_config.json: $.optimizer.params.weight_decay: \"auto\" resolved to "
      "0 (Hugging Face TrainingArguments' default weight_decay)",
      "ds_config.json: $.optimizer.params.betas: \"auto\" resolved to [0.9, "
      "0.999] (default)",
      "ds_config.json: $.scheduler.params.warmup_min_lr: \"auto\" resolved "
      "to 0 (default)",
      "ds_config.json: $.scheduler.params.warmup_max_lr: \"auto\" resolved "
      "to 0.0005 (optimizer.params.lr)",
      "ds_config.json: $.scheduler.params.warmup_num_steps: \"auto\" "
      "resolved to 0 (Hugging Face TrainingArguments' default warmup_steps)",
      "ds_config.json: $.fp16.enabled: \"auto\" resolved to false (default)",
      "ds_config.json: $.bf16.enabled: \"auto\" resolved to false (default)",
      "ds_config.json: $.zero_optimization.reduce_bucket_size: \"auto\" "
      "resolved to 500000000 (default)",
      "ds_config.json: $.zero_optimization.overlap_comm: \"auto\" resolved "
      "to false (default)",
  };
  EXPECT_EQ(c.notes, expected);
}

//===----------------------------------------------------------------------===//
// Canonical JSON
//===----------------------------------------------------------------------===//

constexpr const char *kFullConfig = R"({
  "train_batch_size": 64,
  "gradient_accumulation_steps": 4,
  "gradient_clipping": 0.5,
  "optimizer": {"type": "adam", "params": {"lr": 0.1, "betas": [0.85, 0.97],
                "eps": 1e-7, "weight_decay": 0.003}},
  "scheduler": {"type": "WarmupCosineLR", "params": {"total_num_steps": 777,
                "warmup_min_ratio": 0.3, "warmup_num_steps": 11,
                "warmup_type": "linear", "cos_min_ratio": 0.02}},
  "fp16": {"enabled": true, "loss_scale": 0, "initial_scale_power": 20,
           "loss_scale_window": 300, "hysteresis": 4,
           "min_loss_scale": 0.25},
  "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"},
                        "offload_param": {"device": "cpu"},
                        "reduce_bucket_size": 123456789,
                        "contiguous_gradients": false, "overlap_comm": true,
                        "stage3_prefetch_bucket_size": 7,
                        "stage3_param_persistence_threshold": 8,
                        "stage3_max_live_parameters": 9},
  "activation_checkpointing": {"partition_activations": true,
                               "cpu_checkpointing": false,
                               "contiguous_memory_optimization": true,
                               "number_checkpoints": 6,
                               "synchronize_checkpoint_boundary": false,
                               "profile": true},
  "steps_per_print": 100
})";

TEST(ConfigTest, ToJsonRoundTrips) {
  const char *configs[] = {
      "{}",
      kFullConfig,
      R"({"scheduler": {"type": "WarmupLR", "params": {"warmup_min_lr": 0.01,
          "warmup_max_lr": 0.3, "warmup_num_steps": 7}},
          "bf16": {"enabled": true}})",
      R"({"scheduler": {"type": "WarmupDecayLR", "params": {
          "total_num_steps": 10000, "warmup_max_lr": 0.1}},
          "optimizer": {"type": "Adam"}})",
      // -0 reads as 0 (ConfigFuzzer: "-0" in the canonical JSON read back
      // as the integer 0).
      R"({"gradient_clipping": -0.0,
          "optimizer": {"type": "AdamW", "params": {"lr": -0.0}}})",
  };
  for (const char *text : configs) {
    SCOPED_TRACE(text);
    DsConfig c = parseOk(text, /*worldSize=*/2);
    std::string canonical = toJson(c);
    DsConfig again = parseOk(canonical, /*worldSize=*/2);
    EXPECT_EQ(again, c) << canonical;
    EXPECT_EQ(toJson(again), canonical);
    // Only the notes every parse of such a file gives: DeepSpeed keys
    // without effect in dsc (no "auto" is left to resolve).
    for (const std::string &note : again.notes)
      EXPECT_NE(note.find("has no effect in dsc"), std::string::npos) << note;
  }
}

TEST(ConfigTest, ToJsonIsExplicitAndDeepSpeedShaped) {
  DsConfig c = parseOk(kFullConfig, /*worldSize=*/2);
  llvm::Expected<llvm::json::Value> v = llvm::json::parse(toJson(c));
  ASSERT_TRUE(bool(v));
  const llvm::json::Object *root = v->getAsObject();
  ASSERT_TRUE(root);
  EXPECT_EQ(root->getInteger("train_batch_size"), 64);
  EXPECT_EQ(root->getInteger("train_micro_batch_size_per_gpu"), 8);
  EXPECT_EQ(root->getInteger("gradient_accumulation_steps"), 4);
  EXPECT_EQ(root->getObject("optimizer")->getString("type"), "Adam");
  EXPECT_EQ(root->getObject("scheduler")->getString("type"), "WarmupCosineLR");
  EXPECT_EQ(root->getObject("zero_optimization")
                ->getObject("offload_param")
                ->getString("device"),
            "cpu");
  EXPECT_FALSE(root->get("steps_per_print")); // ignored keys are dropped

  // A constant lr has no scheduler, as in DeepSpeed; no checkpoint count is
  // null.
  llvm::Expected<llvm::json::Value> d =
      llvm::json::parse(toJson(parseOk("{}")));
  ASSERT_TRUE(bool(d));
  EXPECT_FALSE(d->getAsObject()->get("scheduler"));
  const llvm::json::Value *n = d->getAsObject()
                                   ->getObject("activation_checkpointing")
                                   ->get("number_checkpoints");
  ASSERT_TRUE(n);
  EXPECT_EQ(n->kind(), llvm::json::Value::Null);
}

TEST(ConfigTest, EqualityComparesEveryValueButNotes) {
  DsConfig a = parseOk(kFullConfig, 2);
  DsConfig b = a;
  b.notes.push_back("x");
  EXPECT_EQ(a, b);
  b = a;
  b.scheduler.cosMinRatio = 0.5;
  EXPECT_NE(a, b);
  b = a;
  b.zero.offloadParam = "none";
  EXPECT_NE(a, b);
  b = a;
  b.activationCheckpointing.profile = false;
  EXPECT_NE(a, b);
}

// One run reports every problem of the file, one line each: the keys of a
// section in sorted order, the sections in the order they are read.
TEST(ConfigTest, EveryProblemOfAFileInOneRun) {
  DsConfig config;
  std::string error;
  EXPECT_FALSE(parseDsConfig(
      R"({"zz": 1, "aa": 2, "comet": {"enabled": true},
          "optimizer": {"type": "AdamW", "params": {"lr": "x", "eps": 0}},
          "zero_optimization": {"stage": 5, "reduce_bucket_size": 0},
          "fp16": {"enabled": true, "hysteresis": 0}})",
      kFile, 1, 4, config, error));
  EXPECT_EQ(error, "ds_config.json: $.aa: unknown key\n"
                   "ds_config.json: $.comet: not supported yet (dsc "
                   "writes tensorboard, csv_monitor and wandb (through "
                   "dsc-train and dsc.train), and dsrun --metrics every "
                   "step's loss, lr, grad norm, loss scale, tokens/s and "
                   "memory as JSON lines)\n"
                   "ds_config.json: $.zz: unknown key\n"
                   "ds_config.json: $.optimizer.params.lr: expected a number, "
                   "got a string\n"
                   "ds_config.json: $.optimizer.params.eps: must be > 0, got "
                   "0\n"
                   "ds_config.json: $.fp16.hysteresis: must be >= 1, got 0\n"
                   "ds_config.json: $.zero_optimization.stage: must be 0, 1, "
                   "2 or 3, got 5\n"
                   "ds_config.json: $.zero_optimization.reduce_bucket_size: "
                   "must be >= 1, got 0");
}

// A file with very many problems shows the first 20 and says there are more.
TEST(ConfigTest, ProblemsAreCappedAtTwenty) {
  std::string text = "{";
  for (int i = 0; i < 25; ++i)
    text += (i ? ", \"k" : "\"k") + std::to_string(100 + i) + "\": 1";
  text += "}";
  DsConfig config;
  std::string error;
  EXPECT_FALSE(parseDsConfig(text, kFile, 1, 4, config, error));
  llvm::SmallVector<llvm::StringRef> lines;
  llvm::StringRef(error).split(lines, '\n');
  ASSERT_EQ(lines.size(), 21u) << error;
  EXPECT_EQ(lines[0], "ds_config.json: $.k100: unknown key");
  EXPECT_EQ(lines[19], "ds_config.json: $.k119: unknown key");
  EXPECT_EQ(lines[20], "ds_config.json: more problems not shown");
}

} // namespace
