//===- ConfigMonitorsTest.cpp - tensorboard, csv_monitor, wandb -----------===//

#include "test/compiler/ConfigTestSupport.h"

using namespace dsc::configtest;

namespace {

TEST(ConfigTest, MonitorsAreAcceptedAndNotedWhenEnabled) {
  DsConfig c = parseOk(R"({"train_micro_batch_size_per_gpu": 2,
      "tensorboard": {"enabled": true, "output_path": "logs/",
                      "job_name": "run1"},
      "csv_monitor": {"enabled": false, "output_path": "csv/"},
      "wandb": {"enabled": true, "project": "dsc", "team": "t",
                "group": "g"}})");
  const std::string written = ": written by dsc-train and dsc.train "
                              "(Python); dsrun alone writes --metrics JSON "
                              "lines";
  EXPECT_EQ(c.notes,
            (std::vector<std::string>{"ds_config.json: $.tensorboard" + written,
                                      "ds_config.json: $.wandb" + written}));
}

TEST(ConfigTest, MonitorErrors) {
  expectErrors({
      {R"({"tensorboard": {"enabled": "yes"}})",
       "ds_config.json: $.tensorboard.enabled: expected a boolean, got a "
       "string"},
      {R"({"csv_monitor": {"enabled": true, "output_path": 3}})",
       "ds_config.json: $.csv_monitor.output_path: expected a string, got a "
       "number"},
      {R"({"wandb": {"enabled": true, "projct": "x"}})",
       "ds_config.json: $.wandb.projct: unknown key (did you mean "
       "'project'?)"},
      {R"({"tensorboard": true})",
       "ds_config.json: $.tensorboard: expected an object, got a boolean"},
  });
}

TEST(ConfigTest, FlopsProfilerKeys) {
  DsConfig c = parseOk(R"({"flops_profiler": {"enabled": true,
      "profile_step": 5, "module_depth": 2, "top_modules": 3,
      "detailed": false, "output_file": null}})");
  EXPECT_TRUE(c.flopsProfiler.enabled);
  EXPECT_EQ(c.flopsProfiler.profileStep, 5);
  EXPECT_EQ(c.flopsProfiler.moduleDepth, 2);
  EXPECT_EQ(c.flopsProfiler.topModules, 3);
  // DeepSpeed's defaults, and the resolved config written back reads the
  // same.
  c = parseOk(R"({"flops_profiler": {"enabled": true}})");
  EXPECT_EQ(c.flopsProfiler.profileStep, 1);
  EXPECT_EQ(c.flopsProfiler.moduleDepth, -1);
  EXPECT_EQ(c.flopsProfiler.topModules, 1);
  EXPECT_TRUE(parseOk(toJson(c)) == c);
  expectErrors({
      {R"({"flops_profiler": {"enabled": true, "profile_step": 0}})",
       "ds_config.json: $.flops_profiler.profile_step: must be >= 1, got 0"},
      {R"({"flops_profiler": {"enabled": true, "module_depth": -2}})",
       "ds_config.json: $.flops_profiler.module_depth: must be >= -1, got "
       "-2"},
      {R"({"flops_profiler": {"enabled": true, "top_modules": 0}})",
       "ds_config.json: $.flops_profiler.top_modules: must be >= 1, got 0"},
  });
}

} // namespace
