//===- PlanModel.h - the plan in memory, before serialization ---*- C++ -*-===//
//
// lowerToPlan turns the training step (phase `train` and later) into a list of
// kernel calls over views of storage; writePlanModule writes that as the
// plan dialect, where plan-place places transient storage, and
// readPlanModule reads it back for serializePlan (the runtime's FlatBuffers
// schema) and the report.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_COMPILER_PLAN_PLANMODEL_H
#define DSC_COMPILER_PLAN_PLANMODEL_H

#include "runtime/core/DType.h"
#include "runtime/core/MemorySpace.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringRef.h"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace dsc {

struct DsConfig; // compiler/config/Config.h

/// Where storage starts in its arena: 64-byte multiples (a cache line, and
/// every vector width the backends load).
constexpr uint64_t kStorageAlign = 64;

/// The arena categories of plan.fbs, in its order.
enum class Category : uint8_t {
  Params,
  Grads,
  OptimizerState,
  Activations,
  CommBuffers,
  Workspace,
  Inputs,
  Constants
};
constexpr int kNumCategories = 8;
llvm::StringRef categoryName(Category c);

/// dsc::MemorySpace (runtime/core/MemorySpace.h) in the compiler's
/// spelling, value for value; memorySpace() converts, and the plan's Space
/// is plan::schemaSpace of that (runtime/plan/PlanFormat.h).
enum class Space : uint8_t {
  Device = static_cast<uint8_t>(MemorySpace::device),
  Host = static_cast<uint8_t>(MemorySpace::host)
};
constexpr MemorySpace memorySpace(Space s) {
  return MemorySpace(static_cast<uint8_t>(s));
}

struct PlanBuffer {
  Category arena;
  Space space = Space::Device; ///< the arena is (space, category)
  uint64_t offset = 0;
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
  std::string name;
  uint64_t bytes() const;
  /// What ds-lower-to-plan knows before placement: the storage the buffer
  /// views, the bytes into it, and the program whose lowering made it (-1:
  /// the variables' layout). `offset` is set only once storage is placed.
  int storage = -1;
  uint64_t viewOffset = 0;
  int program = -1;
};

/// Bytes in an arena that buffers view (plan.storage): persistent storage
/// is laid out by lowering; transient storage (what one program computes)
/// is placed by plan-place.
struct PlanStorage {
  std::string name;
  Category category = Category::Activations;
  Space space = Space::Device;
  uint64_t size = 0; ///< bytes written (transient: placed at 64-byte multiples)
  uint64_t offset = 0; ///< persistent storage only, until placed
  bool transient = false;
};

struct PlanVariable {
  std::string name;
  uint8_t kind = 0; ///< 0 param, 1 grad, 2 opt_state (plan.fbs VarKind)
  std::string of;
  uint32_t buffer = 0;
  uint8_t init = 0; ///< 0 zeros, 1 ones, 2 normal
  double std = 0;
  uint32_t rngStream = 0;
  bool weightDecay = false;
  /// ZeRO stage 3: `buffer` is this rank's shard of the group holding the
  /// variable, which starts at element `shardOffset` of the group.
  bool sharded = false;
  uint64_t shardOffset = 0;
  std::vector<int64_t> shape; ///< the whole variable's
  /// Tensor parallelism (dist.tensor_split): the dimension of `shape` cut
  /// over the group, in `splitBlocks` blocks; -1 when whole.
  int64_t splitDim = -1;
  int64_t splitBlocks = 1;
};

struct PlanConstant {
  uint32_t buffer = 0;
  std::vector<uint8_t> data;
};

struct PlanInstr {
  std::string kernel;
  uint8_t stream = 0; ///< plan.fbs Stream: 0 compute, 1 comm, 2 h2d, 3 d2h
  uint8_t space = 0;  ///< the Space it runs in, as its value
  std::vector<uint32_t> wait, record; ///< events
  /// As lowered, before the stream and event passes: a collective or copy
  /// between memory spaces (`async`), or a marker with no kernel where the
  /// program needs the result of instruction `awaits`.
  bool async = false;
  int awaits = -1;
  /// A collective over the rank's tensor-parallel group (dist.tensor_group)
  /// rather than its data-parallel group.
  bool tensorGroup = false;
  /// A collective over these pipeline stages (a bit each;
  /// dist.pipeline_group), 0 for none.
  uint64_t pipelineGroup = 0;
  double flops = 0; ///< the op's KernelOpInterface count
  /// Its place in a pipeline stage's schedule (dist::ScheduleTag): the
  /// micro-batch, -1 for none, and plan.fbs SchedulePart's value.
  int32_t microBatch = -1;
  uint8_t schedulePart = 0;
  std::vector<uint32_t> inputs, outputs;
  std::vector<int64_t> intAttrs;
  std::vector<double> floatAttrs;
  std::string loc;
  mlir::Operation *op = nullptr; ///< source op (its location names the call)
};

struct PlanProgram {
  std::string name;
  std::vector<PlanInstr> instrs;
  std::vector<uint32_t> inputs, outputs;
  double flops = 0;
  double recomputedFlops = 0; ///< of ops marked ds.recompute (ds-remat)
  double commBytes = 0;       ///< bytes each rank hands to collectives per run
  uint64_t activationBytes = 0; ///< this program's activation peak
  /// Per category, this program's own peak in the device's and the host's
  /// transient arenas (activations, comm_buffers; 0 elsewhere).
  std::array<uint64_t, kNumCategories> arenaPeaks{}, hostArenaPeaks{};
  uint32_t numEvents = 0;
};

struct PlanOptions {
  int64_t worldSize = 1;
  int64_t tensorParallel = 1; ///< ranks of a tensor-parallel group
  /// Ranks of a Ulysses sequence-parallel group (ds-ulysses): each holds
  /// [B, L / S] of the tokens; data parallelism spans the world.
  int64_t sequenceParallel = 1;
  int64_t accumulationSteps = 1;
  /// A pipeline's stages and the one this plan runs (the stage module's
  /// dist.pipeline_stages and dist.stage).
  int64_t pipelineStages = 1, pipelineStage = 0;
  /// The interleaved schedule's model chunks a stage (1 otherwise).
  int64_t virtualStages = 1;
  std::string model;
};

struct PlanModel {
  PlanOptions options;
  int64_t microBatch = 0, seqLen = 0, vocabSize = 0;
  /// Per category: the device arenas and the host arenas (offload).
  std::array<uint64_t, kNumCategories> arenaBytes{}, hostArenaBytes{};
  bool hasHostArenas() const {
    for (uint64_t b : hostArenaBytes)
      if (b)
        return true;
    return false;
  }
  std::vector<PlanBuffer> buffers;
  std::vector<PlanVariable> variables;
  /// (alias, parameter): other state-dict names of a parameter (tied
  /// weights of an exported module; the module's ds.aliases).
  std::vector<std::pair<std::string, std::string>> aliases;
  std::vector<PlanConstant> constants;
  std::vector<PlanProgram> programs;
  std::vector<PlanStorage> storages; ///< lowering's, for the plan IR
  bool lossScaling = false;          ///< micro_step and apply take `loss_scale`
  bool skipsOverflow = false;        ///< apply has ds.overflow_guard
  /// Every set of stages a collective of the pipeline runs over
  /// (Plan.pipeline_groups), the same in every stage's plan.
  std::vector<uint64_t> pipelineGroups;
  /// A pipeline stage's: the whole model's parameter elements (0: this
  /// plan's own are the model's).
  uint64_t modelParameters = 0;
};

/// Lowers @micro_step and @apply of a `train`-phase module. Emits a
/// diagnostic at the offending op and fails on anything it cannot place.
/// Reads the module's `ds.aliases` ({alias = "parameter"}) into
/// plan.aliases, refusing an alias of a non-parameter or one that is a
/// variable itself (part of lowerToPlan).
mlir::LogicalResult lowerAliases(mlir::ModuleOp module, PlanModel &plan);

mlir::LogicalResult lowerToPlan(mlir::ModuleOp module,
                                const PlanOptions &options, PlanModel &plan);

/// The FlatBuffer bytes of `plan` (runtime/schema/plan.fbs), with the
/// run-time settings of `config` (its LR schedule, its fp16 loss scaler
/// when the programs take a loss scale, and the config itself as
/// config_json) written into the plan's tables as they are, since no pass
/// reads them. A null `config` (none given) writes the defaults and "{}".
std::vector<uint8_t> serializePlan(const PlanModel &plan,
                                   const DsConfig *config);

/// The file of a pipeline: each stage's plan bytes (serializePlan's),
/// stage s at index s, nested in one sealed plan for `worldSize` ranks in
/// tensor groups of `tensorParallel`.
std::vector<uint8_t>
serializePipeline(const std::vector<std::vector<uint8_t>> &stagePlans,
                  int64_t worldSize, int64_t tensorParallel,
                  const std::string &model);

/// Writes `plan` (as lowered, transient storage not yet placed) into
/// `module` as the nested module @plan of the plan dialect, replacing one
/// there (PlanWriter.cpp).
void writePlanModule(mlir::ModuleOp module, const PlanModel &plan);

/// On a plan.call: the stages a pipeline-group collective runs over
/// (PlanInstr::pipelineGroup), an i64 of stage bits.
constexpr llvm::StringLiteral kPipelineGroupCallAttr = "plan.pipeline_group";

/// The nested module @plan of `module`, or null.
mlir::ModuleOp findPlanModule(mlir::ModuleOp module);

/// The nested module @plan of `module`, or null after an error on `module`
/// that `who` (a pass) needs one: "WHO: no module @plan; run
/// ds-lower-to-plan first".
mlir::ModuleOp requirePlanModule(mlir::ModuleOp module, llvm::StringRef who);

/// Reads the placed plan module of `module` back into a PlanModel, buffers
/// numbered in the order they are first declared (PlanReader.cpp). Emits
/// an error and fails when there is none or storage is left unplaced.
mlir::LogicalResult readPlanModule(mlir::ModuleOp module, PlanModel &plan);

} // namespace dsc

#endif // DSC_COMPILER_PLAN_PLANMODEL_H
