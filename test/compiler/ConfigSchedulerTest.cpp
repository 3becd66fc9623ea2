//===- ConfigSchedulerTest.cpp - LRRangeTest and OneCycle in ds_config ----===//
//
// The range test and the one-cycle policy read with DeepSpeed's defaults
// (deepspeed/runtime/lr_schedules.py), OneCycle's momentum cycling as
// DeepSpeed sets the optimizer's betas, and each problem of the section
// named by its path. Their
// learning rates step for step against DeepSpeed: test/e2e/lr-deepspeed.test.
//
//===----------------------------------------------------------------------===//
#include "ConfigTestSupport.h"

namespace {

using namespace dsc::configtest;

TEST(ConfigSchedulerTest, LRRangeTestTakesDeepSpeedsDefaults) {
  DsConfig c = parseOk(R"({"scheduler": {"type": "LRRangeTest"}})");
  EXPECT_EQ(c.scheduler.type, "LRRangeTest");
  EXPECT_EQ(c.scheduler.rangeMinLr, 1e-3);
  EXPECT_EQ(c.scheduler.rangeStepSize, 2000);
  EXPECT_EQ(c.scheduler.rangeStepRate, 1.0);
  EXPECT_FALSE(c.scheduler.rangeStaircase);
  c = parseOk(R"({"scheduler": {"type": "LRRangeTest", "params": {
      "lr_range_test_min_lr": 1e-5, "lr_range_test_step_size": 50,
      "lr_range_test_step_rate": 3, "lr_range_test_staircase": true}}})");
  EXPECT_EQ(c.scheduler.rangeMinLr, 1e-5);
  EXPECT_EQ(c.scheduler.rangeStepSize, 50);
  EXPECT_EQ(c.scheduler.rangeStepRate, 3.0);
  EXPECT_TRUE(c.scheduler.rangeStaircase);
}

TEST(ConfigSchedulerTest, OneCycleSecondHalfDefaultsToTheFirst) {
  DsConfig c = parseOk(R"({"scheduler": {"type": "OneCycle", "params": {
      "cycle_min_lr": 1e-4, "cycle_max_lr": 1e-2, "cycle_first_step_size": 30,
      "cycle_first_stair_count": 5, "cycle_momentum": false}}})");
  EXPECT_EQ(c.scheduler.type, "OneCycle");
  EXPECT_EQ(c.scheduler.cycleMinLr, 1e-4);
  EXPECT_EQ(c.scheduler.cycleMaxLr, 1e-2);
  EXPECT_EQ(c.scheduler.cycleFirstStepSize, 30.0);
  EXPECT_EQ(c.scheduler.cycleSecondStepSize, 30.0);
  EXPECT_EQ(c.scheduler.cycleFirstStairCount, 5);
  EXPECT_EQ(c.scheduler.cycleSecondStairCount, 5);
  EXPECT_EQ(c.scheduler.decayLrRate, 0.0);
  EXPECT_EQ(c.scheduler.decayStepSize, 0.0);
  c = parseOk(R"({"scheduler": {"type": "OneCycle", "params": {
      "cycle_min_lr": 0, "cycle_max_lr": 1, "cycle_second_step_size": 0,
      "cycle_second_stair_count": 2, "decay_lr_rate": 0.1,
      "decay_step_size": 10, "cycle_momentum": false}}})");
  EXPECT_EQ(c.scheduler.cycleFirstStepSize, 2000.0);
  EXPECT_EQ(c.scheduler.cycleSecondStepSize, 0.0);
  EXPECT_EQ(c.scheduler.cycleFirstStairCount, 0);
  EXPECT_EQ(c.scheduler.cycleSecondStairCount, 2);
  EXPECT_EQ(c.scheduler.decayLrRate, 0.1);
  EXPECT_EQ(c.scheduler.decayStepSize, 10.0);
}

// cycle_momentum is DeepSpeed's default: AdamW's (and Lion's) betas become
// (cycled beta1, 0.99), said in a note; SGD and Adagrad have no betas, and
// DeepSpeed turns the cycling off for them.
TEST(ConfigSchedulerTest, OneCycleCyclesTheMomentumOfOptimizersWithBetas) {
  DsConfig c = parseOk(
      R"({"train_micro_batch_size_per_gpu": 4, "optimizer": {"type": "AdamW", "params": {
      "lr": 1e-3, "betas": [0.9, 0.95]}},
      "scheduler": {"type": "OneCycle", "params": {
      "cycle_min_lr": 1e-4, "cycle_max_lr": 1e-3}}})");
  EXPECT_TRUE(c.scheduler.cycleMomentum);
  EXPECT_EQ(c.scheduler.cycleMinMom, 0.8);
  EXPECT_EQ(c.scheduler.cycleMaxMom, 0.9);
  EXPECT_EQ(c.scheduler.decayMomRate, 0.0);
  EXPECT_EQ(c.optimizer.beta1, 0.8);
  EXPECT_EQ(c.optimizer.beta2, 0.99);
  EXPECT_EQ(c.notes, std::vector<std::string>{
                         "ds_config.json: $.scheduler.params.cycle_momentum: "
                         "beta1 cycles between cycle_max_mom 0.9 and "
                         "cycle_min_mom 0.8 and beta2 is 0.99, as DeepSpeed's "
                         "OneCycle sets them (optimizer.params.betas [0.9, "
                         "0.95] is not used)"});

  c = parseOk(
      R"({"train_micro_batch_size_per_gpu": 4, "optimizer": {"type": "Lion"},
      "scheduler": {"type": "OneCycle", "params": {
      "cycle_min_lr": 1e-4, "cycle_max_lr": 1e-3, "cycle_min_mom": 0.85,
      "cycle_max_mom": 0.95, "decay_mom_rate": 0.01}}})");
  EXPECT_TRUE(c.scheduler.cycleMomentum);
  EXPECT_EQ(c.scheduler.cycleMinMom, 0.85);
  EXPECT_EQ(c.scheduler.cycleMaxMom, 0.95);
  EXPECT_EQ(c.scheduler.decayMomRate, 0.01);

  c = parseOk(
      R"({"train_micro_batch_size_per_gpu": 4, "optimizer": {"type": "SGD", "params": {"momentum": 0.9}},
      "scheduler": {"type": "OneCycle", "params": {
      "cycle_min_lr": 1e-4, "cycle_max_lr": 1e-3}}})");
  EXPECT_FALSE(c.scheduler.cycleMomentum);
  EXPECT_EQ(c.notes, std::vector<std::string>{
                         "ds_config.json: $.scheduler.params.cycle_momentum: "
                         "true has no effect: SGD has no betas to cycle "
                         "(DeepSpeed turns it off too)"});

  c = parseOk(R"({"train_micro_batch_size_per_gpu": 4,
      "scheduler": {"type": "OneCycle", "params": {
      "cycle_min_lr": 1e-4, "cycle_max_lr": 1e-3, "cycle_momentum": false}}})");
  EXPECT_FALSE(c.scheduler.cycleMomentum);
  EXPECT_EQ(c.optimizer.beta2, 0.999);
  EXPECT_TRUE(c.notes.empty());
}

TEST(ConfigSchedulerTest, CyclicSchedulerErrors) {
  expectErrors({
      {R"({"scheduler": {"type": "OneCycle", "params": {
          "cycle_min_lr": 1e-4, "cycle_max_lr": 1e-3, "cycle_max_mom": 1}}})",
       "ds_config.json: $.scheduler.params.cycle_max_mom: must be in [0, 1), "
       "got 1"},
      {R"({"scheduler": {"type": "OneCycle", "params": {
          "cycle_min_lr": 1e-4, "cycle_max_lr": 1e-3,
          "cycle_momentum": "yes"}}})",
       "ds_config.json: $.scheduler.params.cycle_momentum: expected a "
       "boolean, got a string"},
      {R"({"scheduler": {"type": "OneCycle", "params": {
          "cycle_max_lr": 1e-3, "cycle_momentum": false}}})",
       "ds_config.json: $.scheduler.params.cycle_min_lr: required by "
       "OneCycle but missing"},
      {R"({"scheduler": {"type": "OneCycle", "params": {
          "cycle_min_lr": 1e-4, "cycle_max_lr": 1e-3,
          "cycle_first_step_size": 0, "cycle_momentum": false}}})",
       "ds_config.json: $.scheduler.params.cycle_first_step_size: must be > "
       "0, got 0"},
      {R"({"scheduler": {"type": "LRRangeTest",
                         "params": {"lr_range_test_step_size": 0}}})",
       "ds_config.json: $.scheduler.params.lr_range_test_step_size: must be "
       ">= 1, got 0"},
      // Another schedule's key, as DeepSpeed's constructor refuses it.
      {R"({"scheduler": {"type": "OneCycle", "params": {
          "cycle_min_lr": 1e-4, "cycle_max_lr": 1e-3,
          "warmup_num_steps": 10, "cycle_momentum": false}}})",
       "ds_config.json: $.scheduler.params.warmup_num_steps: unknown key"},
  });
}

} // namespace
