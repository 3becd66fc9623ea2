//===- RematPolicyOption.h - ds-remat's policy as an option value -*- C++
//-*-===//
//
// The policies as llvm::cl values, words and help, for ds-remat's `policy`
// option (Passes.td) and ds-opt's ds-compile-to-* `remat` option: declared
// once, so both print and parse the same words.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_PASSES_REMAT_REMATPOLICYOPTION_H
#define DSC_PASSES_REMAT_REMATPOLICYOPTION_H

#include "passes/remat/RematPolicy.h"

#include "llvm/Support/CommandLine.h"

namespace mlir::ds::remat {

inline llvm::cl::ValuesClass policyValues() {
  return llvm::cl::values(
      clEnumValN(Policy::none, "none", "keep every forward value"),
      clEnumValN(Policy::layers, "layers",
                 "keep the input of each group of transformer blocks"),
      clEnumValN(Policy::selective, "selective",
                 "keep GEMM outputs and norm inputs, recompute the rest"),
      clEnumValN(Policy::automatic, "auto",
                 "the fewest recomputed FLOPs whose activations fit "
                 "activation-memory"));
}

} // namespace mlir::ds::remat

#endif // DSC_PASSES_REMAT_REMATPOLICYOPTION_H
