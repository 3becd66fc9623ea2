//===- ConfigPrecisionTest.cpp - fp16, bf16, communication_data_type ------===//

#include "test/compiler/ConfigTestSupport.h"

using namespace dsc::configtest;

namespace {

TEST(ConfigTest, PrecisionParsesEveryKey) {
  DsConfig c = parseOk(R"({"fp16": {"enabled": true, "loss_scale": 128,
      "initial_scale_power": 12, "loss_scale_window": 500, "hysteresis": 3,
      "min_loss_scale": 0.5, "auto_cast": false}, "bf16": {"enabled": false}})");
  EXPECT_TRUE(c.fp16.enabled);
  EXPECT_EQ(c.fp16.lossScale, 128.0);
  EXPECT_EQ(c.fp16.initialScalePower, 12);
  EXPECT_EQ(c.fp16.lossScaleWindow, 500);
  EXPECT_EQ(c.fp16.hysteresis, 3);
  EXPECT_EQ(c.fp16.minLossScale, 0.5);
  EXPECT_FALSE(c.bf16.enabled);

  c = parseOk(R"({"bf16": {"enabled": true}})");
  EXPECT_TRUE(c.bf16.enabled);
  EXPECT_FALSE(c.fp16.enabled);
  // DeepSpeed's older name.
  c = parseOk(R"({"bfloat16": {"enabled": true}})");
  EXPECT_TRUE(c.bf16.enabled);
}

TEST(ConfigTest, PrecisionConsecutiveHysteresis) {
  EXPECT_FALSE(parseOk("{}").fp16.consecutiveHysteresis);
  DsConfig c = parseOk(R"({"fp16": {"consecutive_hysteresis": true}})");
  EXPECT_TRUE(c.fp16.consecutiveHysteresis);
  DsConfig again = parseOk(toJson(c));
  EXPECT_EQ(again, c);
  again.fp16.consecutiveHysteresis = false;
  EXPECT_NE(again, c);
  expectErrors({{R"({"fp16": {"consecutive_hysteresis": 1}})",
                 "ds_config.json: $.fp16.consecutive_hysteresis: expected a "
                 "boolean, got a number"}});
}

TEST(ConfigTest, PrecisionBf16CheckGradOverflow) {
  EXPECT_TRUE(parseOk("{}").bf16.checkGradOverflow);
  DsConfig c =
      parseOk(R"({"bf16": {"enabled": true, "check_grad_overflow": false}})");
  EXPECT_FALSE(c.bf16.checkGradOverflow);
  DsConfig again = parseOk(toJson(c));
  EXPECT_EQ(again, c);
  again.bf16.checkGradOverflow = true;
  EXPECT_NE(again, c);
  expectErrors({{R"({"bf16": {"check_grad_overflow": "yes"}})",
                 "ds_config.json: $.bf16.check_grad_overflow: expected a "
                 "boolean, got a string"}});
}

TEST(ConfigTest, CommunicationDataType) {
  EXPECT_EQ(parseOk("{}").communicationDataType, "");
  DsConfig c = parseOk(
      R"({"bf16": {"enabled": true}, "communication_data_type": "fp32"})");
  EXPECT_EQ(c.communicationDataType, "fp32");
  DsConfig again = parseOk(toJson(c));
  EXPECT_EQ(again, c);
  again.communicationDataType = "";
  EXPECT_NE(again, c);
  EXPECT_EQ(parseOk(R"({"fp16": {"enabled": true},
                        "communication_data_type": "fp16"})")
                .communicationDataType,
            "fp16");
  expectErrors({
      {R"({"communication_data_type": "fp8"})",
       "ds_config.json: $.communication_data_type: unsupported value 'fp8' "
       "(supported: fp32, fp16, bf16)"},
      {R"({"bf16": {"enabled": true}, "communication_data_type": "fp16"})",
       "ds_config.json: $.communication_data_type: \"fp16\" needs "
       "fp16.enabled: dsc communicates in the model's dtype or in fp32"},
  });
}

TEST(ConfigTest, PrecisionErrors) {
  expectErrors({
      {R"({"fp16": {"enabled": true}, "bf16": {"enabled": true}})",
       "ds_config.json: $.bf16.enabled: fp16 and bf16 cannot both be "
       "enabled"},
      {R"({"fp16": {"enabled": true}, "bfloat16": {"enabled": true}})",
       "ds_config.json: $.bfloat16.enabled: fp16 and bf16 cannot both be "
       "enabled"},
      {R"({"bf16": {"enabled": true}, "bfloat16": {"enabled": true}})",
       "ds_config.json: $.bfloat16: duplicates $.bf16 (bfloat16 is its "
       "older name)"},
      {R"({"fp16": {"auto_cast": true}})",
       "ds_config.json: $.fp16.auto_cast: true is not supported: dsc does "
       "not cast the model's inputs"},
      {R"({"bf16": {"enabled": true, "loss_scale": 0}})",
       "ds_config.json: $.bf16.loss_scale: unknown key"},
  });
}

} // namespace
