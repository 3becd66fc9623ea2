//===- PlanReader.cpp - the plan dialect back into a PlanModel ------------===//
//
// What ds-emit-plan serializes and the report reads: the placed module
// @plan (PlanWriter.cpp, plan-place) as the runtime's tables. Buffers are
// numbered in the order they are first used: the variables', then each
// program's (readProgram says in which order).
//
//===----------------------------------------------------------------------===//
#include "compiler/plan/PlanModel.h"

#include "dialects/dist/DistOps.h"
#include "dialects/ds/DsUtils.h"
#include "dialects/plan/PlanOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <map>
#include <tuple>

namespace dsc {

using namespace mlir;

namespace {

/// The name a location gives an instruction in the plan (dsrun's --trace
/// and its errors): a NameLoc's name, a file's "file:line", or the first
/// of a fused location's.
std::string locationName(Location loc) {
  if (auto name = dyn_cast<NameLoc>(loc))
    return name.getName().str();
  if (auto file = dyn_cast<FileLineColLoc>(loc))
    return (file.getFilename().getValue() + ":" + Twine(file.getLine())).str();
  if (auto fused = dyn_cast<FusedLoc>(loc))
    return fused.getLocations().empty() ? ""
                                        : locationName(fused.getLocations()[0]);
  return "";
}

int64_t intAttr(Operation *op, StringRef name) {
  auto a = op->getAttrOfType<IntegerAttr>(name);
  return a ? a.getInt() : 0;
}

double floatAttr(Operation *op, StringRef name) {
  auto a = op->getAttrOfType<FloatAttr>(name);
  return a ? a.getValueAsDouble() : 0.0;
}

std::vector<uint32_t> events(std::optional<ArrayRef<int32_t>> list) {
  if (!list)
    return {};
  return std::vector<uint32_t>(list->begin(), list->end());
}

class PlanReader {
public:
  PlanReader(ModuleOp module, PlanModel &plan)
      : module(module), plan(plan), symbols(module) {}

  LogicalResult read();

private:
  ModuleOp module;
  PlanModel &plan;
  SymbolTable symbols;
  std::map<std::tuple<Operation *, const void *, uint64_t>, uint32_t> idOf;

  void readAttributes();
  /// A dictionary of arena sizes by name ("activations", "comm_buffers@host").
  static void readArenaBytes(Operation *op, StringRef attr,
                             std::array<uint64_t, kNumCategories> &device,
                             std::array<uint64_t, kNumCategories> &host);
  FailureOr<uint32_t> bufferId(Operation *user, FlatSymbolRefAttr storage,
                               MemRefType type, uint64_t viewOffset);
  LogicalResult readVariable(plan::VariableOp v);
  LogicalResult readProgram(func::FuncOp func);
};

void PlanReader::readAttributes() {
  Operation *m = module;
  if (auto model = m->getAttrOfType<StringAttr>("plan.model"))
    plan.options.model = model.str();
  plan.options.worldSize = intAttr(m, "plan.world_size");
  plan.options.tensorParallel = intAttr(m, "plan.tensor_parallel");
  plan.options.sequenceParallel =
      std::max<int64_t>(1, intAttr(m, "plan.sequence_parallel"));
  plan.options.accumulationSteps = intAttr(m, "plan.accumulation_steps");
  plan.options.pipelineStages =
      std::max<int64_t>(1, intAttr(m, "plan.pipeline_stages"));
  plan.options.pipelineStage = intAttr(m, "plan.pipeline_stage");
  plan.options.virtualStages =
      std::max<int64_t>(1, intAttr(m, "plan.virtual_stages"));
  if (auto groups = m->getAttrOfType<DenseI64ArrayAttr>("plan.pipeline_groups"))
    for (int64_t g : groups.asArrayRef())
      plan.pipelineGroups.push_back(uint64_t(g));
  plan.microBatch = intAttr(m, "plan.micro_batch");
  plan.seqLen = intAttr(m, "plan.seq_len");
  plan.vocabSize = intAttr(m, "plan.vocab_size");
  plan.lossScaling = m->hasAttr("plan.loss_scaling");
  plan.skipsOverflow = m->hasAttr("plan.skips_overflow");
  if (auto aliases = m->getAttrOfType<ArrayAttr>("plan.aliases"))
    for (Attribute pair : aliases) {
      auto names = cast<ArrayAttr>(pair);
      plan.aliases.push_back(
          {cast<StringAttr>(names[0]).str(), cast<StringAttr>(names[1]).str()});
    }
  readArenaBytes(m, "plan.arenas", plan.arenaBytes, plan.hostArenaBytes);
}

void PlanReader::readArenaBytes(Operation *op, StringRef attr,
                                std::array<uint64_t, kNumCategories> &device,
                                std::array<uint64_t, kNumCategories> &host) {
  if (auto arenas = op->getAttrOfType<DictionaryAttr>(attr))
    for (NamedAttribute a : arenas) {
      auto [category, space] = a.getName().getValue().split('@');
      for (int c = 0; c < kNumCategories; ++c)
        if (categoryName(Category(c)) == category)
          (space.empty() ? device : host)[c] =
              cast<IntegerAttr>(a.getValue()).getInt();
    }
}

FailureOr<uint32_t> PlanReader::bufferId(Operation *user,
                                         FlatSymbolRefAttr storage,
                                         MemRefType type, uint64_t viewOffset) {
  auto s = symbols.lookup<plan::StorageOp>(storage.getValue());
  if (!s)
    return user->emitError("plan: no plan.storage ") << storage, failure();
  auto key =
      std::make_tuple(s.getOperation(), type.getAsOpaquePointer(), viewOffset);
  if (auto it = idOf.find(key); it != idOf.end())
    return it->second;
  std::optional<int64_t> offset = s.getOffset();
  if (!offset)
    return s.emitError("plan: storage '")
               << s.getName() << "' is not placed; run plan-place first",
           failure();
  PlanBuffer b;
  b.arena = Category(static_cast<int>(s.getCategory()));
  b.space = Space(static_cast<int>(s.getSpace()));
  b.offset = uint64_t(*offset) + viewOffset;
  b.dtype = *mlir::ds::dtypeOfElement(type.getElementType());
  b.shape.assign(type.getShape().begin(), type.getShape().end());
  b.name = s.getName().str();
  plan.buffers.push_back(std::move(b));
  return idOf[key] = plan.buffers.size() - 1;
}

LogicalResult PlanReader::readVariable(plan::VariableOp v) {
  FailureOr<uint32_t> id =
      bufferId(v, v.getStorageAttr(), cast<MemRefType>(v.getType()), 0);
  if (failed(id))
    return failure();
  PlanVariable pv;
  pv.name = v.getName().str();
  pv.kind = static_cast<uint8_t>(v.getKind());
  pv.of = v.getOf() ? v.getOf()->str() : "";
  pv.buffer = *id;
  pv.init = static_cast<uint8_t>(v.getInit());
  pv.std = v.getStd().convertToDouble();
  pv.rngStream = static_cast<uint32_t>(v.getRng());
  pv.weightDecay = v.getDecay();
  pv.sharded = v.getShardOffset().has_value();
  pv.shardOffset = v.getShardOffset().value_or(0);
  pv.shape.assign(v.getShape().begin(), v.getShape().end());
  if (std::optional<ArrayRef<int64_t>> split = v.getTensorSplit()) {
    if (split->size() != 2)
      return v.emitError("plan: tensor_split needs [dim, blocks]");
    pv.splitDim = (*split)[0];
    pv.splitBlocks = (*split)[1];
  }
  plan.variables.push_back(std::move(pv));
  return success();
}

LogicalResult PlanReader::readProgram(func::FuncOp func) {
  PlanProgram p;
  p.name = func.getSymName().str();
  p.flops = floatAttr(func, "plan.flops");
  p.recomputedFlops = floatAttr(func, "plan.recomputed_flops");
  p.commBytes = floatAttr(func, "plan.comm_bytes");
  p.activationBytes = intAttr(func, "plan.activation_bytes");
  readArenaBytes(func, "plan.arena_peaks", p.arenaPeaks, p.hostArenaPeaks);
  p.numEvents = intAttr(func, "plan.events");
  // Buffers are numbered as the plan has always numbered them: in each
  // program its inputs, then the constants it declares, then each call's
  // inputs and outputs in order, then its outputs. A view nothing uses
  // gets no number.
  DenseMap<Value, uint32_t> bufferOf;
  bool failedView = false;
  auto id = [&](Value v) -> uint32_t {
    if (auto it = bufferOf.find(v); it != bufferOf.end())
      return it->second;
    FailureOr<uint32_t> n = failure();
    if (auto view = v.getDefiningOp<plan::BufferOp>())
      n = bufferId(view, view.getStorageAttr(), view.getType(),
                   view.getViewOffset().value_or(0));
    else if (auto constant = v.getDefiningOp<plan::ConstantOp>())
      n = bufferId(constant, constant.getStorageAttr(), constant.getType(), 0);
    failedView |= failed(n);
    return bufferOf[v] = succeeded(n) ? *n : 0;
  };
  auto ids = [&](ValueRange values) {
    std::vector<uint32_t> out;
    for (Value v : values)
      out.push_back(id(v));
    return out;
  };
  Block &body = func.front();
  for (auto inputs : body.getOps<plan::InputsOp>())
    p.inputs = ids(inputs.getBuffers());
  for (auto constant : body.getOps<plan::ConstantOp>()) {
    uint32_t buffer = id(constant);
    ArrayRef<char> raw =
        cast<DenseElementsAttr>(constant.getValue()).getRawData();
    plan.constants.push_back({buffer, {raw.begin(), raw.end()}});
  }
  for (auto call : body.getOps<plan::CallOp>()) {
    PlanInstr i;
    i.kernel = call.getKernel().str();
    i.stream = static_cast<uint8_t>(call.getStream());
    i.space =
        static_cast<uint8_t>(call.getPlace().value_or(plan::Space::device));
    i.wait = events(call.getWait());
    i.record = events(call.getRecord());
    i.inputs = ids(call.getIns());
    i.outputs = ids(call.getOuts());
    i.intAttrs.assign(call.getInts().begin(), call.getInts().end());
    i.floatAttrs.assign(call.getFloats().begin(), call.getFloats().end());
    i.loc = locationName(call.getLoc());
    if (auto tag = dist::scheduleTagOf(call.getLoc())) {
      i.microBatch = int32_t(tag->microBatch);
      i.schedulePart = tag->part == 'F' ? 1 : tag->part == 'B' ? 2 : 3;
    }
    i.flops = call.getFlops() ? call.getFlops()->convertToDouble() : 0.0;
    i.tensorGroup = call.getTensorGroup();
    if (auto group = call->getAttrOfType<IntegerAttr>(kPipelineGroupCallAttr))
      i.pipelineGroup = uint64_t(group.getInt());
    p.instrs.push_back(std::move(i));
  }
  for (auto outputs : body.getOps<plan::OutputsOp>())
    p.outputs = ids(outputs.getBuffers());
  if (failedView)
    return failure();
  plan.programs.push_back(std::move(p));
  return success();
}

LogicalResult PlanReader::read() {
  readAttributes();
  for (auto v : module.getOps<plan::VariableOp>())
    if (failed(readVariable(v)))
      return failure();
  for (auto func : module.getOps<func::FuncOp>())
    if (failed(readProgram(func)))
      return failure();
  return success();
}

} // namespace

LogicalResult readPlanModule(ModuleOp module, PlanModel &plan) {
  plan = PlanModel();
  ModuleOp planModule = requirePlanModule(module, "plan");
  if (!planModule)
    return failure();
  return PlanReader(planModule, plan).read();
}

} // namespace dsc
