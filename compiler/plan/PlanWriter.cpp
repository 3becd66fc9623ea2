//===- PlanWriter.cpp - the lowered plan as the plan dialect --------------===//
//
// ds-lower-to-plan's result as IR: a module @plan nested in the compiled
// module, holding the storage (plan.storage), the variables, and one
// func.func per program whose body declares its buffers (plan.buffer,
// plan.constant), then its inputs, its calls in order and its outputs.
// plan-place and ds-emit-plan read only this.
//
//===----------------------------------------------------------------------===//
#include "compiler/plan/PlanModel.h"

#include "dialects/ds/DsOps.h"
#include "dialects/plan/PlanOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include <map>
#include <set>

namespace dsc {

using namespace mlir;

namespace {

constexpr llvm::StringLiteral kPlanModule = "plan";

Type elementType(MLIRContext *ctx, DType t) {
  Builder b(ctx);
  switch (t) {
  case DType::f32:
    return b.getF32Type();
  case DType::f16:
    return b.getF16Type();
  case DType::bf16:
    return b.getBF16Type();
  case DType::f64:
    return b.getF64Type();
  case DType::i32:
    return b.getI32Type();
  case DType::i64:
    return b.getI64Type();
  }
  return b.getF32Type();
}

std::string storageSymbol(int index) { return "s" + std::to_string(index); }

class PlanWriter {
public:
  PlanWriter(ModuleOp top, const PlanModel &plan)
      : plan(plan), b(top.getContext()) {
    ctx = top.getContext();
    ctx->getOrLoadDialect<plan::PlanDialect>();
    ctx->getOrLoadDialect<func::FuncDialect>();
    if (ModuleOp old = findPlanModule(top))
      old.erase();
    b.setInsertionPointToEnd(top.getBody());
    module = b.create<ModuleOp>(top.getLoc(), kPlanModule);
    // Each constant's data, by its buffer.
    for (const PlanConstant &c : plan.constants)
      constantOf[c.buffer] = &c;
  }

  void write();

private:
  const PlanModel &plan;
  OpBuilder b;
  MLIRContext *ctx;
  ModuleOp module;
  std::map<uint32_t, const PlanConstant *> constantOf;

  MemRefType typeOf(const PlanBuffer &buf) {
    return MemRefType::get(buf.shape, elementType(ctx, buf.dtype));
  }
  FlatSymbolRefAttr storageRef(const PlanBuffer &buf) {
    return FlatSymbolRefAttr::get(ctx, storageSymbol(buf.storage));
  }

  void writeAttributes();
  void writeStorage();
  void writeVariables();
  void writeProgram(int index, const PlanProgram &p);
  Value declare(uint32_t id, int program);
};

void PlanWriter::write() {
  writeAttributes();
  b.setInsertionPointToEnd(module.getBody());
  writeStorage();
  writeVariables();
  for (auto [i, p] : llvm::enumerate(plan.programs))
    writeProgram(i, p);
}

void PlanWriter::writeAttributes() {
  auto set = [&](StringRef name, Attribute a) { module->setAttr(name, a); };
  set("plan.model", b.getStringAttr(plan.options.model));
  set("plan.world_size", b.getI64IntegerAttr(plan.options.worldSize));
  set("plan.tensor_parallel", b.getI64IntegerAttr(plan.options.tensorParallel));
  set("plan.sequence_parallel",
      b.getI64IntegerAttr(plan.options.sequenceParallel));
  if (plan.options.pipelineStages > 1) {
    set("plan.pipeline_stages",
        b.getI64IntegerAttr(plan.options.pipelineStages));
    set("plan.pipeline_stage", b.getI64IntegerAttr(plan.options.pipelineStage));
    if (plan.options.virtualStages > 1)
      set("plan.virtual_stages",
          b.getI64IntegerAttr(plan.options.virtualStages));
    SmallVector<int64_t> groups(plan.pipelineGroups.begin(),
                                plan.pipelineGroups.end());
    set("plan.pipeline_groups", b.getDenseI64ArrayAttr(groups));
  }
  set("plan.accumulation_steps",
      b.getI64IntegerAttr(plan.options.accumulationSteps));
  set("plan.micro_batch", b.getI64IntegerAttr(plan.microBatch));
  set("plan.seq_len", b.getI64IntegerAttr(plan.seqLen));
  set("plan.vocab_size", b.getI64IntegerAttr(plan.vocabSize));
  if (plan.lossScaling)
    set("plan.loss_scaling", b.getUnitAttr());
  if (plan.skipsOverflow)
    set("plan.skips_overflow", b.getUnitAttr());
  if (!plan.aliases.empty()) {
    SmallVector<Attribute> pairs;
    for (const auto &[alias, of] : plan.aliases)
      pairs.push_back(b.getStrArrayAttr({alias, of}));
    set("plan.aliases", b.getArrayAttr(pairs));
  }
  // The persistent arenas; plan-place adds the transient ones.
  SmallVector<NamedAttribute> arenas;
  for (Space s : {Space::Device, Space::Host})
    for (int c = 0; c < kNumCategories; ++c) {
      uint64_t bytes =
          (s == Space::Host ? plan.hostArenaBytes : plan.arenaBytes)[c];
      if (bytes)
        arenas.push_back(b.getNamedAttr(
            (categoryName(Category(c)) + (s == Space::Host ? "@host" : ""))
                .str(),
            b.getI64IntegerAttr(bytes)));
    }
  set("plan.arenas", b.getDictionaryAttr(arenas));
}

void PlanWriter::writeStorage() {
  // Only storage some buffer views (a transient whose producer writes a
  // variable directly is never referenced).
  std::vector<bool> used(plan.storages.size(), false);
  for (const PlanBuffer &buf : plan.buffers)
    used[buf.storage] = true;
  for (auto [i, s] : llvm::enumerate(plan.storages)) {
    if (!used[i])
      continue;
    b.create<plan::StorageOp>(
        module.getLoc(), b.getStringAttr(storageSymbol(i)),
        b.getStringAttr(s.name),
        plan::CategoryAttr::get(ctx, plan::Category(int(s.category))),
        plan::SpaceAttr::get(ctx, plan::Space(int(s.space))),
        b.getI64IntegerAttr(s.size),
        s.transient ? IntegerAttr() : b.getI64IntegerAttr(s.offset),
        s.transient ? b.getUnitAttr() : UnitAttr(), DenseI64ArrayAttr());
  }
}

void PlanWriter::writeVariables() {
  for (const PlanVariable &v : plan.variables) {
    const PlanBuffer &buf = plan.buffers[v.buffer];
    b.create<plan::VariableOp>(
        module.getLoc(), b.getStringAttr(v.name),
        plan::VarKindAttr::get(ctx, plan::VarKind(v.kind)),
        v.of.empty() ? StringAttr() : b.getStringAttr(v.of), storageRef(buf),
        TypeAttr::get(typeOf(buf)),
        plan::InitKindAttr::get(ctx, plan::InitKind(v.init)),
        b.getF64FloatAttr(v.std), b.getI64IntegerAttr(v.rngStream),
        b.getDenseI64ArrayAttr(v.shape),
        v.weightDecay ? b.getUnitAttr() : UnitAttr(),
        v.sharded ? b.getI64IntegerAttr(v.shardOffset) : IntegerAttr(),
        v.splitDim >= 0 ? b.getDenseI64ArrayAttr({v.splitDim, v.splitBlocks})
                        : DenseI64ArrayAttr());
  }
}

Value PlanWriter::declare(uint32_t id, int program) {
  const PlanBuffer &buf = plan.buffers[id];
  Location loc = b.getUnknownLoc();
  // A constant is declared with its data where it was made; later
  // programs view its storage.
  auto c = constantOf.find(id);
  if (c != constantOf.end() && buf.program == program) {
    // The data as lowering copied it (the dense attribute's raw bytes),
    // typed as the buffer.
    auto type = RankedTensorType::get(buf.shape, elementType(ctx, buf.dtype));
    const std::vector<uint8_t> &d = c->second->data;
    ArrayRef<char> raw(reinterpret_cast<const char *>(d.data()), d.size());
    return b.create<plan::ConstantOp>(
        loc, typeOf(buf), storageRef(buf),
        DenseElementsAttr::getFromRawBuffer(type, raw));
  }
  return b.create<plan::BufferOp>(
      loc, typeOf(buf), storageRef(buf),
      buf.viewOffset ? b.getI64IntegerAttr(buf.viewOffset) : IntegerAttr());
}

void PlanWriter::writeProgram(int index, const PlanProgram &p) {
  auto func = b.create<func::FuncOp>(module.getLoc(), p.name,
                                     b.getFunctionType({}, {}));
  func->setAttr("plan.flops", b.getF64FloatAttr(p.flops));
  func->setAttr("plan.recomputed_flops", b.getF64FloatAttr(p.recomputedFlops));
  func->setAttr("plan.comm_bytes", b.getF64FloatAttr(p.commBytes));
  func->setAttr("plan.events", b.getI64IntegerAttr(p.numEvents));
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(func.addEntryBlock());

  // Every buffer the program reads or writes, and those its lowering made
  // (constants), in the buffer table's order.
  std::set<uint32_t> ids;
  for (const PlanInstr &i : p.instrs)
    for (uint32_t id : llvm::concat<const uint32_t>(i.inputs, i.outputs))
      ids.insert(id);
  ids.insert(p.inputs.begin(), p.inputs.end());
  ids.insert(p.outputs.begin(), p.outputs.end());
  for (auto [id, buf] : llvm::enumerate(plan.buffers))
    if (buf.program == index)
      ids.insert(id);
  std::map<uint32_t, Value> valueOf;
  for (uint32_t id : ids)
    valueOf[id] = declare(id, index);
  auto values = [&](const std::vector<uint32_t> &list) {
    SmallVector<Value> out;
    for (uint32_t id : list)
      out.push_back(valueOf[id]);
    return out;
  };

  b.create<plan::InputsOp>(func.getLoc(), values(p.inputs));
  // An asynchronous call's token, by its index, for the markers that await
  // it.
  std::vector<Value> tokens(p.instrs.size());
  Type token = plan::TokenType::get(ctx);
  for (auto [n, i] : llvm::enumerate(p.instrs)) {
    Location loc = i.op ? i.op->getLoc() : b.getUnknownLoc();
    if (i.awaits >= 0) {
      b.create<plan::AwaitOp>(loc, tokens[i.awaits]);
      continue;
    }
    auto optional = [&](const std::vector<uint32_t> &events) {
      SmallVector<int32_t> e(events.begin(), events.end());
      return e.empty() ? DenseI32ArrayAttr() : b.getDenseI32ArrayAttr(e);
    };
    auto space = static_cast<Space>(i.space);
    auto call = b.create<plan::CallOp>(
        loc, i.async ? token : Type(), b.getStringAttr(i.kernel),
        values(i.inputs), values(i.outputs), b.getDenseI64ArrayAttr(i.intAttrs),
        b.getDenseF64ArrayAttr(i.floatAttrs),
        plan::StreamAttr::get(ctx, plan::Stream(i.stream)),
        space == Space::Host ? plan::SpaceAttr::get(ctx, plan::Space::host)
                             : plan::SpaceAttr(),
        optional(i.wait), optional(i.record),
        i.flops > 0 ? b.getF64FloatAttr(i.flops) : FloatAttr(),
        i.tensorGroup ? b.getUnitAttr() : UnitAttr());
    if (i.pipelineGroup)
      call->setAttr(kPipelineGroupCallAttr,
                    b.getI64IntegerAttr(int64_t(i.pipelineGroup)));
    tokens[n] = call.getToken();
  }
  b.create<plan::OutputsOp>(func.getLoc(), values(p.outputs));
  b.create<func::ReturnOp>(func.getLoc());
}

} // namespace

ModuleOp findPlanModule(ModuleOp module) {
  for (auto nested : module.getBody()->getOps<ModuleOp>())
    if (nested.getSymName() == kPlanModule)
      return nested;
  return nullptr;
}

ModuleOp requirePlanModule(ModuleOp module, StringRef who) {
  ModuleOp plan = findPlanModule(module);
  if (!plan)
    module.emitError(who) << ": no module @plan; run ds-lower-to-plan first";
  return plan;
}

void writePlanModule(ModuleOp module, const PlanModel &plan) {
  PlanWriter(module, plan).write();
}

} // namespace dsc
