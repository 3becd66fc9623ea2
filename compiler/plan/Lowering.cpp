//===- Lowering.cpp - training step -> kernel calls over placed buffers ---===//
//
// Persistent state is packed densely per category in a fixed order (params
// with weight decay, then without; grads and moments in the same order) so
// that optimizer updates and zeroing run as one kernel over a flat range.
// Everything else a program computes lives in the activations arena, placed
// by liveness with greedy-by-size first-fit (as TFLite's and XLA's heap
// simulators): bigger buffers first, each at the lowest offset that does
// not overlap a placed buffer whose lifetime intersects its own.
//
//===----------------------------------------------------------------------===//

#include "compiler/plan/PlanModel.h"
#include "dialects/dist/DistOps.h"
#include "dialects/ds/DsOps.h"
#include "dialects/ds/DsUtils.h"
#include "runtime/rng/Philox.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/TypeSwitch.h"

#include <algorithm>
#include <climits>
#include <map>

using namespace mlir;
using namespace mlir::ds;

namespace dsc {

llvm::StringRef categoryName(Category c) {
  static const char *names[] = {
      "params",       "grads",     "optimizer_state", "activations",
      "comm_buffers", "workspace", "inputs",          "constants"};
  return names[static_cast<int>(c)];
}

static uint64_t elemSize(ElemType t) {
  switch (t) {
  case ElemType::F16:
  case ElemType::BF16:
    return 2;
  case ElemType::F64:
  case ElemType::I64:
    return 8;
  default:
    return 4;
  }
}

uint64_t PlanBuffer::bytes() const {
  uint64_t n = 1;
  for (int64_t d : shape)
    n *= static_cast<uint64_t>(d);
  return n * elemSize(dtype);
}

namespace {

constexpr uint64_t kAlign = 64;
uint64_t alignUp(uint64_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

std::optional<ElemType> elemTypeOf(Type t) {
  if (t.isF32())
    return ElemType::F32;
  if (t.isF16())
    return ElemType::F16;
  if (t.isBF16())
    return ElemType::BF16;
  if (t.isF64())
    return ElemType::F64;
  if (t.isInteger(32))
    return ElemType::I32;
  if (t.isInteger(64))
    return ElemType::I64;
  return std::nullopt;
}

uint64_t bytesOf(RankedTensorType t) {
  return static_cast<uint64_t>(t.getNumElements()) *
         elemSize(*elemTypeOf(t.getElementType()));
}

std::string locString(Location loc) {
  if (auto name = dyn_cast<NameLoc>(loc))
    return name.getName().str();
  if (auto file = dyn_cast<FileLineColLoc>(loc))
    return (file.getFilename().getValue() + ":" + Twine(file.getLine())).str();
  if (auto fused = dyn_cast<FusedLoc>(loc))
    return fused.getLocations().empty() ? ""
                                        : locString(fused.getLocations()[0]);
  return "";
}

/// A storage location: fixed (variables, constants, inputs) or a transient
/// placed by liveness.
struct Slot {
  Category category = Category::Activations;
  bool fixed = false;
  uint64_t offset = 0;
  uint64_t bytes = 0; ///< placement size (transients: 64-byte multiple)
  int first = INT_MAX, last = -1;
  std::string name;
  uint64_t used = 0; ///< bytes actually written; the arena peak uses this
};

struct Ref {
  int slot;
  RankedTensorType type;
  uint64_t offset = 0; ///< bytes into the slot (views of a part of it)
};

struct Pending {
  Pending() = default;
  Pending(std::string kernel, SmallVector<Ref> ins, SmallVector<Ref> outs,
          std::vector<int64_t> ints, std::vector<double> floats, Operation *op)
      : kernel(std::move(kernel)), ins(std::move(ins)), outs(std::move(outs)),
        ints(std::move(ints)), floats(std::move(floats)), op(op) {}

  std::string kernel;
  SmallVector<Ref> ins, outs;
  std::vector<int64_t> ints;
  std::vector<double> floats;
  Operation *op = nullptr;
  uint8_t stream = 0; ///< 0 compute, 1 comm
  std::vector<uint32_t> waits, records;
  /// A collective's buffers stay live until the compute instruction that
  /// waits for it (its dist.wait); -1 for compute instructions.
  int liveUntil = -1;
};

/// Ops whose result is a view of their operand's bytes: reshapes, and
/// slices of a 1-D tensor (a contiguous range of it).
bool isView(Operation *op) {
  if (isa<ReshapeOp>(op))
    return true;
  auto slice = dyn_cast<SliceOp>(op);
  return slice && cast<RankedTensorType>(slice.getX().getType()).getRank() == 1;
}

/// Kernels that read element i of an operand before writing element i of
/// the result, so the result may overwrite a same-shaped operand.
bool isInPlaceSafe(Operation *op) {
  return isa<AddOp, SubOp, MulOp, DivOp, MinimumOp, MaximumOp, NegOp, ExpOp,
             LogOp, TanhOp, SqrtOp, RsqrtOp, ReluOp, SiluOp, GeluOp, ReluGradOp,
             SiluGradOp, GeluGradOp, DropoutOp, AdamWOp>(op);
}

class Lowering {
public:
  Lowering(ModuleOp module, PlanModel &plan) : module(module), plan(plan) {}

  LogicalResult run() {
    if (failed(layoutVariables()))
      return failure();
    for (StringRef name : {"micro_step", "apply"}) {
      auto func = module.lookupSymbol<func::FuncOp>(name);
      if (!func)
        return module.emitError("plan: no @")
               << name << "; compile to phase `train` first";
      if (failed(lowerProgram(func)))
        return failure();
    }
    // Stages 0-1 with accumulation: the micro-step that reduces.
    if (auto sync = module.lookupSymbol<func::FuncOp>("micro_step_sync"))
      if (failed(lowerProgram(sync)))
        return failure();
    for (Category c : {Category::Activations, Category::CommBuffers})
      arena(c) = transientPeak[static_cast<int>(c)];
    return success();
  }

private:
  ModuleOp module;
  PlanModel &plan;
  llvm::StringMap<int> varSlot;                 // variable -> slot
  llvm::StringMap<int> groupParams, groupGrads; // dist.group -> flat slot
  std::vector<Slot> slots;                      // all programs
  std::map<std::tuple<int, const void *, uint64_t>, uint32_t>
      bufferOf; // (slot, type, offset)
  llvm::DenseMap<Attribute, int> constSlot;
  /// Per category, the end of the highest transient placed.
  std::array<uint64_t, kNumCategories> transientPeak{};

  uint64_t &arena(Category c) { return plan.arenaBytes[static_cast<int>(c)]; }

  int fixedSlot(Category c, uint64_t bytes, std::string name,
                bool align = true) {
    uint64_t &end = arena(c);
    if (align)
      end = alignUp(end);
    slots.push_back({c, true, end, bytes, INT_MAX, -1, std::move(name)});
    end += bytes;
    return slots.size() - 1;
  }

  uint32_t buffer(int slot, RankedTensorType type, uint64_t offset = 0) {
    auto key = std::make_tuple(slot, type.getAsOpaquePointer(), offset);
    auto it = bufferOf.find(key);
    if (it != bufferOf.end())
      return it->second;
    const Slot &s = slots[slot];
    PlanBuffer b;
    b.arena = s.category;
    b.offset = s.offset + offset;
    b.dtype = *elemTypeOf(type.getElementType());
    b.shape.assign(type.getShape().begin(), type.getShape().end());
    b.name = s.name;
    plan.buffers.push_back(std::move(b));
    bufferOf[key] = plan.buffers.size() - 1;
    return plan.buffers.size() - 1;
  }

  LogicalResult layoutVariables() {
    SmallVector<VariableOp> decayed, plain;
    llvm::StringMap<VariableOp> gradOf, mOf, vOf;
    for (auto var : module.getOps<VariableOp>()) {
      if (!elemTypeOf(var.getTensorType().getElementType()))
        return var.emitError("plan: unsupported element type");
      switch (var.getKind()) {
      case VariableKind::param:
        if (!var.getOf()) // not a group's shard
          (takesWeightDecay(var.getTensorType()) ? decayed : plain)
              .push_back(var);
        break;
      case VariableKind::grad:
        gradOf[var.getOfAttr().getValue()] = var;
        break;
      case VariableKind::opt_state:
        (var.getSymName().ends_with(".exp_avg_sq")
             ? vOf
             : mOf)[var.getOfAttr().getValue()] = var;
        break;
      }
    }
    auto describe = [&](VariableOp var, bool decay) {
      PlanVariable pv;
      pv.name = var.getSymName().str();
      pv.kind = static_cast<uint8_t>(var.getKind());
      pv.of = var.getOf() ? var.getOf()->str() : "";
      pv.init = static_cast<uint8_t>(var.getInit());
      pv.std = var.getStd() ? var.getStd()->convertToDouble() : 0.0;
      pv.rngStream = rng::streamForName(pv.name);
      pv.weightDecay = decay;
      pv.shape.assign(var.getTensorType().getShape().begin(),
                      var.getTensorType().getShape().end());
      return pv;
    };
    auto add = [&](VariableOp var, Category c, bool decay) {
      int slot = fixedSlot(c, bytesOf(var.getTensorType()),
                           var.getSymName().str(), /*align=*/false);
      varSlot[var.getSymName()] = slot;
      PlanVariable pv = describe(var, decay);
      pv.buffer = buffer(slot, var.getTensorType());
      plan.variables.push_back(std::move(pv));
    };
    SymbolTable symbols(module);
    auto decays = [](VariableOp p) {
      return takesWeightDecay(p.getTensorType());
    };

    // ZeRO groups first: members in order, then zero padding up to the
    // group's size, in the params and the grads arena alike.
    llvm::StringSet<> grouped;
    // Stage 3: a sharded group's storage variable, and its members with
    // their first element in the group.
    llvm::StringMap<VariableOp> storageOf;
    llvm::StringMap<SmallVector<std::pair<VariableOp, int64_t>>> membersOf;
    for (auto var : module.getOps<VariableOp>())
      if (var.getKind() == VariableKind::param && var.getOf())
        storageOf[*var.getOf()] = var;
    auto member = [&](dist::GroupOp group, Attribute a) -> VariableOp {
      auto p =
          symbols.lookup<VariableOp>(cast<FlatSymbolRefAttr>(a).getValue());
      if (!p)
        group.emitError("plan: group member ") << a << " is not a variable";
      return p;
    };
    for (auto group : module.getOps<dist::GroupOp>()) {
      if (group.getSharded()) {
        if (!storageOf.count(group.getSymName()))
          return group.emitError("plan: sharded group has no param variable");
        int64_t offset = 0;
        for (Attribute a : group.getMembers()) {
          VariableOp p = member(group, a);
          if (!p)
            return failure();
          membersOf[group.getSymName()].push_back({p, offset});
          offset += p.getTensorType().getNumElements();
          grouped.insert(p.getSymName());
        }
        if (offset > group.getSize())
          return group.emitError(
              "plan: group size is smaller than its members");
        continue;
      }
      Type elt;
      // Stage 2 keeps gradients per group shard, not per parameter.
      bool perParamGrads = llvm::any_of(group.getMembers(), [&](Attribute a) {
        return gradOf.count(cast<FlatSymbolRefAttr>(a).getValue());
      });
      for (Category c : {Category::Params, Category::Grads}) {
        if (c == Category::Grads && !perParamGrads)
          continue;
        uint64_t start = arena(c), used = 0;
        for (Attribute a : group.getMembers()) {
          VariableOp p = member(group, a);
          if (!p)
            return failure();
          elt = p.getTensorType().getElementType();
          VariableOp v =
              c == Category::Params ? p : gradOf.lookup(p.getSymName());
          if (!v)
            return group.emitError("plan: group member ")
                   << a << " has no gradient";
          add(v, c, c == Category::Params && decays(p));
          used += bytesOf(v.getTensorType());
          grouped.insert(p.getSymName());
        }
        uint64_t bytes =
            static_cast<uint64_t>(group.getSize()) * elemSize(*elemTypeOf(elt));
        if (bytes < used)
          return group.emitError(
              "plan: group size is smaller than its members");
        if (c == Category::Grads && bytes > used) {
          // Nothing writes the gradients' padding (the parameters' is
          // written by the all-gather): a zero-initialized variable of its
          // own makes it resident state, so the runtime counts it.
          std::string name = group.getSymName().str() + ".grad_padding";
          int pad = fixedSlot(c, bytes - used, name, /*align=*/false);
          PlanVariable pv;
          pv.name = name;
          pv.kind = static_cast<uint8_t>(VariableKind::grad);
          pv.of = group.getSymName().str();
          pv.init = static_cast<uint8_t>(InitKind::zeros);
          int64_t n =
              static_cast<int64_t>((bytes - used) / elemSize(*elemTypeOf(elt)));
          pv.shape = {n};
          pv.buffer = buffer(pad, RankedTensorType::get({n}, elt));
          plan.variables.push_back(std::move(pv));
        }
        arena(c) = start + bytes;
        slots.push_back({c, true, start, bytes, INT_MAX, -1,
                         group.getSymName().str(), bytes});
        (c == Category::Params ? groupParams : groupGrads)[group.getSymName()] =
            slots.size() - 1;
      }
    }
    // Then the rest, densely in one order per category, so that optimizer
    // updates and zeroing run over flat ranges.
    SmallVector<VariableOp> params;
    for (auto *list : {&decayed, &plain})
      for (VariableOp p : *list)
        if (!grouped.contains(p.getSymName()))
          params.push_back(p);
    for (VariableOp p : params)
      add(p, Category::Params, decays(p));
    for (auto *table : {&gradOf, &mOf, &vOf})
      for (VariableOp p : params)
        if (VariableOp v = table->lookup(p.getSymName()))
          add(v, table == &gradOf ? Category::Grads : Category::OptimizerState,
              false);
    // State that belongs to a group (sharded moments, gradients and, at
    // stage 3, parameters), in module order.
    for (auto var : module.getOps<VariableOp>()) {
      if (varSlot.count(var.getSymName()) || grouped.contains(var.getSymName()))
        continue;
      if (var.getKind() == VariableKind::param) {
        // Storage, not a checkpoint tensor: the members are the variables.
        int slot = fixedSlot(Category::Params, bytesOf(var.getTensorType()),
                             var.getSymName().str(), /*align=*/false);
        varSlot[var.getSymName()] = slot;
        uint32_t shard = buffer(slot, var.getTensorType());
        for (auto [p, offset] : membersOf.lookup(*var.getOf())) {
          PlanVariable pv = describe(p, decays(p));
          pv.buffer = shard;
          pv.sharded = true;
          pv.shardOffset = static_cast<uint64_t>(offset);
          plan.variables.push_back(std::move(pv));
        }
        continue;
      }
      add(var,
          var.getKind() == VariableKind::grad ? Category::Grads
                                              : Category::OptimizerState,
          false);
    }
    return success();
  }

  int constantSlot(ConstantOp c) {
    Attribute key = c.getValue();
    auto it = constSlot.find(key);
    if (it != constSlot.end())
      return it->second;
    auto type = cast<RankedTensorType>(c.getType());
    int slot = fixedSlot(Category::Constants, bytesOf(type), "constant");
    auto dense = cast<DenseElementsAttr>(c.getValue());
    PlanConstant pc;
    pc.buffer = buffer(slot, type);
    ArrayRef<char> raw = dense.getRawData();
    pc.data.assign(raw.begin(), raw.end());
    plan.constants.push_back(std::move(pc));
    constSlot[key] = slot;
    return slot;
  }

  /// Whether `store`'s value can be computed directly into the variable.
  bool canForward(StoreOp store, const DenseMap<Operation *, int> &position,
                  ArrayRef<LoadOp> loadsOfVar) {
    Value v = store.getValue();
    Operation *producer = v.getDefiningOp();
    if (!producer || isa<LoadOp, ConstantOp>(producer) || isView(producer) ||
        !v.hasOneUse())
      return false;
    int at = position.lookup(producer);
    for (Operation *user : readersOf(loadsOfVar)) {
      if (user == producer) {
        // Every operand of the producer that reads the variable must be
        // element-for-element the output it overwrites.
        for (Value operand : producer->getOperands())
          if (readsVariable(operand, loadsOfVar) &&
              (!isInPlaceSafe(producer) || operand.getType() != v.getType()))
            return false;
      } else if (position.lookup(user) > at) {
        return false;
      }
    }
    return true;
  }

  /// The ops that read a variable through `loads`, looking through reshapes
  /// (views of the same bytes).
  static SmallVector<Operation *> readersOf(ArrayRef<LoadOp> loads) {
    SmallVector<Operation *> readers;
    SmallVector<Value> views;
    for (LoadOp load : loads)
      views.push_back(load.getResult());
    while (!views.empty())
      for (Operation *user : views.pop_back_val().getUsers()) {
        if (auto reshape = dyn_cast<ReshapeOp>(user))
          views.push_back(reshape);
        else
          readers.push_back(user);
      }
    return readers;
  }

  static bool readsVariable(Value v, ArrayRef<LoadOp> loads) {
    while (auto reshape = v.getDefiningOp<ReshapeOp>())
      v = reshape.getX();
    auto load = v.getDefiningOp<LoadOp>();
    return load && llvm::is_contained(loads, load);
  }

  LogicalResult lowerProgram(func::FuncOp func) {
    PlanProgram prog;
    prog.name = func.getSymName().str();
    std::vector<Pending> pend;
    DenseMap<Value, int> slotOf;
    DenseMap<Value, uint64_t> viewOffset; // bytes into the slot, for views
    Block &body = func.front();

    DenseMap<Operation *, int> position;
    llvm::StringMap<SmallVector<LoadOp>> loads;
    for (auto [i, op] : llvm::enumerate(body))
      position[&op] = i;
    func.walk([&](LoadOp l) { loads[l.getName()].push_back(l); });

    for (BlockArgument arg : func.getArguments()) {
      auto type = cast<RankedTensorType>(arg.getType());
      int slot =
          fixedSlot(Category::Inputs, bytesOf(type),
                    prog.name + ".arg" + std::to_string(arg.getArgNumber()));
      slotOf[arg] = slot;
      prog.inputs.push_back(buffer(slot, type));
    }

    auto ref = [&](Value v) {
      return Ref{slotOf.lookup(v), cast<RankedTensorType>(v.getType()),
                 viewOffset.lookup(v)};
    };
    auto alias = [&](Value view, Value of, uint64_t offset = 0) {
      slotOf[view] = slotOf.lookup(of);
      viewOffset[view] = viewOffset.lookup(of) + offset;
    };
    auto newSlot = [&](Value v, Operation *op,
                       Category category = Category::Activations) {
      auto type = cast<RankedTensorType>(v.getType());
      slots.push_back({category, false, 0, alignUp(bytesOf(type)), INT_MAX, -1,
                       op->getName().stripDialect().str() + "." +
                           std::to_string(position.lookup(op)),
                       bytesOf(type)});
      slotOf[v] = slots.size() - 1;
      return Ref{static_cast<int>(slots.size() - 1), type};
    };

    for (Operation &op : body) {
      if (auto ret = dyn_cast<func::ReturnOp>(op)) {
        for (Value v : ret.getOperands())
          returned.push_back(ref(v));
        continue;
      }
      if (auto load = dyn_cast<LoadOp>(op)) {
        slotOf[load] = varSlot.lookup(load.getName());
        continue;
      }
      if (auto c = dyn_cast<ConstantOp>(op)) {
        bool onlyStored = llvm::all_of(
            c->getUsers(), [](Operation *u) { return isa<StoreOp>(u); });
        auto dense = dyn_cast<DenseElementsAttr>(c.getValue());
        if (!dense)
          return c.emitError("plan: constant is not dense");
        if (!(onlyStored && dense.isSplat()))
          slotOf[c] = constantSlot(c);
        continue;
      }
      if (auto reshape = dyn_cast<ReshapeOp>(op)) {
        alias(reshape, reshape.getX()); // a view, no copy
        continue;
      }
      if (auto slice = dyn_cast<SliceOp>(op); slice && isView(slice)) {
        auto type = cast<RankedTensorType>(slice.getType());
        alias(slice, slice.getX(),
              static_cast<uint64_t>(slice.getOffsets()[0]) *
                  elemSize(*elemTypeOf(type.getElementType())));
        continue;
      }
      if (auto store = dyn_cast<StoreOp>(op)) {
        int target = varSlot.lookup(store.getName());
        auto type = cast<RankedTensorType>(store.getValue().getType());
        Value v = store.getValue();
        if (auto c = v.getDefiningOp<ConstantOp>(); c && !slotOf.count(v)) {
          auto dense = cast<DenseElementsAttr>(c.getValue());
          double value = isa<FloatType>(dense.getElementType())
                             ? dense.getSplatValue<APFloat>().convertToDouble()
                             : static_cast<double>(
                                   dense.getSplatValue<APInt>().getSExtValue());
          pushCompute(pend,
                      {"ds.fill", {}, {Ref{target, type}}, {}, {value}, &op});
          continue;
        }
        // Only a compute instruction's output can be pointed at the
        // variable (a collective's result, after its wait, is copied).
        if (producerIndex.count(v) &&
            canForward(store, position, loads.lookup(store.getName()))) {
          // The producer writes the variable directly; its own transient
          // slot is never referenced again and is not placed.
          slotOf[v] = target;
          retarget(pend, v, target);
          continue;
        }
        for (Operation *user : readersOf(loads.lookup(store.getName())))
          if (position.lookup(user) > position.lookup(store))
            return store.emitError(
                "plan: a variable is read after being overwritten in the "
                "same program; not supported yet");
        pushCompute(pend,
                    {"ds.copy", {ref(v)}, {Ref{target, type}}, {}, {}, &op});
        continue;
      }
      if (isa<dist::AllReduceOp, dist::ReduceScatterOp, dist::AllGatherOp>(
              op)) {
        // On the comm stream, after everything compute has issued so far;
        // the result is a comm buffer.
        std::vector<double> floats;
        if (auto scale = op.getAttrOfType<FloatAttr>("scale"))
          floats.push_back(scale.getValueAsDouble());
        std::string kernel = "comm." + op.getName().stripDialect().str();
        Pending p{kernel,
                  {ref(op.getOperand(0))},
                  {newSlot(op.getResult(0), &op, Category::CommBuffers)},
                  {},
                  std::move(floats),
                  &op};
        p.stream = 1;
        prog.commBytes += bytesOf(p.ins[0].type);
        if (lastCompute >= 0) {
          uint32_t ready = prog.numEvents++;
          pend[lastCompute].records.push_back(ready);
          p.waits.push_back(ready);
        }
        uint32_t done = prog.numEvents++;
        p.records.push_back(done);
        commOf[op.getResult(0)] = {pend.size(), done};
        pend.push_back(std::move(p));
        continue;
      }
      if (auto flat = dyn_cast<dist::FlatParamsOp>(op)) {
        slotOf[flat] = groupParams.lookup(flat.getGroup());
        continue;
      }
      if (auto flat = dyn_cast<dist::FlatGradsOp>(op)) {
        slotOf[flat] = groupGrads.lookup(flat.getGroup());
        continue;
      }
      if (auto shard = dyn_cast<dist::ShardOp>(op)) {
        pushCompute(pend, {"dist.shard",
                           {ref(shard.getX())},
                           {newSlot(shard, &op)},
                           {static_cast<int64_t>(shard.getWorldSize())},
                           {},
                           &op});
        continue;
      }
      if (auto store = dyn_cast<dist::StoreParamsOp>(op)) {
        int target = groupParams.lookup(store.getGroup());
        auto type = cast<RankedTensorType>(store.getValue().getType());
        // The all-gather writes the parameters in place.
        auto wait = store.getValue().getDefiningOp<dist::WaitOp>();
        auto gather = wait ? wait.getX().getDefiningOp<dist::AllGatherOp>()
                           : dist::AllGatherOp();
        if (gather && gather->hasOneUse() && commOf.count(gather)) {
          pend[commOf.lookup(gather).first].outs[0].slot = target;
          slotOf[gather] = slotOf[wait] = target;
          continue;
        }
        pushCompute(pend, {"ds.copy",
                           {ref(store.getValue())},
                           {Ref{target, type}},
                           {},
                           {},
                           &op});
        continue;
      }
      if (auto wait = dyn_cast<dist::WaitOp>(op)) {
        alias(wait, wait.getX());
        auto [index, event] = commOf.lookup(wait.getX());
        waitsForNext.push_back(event);
        waited.push_back(index);
        continue;
      }
      Pending p;
      p.op = &op;
      p.kernel = op.getName().getStringRef().str();
      for (Value in : op.getOperands())
        p.ins.push_back(ref(in));
      for (Value out : op.getResults())
        p.outs.push_back(newSlot(out, &op));
      if (failed(attributes(&op, p)))
        return failure();
      prog.flops += flops(&op);
      pushCompute(pend, std::move(p));
      for (Value out : op.getResults())
        producerIndex[out] = pend.size() - 1;
    }

    for (size_t c : waited)
      pend[c].liveUntil = pend.size();

    if (prog.name == "apply")
      fuseOptimizer(pend);

    // Liveness and placement of this program's transients.
    std::vector<int> transients;
    for (auto [i, p] : llvm::enumerate(pend))
      for (const Ref &r : llvm::concat<Ref>(p.ins, p.outs)) {
        Slot &s = slots[r.slot];
        if (s.fixed)
          continue;
        if (s.last < 0)
          transients.push_back(r.slot);
        s.first = std::min<int>(s.first, i);
        s.last = std::max<int>(s.last, i);
      }
    for (const Ref &r : returned)
      slots[r.slot].last = pend.size();
    for (const Pending &p : pend)
      if (p.liveUntil >= 0)
        for (const Ref &r : llvm::concat<const Ref>(p.ins, p.outs))
          if (!slots[r.slot].fixed)
            slots[r.slot].last = std::max(slots[r.slot].last, p.liveUntil);
    placeTransients(transients);

    for (Pending &p : pend) {
      PlanInstr instr;
      instr.kernel = p.kernel;
      for (Ref &r : p.ins)
        instr.inputs.push_back(buffer(r.slot, r.type, r.offset));
      for (Ref &r : p.outs)
        instr.outputs.push_back(buffer(r.slot, r.type, r.offset));
      instr.intAttrs = std::move(p.ints);
      instr.floatAttrs = std::move(p.floats);
      instr.op = p.op;
      instr.stream = p.stream;
      instr.wait = std::move(p.waits);
      instr.record = std::move(p.records);
      instr.loc = p.op ? locString(p.op->getLoc()) : "";
      prog.instrs.push_back(std::move(instr));
    }
    for (Ref &r : returned)
      prog.outputs.push_back(buffer(r.slot, r.type, r.offset));
    returned.clear();
    producerIndex.clear();
    lastCompute = -1;
    commOf.clear();
    waitsForNext.clear();
    waited.clear();
    plan.programs.push_back(std::move(prog));
    return success();
  }

  std::vector<Ref> returned;
  DenseMap<Value, size_t> producerIndex;
  // Streams: the last compute instruction, the collectives by result, and
  // the events the next compute instruction must wait for.
  int lastCompute = -1;
  DenseMap<Value, std::pair<size_t, uint32_t>> commOf;
  std::vector<uint32_t> waitsForNext;
  std::vector<size_t> waited;

  /// Appends a compute-stream instruction; it waits for the collectives
  /// whose dist.wait came before it, which keeps their buffers live so far.
  void pushCompute(std::vector<Pending> &pend, Pending p) {
    p.waits = std::move(waitsForNext);
    waitsForNext.clear();
    for (size_t c : waited)
      pend[c].liveUntil = pend.size();
    waited.clear();
    lastCompute = pend.size();
    pend.push_back(std::move(p));
  }

  /// Points the output of `v`'s producing instruction at `target`.
  void retarget(std::vector<Pending> &pend, Value v, int target) {
    auto it = producerIndex.find(v);
    if (it == producerIndex.end())
      return;
    Pending &p = pend[it->second];
    unsigned idx = cast<OpResult>(v).getResultNumber();
    p.outs[idx].slot = target;
  }

  void placeTransients(const std::vector<int> &ids) {
    std::vector<int> order(ids);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
      return slots[a].bytes > slots[b].bytes;
    });
    // Placed slots per category, kept sorted by (offset, end): the first-fit
    // scan below then visits them in address order without sorting the
    // overlapping ones for every slot (that sort made placement the slowest
    // step of deep models).
    std::map<int, std::vector<int>> placedByCategory;
    auto byAddress = [&](int a, int b) {
      const Slot &x = slots[a], &y = slots[b];
      return std::make_pair(x.offset, x.offset + x.bytes) <
             std::make_pair(y.offset, y.offset + y.bytes);
    };
    for (int id : order) {
      Slot &s = slots[id];
      std::vector<int> &placed = placedByCategory[static_cast<int>(s.category)];
      uint64_t offset = 0;
      for (int q : placed) {
        const Slot &o = slots[q];
        if (o.last < s.first || s.last < o.first)
          continue; // never live at the same time
        if (offset + s.bytes <= o.offset)
          break;
        offset = std::max(offset, o.offset + o.bytes);
      }
      s.offset = offset;
      // The predicted peak is the last byte written, as the runtime
      // measures it: alignment padding after the top buffer is not counted.
      uint64_t &peak = transientPeak[static_cast<int>(s.category)];
      peak = std::max(peak, offset + s.used);
      placed.insert(
          std::upper_bound(placed.begin(), placed.end(), id, byAddress), id);
    }
  }

  /// One ds.adamw over each flat, contiguous run of parameters with equal
  /// hyper-parameters, and one fill over contiguous zeroed accumulators.
  void fuseOptimizer(std::vector<Pending> &pend) {
    auto contiguous = [&](const Ref &a, const Ref &b) {
      const Slot &x = slots[a.slot], &y = slots[b.slot];
      return x.fixed && y.fixed && x.category == y.category &&
             x.offset + x.bytes == y.offset &&
             a.type.getElementType() == b.type.getElementType();
    };
    auto flat = [&](const Ref &first, uint64_t bytes) {
      const Slot &s = slots[first.slot];
      slots.push_back(
          {s.category, true, s.offset, bytes, INT_MAX, -1, s.name + "+flat"});
      auto type = RankedTensorType::get({static_cast<int64_t>(bytes / 4)},
                                        first.type.getElementType());
      return Ref{static_cast<int>(slots.size() - 1), type};
    };
    std::vector<Pending> out;
    for (size_t i = 0; i < pend.size(); ++i) {
      Pending &p = pend[i];
      // Instructions that synchronize with another stream stay as they are.
      bool synced = !p.waits.empty() || !p.records.empty();
      bool isAdam = p.kernel == "ds.adamw" && !synced;
      bool isFill = p.kernel == "ds.fill" && !synced;
      if (!isAdam && !isFill) {
        out.push_back(std::move(p));
        continue;
      }
      // Extend a run of same-kind instructions over adjacent memory.
      std::vector<size_t> run{i};
      for (size_t j = i + 1; j < pend.size(); ++j) {
        Pending &q = pend[j];
        if (q.kernel == "ds.fill" && isAdam)
          continue; // zeroing of an earlier grad may sit in between
        if (q.kernel != p.kernel || q.floats != p.floats || !q.waits.empty() ||
            !q.records.empty())
          break;
        const Pending &last = pend[run.back()];
        bool adj = true;
        size_t nRefs = isAdam ? 4 : 1;
        for (size_t k = 0; k < nRefs && adj; ++k)
          adj = isAdam ? contiguous(last.ins[k], q.ins[k])
                       : contiguous(last.outs[0], q.outs[0]);
        if (isAdam) {
          for (size_t k = 4; k < 7 && adj; ++k)
            adj = last.ins[k].slot == q.ins[k].slot;
          // Only updates that were forwarded into their variables.
          adj = adj && q.outs[0].slot == q.ins[0].slot &&
                q.outs[1].slot == q.ins[2].slot &&
                q.outs[2].slot == q.ins[3].slot;
        }
        if (!adj)
          break;
        run.push_back(j);
      }
      bool forwarded = !isAdam || (p.outs[0].slot == p.ins[0].slot &&
                                   p.outs[1].slot == p.ins[2].slot &&
                                   p.outs[2].slot == p.ins[3].slot);
      if (run.size() == 1 || !forwarded) {
        out.push_back(std::move(p));
        continue;
      }
      uint64_t bytes = 0;
      for (size_t j : run)
        bytes += slots[(isAdam ? pend[j].ins[0] : pend[j].outs[0]).slot].bytes;
      Pending merged = std::move(p);
      merged.op = nullptr;
      if (isAdam) {
        for (size_t k = 0; k < 4; ++k)
          merged.ins[k] = flat(merged.ins[k], bytes);
        merged.outs = {merged.ins[0], merged.ins[2], merged.ins[3]};
      } else {
        merged.outs[0] = flat(merged.outs[0], bytes);
      }
      out.push_back(std::move(merged));
      // Keep fills that sat between merged updates, in order, after it.
      for (size_t j = i + 1; j <= run.back(); ++j)
        if (!llvm::is_contained(run, j))
          out.push_back(std::move(pend[j]));
      i = run.back();
    }
    pend = std::move(out);
    // Zeroing the accumulators is the last thing @apply does to them (the
    // norm and the updates read them first), so those fills can move to the
    // end of the program and merge over adjacent memory.
    bool again = llvm::count_if(pend, [](const Pending &p) {
                   return p.kernel == "ds.fill";
                 }) > 1;
    if (again) {
      std::vector<Pending> fills;
      std::vector<Pending> rest;
      for (Pending &p : pend)
        (p.kernel == "ds.fill" &&
                 slots[p.outs[0].slot].category == Category::Grads &&
                 p.waits.empty() && p.records.empty()
             ? fills
             : rest)
            .push_back(std::move(p));
      pend = std::move(rest);
      for (size_t i = 0; i < fills.size();) {
        size_t j = i + 1;
        uint64_t bytes = slots[fills[i].outs[0].slot].bytes;
        while (j < fills.size() && fills[j].floats == fills[i].floats &&
               contiguous(fills[j - 1].outs[0], fills[j].outs[0])) {
          bytes += slots[fills[j].outs[0].slot].bytes;
          ++j;
        }
        Pending merged = std::move(fills[i]);
        if (j > i + 1) {
          merged.outs[0] = flat(merged.outs[0], bytes);
          merged.op = nullptr;
        }
        pend.push_back(std::move(merged));
        i = j;
      }
    }
  }

  static double flops(Operation *op) {
    auto numel = [](Value v) {
      return static_cast<double>(
          cast<RankedTensorType>(v.getType()).getNumElements());
    };
    if (auto mm = dyn_cast<MatmulOp>(op)) {
      auto a = cast<RankedTensorType>(mm.getLhs().getType());
      int64_t k = a.getShape()[mm.getTransposeLhs() ? a.getRank() - 2
                                                    : a.getRank() - 1];
      return 2.0 * numel(mm.getResult()) * k;
    }
    if (auto at = dyn_cast<AttentionOp>(op)) {
      auto q = cast<RankedTensorType>(at.getQ().getType()).getShape();
      auto k = cast<RankedTensorType>(at.getK().getType()).getShape();
      return 4.0 * q[0] * q[1] * q[2] * k[2] * q[3];
    }
    if (auto at = dyn_cast<AttentionGradOp>(op)) {
      auto q = cast<RankedTensorType>(at.getQ().getType()).getShape();
      auto k = cast<RankedTensorType>(at.getK().getType()).getShape();
      return 10.0 * q[0] * q[1] * q[2] * k[2] * q[3];
    }
    return op->getNumResults() ? numel(op->getResult(0)) : 0.0;
  }

  static LogicalResult attributes(Operation *op, Pending &p) {
    auto f = [](FloatAttr a) { return a.getValueAsDouble(); };
    auto ints = [&](ArrayRef<int64_t> v) {
      p.ints.insert(p.ints.end(), v.begin(), v.end());
    };
    bool known = true;
    llvm::TypeSwitch<Operation *>(op)
        .Case<AddOp, SubOp, MulOp, DivOp, MinimumOp, MaximumOp, EqualOp, NegOp,
              ExpOp, LogOp, TanhOp, SqrtOp, RsqrtOp, ReluOp, SiluOp, ReluGradOp,
              SiluGradOp, CastOp, SoftmaxOp, SoftmaxGradOp, EmbeddingOp,
              EmbeddingGradOp, BroadcastOp>([](auto) {})
        .Case<GeluOp, GeluGradOp, BiasGeluOp>([&](auto g) {
          p.ints.push_back(g.getApproximate() == GeluApproximation::tanh);
        })
        .Case([&](DropoutOp d) {
          p.ints.push_back(d.getId());
          p.floats.push_back(f(d.getRateAttr()));
        })
        .Case([&](MatmulOp m) {
          p.ints = {m.getTransposeLhs(), m.getTransposeRhs()};
        })
        .Case<LayerNormOp, LayerNormGradOp, RmsNormOp, RmsNormGradOp,
              AddLayerNormOp>(
            [&](auto n) { p.floats.push_back(f(n.getEpsAttr())); })
        .Case<AttentionOp, AttentionGradOp>([&](auto a) {
          p.ints.push_back(a.getCausal());
          p.floats.push_back(f(a.getScaleAttr()));
        })
        .Case([&](RotaryOp r) {
          p.ints.push_back(r.getInverse());
          p.floats.push_back(f(r.getThetaAttr()));
        })
        .Case<CrossEntropyOp, CrossEntropyGradOp>(
            [&](auto c) { p.ints.push_back(c.getIgnoreIndex()); })
        .Case([&](TransposeOp t) { ints(t.getPermutation()); })
        .Case([&](SliceOp s) { ints(s.getOffsets()); })
        .Case([&](PadOp s) { ints(s.getLow()); })
        .Case([&](ConcatOp c) { p.ints.push_back(c.getAxis()); })
        .Case([&](SplitOp s) { p.ints.push_back(s.getAxis()); })
        .Case<ReduceSumOp, ReduceMeanOp, ReduceMaxOp>(
            [&](auto r) { ints(r.getAxes()); })
        .Case([&](IotaOp i) { p.ints.push_back(i.getDim()); })
        .Case([&](AdamWOp a) {
          p.floats = {f(a.getBeta1Attr()), f(a.getBeta2Attr()),
                      f(a.getEpsAttr()), f(a.getWeightDecayAttr())};
        })
        .Default([&](Operation *) { known = false; });
    if (!known)
      return op->emitError("plan: no kernel for '") << op->getName() << "'";
    return success();
  }
};

} // namespace

LogicalResult lowerToPlan(ModuleOp module, const PlanOptions &options,
                          PlanModel &plan) {
  plan = PlanModel();
  plan.options = options;
  if (auto micro = module.lookupSymbol<func::FuncOp>("micro_step")) {
    auto inputs = micro.getFunctionType().getInputs();
    if (!inputs.empty())
      if (auto t = dyn_cast<RankedTensorType>(inputs[0]);
          t && t.getRank() == 2) {
        plan.microBatch = t.getDimSize(0);
        plan.seqLen = t.getDimSize(1);
      }
    micro.walk([&](CrossEntropyOp ce) {
      plan.vocabSize =
          cast<RankedTensorType>(ce.getLogits().getType()).getShape().back();
    });
  }
  return Lowering(module, plan).run();
}

} // namespace dsc
