//===- CudaKernels.cpp - the CUDA kernel table ----------------------------===//
//
// One row per kernel variant, as in the CPU backend's table: name, operand
// dtypes (KernelSignature.h), arity, tolerated aliasing, body. Every call
// goes through `entry`, which runs the shared table checks and prefixes the
// body's error with the kernel name. A float operand is f32, f16 or bf16
// independently (FP below); the families not written yet are listed in
// docs/cuda.md and refused by the plan verifier ("no kernel ... on backend
// cuda") before anything runs.
//
//===----------------------------------------------------------------------===//
#include "runtime/backends/cuda/CudaKernels.h"
#include "runtime/backends/cuda/CudaBackend.h"
#include "runtime/kernels/KernelChecks.h"

#include <algorithm>
#include <utility>

namespace dsc::rt::cuda {
namespace {

using Alias = KernelAlias;
using Body = bool (*)(const KernelArgs &, std::string &);

struct Spec {
  std::string_view name;
  std::string_view dtypes;
  int numInputs, numOutputs, numIntAttrs, numFloatAttrs;
  Alias alias;
  Body body;
};

#define FP "f32|f16|bf16"
#define UNARY FP "->" FP
#define BINARY FP "," FP "->" FP

constexpr Spec kSpecs[] = {
    // clang-format off
    {"ds.add",            BINARY,                 2, 1, 0, 0, Alias::AnyInput, addBody},
    {"ds.bias_gelu",      FP "," FP "->" FP "," FP, 2, 2, 1, 0, Alias::AnyInput, biasGeluBody},
    {"ds.cast",           "float->float",         1, 1, 0, 0, Alias::AnyInput, castBody},
    {"ds.copy",           "any->any",             1, 1, 0, 0, Alias::AnyInput, copyBody},
    {"ds.div",            BINARY,                 2, 1, 0, 0, Alias::AnyInput, divBody},
    {"ds.dropout",        UNARY,                  1, 1, 1, 1, Alias::AnyInput, dropoutBody},
    {"ds.equal",          BINARY,                 2, 1, 0, 0, Alias::AnyInput, equalBody},
    {"ds.exp",            UNARY,                  1, 1, 0, 0, Alias::AnyInput, expBody},
    {"ds.fill",           "->any",                0, 1, 0, 1, Alias::None,     fillBody},
    {"ds.gelu",           UNARY,                  1, 1, 1, 0, Alias::AnyInput, geluBody},
    {"ds.gelu_grad",      BINARY,                 2, 1, 1, 0, Alias::AnyInput, geluGradBody},
    {"ds.log",            UNARY,                  1, 1, 0, 0, Alias::AnyInput, logBody},
    {"ds.matmul",         "f32,f32->f32",         2, 1, 2, 0, Alias::None,     matmulBody},
    {"ds.matmul",         "bf16,bf16->bf16|f32",  2, 1, 2, 0, Alias::None,     matmulBody},
    {"ds.matmul",         "f16,f16->f16|f32",     2, 1, 2, 0, Alias::None,     matmulBody},
    {"ds.matmul_bias",    "f32,f32,f32->f32",     3, 1, 2, 0, Alias::None,     matmulBiasBody},
    {"ds.matmul_bias",    "bf16,bf16,bf16->bf16", 3, 1, 2, 0, Alias::None,     matmulBiasBody},
    {"ds.matmul_bias",    "f16,f16,f16->f16",     3, 1, 2, 0, Alias::None,     matmulBiasBody},
    {"ds.matmul_bias_gelu", "f32,f32,f32->f32,f32",       3, 2, 3, 0, Alias::None, matmulBiasGeluBody},
    {"ds.matmul_bias_gelu", "bf16,bf16,bf16->bf16,bf16",  3, 2, 3, 0, Alias::None, matmulBiasGeluBody},
    {"ds.matmul_bias_gelu", "f16,f16,f16->f16,f16",       3, 2, 3, 0, Alias::None, matmulBiasGeluBody},
    {"ds.matmul_gelu_grad", "f32,f32,f32->f32,f32",       3, 2, 3, 0, Alias::None, matmulGeluGradBody},
    {"ds.matmul_gelu_grad", "bf16,bf16,bf16->bf16,bf16",  3, 2, 3, 0, Alias::None, matmulGeluGradBody},
    {"ds.matmul_gelu_grad", "f16,f16,f16->f16,f16",       3, 2, 3, 0, Alias::None, matmulGeluGradBody},
    {"ds.maximum",        BINARY,                 2, 1, 0, 0, Alias::AnyInput, maximumBody},
    {"ds.minimum",        BINARY,                 2, 1, 0, 0, Alias::AnyInput, minimumBody},
    {"ds.mul",            BINARY,                 2, 1, 0, 0, Alias::AnyInput, mulBody},
    {"ds.neg",            UNARY,                  1, 1, 0, 0, Alias::AnyInput, negBody},
    {"ds.overflow_guard", BINARY,                 2, 1, 0, 0, Alias::None,     overflowGuardBody},
    {"ds.relu",           UNARY,                  1, 1, 0, 0, Alias::AnyInput, reluBody},
    {"ds.relu_grad",      BINARY,                 2, 1, 0, 0, Alias::AnyInput, reluGradBody},
    {"ds.rsqrt",          UNARY,                  1, 1, 0, 0, Alias::AnyInput, rsqrtBody},
    {"ds.silu",           UNARY,                  1, 1, 0, 0, Alias::AnyInput, siluBody},
    {"ds.silu_grad",      BINARY,                 2, 1, 0, 0, Alias::AnyInput, siluGradBody},
    {"ds.sqrt",           UNARY,                  1, 1, 0, 0, Alias::AnyInput, sqrtBody},
    {"ds.sub",            BINARY,                 2, 1, 0, 0, Alias::AnyInput, subBody},
    {"ds.tanh",           UNARY,                  1, 1, 0, 0, Alias::AnyInput, tanhBody},
    {"ds.add_layer_norm",   FP "*->" FP "," FP,     -1, 2, 0, 1, Alias::AnyInput, addLayerNormBody},
    {"ds.layer_norm",       FP "*->" FP,            -1, 1, 0, 1, Alias::AnyInput, layerNormBody},
    {"ds.layer_norm_grad",  FP "," FP "," FP "->" FP "," FP "," FP, 3, 3, 0, 1, Alias::None, layerNormGradBody},
    {"ds.rms_norm",         BINARY,                 2, 1, 0, 1, Alias::AnyInput, rmsNormBody},
    {"ds.rms_norm_grad",    FP "," FP "," FP "->" FP "," FP, 3, 2, 0, 1, Alias::None, rmsNormGradBody},
    {"ds.softmax",          UNARY,                  1, 1, 0, 0, Alias::AnyInput, softmaxBody},
    {"ds.softmax_grad",     BINARY,                 2, 1, 0, 0, Alias::AnyInput, softmaxGradBody},
    {"ds.cross_entropy",    FP ",idx->" FP,         2, 1, 1, 0, Alias::None,     crossEntropyBody},
    {"ds.cross_entropy_grad", FP ",idx," FP "->" FP, 3, 1, 1, 0, Alias::AnyInput, crossEntropyGradBody},
    {"ds.embedding",        FP ",idx->" FP,         2, 1, 0, 0, Alias::None,     embeddingBody},
    {"ds.embedding_grad",   "idx," FP "->" FP,      2, 1, 0, 0, Alias::None,     embeddingGradBody},
    {"ds.broadcast",        "T->T",                 1, 1, 0, 0, Alias::None,     broadcastBody},
    {"ds.concat",           "T*->T",               -1, 1, 1, 0, Alias::None,     concatBody},
    {"ds.iota",             "->f32|f64|i32|i64",    0, 1, 1, 0, Alias::None,     iotaBody},
    {"ds.pad",              "T->T",                 1, 1, -1, 0, Alias::None,    padBody},
    {"ds.reduce_max",       UNARY,                  1, 1, -1, 0, Alias::None,    reduceMaxBody},
    {"ds.reduce_mean",      UNARY,                  1, 1, -1, 0, Alias::None,    reduceMeanBody},
    {"ds.reduce_sum",       UNARY,                  1, 1, -1, 0, Alias::None,    reduceSumBody},
    {"ds.slice",            "T->T",                 1, 1, -1, 0, Alias::None,    sliceBody},
    {"ds.split",            "T->T*",                1, -1, 1, 0, Alias::None,    splitBody},
    {"ds.transpose",        "T->T",                 1, 1, -1, 0, Alias::None,    transposeBody},
    {"ds.adamw",            "f32,f32,f32,f32,f32,f32,f32->f32,f32,f32", 7, 3, 0, 4, Alias::AdamW, adamwBody},
    {"ds.adamw_round",      "f32," FP ",f32,f32,f32,f32,f32->f32,f32,f32,f16|bf16", 7, 4, 0, 4, Alias::AdamW, adamwRoundBody},
    {"ds.attention",        FP "," FP "," FP "->" FP, 3, 1, 1, 1, Alias::None,   attentionBody},
    {"ds.attention_grad",   FP "," FP "," FP "," FP "->" FP "," FP "," FP, 4, 3, 1, 1, Alias::None, attentionGradBody},
    {"ds.rotary",           UNARY,                  1, 1, 1, 1, Alias::AnyInput, rotaryBody},
    {"comm.all_gather",     "T->T",                 1, 1, 0, 0, Alias::None,     commAllGatherBody},
    {"comm.all_reduce",     "f32->f32",             1, 1, 0, 1, Alias::AnyInput, commAllReduceBody},
    {"comm.all_reduce",     "f64->f64",             1, 1, 0, 1, Alias::AnyInput, commAllReduceBody},
    {"comm.all_reduce",     "f16->f16",             1, 1, 0, 1, Alias::AnyInput, commAllReduceBody},
    {"comm.all_reduce",     "bf16->bf16",           1, 1, 0, 1, Alias::AnyInput, commAllReduceBody},
    {"comm.broadcast",      "T->T",                 1, 1, 1, 0, Alias::AnyInput, commBroadcastBody},
    {"comm.reduce_scatter", "f32->f32",             1, 1, 0, 1, Alias::None,     commReduceScatterBody},
    {"comm.reduce_scatter", "f64->f64",             1, 1, 0, 1, Alias::None,     commReduceScatterBody},
    {"comm.reduce_scatter", "f16->f16",             1, 1, 0, 1, Alias::None,     commReduceScatterBody},
    {"comm.reduce_scatter", "bf16->bf16",           1, 1, 0, 1, Alias::None,     commReduceScatterBody},
    {"dist.shard",          "T->T",                 1, 1, 1, 0, Alias::None,     distShardBody},
    // clang-format on
};
constexpr size_t kNumSpecs = sizeof(kSpecs) / sizeof(kSpecs[0]);

#undef BINARY
#undef UNARY
#undef FP

template <size_t I> bool entry(const KernelArgs &args, std::string &error) {
  const Spec &spec = kSpecs[I];
  std::string err;
  if (checkKernelArgs({spec.numInputs, spec.numOutputs, spec.numIntAttrs,
                       spec.numFloatAttrs, spec.alias},
                      args, err) &&
      spec.body(args, err))
    return true;
  error = std::string(spec.name) + ": " + err;
  return false;
}

template <size_t... I>
std::vector<KernelInfo> makeTable(std::index_sequence<I...>) {
  return {KernelInfo{kSpecs[I].name, kSpecs[I].dtypes, kSpecs[I].numInputs,
                     kSpecs[I].numOutputs, kSpecs[I].numIntAttrs,
                     kSpecs[I].numFloatAttrs, &entry<I>}...};
}

} // namespace

const std::vector<KernelInfo> &cudaKernels() {
  static const std::vector<KernelInfo> table = [] {
    std::vector<KernelInfo> t =
        makeTable(std::make_index_sequence<kNumSpecs>());
    sortKernelTable(t);
    return t;
  }();
  return table;
}

KernelVariants cudaKernelVariants(std::string_view name) {
  return variantsOf(cudaKernels(), name);
}

} // namespace dsc::rt::cuda
