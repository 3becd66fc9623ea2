//===- Pipelines.h - dsc's compile phases -----------------------*- C++ -*-===//
//
// The phases of DESIGN.md as named pass pipelines. dsc and ds-opt build them
// through the same function, so `ds-opt --ds-compile-to-train` replays what
// `dsc --compile-to=train` ran.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_COMPILER_PIPELINES_H
#define DSC_COMPILER_PIPELINES_H

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <optional>

namespace dsc {

/// In pipeline order; each phase includes the ones before it.
enum class Phase { Input, Train, Dist, Fused, Scheduled, Plan, Emit };

struct TrainOptions;

/// A phase of the table in Pipelines.cpp: its name (dsc --compile-to and
/// ds-opt's ds-compile-to-NAME), what holds after it, and the passes it adds
/// to the previous phase's pipeline (null: none; plan lowering and emission
/// run after the pass manager).
struct PhaseInfo {
  Phase phase;
  llvm::StringLiteral name;
  llvm::StringLiteral summary;
  void (*addPasses)(mlir::OpPassManager &pm, const TrainOptions &options);
};

/// Every phase, in pipeline order.
llvm::ArrayRef<PhaseInfo> phases();

std::optional<Phase> parsePhase(llvm::StringRef name);
llvm::StringRef phaseName(Phase phase);
/// "input|train|...": the phases this build implements, for messages.
llvm::StringRef phaseList();

/// Everything the training-step phases need to know; ds_config.json maps
/// onto this.
struct TrainOptions {
  int64_t accumulationSteps = 1;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weightDecay = 0.01;
  double gradClip = 0.0;
  int64_t worldSize = 1;
  int64_t zeroStage = 0;
  int64_t reduceBucketSize = 500000000;
  int64_t prefetchBucketSize = 50000000;
  int64_t maxLiveParameters = 1000000000;
  int64_t persistenceThreshold = 100000;
};

void buildPipeline(mlir::OpPassManager &pm, Phase phase,
                   const TrainOptions &options);

/// Registers dsc's dialects (and the ones its IR uses) into `registry`, and
/// its passes and pipelines into the global pass registry.
void registerAll(mlir::DialectRegistry &registry);

} // namespace dsc

#endif // DSC_COMPILER_PIPELINES_H
