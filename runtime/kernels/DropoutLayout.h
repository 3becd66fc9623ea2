//===- DropoutLayout.h - where ds.dropout's elements sit in the batch -----===//
//
// ds.dropout keys element e of x by its global index g: x's leading
// dimension is the micro-batch, which starts at global sample s, so
// g = s * (elements per sample) + e. Under sequence parallelism x is one
// of `parts` parts of the whole activation cut along `partDim`, the one
// numbered by the rank's place in its group (its tensor rank). Cut along
// the batch, the part is one contiguous run of the whole; cut along a
// later dimension (the sequence), it is one run of R = the part's
// elements from partDim on, repeated for each index of the dimensions
// before, every parts x R elements of the whole. Both backends' kernels
// use these numbers: for e in run k = e / segment,
//   g = s * sampleElements + partOffset + k * stride + e % segment,
// where partOffset also counts the `sample_offset` samples x starts after
// the micro-batch's first.
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
  uint64_t segment = 0;        ///< x's elements in one run of the whole
  uint64_t stride = 0;         ///< the whole's elements from run to run
};

inline DropoutLayout partLayout(const TensorRef &x, int64_t parts,
                                int64_t partDim, int tensorRank) {
  const int64_t n = x.numel();
  const uint64_t un = uint64_t(n);
  if (x.rank == 0 || n == 0) // a scalar: its one element, keyed as 0
    return {0, 0, un > 0 ? un : 1, 0};
  const uint64_t rows = uint64_t(x.shape[0]);
  if (parts <= 1)
    return {un / rows, 0, un, 0};
  const uint64_t p = uint64_t(parts), rank = uint64_t(tensorRank);
  if (partDim == 0) // the batch cut: rows x parts samples, one run
    return {un / rows, rank * un, un, 0};
  uint64_t run = 1; // the part's elements from partDim on
  for (int d = int(partDim); d < x.rank; ++d)
    run *= uint64_t(x.shape[d]);
  return {un / rows * p, rank * run, run, run * p};
}

inline DropoutLayout dropoutLayout(const TensorRef &x, int64_t parts,
                                   int64_t partDim, int tensorRank,
                                   int64_t sampleOffset) {
  DropoutLayout where = partLayout(x, parts, partDim, tensorRank);
  // x starts sampleOffset samples into the micro-batch (a chunk of it, or
  // a later micro-batch of an unrolled pipeline step).
  where.partOffset += uint64_t(sampleOffset) * where.sampleElements;
  return where;
}

} // namespace dsc::rt

#endif // DSC_RUNTIME_KERNELS_DROPOUTLAYOUT_H
