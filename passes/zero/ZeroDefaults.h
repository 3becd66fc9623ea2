//===- ZeroDefaults.h - ZeRO's defaults, for the passes and config *- C++ -*-//
//
// DeepSpeed's defaults of the zero_optimization keys the passes take.
// passes/Passes.td gives them to ds-zero's and ds-offload's options, and
// compiler/config/Config.h to a ds_config.json that leaves a key out, so a
// pass run without a config (ds-opt) and a config without the key agree.
// Standard library only.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_PASSES_ZERO_ZERODEFAULTS_H
#define DSC_PASSES_ZERO_ZERODEFAULTS_H

#include <cstdint>

namespace mlir::ds::zero {

/// reduce_bucket_size: elements per gradient bucket.
constexpr int64_t kDefaultBucketSize = 500000000;
/// stage3_prefetch_bucket_size: the largest group gathered ahead of use.
constexpr int64_t kDefaultPrefetchBucketSize = 50000000;
/// stage3_max_live_parameters: gathered elements live at once.
constexpr int64_t kDefaultMaxLiveParameters = 1000000000;
/// stage3_param_persistence_threshold: smaller parameters stay whole.
constexpr int64_t kDefaultPersistenceThreshold = 100000;

} // namespace mlir::ds::zero

#endif // DSC_PASSES_ZERO_ZERODEFAULTS_H
