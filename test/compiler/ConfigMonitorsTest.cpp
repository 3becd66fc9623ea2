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

} // namespace
