//===- CudaPlansTest.cpp - the CUDA backend accepts what dsc compiles -----===//
//
// `dsrun --backend cuda` must run any plan the CPU backend runs. Without a
// GPU the backend cannot start, but its kernel table is data: this compiles
// the plans the CPU backend is tested with (gpt2 and llama, fp32, fp16 and
// bf16, dropout, ZeRO stages 1-3 on 2 ranks, offload with its host-placed
// optimizer, rematerialization) and runs the plan verifier against the
// CUDA backend's tables and placement rules (createCudaPlanChecker): its
// kernel variants for device instructions, the CPU's for host ones. Every
// instruction must find a variant for its dtypes.
//
//===----------------------------------------------------------------------===//
#if DSC_HAVE_CUDA

#include "compiler/Compile.h"
#include "runtime/backends/AllBackends.h"
#include "runtime/backends/cuda/CudaBackend.h"
#include "runtime/exec/Session.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace {

using namespace dsc::rt;

std::string inputsDir() { return DSC_SOURCE_DIR "/test/e2e/Inputs/"; }

struct Case {
  const char *name, *model, *config;
  int64_t worldSize;
  const char *remat;
};

class CudaPlans : public testing::TestWithParam<Case> {};

TEST_P(CudaPlans, EveryInstructionHasACudaVariant) {
  const Case &c = GetParam();
  dsc::CompileRequest request;
  request.model = c.model;
  if (std::string(c.config).rfind("file:", 0) == 0)
    request.configPath = inputsDir() + (c.config + 5);
  else
    request.configText = c.config;
  request.worldSize = c.worldSize;
  request.remat = c.remat;
  dsc::Compilation out;
  std::string messages;
  int status = dsc::compile(request, out,
                            [&](dsc::CompileMessage, const std::string &line) {
                              messages += line + "\n";
                            });
  ASSERT_EQ(status, 0) << messages;
  ASSERT_TRUE(out.plan) << messages;
  // Host-placed instructions find the CPU's kernels through the registry.
  registerAvailableBackends();
  std::unique_ptr<Backend> cuda = createCudaPlanChecker();
  std::string error;
  auto plan = LoadedPlan::fromBytes(out.plan->bytes, c.name, error, *cuda);
  EXPECT_TRUE(plan) << error;
}

constexpr const char *kGpt2 =
    "gpt2:n_layer=2,n_head=2,n_embd=32,block_size=16,vocab_size=64";
constexpr const char *kLlama =
    "llama:dim=32,n_layer=2,n_head=2,vocab_size=64,block_size=16";
#define OPT "\"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 1e-3}}"

INSTANTIATE_TEST_SUITE_P(
    Plans, CudaPlans,
    testing::Values(
        Case{"gpt2_fp32", kGpt2, "{" OPT "}", 1, ""},
        Case{"gpt2_dropout",
             "gpt2:n_layer=2,n_head=2,n_embd=32,block_size=16,"
             "vocab_size=64,dropout=0.1",
             "{" OPT "}", 1, ""},
        Case{"gpt2_bf16", kGpt2, "{" OPT ", \"bf16\": {\"enabled\": true}}", 1,
             ""},
        Case{"gpt2_fp16", kGpt2, "{" OPT ", \"fp16\": {\"enabled\": true}}", 1,
             ""},
        Case{"llama_fp32", kLlama, "{" OPT "}", 1, ""},
        Case{"llama_bf16", kLlama, "{" OPT ", \"bf16\": {\"enabled\": true}}",
             1, ""},
        Case{"gpt2_zero1", kGpt2,
             "{" OPT ", \"zero_optimization\": {\"stage\": 1}}", 2, ""},
        Case{"gpt2_zero2_bf16", kGpt2,
             "{" OPT ", \"bf16\": {\"enabled\": true}, "
             "\"zero_optimization\": {\"stage\": 2}}",
             2, ""},
        Case{"gpt2_zero3", kGpt2,
             "{" OPT ", \"zero_optimization\": {\"stage\": 3}}", 2, ""},
        Case{"gpt2_offload_optimizer", kGpt2,
             "{" OPT ", \"zero_optimization\": {\"stage\": 2, "
             "\"offload_optimizer\": {\"device\": \"cpu\"}}}",
             1, ""},
        Case{"gpt2_zero_infinity", kGpt2, "file:zero-infinity.json", 2, ""},
        Case{"llama_remat", kLlama, "{" OPT "}", 1, "layers"},
        Case{"gpt2_sgd_zero2_bf16", kGpt2,
             "{\"optimizer\": {\"type\": \"SGD\", \"params\": "
             "{\"lr\": 0.01, \"momentum\": 0.9}}, \"bf16\": "
             "{\"enabled\": true}, \"zero_optimization\": {\"stage\": 2}}",
             2, ""},
        Case{"llama_lion_bf16", kLlama,
             "{\"optimizer\": {\"type\": \"Lion\", \"params\": "
             "{\"lr\": 1e-4}}, \"bf16\": {\"enabled\": true}}",
             1, ""},
        Case{"gpt2_lamb_bf16", kGpt2,
             "{\"optimizer\": {\"type\": \"Lamb\", \"params\": "
             "{\"lr\": 1e-3}}, \"bf16\": {\"enabled\": true}}",
             2, ""},
        Case{"gpt2_lamb_zero2", kGpt2,
             "{\"optimizer\": {\"type\": \"Lamb\", \"params\": "
             "{\"lr\": 1e-3}}, \"zero_optimization\": {\"stage\": 2}}",
             2, ""},
        Case{"llama_muon_bf16", kLlama,
             "{\"optimizer\": {\"type\": \"Muon\", \"params\": "
             "{\"lr\": 1e-3}}, \"bf16\": {\"enabled\": true}}",
             2, ""}),
    [](const testing::TestParamInfo<Case> &info) {
      return std::string(info.param.name);
    });

} // namespace

#endif // DSC_HAVE_CUDA
