//===- CpuKernels.h - the CPU backend's kernel table ------------*- C++ -*-===//
//
// fp32 kernels for every op named in runtime/kernels/Kernel.h: GEMMs through
// OpenBLAS, the rest as loops written for GCC's auto-vectorizer. Index
// tensors (embedding ids, cross-entropy targets, iota) may be i32 or i64;
// ds.cast converts between f32, f64, f16 and bf16 (round to nearest even);
// the data-movement kernels (transpose, slice, pad, concat, split,
// broadcast, copy) move elements of any dtype. Any other dtype is reported
// as "ds.<op>: unsupported dtype ...".
//
// Every kernel checks its arguments (arity, dtypes, ranks, shapes against
// the output buffers, attributes, index ranges) and fails with one line that
// starts with its name; none crashes on a bad shape. Elementwise and
// row-wise kernels and ds.adamw accept an output that is exactly an input
// buffer (in-place update); any other overlap is an error.
//
// Threads: OpenBLAS's pool for GEMMs (OPENBLAS_NUM_THREADS); the kernels
// split large loops, and attention its (batch, head) pairs, over
// DSC_CPU_THREADS threads (default: the hardware concurrency, at most 8).
// Their split points depend on the sizes only, so results do not depend on
// DSC_CPU_THREADS; OpenBLAS's can depend on OPENBLAS_NUM_THREADS for some
// shapes (seen with K = 1000), so keep it fixed across runs to compare.
// OPENBLAS_CORETYPE is set from the CPU's instruction sets unless the user
// set it (Blas.cpp explains why).
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_BACKENDS_CPU_CPUKERNELS_H
#define DSC_RUNTIME_BACKENDS_CPU_CPUKERNELS_H

#include "runtime/backends/Backend.h"
#include "runtime/kernels/Kernel.h"

#include <string_view>
#include <vector>

namespace dsc::rt {

/// The first variant of the kernel named `name` ("ds.matmul"), or null if
/// the CPU backend has none.
const KernelInfo *findCpuKernel(std::string_view name);

/// Every variant of `name` (empty when there is none).
KernelVariants cpuKernelVariants(std::string_view name);

/// Every CPU kernel variant, sorted by name (variants of a name in table
/// order).
const std::vector<KernelInfo> &cpuKernels();

} // namespace dsc::rt

#endif // DSC_RUNTIME_BACKENDS_CPU_CPUKERNELS_H
