//===- CpuKernels.cpp - the CPU kernel table and argument checks ----------===//
//
// One row per kernel variant: its name, the operand dtypes it takes
// (KernelSignature.h), its arity as Kernel.h declares it, which aliasing it
// tolerates and its body. A second dtype variant of a kernel is a second
// row with the same name; every f32 kernel also gets a 16-bit variant
// (Widening.h), after its f32 row. Every call goes through `entry`, which
// checks what all kernels share before the body runs and prefixes the body's
// error with the kernel name.
//
//===----------------------------------------------------------------------===//

#include "runtime/backends/cpu/CpuKernels.h"
#include "runtime/backends/cpu/CpuCommon.h"
#include "runtime/backends/cpu/Widening.h"

#include <algorithm>
#include <utility>

namespace dsc::rt {
namespace {

using cpu::Body;
using cpu::fail;

using Alias = KernelAlias;

struct Spec {
  std::string_view name;
  std::string_view dtypes; ///< KernelSignature.h; the body checks again
  int numInputs, numOutputs, numIntAttrs, numFloatAttrs;
  Alias alias;
  Body body;
};

constexpr Spec kSpecs[] = {
    // clang-format off
    {"ds.adamw",              "f32,f32,f32,f32,f32,f32,f32->f32,f32,f32",  7,  3,  0, 4, Alias::AdamW,    cpu::adamwBody},
    {"ds.adamw_round",        "f32,f32|f16|bf16,f32,f32,f32,f32,f32->f32,f32,f32,f16|bf16", 7, 4, 0, 4, Alias::AdamW, cpu::adamwRoundBody},
    {"ds.add",                "f32,f32->f32",                             2,  1,  0, 0, Alias::AnyInput, cpu::addBody},
    {"ds.add_layer_norm",     "f32*->f32,f32",                           -1,  2,  0, 1, Alias::AnyInput, cpu::addLayerNormBody},
    {"ds.attention",          "f32,f32,f32->f32",                         3,  1,  1, 1, Alias::None,     cpu::attentionBody},
    {"ds.attention_grad",     "f32,f32,f32,f32->f32,f32,f32",             4,  3,  1, 1, Alias::None,     cpu::attentionGradBody},
    {"ds.bias_gelu",          "f32,f32->f32,f32",                         2,  2,  1, 0, Alias::AnyInput, cpu::biasGeluBody},
    {"ds.broadcast",          "T->T",                                     1,  1,  0, 0, Alias::None,     cpu::broadcastBody},
    {"ds.cast",               "float->float",                             1,  1,  0, 0, Alias::AnyInput, cpu::castBody},
    {"ds.concat",             "T*->T",                                   -1,  1,  1, 0, Alias::None,     cpu::concatBody},
    {"ds.copy",               "any->any",                                 1,  1,  0, 0, Alias::AnyInput, cpu::copyBody},
    {"ds.cross_entropy",      "f32,idx->f32",                             2,  1,  1, 0, Alias::None,     cpu::crossEntropyBody},
    {"ds.cross_entropy_grad", "f32,idx,f32->f32",                         3,  1,  1, 0, Alias::AnyInput, cpu::crossEntropyGradBody},
    {"ds.div",                "f32,f32->f32",                             2,  1,  0, 0, Alias::AnyInput, cpu::divBody},
    {"ds.dropout",            "f32->f32",                                 1,  1,  1, 1, Alias::AnyInput, cpu::dropoutBody},
    {"ds.embedding",          "f32,idx->f32",                             2,  1,  0, 0, Alias::None,     cpu::embeddingBody},
    {"ds.embedding_grad",     "idx,f32->f32",                             2,  1,  0, 0, Alias::None,     cpu::embeddingGradBody},
    {"ds.equal",              "f32,f32->f32",                             2,  1,  0, 0, Alias::AnyInput, cpu::equalBody},
    {"ds.exp",                "f32->f32",                                 1,  1,  0, 0, Alias::AnyInput, cpu::expBody},
    {"ds.fill",               "->any",                                    0,  1,  0, 1, Alias::None,     cpu::fillBody},
    {"ds.gelu",               "f32->f32",                                 1,  1,  1, 0, Alias::AnyInput, cpu::geluBody},
    {"ds.gelu_grad",          "f32,f32->f32",                             2,  1,  1, 0, Alias::AnyInput, cpu::geluGradBody},
    {"ds.iota",               "->f32|f64|i32|i64",                        0,  1,  1, 0, Alias::None,     cpu::iotaBody},
    {"ds.layer_norm",         "f32*->f32",                               -1,  1,  0, 1, Alias::AnyInput, cpu::layerNormBody},
    {"ds.layer_norm_grad",    "f32,f32,f32->f32,f32,f32",                 3,  3,  0, 1, Alias::None,     cpu::layerNormGradBody},
    {"ds.log",                "f32->f32",                                 1,  1,  0, 0, Alias::AnyInput, cpu::logBody},
    {"ds.matmul",             "f32,f32->f32",                             2,  1,  2, 0, Alias::None,     cpu::matmulBody},
    {"ds.matmul_bias",        "f32,f32,f32->f32",                         3,  1,  2, 0, Alias::None,     cpu::matmulBiasBody},
    {"ds.matmul_bias_gelu",   "f32,f32,f32->f32,f32",                     3,  2,  3, 0, Alias::None,     cpu::matmulBiasGeluBody},
    {"ds.matmul_gelu_grad",   "f32,f32,f32->f32,f32",                     3,  2,  3, 0, Alias::None,     cpu::matmulGeluGradBody},
    {"ds.maximum",            "f32,f32->f32",                             2,  1,  0, 0, Alias::AnyInput, cpu::maximumBody},
    {"ds.minimum",            "f32,f32->f32",                             2,  1,  0, 0, Alias::AnyInput, cpu::minimumBody},
    {"ds.mul",                "f32,f32->f32",                             2,  1,  0, 0, Alias::AnyInput, cpu::mulBody},
    {"ds.neg",                "f32->f32",                                 1,  1,  0, 0, Alias::AnyInput, cpu::negBody},
    {"ds.overflow_guard",     "f32,f32->f32",                             2,  1,  0, 0, Alias::None,     cpu::overflowGuardBody},
    {"ds.pad",                "T->T",                                     1,  1, -1, 0, Alias::None,     cpu::padBody},
    {"ds.reduce_max",         "f32->f32",                                 1,  1, -1, 0, Alias::None,     cpu::reduceMaxBody},
    {"ds.reduce_mean",        "f32->f32",                                 1,  1, -1, 0, Alias::None,     cpu::reduceMeanBody},
    {"ds.reduce_sum",         "f32->f32",                                 1,  1, -1, 0, Alias::None,     cpu::reduceSumBody},
    {"ds.relu",               "f32->f32",                                 1,  1,  0, 0, Alias::AnyInput, cpu::reluBody},
    {"ds.relu_grad",          "f32,f32->f32",                             2,  1,  0, 0, Alias::AnyInput, cpu::reluGradBody},
    {"ds.rms_norm",           "f32,f32->f32",                             2,  1,  0, 1, Alias::AnyInput, cpu::rmsNormBody},
    {"ds.rms_norm_grad",      "f32,f32,f32->f32,f32",                     3,  2,  0, 1, Alias::None,     cpu::rmsNormGradBody},
    {"ds.rotary",             "f32->f32",                                 1,  1,  1, 1, Alias::AnyInput, cpu::rotaryBody},
    {"ds.rsqrt",              "f32->f32",                                 1,  1,  0, 0, Alias::AnyInput, cpu::rsqrtBody},
    {"ds.silu",               "f32->f32",                                 1,  1,  0, 0, Alias::AnyInput, cpu::siluBody},
    {"ds.silu_grad",          "f32,f32->f32",                             2,  1,  0, 0, Alias::AnyInput, cpu::siluGradBody},
    {"ds.slice",              "T->T",                                     1,  1, -1, 0, Alias::None,     cpu::sliceBody},
    {"ds.softmax",            "f32->f32",                                 1,  1,  0, 0, Alias::AnyInput, cpu::softmaxBody},
    {"ds.softmax_grad",       "f32,f32->f32",                             2,  1,  0, 0, Alias::AnyInput, cpu::softmaxGradBody},
    {"ds.split",              "T->T*",                                    1, -1,  1, 0, Alias::None,     cpu::splitBody},
    {"ds.sqrt",               "f32->f32",                                 1,  1,  0, 0, Alias::AnyInput, cpu::sqrtBody},
    {"ds.sub",                "f32,f32->f32",                             2,  1,  0, 0, Alias::AnyInput, cpu::subBody},
    {"ds.tanh",               "f32->f32",                                 1,  1,  0, 0, Alias::AnyInput, cpu::tanhBody},
    {"ds.transpose",          "T->T",                                     1,  1, -1, 0, Alias::None,     cpu::transposeBody},
    // Collectives through KernelContext::comm (Comm.cpp).
    // Sums: one variant per float type (the body dispatches on it).
    {"comm.all_gather",       "T->T",                                     1,  1,  0, 0, Alias::None,     cpu::commAllGatherBody},
    {"comm.all_reduce",       "f32->f32",                                 1,  1,  0, 1, Alias::AnyInput, cpu::commAllReduceBody},
    {"comm.all_reduce",       "f64->f64",                                 1,  1,  0, 1, Alias::AnyInput, cpu::commAllReduceBody},
    {"comm.all_reduce",       "f16->f16",                                 1,  1,  0, 1, Alias::AnyInput, cpu::commAllReduceBody},
    {"comm.all_reduce",       "bf16->bf16",                               1,  1,  0, 1, Alias::AnyInput, cpu::commAllReduceBody},
    {"comm.broadcast",        "T->T",                                     1,  1,  1, 0, Alias::AnyInput, cpu::commBroadcastBody},
    {"comm.reduce_scatter",   "f32->f32",                                 1,  1,  0, 1, Alias::None,     cpu::commReduceScatterBody},
    {"comm.reduce_scatter",   "f64->f64",                                 1,  1,  0, 1, Alias::None,     cpu::commReduceScatterBody},
    {"comm.reduce_scatter",   "f16->f16",                                 1,  1,  0, 1, Alias::None,     cpu::commReduceScatterBody},
    {"comm.reduce_scatter",   "bf16->bf16",                               1,  1,  0, 1, Alias::None,     cpu::commReduceScatterBody},
    {"dist.shard",            "T->T",                                     1,  1,  1, 0, Alias::None,     cpu::distShardBody},
    // clang-format on
};
constexpr size_t kNumSpecs = sizeof(kSpecs) / sizeof(kSpecs[0]);

bool checkArgs(const Spec &spec, const KernelArgs &a, std::string &err) {
  return checkKernelArgs({spec.numInputs, spec.numOutputs, spec.numIntAttrs,
                          spec.numFloatAttrs, spec.alias},
                         a, err);
}

bool runChecked(const Spec &spec, const KernelArgs &a, std::string &err) {
  return checkArgs(spec, a, err) && spec.body(a, err);
}

template <size_t I> bool entry(const KernelArgs &args, std::string &error) {
  const Spec &spec = kSpecs[I];
  std::string err;
  if (runChecked(spec, args, err))
    return true;
  error = std::string(spec.name) + ": " + err;
  return false;
}

// The 16-bit variant of kernel I (Widening.h): checked on the 16-bit
// operands themselves, then run on their f32 copies.
template <size_t I>
bool widenedEntry(const KernelArgs &args, std::string &error) {
  const Spec &spec = kSpecs[I];
  std::string err;
  if (!checkArgs(spec, args, err)) {
    error = std::string(spec.name) + ": " + err;
    return false;
  }
  if (cpu::isFusedPair(spec.name)) {
    if (cpu::runWidenedPair(spec.name, args, err))
      return true;
    error = std::string(spec.name) + ": " + err;
    return false;
  }
  return cpu::runWidened(&entry<I>, args, error);
}

/// The widened signatures, alive as long as the table that points at them.
std::vector<std::string> &widenedSignatures() {
  static std::vector<std::string> *s = new std::vector<std::string>();
  return *s;
}

template <size_t... I>
std::vector<KernelInfo> makeTable(std::index_sequence<I...>) {
  std::vector<KernelInfo> t = {
      KernelInfo{kSpecs[I].name, kSpecs[I].dtypes, kSpecs[I].numInputs,
                 kSpecs[I].numOutputs, kSpecs[I].numIntAttrs,
                 kSpecs[I].numFloatAttrs, &entry<I>}...};
  std::vector<std::string> &sigs = widenedSignatures();
  sigs.reserve(kNumSpecs);
  const KernelFn widened[] = {&widenedEntry<I>...};
  for (size_t i = 0; i < kNumSpecs; ++i) {
    std::string sig = cpu::widenedSignature(kSpecs[i].dtypes);
    if (sig.empty() || kSpecs[i].name.substr(0, 5) == "comm." ||
        kSpecs[i].name.substr(0, 5) == "dist.")
      continue;
    sigs.push_back(std::move(sig));
    t.push_back(KernelInfo{kSpecs[i].name, sigs.back(), kSpecs[i].numInputs,
                           kSpecs[i].numOutputs, kSpecs[i].numIntAttrs,
                           kSpecs[i].numFloatAttrs, widened[i]});
  }
  return t;
}

} // namespace

const std::vector<KernelInfo> &cpuKernels() {
  static const std::vector<KernelInfo> table = [] {
    cpu::prepareBlas();
    std::vector<KernelInfo> t =
        makeTable(std::make_index_sequence<kNumSpecs>());
    sortKernelTable(t);
    return t;
  }();
  return table;
}

KernelVariants cpuKernelVariants(std::string_view name) {
  return variantsOf(cpuKernels(), name);
}

const KernelInfo *findCpuKernel(std::string_view name) {
  KernelVariants v = cpuKernelVariants(name);
  return v.empty() ? nullptr : v.data;
}

} // namespace dsc::rt
