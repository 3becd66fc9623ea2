//===- CpuKernels.cpp - the CPU kernel table and argument checks ----------===//
//
// One row per kernel: its name, its arity as Kernel.h declares it, which
// aliasing it tolerates and its body. Every call goes through `entry`, which
// checks what all kernels share before the body runs and prefixes the body's
// error with the kernel name.
//
//===----------------------------------------------------------------------===//

#include "runtime/backends/cpu/CpuKernels.h"
#include "runtime/backends/cpu/CpuCommon.h"

#include <algorithm>
#include <limits>
#include <utility>

namespace dsc::rt {
namespace {

using cpu::Body;
using cpu::fail;

/// Which outputs may be exactly an input buffer.
enum class Alias {
  None,     ///< outputs are disjoint from inputs
  AnyInput, ///< an output may be exactly any input (elementwise, row-wise)
  AdamW,    ///< p', m', v' may be p, m, v (inputs 0, 2, 3)
};

struct Spec {
  std::string_view name;
  int numInputs, numOutputs, numIntAttrs, numFloatAttrs;
  Alias alias;
  Body body;
};

constexpr Spec kSpecs[] = {
    // clang-format off
    {"ds.adamw",              7,  3,  0, 4, Alias::AdamW,    cpu::adamwBody},
    {"ds.add",                2,  1,  0, 0, Alias::AnyInput, cpu::addBody},
    {"ds.add_layer_norm",    -1,  2,  0, 1, Alias::AnyInput, cpu::addLayerNormBody},
    {"ds.attention",          3,  1,  1, 1, Alias::None,     cpu::attentionBody},
    {"ds.attention_grad",     4,  3,  1, 1, Alias::None,     cpu::attentionGradBody},
    {"ds.bias_gelu",          2,  2,  1, 0, Alias::AnyInput, cpu::biasGeluBody},
    {"ds.broadcast",          1,  1,  0, 0, Alias::None,     cpu::broadcastBody},
    {"ds.cast",               1,  1,  0, 0, Alias::AnyInput, cpu::castBody},
    {"ds.concat",            -1,  1,  1, 0, Alias::None,     cpu::concatBody},
    {"ds.copy",               1,  1,  0, 0, Alias::AnyInput, cpu::copyBody},
    {"ds.cross_entropy",      2,  1,  1, 0, Alias::None,     cpu::crossEntropyBody},
    {"ds.cross_entropy_grad", 3,  1,  1, 0, Alias::AnyInput, cpu::crossEntropyGradBody},
    {"ds.div",                2,  1,  0, 0, Alias::AnyInput, cpu::divBody},
    {"ds.dropout",            1,  1,  1, 1, Alias::AnyInput, cpu::dropoutBody},
    {"ds.embedding",          2,  1,  0, 0, Alias::None,     cpu::embeddingBody},
    {"ds.embedding_grad",     2,  1,  0, 0, Alias::None,     cpu::embeddingGradBody},
    {"ds.equal",              2,  1,  0, 0, Alias::AnyInput, cpu::equalBody},
    {"ds.exp",                1,  1,  0, 0, Alias::AnyInput, cpu::expBody},
    {"ds.fill",               0,  1,  0, 1, Alias::None,     cpu::fillBody},
    {"ds.gelu",               1,  1,  1, 0, Alias::AnyInput, cpu::geluBody},
    {"ds.gelu_grad",          2,  1,  1, 0, Alias::AnyInput, cpu::geluGradBody},
    {"ds.iota",               0,  1,  1, 0, Alias::None,     cpu::iotaBody},
    {"ds.layer_norm",        -1,  1,  0, 1, Alias::AnyInput, cpu::layerNormBody},
    {"ds.layer_norm_grad",    3,  3,  0, 1, Alias::None,     cpu::layerNormGradBody},
    {"ds.log",                1,  1,  0, 0, Alias::AnyInput, cpu::logBody},
    {"ds.matmul",             2,  1,  2, 0, Alias::None,     cpu::matmulBody},
    {"ds.maximum",            2,  1,  0, 0, Alias::AnyInput, cpu::maximumBody},
    {"ds.minimum",            2,  1,  0, 0, Alias::AnyInput, cpu::minimumBody},
    {"ds.mul",                2,  1,  0, 0, Alias::AnyInput, cpu::mulBody},
    {"ds.neg",                1,  1,  0, 0, Alias::AnyInput, cpu::negBody},
    {"ds.pad",                1,  1, -1, 0, Alias::None,     cpu::padBody},
    {"ds.reduce_max",         1,  1, -1, 0, Alias::None,     cpu::reduceMaxBody},
    {"ds.reduce_mean",        1,  1, -1, 0, Alias::None,     cpu::reduceMeanBody},
    {"ds.reduce_sum",         1,  1, -1, 0, Alias::None,     cpu::reduceSumBody},
    {"ds.relu",               1,  1,  0, 0, Alias::AnyInput, cpu::reluBody},
    {"ds.relu_grad",          2,  1,  0, 0, Alias::AnyInput, cpu::reluGradBody},
    {"ds.rms_norm",           2,  1,  0, 1, Alias::AnyInput, cpu::rmsNormBody},
    {"ds.rms_norm_grad",      3,  2,  0, 1, Alias::None,     cpu::rmsNormGradBody},
    {"ds.rotary",             1,  1,  1, 1, Alias::AnyInput, cpu::rotaryBody},
    {"ds.rsqrt",              1,  1,  0, 0, Alias::AnyInput, cpu::rsqrtBody},
    {"ds.silu",               1,  1,  0, 0, Alias::AnyInput, cpu::siluBody},
    {"ds.silu_grad",          2,  1,  0, 0, Alias::AnyInput, cpu::siluGradBody},
    {"ds.slice",              1,  1, -1, 0, Alias::None,     cpu::sliceBody},
    {"ds.softmax",            1,  1,  0, 0, Alias::AnyInput, cpu::softmaxBody},
    {"ds.softmax_grad",       2,  1,  0, 0, Alias::AnyInput, cpu::softmaxGradBody},
    {"ds.split",              1, -1,  1, 0, Alias::None,     cpu::splitBody},
    {"ds.sqrt",               1,  1,  0, 0, Alias::AnyInput, cpu::sqrtBody},
    {"ds.sub",                2,  1,  0, 0, Alias::AnyInput, cpu::subBody},
    {"ds.tanh",               1,  1,  0, 0, Alias::AnyInput, cpu::tanhBody},
    {"ds.transpose",          1,  1, -1, 0, Alias::None,     cpu::transposeBody},
    // Collectives through KernelContext::comm (Comm.cpp).
    {"comm.all_gather",       1,  1,  0, 0, Alias::None,     cpu::commAllGatherBody},
    {"comm.all_reduce",       1,  1,  0, 1, Alias::AnyInput, cpu::commAllReduceBody},
    {"comm.broadcast",        1,  1,  1, 0, Alias::AnyInput, cpu::commBroadcastBody},
    {"comm.reduce_scatter",   1,  1,  0, 1, Alias::None,     cpu::commReduceScatterBody},
    {"dist.shard",            1,  1,  1, 0, Alias::None,     cpu::distShardBody},
    // clang-format on
};
constexpr size_t kNumSpecs = sizeof(kSpecs) / sizeof(kSpecs[0]);

const char *plural(int64_t n, const char *one, const char *many) {
  return n == 1 ? one : many;
}

bool checkCount(std::string &err, const char *what, int declared, size_t given,
                const void *array) {
  if (declared >= 0 && given != size_t(declared))
    return fail(err, "expects ", declared, " ", what, ", got ", given);
  if (given > 0 && !array)
    return fail(err, given, " ", what, " declared but the array is null");
  return true;
}

// Byte size of a checked tensor.
int64_t byteSize(const TensorRef &t) {
  return t.numel() * int64_t(dtypeSize(t.dtype));
}

bool checkTensor(std::string &err, const TensorRef &t, const char *role,
                 size_t index) {
  if (dtypeSize(t.dtype) == 0)
    return fail(err, role, " ", index, " has an unknown dtype ", int(t.dtype));
  if (t.rank < 0 || t.rank > cpu::kMaxRank)
    return fail(err, role, " ", index, " has rank ", t.rank, " (0 to ",
                cpu::kMaxRank, " supported)");
  if (t.rank > 0 && !t.shape)
    return fail(err, role, " ", index, " has rank ", t.rank, " but no shape");
  int64_t n = int64_t(dtypeSize(t.dtype));
  for (int d = 0; d < t.rank; ++d) {
    if (t.shape[d] < 0)
      return fail(err, role, " ", index, " has a negative dim in ",
                  cpu::shapeStr(t));
    if (t.shape[d] > 0 && n > std::numeric_limits<int64_t>::max() / t.shape[d])
      return fail(err, role, " ", index, " of shape ", cpu::shapeStr(t),
                  " is too large");
    n *= t.shape[d];
  }
  if (n > 0 && !t.data)
    return fail(err, role, " ", index, " of shape ", cpu::shapeStr(t),
                " has no data");
  return true;
}

bool overlap(const TensorRef &a, const TensorRef &b) {
  int64_t na = byteSize(a), nb = byteSize(b);
  if (na == 0 || nb == 0)
    return false;
  auto pa = reinterpret_cast<uintptr_t>(a.data);
  auto pb = reinterpret_cast<uintptr_t>(b.data);
  return pa < pb + uintptr_t(nb) && pb < pa + uintptr_t(na);
}

bool exactAlias(const TensorRef &a, const TensorRef &b) {
  return a.data == b.data && byteSize(a) == byteSize(b) && a.dtype == b.dtype;
}

bool checkAliasing(std::string &err, const Spec &spec, const KernelArgs &a) {
  for (size_t o = 0; o < a.numOutputs; ++o) {
    for (size_t p = 0; p < o; ++p)
      if (overlap(a.outputs[o], a.outputs[p]))
        return fail(err, "outputs ", p, " and ", o, " overlap");
    for (size_t i = 0; i < a.numInputs; ++i) {
      if (!overlap(a.outputs[o], a.inputs[i]))
        continue;
      bool allowed =
          exactAlias(a.outputs[o], a.inputs[i]) &&
          (spec.alias == Alias::AnyInput ||
           (spec.alias == Alias::AdamW && i == (o == 0 ? 0 : o + 1)));
      if (!allowed)
        return fail(err, "output ", o, " overlaps input ", i,
                    spec.alias == Alias::None
                        ? " (this kernel cannot run in place)"
                        : " (only an exact in-place update is allowed)");
    }
  }
  return true;
}

bool runChecked(const Spec &spec, const KernelArgs &a, std::string &err) {
  if (!checkCount(err, plural(spec.numInputs, "input", "inputs"),
                  spec.numInputs, a.numInputs, a.inputs) ||
      !checkCount(err, plural(spec.numOutputs, "output", "outputs"),
                  spec.numOutputs, a.numOutputs, a.outputs) ||
      !checkCount(err, "int attributes", spec.numIntAttrs, a.numIntAttrs,
                  a.intAttrs) ||
      !checkCount(err, "float attributes", spec.numFloatAttrs, a.numFloatAttrs,
                  a.floatAttrs))
    return false;
  for (size_t i = 0; i < a.numInputs; ++i)
    if (!checkTensor(err, a.inputs[i], "input", i))
      return false;
  for (size_t i = 0; i < a.numOutputs; ++i)
    if (!checkTensor(err, a.outputs[i], "output", i))
      return false;
  return checkAliasing(err, spec, a) && spec.body(a, err);
}

template <size_t I> bool entry(const KernelArgs &args, std::string &error) {
  const Spec &spec = kSpecs[I];
  std::string err;
  if (runChecked(spec, args, err))
    return true;
  error = std::string(spec.name) + ": " + err;
  return false;
}

template <size_t... I>
std::vector<KernelInfo> makeTable(std::index_sequence<I...>) {
  return {KernelInfo{kSpecs[I].name, kSpecs[I].numInputs, kSpecs[I].numOutputs,
                     kSpecs[I].numIntAttrs, kSpecs[I].numFloatAttrs,
                     &entry<I>}...};
}

} // namespace

const std::vector<KernelInfo> &cpuKernels() {
  static const std::vector<KernelInfo> table = [] {
    cpu::prepareBlas();
    std::vector<KernelInfo> t =
        makeTable(std::make_index_sequence<kNumSpecs>());
    std::sort(t.begin(), t.end(), [](const KernelInfo &x, const KernelInfo &y) {
      return x.name < y.name;
    });
    return t;
  }();
  return table;
}

const KernelInfo *findCpuKernel(std::string_view name) {
  const std::vector<KernelInfo> &t = cpuKernels();
  auto it = std::lower_bound(
      t.begin(), t.end(), name,
      [](const KernelInfo &k, std::string_view n) { return k.name < n; });
  return it != t.end() && it->name == name ? &*it : nullptr;
}

} // namespace dsc::rt
