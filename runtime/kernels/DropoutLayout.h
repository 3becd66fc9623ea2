//===- DropoutLayout.h - where ds.dropout's elements sit in the batch -----===//
//
// ds.dropout keys element e of x by its global index g: x's leading
// dimension is the micro-batch, which starts at global sample s, so
// g = s * (elements per sample) + e. Under sequence parallelism x is one
// of `parts` contiguous parts of the whole activation (cut along
// `partDim`: the batch, or the sequence of a batch of one), the one
// numbered by the rank's place in its tensor-parallel group; e is then
// counted from that part's first element in the whole. Both backends'
// kernels use these two numbers: g = s * sampleElements + partOffset + e.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_KERNELS_DROPOUTLAYOUT_H
#define DSC_RUNTIME_KERNELS_DROPOUTLAYOUT_H

#include "runtime/kernels/Kernel.h"

#include <cstdint>

namespace dsc::rt {

struct DropoutLayout {
  uint64_t sampleElements = 0; ///< of the whole activation, per sample
  uint64_t partOffset = 0;     ///< the part's first element in the whole
};

inline DropoutLayout dropoutLayout(const TensorRef &x, int64_t parts,
                                   int64_t partDim, int tensorRank) {
  const int64_t n = x.numel();
  if (x.rank == 0 || x.shape[0] == 0)
    return {};
  if (parts <= 1)
    return {uint64_t(n / x.shape[0]), 0};
  const int64_t wholeRows = partDim == 0 ? x.shape[0] * parts : x.shape[0];
  return {uint64_t(n * parts / wholeRows), uint64_t(tensorRank) * uint64_t(n)};
}

} // namespace dsc::rt

#endif // DSC_RUNTIME_KERNELS_DROPOUTLAYOUT_H
