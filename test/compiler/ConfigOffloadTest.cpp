//===- ConfigOffloadTest.cpp - zero_optimization's offload sections -------===//

#include "test/compiler/ConfigTestSupport.h"

using namespace dsc::configtest;

namespace {

TEST(ConfigTest, OffloadKeysWithoutMeaningHereAreNoted) {
  DsConfig c = parseOk(R"({"zero_optimization": {"stage": 3,
      "offload_optimizer": {"device": "cpu", "pin_memory": true,
                            "buffer_count": 4, "fast_init": false,
                            "pipeline_read": false, "ratio": 1},
      "offload_param": {"device": "cpu", "pin_memory": false,
                        "buffer_size": 1e8, "max_in_cpu": 1e9,
                        "nvme_path": "/local_nvme"}}})");
  EXPECT_EQ(c.zero.offloadOptimizer, "cpu");
  EXPECT_EQ(c.zero.offloadParam, "cpu");
  const std::string nvme =
      ": has no effect in dsc: it tunes NVMe offload, which dsc does not "
      "have";
  const std::string at = "ds_config.json: $.zero_optimization.";
  EXPECT_EQ(c.notes,
            (std::vector<std::string>{
                "ds_config.json: $.train_micro_batch_size_per_gpu: not given; "
                "using 4 (dsc's default micro batch)",
                // fast_init and pipeline_read are false: nothing to say.
                at + "offload_optimizer.buffer_count" + nvme,
                at + "offload_param.buffer_size" + nvme,
                at + "offload_param.max_in_cpu" + nvme,
                at + "offload_param.nvme_path" + nvme,
                at + "offload_param.pin_memory: false has no effect in dsc: "
                     "the copies read and write the host arenas directly, "
                     "which a GPU backend allocates page-locked"}));
}

TEST(ConfigTest, OffloadErrors) {
  expectErrors({
      {R"({"zero_optimization": {"stage": 3,
           "offload_optimizer": {"device": "nvme"}}})",
       "ds_config.json: $.zero_optimization.offload_optimizer.device: "
       "\"nvme\" is not supported yet (dsc offloads to \"cpu\", host "
       "memory)"},
      {R"({"zero_optimization": {"stage": 3,
           "offload_param": {"device": "nvme", "nvme_path": "/x"}}})",
       "ds_config.json: $.zero_optimization.offload_param.device: "
       "\"nvme\" is not supported yet (dsc offloads to \"cpu\", host "
       "memory)"},
      {R"({"zero_optimization": {"stage": 3,
           "offload_param": {"device": "disk"}}})",
       "ds_config.json: $.zero_optimization.offload_param.device: "
       "unsupported value 'disk' (supported: none, cpu, nvme)"},
      {R"({"zero_optimization": {"stage": 2,
           "offload_optimizer": {"device": "cpu", "ratio": 0.3}}})",
       "ds_config.json: $.zero_optimization.offload_optimizer.ratio: 0.3 "
       "is not supported yet: dsc runs the whole optimizer on the host "
       "(ratio 1)"},
      {R"({"zero_optimization": {"stage": 2,
           "offload_param": {"device": "cpu"}}})",
       "ds_config.json: $.zero_optimization.offload_param.device: 'cpu' "
       "needs ZeRO stage 3, got stage 2"},
      {R"({"zero_optimization": {"offload_optimizer": {"device": "cpu"}}})",
       "ds_config.json: $.zero_optimization.offload_optimizer.device: 'cpu' "
       "needs ZeRO stage 1, 2 or 3, got stage 0"},
      {R"({"zero_optimization": {"stage": 3,
           "offload_param": {"device": "cpu", "ratio": 1}}})",
       "ds_config.json: $.zero_optimization.offload_param.ratio: unknown "
       "key"},
  });
}

} // namespace
