//===- RematPolicy.h - the names of ds-remat's policies ---------*- C++ -*-===//
//
// One spelling for dsc --remat, ds_config.json's
// activation_checkpointing.remat, the pass option and --report. LLVM's ADT
// only, so the config reader includes it without the passes' libraries.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_PASSES_REMAT_REMATPOLICY_H
#define DSC_PASSES_REMAT_REMATPOLICY_H

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <iterator>

namespace mlir::ds::remat {

constexpr llvm::StringLiteral kNone = "none";
constexpr llvm::StringLiteral kLayers = "layers";
constexpr llvm::StringLiteral kSelective = "selective";
constexpr llvm::StringLiteral kAuto = "auto";

/// The defaults of ds-remat's options and of the config's
/// activation_checkpointing: transformer blocks per checkpoint (layers), and
/// auto's activation budget in bytes (0: as small as possible).
constexpr int64_t kDefaultEvery = 1;
constexpr int64_t kDefaultActivationMemory = 0;

/// Every policy, in the order messages list them.
constexpr llvm::StringRef kPolicies[] = {kNone, kLayers, kSelective, kAuto};

inline bool isPolicy(llvm::StringRef name) {
  return llvm::is_contained(kPolicies, name);
}

/// ds-remat's `policy` option, in kPolicies' order (`auto` is a C++
/// keyword, hence `automatic`).
enum class Policy { none, layers, selective, automatic };

inline llvm::StringRef policyName(Policy p) {
  return kPolicies[static_cast<int>(p)];
}

/// The policy called `name` (isPolicy(name) must hold).
inline Policy policyNamed(llvm::StringRef name) {
  return static_cast<Policy>(llvm::find(kPolicies, name) -
                             std::begin(kPolicies));
}

/// The policy a compiled module records (ds.remat), where an absent one
/// means none ran.
inline llvm::StringRef appliedPolicy(llvm::StringRef recorded) {
  return recorded.empty() ? llvm::StringRef(kNone) : recorded;
}

} // namespace mlir::ds::remat

#endif // DSC_PASSES_REMAT_REMATPOLICY_H
