//===- ConfigOptimizerTest.cpp - the optimizer and scheduler sections ----===//
//
// ds_config.json's "optimizer" (each type's defaults, its own parameters,
// the errors) and "scheduler" sections; ConfigTest.cpp has the rest.
//
//===----------------------------------------------------------------------===//

#include "test/compiler/ConfigTestSupport.h"

using namespace dsc::configtest;

namespace {

TEST(ConfigTest, OptimizerParsesEveryKey) {
  DsConfig c = parseOk(R"({"optimizer": {"type": "AdamW", "params": {
      "lr": 3e-4, "betas": [0.8, 0.95], "eps": 1e-6, "weight_decay": 0.1,
      "adam_w_mode": false, "bias_correction": true, "torch_adam": true}}})");
  EXPECT_EQ(c.optimizer.type, "AdamW");
  EXPECT_EQ(c.optimizer.lr, 3e-4);
  EXPECT_EQ(c.optimizer.beta1, 0.8);
  EXPECT_EQ(c.optimizer.beta2, 0.95);
  EXPECT_EQ(c.optimizer.eps, 1e-6);
  EXPECT_EQ(c.optimizer.weightDecay, 0.1);
}

TEST(ConfigTest, OptimizerTypeIsCaseInsensitiveWithTorchDefaults) {
  DsConfig adam = parseOk(R"({"optimizer": {"type": "adam"}})");
  EXPECT_EQ(adam.optimizer.type, "Adam");
  EXPECT_EQ(adam.optimizer.weightDecay, 0.0);
  DsConfig adamw = parseOk(R"({"optimizer": {"type": "ADAMW",
                                             "params": {"lr": 0.1}}})");
  EXPECT_EQ(adamw.optimizer.type, "AdamW");
  EXPECT_EQ(adamw.optimizer.weightDecay, 0.01);
  EXPECT_EQ(adamw.optimizer.lr, 0.1);
  DsConfig adamW = parseOk(R"({"optimizer": {"type": "Adam", "params": {
      "weight_decay": 0.05, "adam_w_mode": true}}})");
  EXPECT_EQ(adamW.optimizer.type, "Adam");
  EXPECT_EQ(adamW.optimizer.weightDecay, 0.05);
}

TEST(ConfigTest, OptimizerErrors) {
  expectErrors({
      {R"({"optimizer": {"type": "MuAdam"}})",
       "ds_config.json: $.optimizer.type: 'MuAdam' is not supported yet (dsc "
       "implements Adam, AdamW, SGD, Lion, Adagrad, Lamb, Muon)"},
      {R"({"optimizer": {"type": "Muon", "params": {"momentum": 1}}})",
       "ds_config.json: $.optimizer.params.momentum: must be in [0, 1), got "
       "1"},
      {R"({"optimizer": {"type": "Muon", "params": {"ns_method": "svd"}}})",
       "ds_config.json: $.optimizer.params.ns_method: expected \"gram\" or "
       "\"standard\""},
      {R"({"optimizer": {"type": "Muon", "params": {"nesterov": false}}})",
       "ds_config.json: $.optimizer.params.nesterov: not a parameter of Muon "
       "(it is SGD's)"},
      {R"({"optimizer": {"type": "AdamW", "params": {"muon_lr": 0.1}}})",
       "ds_config.json: $.optimizer.params.muon_lr: not a parameter of AdamW "
       "(it is Muon's)"},
      {R"({"optimizer": {"type": "Muon", "params": {"per_head_muon": 1}}})",
       "ds_config.json: $.optimizer.params.per_head_muon: expected a "
       "boolean, got a number"},
      {R"({"optimizer": {"type": "Lamb", "params": {"per_head_muon": true}}})",
       "ds_config.json: $.optimizer.params.per_head_muon: not a parameter of "
       "Lamb (it is Muon's)"},
      {R"({"optimizer": {"type": "Muon", "params": {"adam_w_mode": false}}})",
       "ds_config.json: $.optimizer.params.adam_w_mode: false is not "
       "supported: dsc's Muon decays its AdamW half decoupled; leave "
       "adam_w_mode out"},
      {R"({"optimizer": {"type": "OneBitAdam"}})",
       "ds_config.json: $.optimizer.type: 'OneBitAdam' is not supported: it "
       "compresses gradient communication to one bit per value with error "
       "feedback, and dsc's collectives send full values (use Adam or "
       "AdamW)"},
      {R"({"optimizer": {"type": "Adamax"}})",
       "ds_config.json: $.optimizer.type: unsupported optimizer 'Adamax' "
       "(supported: Adam, AdamW, SGD, Lion, Adagrad, Lamb, Muon)"},
      {R"({"optimizer": {"params": {"lr": 0.1}}})",
       "ds_config.json: $.optimizer.type: required key is missing "
       "(supported: Adam, AdamW, SGD, Lion, Adagrad, Lamb, Muon)"},
      {R"({"optimizer": {"type": "AdamW", "params": {"max_grad_norm": 1}}})",
       "ds_config.json: $.optimizer.params.max_grad_norm: not an optimizer "
       "parameter; use gradient_clipping"},
      {R"({"optimizer": {"type": "Adam", "params": {"adam_w_mode": false}}})",
       "ds_config.json: $.optimizer.params.adam_w_mode: false is not "
       "supported: dsc applies decoupled weight decay (AdamW); use \"AdamW\" "
       "or leave adam_w_mode out"},
      {R"({"optimizer": {"type": "AdamW",
                         "params": {"bias_correction": false}}})",
       "ds_config.json: $.optimizer.params.bias_correction: false is not "
       "supported: dsc's Adam always corrects bias"},
      {R"({"optimizer": {"type": "SGD", "params": {"betas": [0.9, 0.99]}}})",
       "ds_config.json: $.optimizer.params.betas: not a parameter of SGD (it "
       "is Adam, AdamW, Lion, Lamb, Muon's)"},
      {R"({"optimizer": {"type": "SGD", "params": {"momentum": -1}}})",
       "ds_config.json: $.optimizer.params.momentum: must be >= 0, got -1"},
      {R"({"optimizer": {"type": "sgd", "params": {"nesterov": true,
                         "momentum": 0.9, "dampening": 0.1}}})",
       "ds_config.json: $.optimizer.params.nesterov: Nesterov momentum needs "
       "momentum > 0 and dampening 0, got momentum 0.9 and dampening 0.1"},
      {R"({"optimizer": {"type": "AdamW", "params": {"momentum": 0.9}}})",
       "ds_config.json: $.optimizer.params.momentum: not a parameter of AdamW "
       "(it is SGD, Muon's)"},
      {R"({"optimizer": {"type": "Lion", "params": {"eps": 1e-8}}})",
       "ds_config.json: $.optimizer.params.eps: not a parameter of Lion (it "
       "is Adam, AdamW, Adagrad, Lamb, Muon's)"},
      {R"({"optimizer": {"type": "Adagrad",
                         "params": {"initial_accumulator_value": 0.1}}})",
       "ds_config.json: $.optimizer.params.initial_accumulator_value: 0.1 is "
       "not supported yet: dsc's Adagrad starts its sum of squares at 0"},
      {R"({"optimizer": {"type": "Adagrad", "params": {"betas": [0.9, 0.9]}}})",
       "ds_config.json: $.optimizer.params.betas: not a parameter of Adagrad "
       "(it is Adam, AdamW, Lion, Lamb, Muon's)"},
      {R"({"optimizer": {"type": "Lamb", "params": {"min_coeff": 0}}})",
       "ds_config.json: $.optimizer.params.min_coeff: must be > 0, got 0"},
      {R"({"optimizer": {"type": "Lamb", "params": {"max_coeff": 0.001}}})",
       "ds_config.json: $.optimizer.params.max_coeff: must be >= min_coeff "
       "(0.01), got 0.001"},
      {R"({"optimizer": {"type": "AdamW", "params": {"max_coeff": 5}}})",
       "ds_config.json: $.optimizer.params.max_coeff: not a parameter of "
       "AdamW (it is Lamb's)"},
  });
}

// Lamb: DeepSpeed FusedLamb's defaults and its own parameters.
TEST(ConfigTest, Lamb) {
  DsConfig lamb = parseOk(R"({"optimizer": {"type": "lamb"}})");
  EXPECT_EQ(lamb.optimizer.type, "Lamb");
  EXPECT_EQ(lamb.optimizer.lr, 1e-3);
  EXPECT_EQ(lamb.optimizer.eps, 1e-8);
  EXPECT_EQ(lamb.optimizer.weightDecay, 0);
  EXPECT_EQ(lamb.optimizer.minCoeff, 0.01);
  EXPECT_EQ(lamb.optimizer.maxCoeff, 10);
  EXPECT_TRUE(lamb.optimizer.biasCorrection);
  EXPECT_FALSE(lamb.optimizer.epsInsideSqrt);
  DsConfig set = parseOk(R"({"optimizer": {"type": "Lamb", "params": {
      "lr": 0.01, "betas": [0.8, 0.9], "eps": 1e-6, "weight_decay": 0.1,
      "bias_correction": false, "eps_inside_sqrt": true, "min_coeff": 0.1,
      "max_coeff": 2}}})");
  EXPECT_EQ(set.optimizer.beta1, 0.8);
  EXPECT_EQ(set.optimizer.beta2, 0.9);
  EXPECT_EQ(set.optimizer.eps, 1e-6);
  EXPECT_EQ(set.optimizer.weightDecay, 0.1);
  EXPECT_FALSE(set.optimizer.biasCorrection);
  EXPECT_TRUE(set.optimizer.epsInsideSqrt);
  EXPECT_EQ(set.optimizer.minCoeff, 0.1);
  EXPECT_EQ(set.optimizer.maxCoeff, 2);
}

// Muon: MuonWithAuxAdam's defaults for each half, lr for both halves,
// then muon_lr / adam_lr; under a scheduler that sets every group's lr the
// halves' lrs give way to it, with a note.
TEST(ConfigTest, Muon) {
  DsConfig muon = parseOk(R"({"optimizer": {"type": "muon"}})");
  EXPECT_EQ(muon.optimizer.type, "Muon");
  EXPECT_EQ(muon.optimizer.lr, 3e-4);
  EXPECT_EQ(muon.optimizer.muonLr, 0.02);
  EXPECT_EQ(muon.optimizer.beta1, 0.9);
  EXPECT_EQ(muon.optimizer.beta2, 0.95);
  EXPECT_EQ(muon.optimizer.eps, 1e-10);
  EXPECT_EQ(muon.optimizer.weightDecay, 0);
  EXPECT_EQ(muon.optimizer.momentum, 0.95);
  EXPECT_TRUE(muon.optimizer.nesterov);
  EXPECT_EQ(muon.optimizer.nsMethod, "gram");
  EXPECT_FALSE(muon.optimizer.perHeadMuon);
  DsConfig shared = parseOk(R"({"optimizer": {"type": "Muon", "params": {
      "lr": 0.01, "momentum": 0.9, "ns_method": "standard",
      "per_head_muon": true}}})");
  EXPECT_TRUE(shared.optimizer.perHeadMuon);
  EXPECT_EQ(shared.optimizer.lr, 0.01);
  EXPECT_EQ(shared.optimizer.muonLr, 0.01);
  EXPECT_EQ(shared.optimizer.momentum, 0.9);
  EXPECT_EQ(shared.optimizer.nsMethod, "standard");
  DsConfig halves = parseOk(R"({"train_micro_batch_size_per_gpu": 2,
      "optimizer": {"type": "Muon", "params": {
      "lr": 0.01, "muon_lr": 0.05, "adam_lr": 0.002}}})");
  EXPECT_EQ(halves.optimizer.lr, 0.002);
  EXPECT_EQ(halves.optimizer.muonLr, 0.05);
  EXPECT_TRUE(halves.notes.empty());
  DsConfig warm = parseOk(R"({"train_micro_batch_size_per_gpu": 2,
      "optimizer": {"type": "Muon", "params": {
      "muon_lr": 0.05, "adam_lr": 0.002}},
      "scheduler": {"type": "WarmupLR", "params": {"warmup_max_lr": 0.01}}})");
  EXPECT_EQ(warm.optimizer.muonLr, warm.optimizer.lr);
  EXPECT_EQ(warm.notes,
            std::vector<std::string>{
                "ds_config.json: $.optimizer.params: Muon's lr for its "
                "matrices (0.05) and for the rest (0.002) give way to "
                "WarmupLR's, which DeepSpeed sets for every parameter group"});
  DsConfig cosine = parseOk(R"({"optimizer": {"type": "Muon", "params": {
      "muon_lr": 0.05, "adam_lr": 0.002}},
      "scheduler": {"type": "WarmupCosineLR",
                    "params": {"total_num_steps": 10}}})");
  EXPECT_EQ(cosine.optimizer.muonLr, 0.05);
}

// SGD, Lion and Adagrad with torch.optim's and DeepSpeed FusedLion's
// defaults, and their own parameters read.
TEST(ConfigTest, SgdLionAdagrad) {
  DsConfig sgd = parseOk(R"({"optimizer": {"type": "SGD", "params": {
      "lr": 0.05, "momentum": 0.9, "nesterov": true, "weight_decay": 1e-4}}})");
  EXPECT_EQ(sgd.optimizer.type, "SGD");
  EXPECT_EQ(sgd.optimizer.lr, 0.05);
  EXPECT_EQ(sgd.optimizer.momentum, 0.9);
  EXPECT_EQ(sgd.optimizer.dampening, 0);
  EXPECT_TRUE(sgd.optimizer.nesterov);
  EXPECT_EQ(sgd.optimizer.weightDecay, 1e-4);
  DsConfig plain = parseOk(R"({"optimizer": {"type": "sgd"}})");
  EXPECT_EQ(plain.optimizer.momentum, 0);
  EXPECT_EQ(plain.optimizer.weightDecay, 0);
  EXPECT_FALSE(plain.optimizer.nesterov);
  DsConfig lion = parseOk(R"({"optimizer": {"type": "Lion", "params": {
      "lr": 1e-4, "betas": [0.95, 0.98], "weight_decay": 0.1}}})");
  EXPECT_EQ(lion.optimizer.type, "Lion");
  EXPECT_EQ(lion.optimizer.beta1, 0.95);
  EXPECT_EQ(lion.optimizer.beta2, 0.98);
  EXPECT_EQ(lion.optimizer.weightDecay, 0.1);
  DsConfig adagrad = parseOk(R"({"optimizer": {"type": "adagrad", "params": {
      "lr_decay": 0.01, "weight_decay": 1e-3}}})");
  EXPECT_EQ(adagrad.optimizer.type, "Adagrad");
  EXPECT_EQ(adagrad.optimizer.lr, 1e-2); // torch.optim.Adagrad's defaults
  EXPECT_EQ(adagrad.optimizer.eps, 1e-10);
  EXPECT_EQ(adagrad.optimizer.lrDecay, 0.01);
  EXPECT_EQ(adagrad.optimizer.weightDecay, 1e-3);
  EXPECT_TRUE(parseOk(toJson(adagrad)) == adagrad);
  EXPECT_TRUE(parseOk(toJson(sgd)) == sgd);
  DsConfig lionDefaults = parseOk(R"({"optimizer": {"type": "LION"}})");
  EXPECT_EQ(lionDefaults.optimizer.beta2, 0.999);
  EXPECT_EQ(lionDefaults.optimizer.weightDecay, 0);
}

TEST(ConfigTest, SchedulerWarmupLR) {
  DsConfig c = parseOk(R"({"scheduler": {"type": "WarmupLR", "params": {
      "warmup_min_lr": 1e-5, "warmup_max_lr": 2e-3, "warmup_num_steps": 50,
      "warmup_type": "linear", "last_batch_iteration": -1}}})");
  EXPECT_EQ(c.scheduler.type, "WarmupLR");
  EXPECT_EQ(c.scheduler.warmupMinLr, 1e-5);
  EXPECT_EQ(c.scheduler.warmupMaxLr, 2e-3);
  EXPECT_EQ(c.scheduler.warmupNumSteps, 50);
  EXPECT_EQ(c.scheduler.warmupType, "linear");
  // Defaults of WarmupLR's constructor.
  c = parseOk(R"({"scheduler": {"type": "WarmupLR"}})");
  EXPECT_EQ(c.scheduler.warmupMinLr, 0.0);
  EXPECT_EQ(c.scheduler.warmupMaxLr, 1e-3);
  EXPECT_EQ(c.scheduler.warmupNumSteps, 1000);
  EXPECT_EQ(c.scheduler.warmupType, "log");
}

TEST(ConfigTest, SchedulerWarmupDecayLR) {
  DsConfig c = parseOk(R"({"scheduler": {"type": "WarmupDecayLR", "params": {
      "total_num_steps": 1000, "warmup_min_lr": 0, "warmup_max_lr": 1e-4,
      "warmup_num_steps": 100, "warmup_type": "log"}}})");
  EXPECT_EQ(c.scheduler.type, "WarmupDecayLR");
  EXPECT_EQ(c.scheduler.totalNumSteps, 1000);
  EXPECT_EQ(c.scheduler.warmupMaxLr, 1e-4);
  EXPECT_EQ(c.scheduler.warmupNumSteps, 100);
  EXPECT_TRUE(c.notes.size() == 1); // only the default micro batch

  // Fewer total steps than warm-up steps: DeepSpeed warns, dsc notes.
  c = parseOk(R"({"train_micro_batch_size_per_gpu": 1,
                  "scheduler": {"type": "WarmupDecayLR",
                                "params": {"total_num_steps": 10}}})");
  EXPECT_EQ(c.notes, std::vector<std::string>{
                         "ds_config.json: $.scheduler.params.total_num_steps: "
                         "10 is less than warmup_num_steps 1000 (DeepSpeed "
                         "warns too)"});
}

TEST(ConfigTest, SchedulerWarmupCosineLR) {
  DsConfig c = parseOk(R"({"scheduler": {"type": "WarmupCosineLR", "params": {
      "total_num_steps": 5000, "warmup_min_ratio": 0.1, "warmup_num_steps": 20,
      "warmup_type": "linear", "cos_min_ratio": 0.01}}})");
  EXPECT_EQ(c.scheduler.type, "WarmupCosineLR");
  EXPECT_EQ(c.scheduler.totalNumSteps, 5000);
  EXPECT_EQ(c.scheduler.warmupMinRatio, 0.1);
  EXPECT_EQ(c.scheduler.warmupNumSteps, 20);
  EXPECT_EQ(c.scheduler.warmupType, "linear");
  EXPECT_EQ(c.scheduler.cosMinRatio, 0.01);
  c = parseOk(R"({"scheduler": {"type": "WarmupCosineLR",
                                "params": {"total_num_steps": 5000}}})");
  EXPECT_EQ(c.scheduler.cosMinRatio, 1e-4);
  EXPECT_EQ(c.scheduler.warmupMinRatio, 0.0);
}

TEST(ConfigTest, SchedulerErrors) {
  expectErrors({
      {R"({"scheduler": {"type": "CyclicLR"}})",
       "ds_config.json: $.scheduler.type: unsupported scheduler 'CyclicLR' "
       "(supported: WarmupLR, WarmupDecayLR, WarmupCosineLR, LRRangeTest, "
       "OneCycle)"},
      {R"({"scheduler": {"params": {}}})",
       "ds_config.json: $.scheduler.type: required key is missing "
       "(supported: WarmupLR, WarmupDecayLR, WarmupCosineLR, LRRangeTest, "
       "OneCycle)"},
      {R"({"scheduler": {"type": "WarmupDecayLR",
                         "params": {"warmup_max_lr": 0.1}}})",
       "ds_config.json: $.scheduler.params.total_num_steps: required by "
       "WarmupDecayLR but missing"},
      {R"({"scheduler": {"type": "WarmupCosineLR"}})",
       "ds_config.json: $.scheduler.params.total_num_steps: required by "
       "WarmupCosineLR but missing"},
      {R"({"scheduler": {"type": "WarmupCosineLR",
                         "params": {"total_num_steps": "auto"}}})",
       "ds_config.json: $.scheduler.params.total_num_steps: \"auto\" cannot "
       "be resolved: dsc does not know the number of training steps; give a "
       "number"},
      {R"({"scheduler": {"type": "WarmupDecayLR",
                         "params": {"total_num_steps": 0}}})",
       "ds_config.json: $.scheduler.params.total_num_steps: must be >= 1, "
       "got 0"},
      {R"({"scheduler": {"type": "WarmupLR",
                         "params": {"warmup_type": "cosine"}}})",
       "ds_config.json: $.scheduler.params.warmup_type: unsupported value "
       "'cosine' (supported: log, linear)"},
      {R"({"scheduler": {"type": "WarmupLR",
                         "params": {"warmup_num_steps": -1}}})",
       "ds_config.json: $.scheduler.params.warmup_num_steps: must be >= 0, "
       "got -1"},
      {R"({"scheduler": {"type": "WarmupLR",
                         "params": {"warmup_min_lr": -1}}})",
       "ds_config.json: $.scheduler.params.warmup_min_lr: must be >= 0, got "
       "-1"},
      {R"({"scheduler": {"type": "WarmupCosineLR", "params": {
           "total_num_steps": 9, "cos_min_ratio": -0.5}}})",
       "ds_config.json: $.scheduler.params.cos_min_ratio: must be >= 0, got "
       "-0.5"},
      {R"({"scheduler": {"type": "WarmupLR",
                         "params": {"last_batch_iteration": 5}}})",
       "ds_config.json: $.scheduler.params.last_batch_iteration: only -1 "
       "(start at step 0) is supported, got 5"},
  });
}

} // namespace
