//===- VariableLayout.cpp - persistent state packed per category ----------===//
//
// Variables are packed densely per category in a fixed order (parameters
// with weight decay, then without; gradients and moments in the same order;
// ZeRO groups first), so that optimizer updates and zeroing run as one
// kernel over a flat range. Constants get their own arena.
//
//===----------------------------------------------------------------------===//
#include "compiler/plan/LoweringImpl.h"

#include "dialects/dist/DistOps.h"
#include "dialects/ds/DsUtils.h"
#include "runtime/rng/Philox.h"

#include "llvm/ADT/StringSet.h"

namespace dsc::lowering {

LogicalResult Lowering::layoutVariables() {
  SmallVector<VariableOp> decayed, plain;
  llvm::StringMap<VariableOp> gradOf, masterOf, mOf, vOf;
  for (auto var : module.getOps<VariableOp>()) {
    if (!dtypeOfElement(var.getTensorType().getElementType()))
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
    case VariableKind::master:
      masterOf[var.getOfAttr().getValue()] = var;
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
    // A master weight draws what its parameter draws: the 16-bit parameter
    // is its rounding, and fp32 runs start from the same weights.
    pv.rngStream = rng::streamForName(
        var.getKind() == VariableKind::master ? pv.of : pv.name);
    pv.weightDecay = decay;
    pv.shape.assign(var.getTensorType().getShape().begin(),
                    var.getTensorType().getShape().end());
    return pv;
  };
  // ds-offload's host variables.
  auto spaceOf = [](VariableOp var) {
    return var->hasAttr("dist.host") ? Space::Host : Space::Device;
  };
  auto add = [&](VariableOp var, Category c, bool decay) {
    int slot = fixedSlot(c, bytesOf(var.getTensorType()),
                         var.getSymName().str(), /*align=*/false, spaceOf(var));
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
  // Every group's members with their first element (master shards of
  // stages 1-3 are laid out over them).
  llvm::StringMap<SmallVector<std::pair<VariableOp, int64_t>>> offsetsOf;
  for (auto group : module.getOps<dist::GroupOp>()) {
    int64_t offset = 0;
    for (Attribute a : group.getMembers())
      if (auto p = symbols.lookup<VariableOp>(
              cast<FlatSymbolRefAttr>(a).getValue())) {
        offsetsOf[group.getSymName()].push_back({p, offset});
        offset += p.getTensorType().getNumElements();
      }
  }
  auto member = [&](dist::GroupOp group, Attribute a) -> VariableOp {
    auto p = symbols.lookup<VariableOp>(cast<FlatSymbolRefAttr>(a).getValue());
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
      if (static_cast<uint64_t>(offset) > group.getSize())
        return group.emitError("plan: group size is smaller than its members");
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
      // The members' space (ds-offload moves whole categories).
      Space space = Space::Device;
      if (!group.getMembers().empty())
        if (VariableOp first = member(group, group.getMembers()[0]))
          if (VariableOp v = c == Category::Params
                                 ? first
                                 : gradOf.lookup(first.getSymName()))
            space = spaceOf(v);
      uint64_t start = arena(c, space), used = 0;
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
      uint64_t bytes = static_cast<uint64_t>(group.getSize()) *
                       dtypeSize(*dtypeOfElement(elt));
      if (bytes < used)
        return group.emitError("plan: group size is smaller than its members");
      if (c == Category::Grads && bytes > used) {
        // Nothing writes the gradients' padding (the parameters' is
        // written by the all-gather): a zero-initialized variable of its
        // own makes it resident state, so the runtime counts it.
        std::string name = group.getSymName().str() + ".grad_padding";
        int pad = fixedSlot(c, bytes - used, name, /*align=*/false, space);
        PlanVariable pv;
        pv.name = name;
        pv.kind = static_cast<uint8_t>(VariableKind::grad);
        pv.of = group.getSymName().str();
        pv.init = static_cast<uint8_t>(InitKind::zeros);
        int64_t n = static_cast<int64_t>((bytes - used) /
                                         dtypeSize(*dtypeOfElement(elt)));
        pv.shape = {n};
        pv.buffer = buffer(pad, RankedTensorType::get({n}, elt));
        plan.variables.push_back(std::move(pv));
      }
      arena(c, space) = start + bytes;
      slots.push_back({c, true, start, bytes, INT_MAX, -1,
                       group.getSymName().str(), bytes});
      slots.back().space = space;
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
  for (auto *table : {&gradOf, &masterOf, &mOf, &vOf})
    for (VariableOp p : params)
      if (VariableOp v = table->lookup(p.getSymName()))
        add(v, table == &gradOf ? Category::Grads : Category::OptimizerState,
            table == &masterOf && decays(p));
  // State that belongs to a group (sharded moments, gradients and, at
  // stage 3, parameters), in module order.
  for (auto var : module.getOps<VariableOp>()) {
    if (varSlot.count(var.getSymName()) || grouped.contains(var.getSymName()))
      continue;
    // A group's master weights or moments (stages 1-3): one shard of
    // storage, described per member parameter, so that checkpoints and
    // initialization see each parameter's own state at its offset.
    bool stateShard = (var.getKind() == VariableKind::master ||
                       var.getKind() == VariableKind::opt_state) &&
                      var.getOf() && offsetsOf.count(*var.getOf());
    bool masterShard = stateShard && var.getKind() == VariableKind::master;
    if (var.getKind() == VariableKind::param || stateShard) {
      // Storage, not a checkpoint tensor: the members are the variables
      // (parameters, or their masters, which draw what the parameter
      // draws, or their moments).
      int slot =
          fixedSlot(stateShard ? Category::OptimizerState : Category::Params,
                    bytesOf(var.getTensorType()), var.getSymName().str(),
                    /*align=*/false, spaceOf(var));
      varSlot[var.getSymName()] = slot;
      uint32_t shard = buffer(slot, var.getTensorType());
      // "zero.decay.exp_avg" of group "zero.decay": each member's moment is
      // "<member>.exp_avg".
      StringRef suffix =
          var.getSymName().drop_front(stateShard ? var.getOf()->size() : 0);
      for (auto [p, offset] : stateShard ? offsetsOf.lookup(*var.getOf())
                                         : membersOf.lookup(*var.getOf())) {
        PlanVariable pv = describe(p, decays(p));
        if (masterShard) {
          pv.name += ".master";
          pv.kind = static_cast<uint8_t>(VariableKind::master);
          pv.of = p.getSymName().str();
        } else if (stateShard) {
          pv.name += suffix.str();
          pv.kind = static_cast<uint8_t>(VariableKind::opt_state);
          pv.of = p.getSymName().str();
          pv.init = static_cast<uint8_t>(InitKind::zeros);
          pv.std = 0;
          pv.weightDecay = false;
        }
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

int Lowering::constantSlot(ConstantOp c, Space space) {
  std::pair<Attribute, int> key{c.getValue(), static_cast<int>(space)};
  auto it = constSlot.find(key);
  if (it != constSlot.end())
    return it->second;
  auto type = cast<RankedTensorType>(c.getType());
  int slot = fixedSlot(Category::Constants, bytesOf(type), "constant",
                       /*align=*/true, space);
  auto dense = cast<DenseElementsAttr>(c.getValue());
  PlanConstant pc;
  pc.buffer = buffer(slot, type);
  ArrayRef<char> raw = dense.getRawData();
  pc.data.assign(raw.begin(), raw.end());
  plan.constants.push_back(std::move(pc));
  constSlot[key] = slot;
  return slot;
}

} // namespace dsc::lowering
