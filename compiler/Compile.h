//===- Compile.h - one compilation, for dsc and the Python API --*- C++ -*-===//
//
// What dsc does between parsing its flags and writing its output: read the
// config, build or parse the model, run the phases, check the device budget.
// tools/dsc (compiler/DscMain.cpp) and the Python module (python/) both call
// compile(); each prints or raises the lines it reports.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_COMPILER_COMPILE_H
#define DSC_COMPILER_COMPILE_H

#include "compiler/Pipelines.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace dsc {

struct CompileRequest {
  /// The model: exactly one of an MLIR file, MLIR text (named inputName in
  /// messages) and a built-in model spec ("gpt2:n_layer=2,...").
  std::string inputPath;
  std::string inputText;
  std::string inputName = "input.mlir";
  std::string model;
  /// A ds_config.json: a file, or its text (named configName); none: the
  /// passes' defaults.
  std::string configPath;
  std::string configText;
  std::string configName = "ds_config.json";
  int64_t worldSize = 1;
  /// Rows of the eval program's batch; unset: the training micro-batch.
  std::optional<int64_t> evalMicroBatch;
  /// Built-in models also get the sampling programs "sample_<T>" (one row,
  /// a few lengths; plan/ProgramNames.h); false: dsrun samples with eval.
  bool samplePrograms = true;
  /// Overrides of the config's activation_checkpointing (dsc's flags).
  std::string remat;
  std::optional<int64_t> rematEvery;
  std::optional<int64_t> activationMemory;
  /// false: phase fused leaves an LM head and its loss as five ops.
  bool fuseLmHead = true;
  /// false: phase fused leaves elementwise chains as separate ops.
  bool fuseElementwise = true;
  /// ds-fold-attention-layout (dsc --fold-attention-layout).
  bool foldAttentionLayout = true;
  /// The fused head's rows a chunk; 0: ds-fuse-lm-head's rule.
  int64_t lmHeadChunkRows = 0;
  /// Refuse a plan that needs more device memory per rank ("80GiB"); the
  /// balanced pipeline partition keeps each stage's prediction within it.
  std::string deviceMemory;
  /// The machine's FLOP/s over its memory bandwidth (--machine), which the
  /// balanced pipeline partition weighs ops with; 0: the h100 model's.
  double flopsPerByte = 0;
  /// Parameter groups (dsc.initialize): every parameter decays but these
  /// (ds-adamw decay-all, no-decay); unset: rank >= 2 decays.
  std::optional<std::vector<std::string>> noDecay;
  Phase phase = Phase::Emit;
  /// A textual pass pipeline instead of the phases' (plan phases follow).
  std::string passPipeline;
  /// The plan's @forward must take what dsrun feeds (a plan file for dsrun;
  /// false for a report only).
  bool forDsrun = true;
  /// Applies MLIR's command-line pass-manager options (dsc); may be null.
  std::function<mlir::LogicalResult(mlir::PassManager &)> configurePasses;
};

/// What compile() reports, one line at a time, as it goes.
enum class CompileMessage {
  Error,      ///< a problem with the input ("dsc: " + line for the tool)
  Note,       ///< a config note ("dsc: note: " + line)
  Diagnostic, ///< an MLIR diagnostic, already "<where>: error: <what>"
};
using CompileSink =
    std::function<void(CompileMessage kind, const std::string &line)>;

struct Compilation {
  std::unique_ptr<mlir::MLIRContext> context;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  /// Filled by the plan phases (phase >= Plan).
  std::shared_ptr<PlanResult> plan;
  /// The module's ds.remat attribute (the policy the remat phase ran), or "".
  std::string remat;
};

/// Runs the request. 0 on success; 2 (bad input) after reporting at least
/// one line to `sink`.
int compile(const CompileRequest &request, Compilation &out,
            const CompileSink &sink);

} // namespace dsc

#endif // DSC_COMPILER_COMPILE_H
