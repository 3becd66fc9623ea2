//===- ConfigMonitorsTest.cpp - monitors, profilers and loggers -----------===//

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

// wall_clock_breakdown and comms_logger reach the plan (dsrun times the
// steps: test/e2e/wall-clock.test); prof_ops takes DeepSpeed's names for
// the collectives dsc's plans run and refuses names DeepSpeed has not.
TEST(ConfigTest, TimingSectionsAreRead) {
  DsConfig c = parseOk(R"({"train_micro_batch_size_per_gpu": 2,
      "wall_clock_breakdown": true, "comms_logger": {"enabled": true,
      "verbose": true, "prof_all": false, "debug": false,
      "prof_ops": ["all_reduce", "all_gather_into_tensor", "send"]}})");
  EXPECT_TRUE(c.notes.empty());
  EXPECT_TRUE(c.wallClockBreakdown);
  EXPECT_TRUE(c.commsLogger.enabled && c.commsLogger.verbose);
  EXPECT_FALSE(c.commsLogger.allOps);
  EXPECT_EQ(c.commsLogger.ops,
            (std::vector<std::string>{"all_reduce", "all_gather"}));
  // prof_ops counts only once prof_all is false, as in DeepSpeed.
  DsConfig all = parseOk(R"({"train_micro_batch_size_per_gpu": 2,
      "comms_logger": {"enabled": true, "prof_ops": ["broadcast"]}})");
  EXPECT_TRUE(all.commsLogger.allOps);
  EXPECT_TRUE(all.commsLogger.ops.empty());
  DsConfig bad;
  std::string error;
  EXPECT_FALSE(parseDsConfig(R"({"comms_logger": {"enabled": true,
                        "prof_all": false, "prof_ops": ["allreduce", 3]}})",
                             kFile, 1, 4, bad, error));
  EXPECT_EQ(error,
            "ds_config.json: $.comms_logger.prof_ops[0]: unknown operation "
            "'allreduce' (dsc's plans run all_reduce, all_gather, "
            "reduce_scatter and broadcast)\n"
            "ds_config.json: $.comms_logger.prof_ops[1]: expected a string, "
            "got a number");
  EXPECT_EQ(errorOf(R"({"comms_logger": {"prof_ops": "all_reduce"}})"),
            "ds_config.json: $.comms_logger.prof_ops: expected a list of "
            "operation names, got a string");
  EXPECT_EQ(parseOk(R"({"train_micro_batch_size_per_gpu": 2,
                        "comms_logger": {"debug": true}})")
                .notes,
            std::vector<std::string>{
                "ds_config.json: $.comms_logger.debug: has no effect in dsc: "
                "DeepSpeed adds the calling function's name; dsc's "
                "collectives are the plan's instructions, named by module in "
                "dsrun --trace"});
}

} // namespace
