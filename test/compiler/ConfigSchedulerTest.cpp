//===- ConfigSchedulerTest.cpp - LRRangeTest and OneCycle in ds_config ----===//
//
// The range test and the one-cycle policy read with DeepSpeed's defaults
// (deepspeed/runtime/lr_schedules.py), OneCycle's momentum cycling refused
// by name, and each problem of the section named by its path. Their
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

TEST(ConfigSchedulerTest, CyclicSchedulerErrors) {
  expectErrors({
      {R"({"scheduler": {"type": "OneCycle", "params": {
          "cycle_min_lr": 1e-4, "cycle_max_lr": 1e-3}}})",
       "ds_config.json: $.scheduler.params.cycle_momentum: true (DeepSpeed's "
       "default) is not supported yet: it moves AdamW's beta1 every step, "
       "which dsc compiles into the update; set \"cycle_momentum\": false to "
       "cycle the learning rate alone"},
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
