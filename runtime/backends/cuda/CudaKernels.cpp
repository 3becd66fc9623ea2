//===- CudaKernels.cpp - the CUDA kernel table ----------------------------===//
//
// One body per kernel contract (runtime/kernels/KernelContract.h, generated
// from ODS), which gives the name, arity, aliasing and dtype columns; each
// body takes f32, f16 and bf16 operands itself, so it runs every column the
// contract declares, except the gaps listed below (the plan verifier
// refuses them, "no kernel ... on backend cuda", before anything runs).
// Every call goes through `entry`, which runs the shared table checks and
// prefixes the body's error with the kernel name.
//
//===----------------------------------------------------------------------===//
#include "runtime/backends/cuda/CudaKernels.h"
#include "runtime/backends/cuda/CudaBackend.h"
#include "runtime/kernels/KernelChecks.h"

#include <utility>

namespace dsc::rt::cuda {
namespace {

// In KernelId order, as DSC_FOR_EACH_KERNEL lists them.
#define DSC_CUDA_BODY(id, body) &body##Body,
constexpr KernelFn kBodies[] = {DSC_FOR_EACH_KERNEL(DSC_CUDA_BODY)};
#undef DSC_CUDA_BODY
static_assert(sizeof(kBodies) / sizeof(kBodies[0]) == kNumKernels);

template <size_t I> bool entry(const KernelArgs &args, std::string &error) {
  return callChecked(kKernelContracts[I], kBodies[I], args, error);
}

template <size_t... I>
std::vector<KernelInfo> makeTable(std::index_sequence<I...>) {
  const KernelFn fns[] = {&entry<I>...};
  std::vector<KernelInfo> t;
  for (size_t i = 0; i < kNumKernels; ++i)
    for (KernelColumn column : {KernelColumn::Full, KernelColumn::Half})
      if (!isCudaKernelGap(KernelId(i), column))
        addKernelVariants(t, kKernelContracts[i], column, fns[i]);
  return t;
}

} // namespace

bool isCudaKernelGap(KernelId id, KernelColumn column) {
  // ds.adamw on 16-bit parameters and gradients: the compiler keeps AdamW's
  // operands in f32 (fp32 master weights; ds.adamw_round writes the 16-bit
  // copy), so no plan calls it; the CPU backend has it for completeness.
  return id == KernelId::Adamw && column == KernelColumn::Half;
}

const std::vector<KernelInfo> &cudaKernels() {
  static const std::vector<KernelInfo> table = [] {
    std::vector<KernelInfo> t =
        makeTable(std::make_index_sequence<kNumKernels>());
    sortKernelTable(t);
    return t;
  }();
  return table;
}

KernelVariants cudaKernelVariants(std::string_view name) {
  return variantsOf(cudaKernels(), name);
}

} // namespace dsc::rt::cuda
