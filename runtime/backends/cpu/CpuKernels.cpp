//===- CpuKernels.cpp - the CPU kernel table ------------------------------===//
//
// One body per kernel contract (runtime/kernels/KernelContract.h, generated
// from ODS): the contract gives the name, arity, aliasing and dtype
// columns; this file only says which body runs which column. The full
// column runs the body; the 16-bit column runs it on f32 copies of the
// 16-bit operands (Widening.h; bf16 products natively where the CPU has
// a fast bf16 GEMM, Matmul.cpp). Every call goes through an entry that
// checks what all kernels share before the body runs and prefixes the
// body's error with the kernel name.
//
//===----------------------------------------------------------------------===//

#include "runtime/backends/cpu/CpuKernels.h"
#include "runtime/backends/cpu/CpuCommon.h"
#include "runtime/backends/cpu/Widening.h"

#include <utility>

namespace dsc::rt {
namespace {

using cpu::Body;

// In KernelId order, as DSC_FOR_EACH_KERNEL lists them.
#define DSC_CPU_BODY(id, body) &cpu::body##Body,
constexpr Body kBodies[] = {DSC_FOR_EACH_KERNEL(DSC_CPU_BODY)};
#undef DSC_CPU_BODY
static_assert(sizeof(kBodies) / sizeof(kBodies[0]) == kNumKernels);

template <size_t I> bool entry(const KernelArgs &args, std::string &error) {
  return callChecked(kKernelContracts[I], kBodies[I], args, error);
}

template <size_t I>
bool widenedPairBody(const KernelArgs &args, std::string &err) {
  return cpu::runWidenedPair(kKernelContracts[I].name, args, err);
}

/// Kernels whose 16-bit column has its own body on the 16-bit operands
/// (Widening.h) instead of f32 copies: bf16 products natively where the CPU
/// has a fast bf16 GEMM; norms, attention, lookups and the loss a row (or a
/// head) at a time; reductions over rows reading 16 bits as they are.
struct HalfBody {
  std::string_view kernel;
  Body body;
};
constexpr HalfBody kHalfBodies[] = {
    {"ds.matmul", &cpu::halfMatmulBody},
    {"ds.layer_norm_grad", &cpu::halfLayerNormGradBody},
    {"ds.rms_norm_grad", &cpu::halfRmsNormGradBody},
    {"ds.attention", &cpu::halfAttentionBody},
    {"ds.attention_grad", &cpu::halfAttentionGradBody},
    {"ds.reduce_sum", &cpu::halfReduceSumBody},
    {"ds.reduce_mean", &cpu::halfReduceMeanBody},
    {"ds.reduce_max", &cpu::halfReduceMaxBody},
    {"ds.embedding", &cpu::halfEmbeddingBody},
    {"ds.embedding_grad", &cpu::halfEmbeddingGradBody},
    {"ds.cross_entropy", &cpu::halfCrossEntropyBody},
    {"ds.cross_entropy_grad", &cpu::halfCrossEntropyGradBody},
    {"ds.cross_entropy_part", &cpu::halfCrossEntropyPartBody},
    {"ds.cross_entropy_part_grad", &cpu::halfCrossEntropyPartGradBody},
    {"ds.dropout", &cpu::halfDropoutBody},
};

// The 16-bit column of kernel I (Widening.h): checked on the 16-bit
// operands themselves, then run on their f32 copies (a fused pair in two
// rounded steps).
template <size_t I>
bool widenedEntry(const KernelArgs &args, std::string &error) {
  const KernelContract &contract = kKernelContracts[I];
  if (cpu::isFusedPair(contract.name))
    return callChecked(contract, &widenedPairBody<I>, args, error);
  // Which body, found once per kernel rather than per call.
  static const Body half = [&]() -> Body {
    for (const HalfBody &h : kHalfBodies)
      if (h.kernel == contract.name)
        return h.body;
    return nullptr;
  }();
  if (half)
    return callChecked(contract, half, args, error);
  std::string err;
  if (!checkKernelArgs(contract, args, err)) {
    error = std::string(contract.name) + ": " + err;
    return false;
  }
  if (cpu::runHalfElementwise(contract.name, args))
    return true;
  return cpu::runWidenedTiled(
      contract.name,
      [](const KernelArgs &a, std::string &e) {
        return cpu::runWidened(&entry<I>, a, e);
      },
      args, error);
}

/// Kernels whose bodies take 16-bit operands themselves: the collectives sum
/// in the operands' dtype, as NCCL does, rather than on widened copies;
/// ds.linear_cross_entropy and ds.fused_elementwise round their
/// intermediates where the unfused ops' results would be, which one widened
/// call cannot.
bool halfIsNative(KernelId id) {
  return id == KernelId::CommAllReduce || id == KernelId::CommReduceScatter ||
         id == KernelId::LinearCrossEntropy || id == KernelId::FusedElementwise;
}

template <size_t... I>
std::vector<KernelInfo> makeTable(std::index_sequence<I...>) {
  const KernelFn full[] = {&entry<I>...};
  const KernelFn half[] = {&widenedEntry<I>...};
  std::vector<KernelInfo> t;
  for (size_t i = 0; i < kNumKernels; ++i) {
    const KernelContract &c = kKernelContracts[i];
    addKernelVariants(t, c, KernelColumn::Full, full[i]);
    addKernelVariants(t, c, KernelColumn::Half,
                      halfIsNative(KernelId(i)) ? full[i] : half[i]);
  }
  return t;
}

} // namespace

const std::vector<KernelInfo> &cpuKernels() {
  static const std::vector<KernelInfo> table = [] {
    cpu::prepareBlas();
    std::vector<KernelInfo> t =
        makeTable(std::make_index_sequence<kNumKernels>());
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
