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
#include "dialects/ds/Contracts.h"
#include "dialects/ds/DsUtils.h"
#include "runtime/plan/VariableNames.h"
#include "runtime/rng/Philox.h"

#include "llvm/ADT/StringSet.h"

namespace dsc::lowering {

namespace {

/// A group's members with their first element in the group, in order.
using MemberOffsets = SmallVector<std::pair<VariableOp, int64_t>>;

bool decays(VariableOp p) { return inDecayGroup(p); }

/// ds-offload's host variables.
Space spaceOf(VariableOp var) {
  return dist::isOnHost(var) ? Space::Host : Space::Device;
}

/// `var` as the plan lists it; the caller points it at its buffer.
PlanVariable describe(VariableOp var, bool decay) {
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
  // A tensor-parallel part: the plan lists the whole variable's shape.
  if (auto split =
          var->getAttrOfType<DenseI64ArrayAttr>(dist::kTensorSplitAttr)) {
    auto tp = var->getParentOfType<ModuleOp>()->getAttrOfType<IntegerAttr>(
        dist::kTensorParallelAttr);
    pv.splitDim = split[0];
    pv.splitBlocks = split[1];
    pv.shape[size_t(pv.splitDim)] *= tp ? tp.getInt() : 1;
  }
  return pv;
}

/// Member `p`'s share of a group's storage: its parameters (stage 3), its
/// master weights, or its moment named `p` + `suffix` ("zero.decay.exp_avg"
/// of group "zero.decay" holds each member's "<member>.exp_avg").
PlanVariable describeShare(VariableOp p, VariableOp storage, bool stateShard,
                           StringRef suffix) {
  PlanVariable pv = describe(p, decays(p));
  // A ZeRO share of a tensor-parallel part: `shape` is the part's, and
  // the split says where the part sits in the whole tensor.
  if (pv.splitDim >= 0)
    pv.shape.assign(p.getTensorType().getShape().begin(),
                    p.getTensorType().getShape().end());
  if (stateShard && storage.getKind() == VariableKind::master) {
    pv.name += plan::kMasterSuffix;
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
  return pv;
}

} // namespace

/// The variables' layout, decided in this order: each variable's kind,
/// the ZeRO groups (members, then padding, per category), the rest densely
/// per category, and last the state that belongs to a group.
class Lowering::VariableLayout {
public:
  explicit VariableLayout(Lowering &lowering)
      : lowering(lowering), module(lowering.module), symbols(module) {}

  LogicalResult run();

private:
  Lowering &lowering;
  ModuleOp module;
  SymbolTable symbols;
  /// Parameters that are not a group's storage, with weight decay and
  /// without; each one's gradient, master weights and moments.
  SmallVector<VariableOp> decayed, plain;
  llvm::StringMap<VariableOp> gradOf, masterOf, mOf, vOf;
  /// Parameters laid out as members of a group.
  llvm::StringSet<> grouped;
  /// Stage 3: a sharded group's storage variable, and its members with
  /// their first element in the group.
  llvm::StringMap<VariableOp> storageOf;
  llvm::StringMap<MemberOffsets> membersOf;
  /// Every group's members with their first element (master shards of
  /// stages 1-3 are laid out over them).
  llvm::StringMap<MemberOffsets> offsetsOf;

  LogicalResult classify();
  void indexGroups();
  VariableOp member(dist::GroupOp group, Attribute a);
  void add(VariableOp var, Category c, bool decay);

  LogicalResult recordShardedGroup(dist::GroupOp group);
  LogicalResult layoutGroup(dist::GroupOp group);
  LogicalResult layoutGroupCategory(dist::GroupOp group, Category c);
  Space groupSpace(dist::GroupOp group, Category c);
  void addGradPadding(dist::GroupOp group, uint64_t bytes, Type elt,
                      Space space);

  void layoutUngrouped();
  void layoutGroupState();
  void layoutStorage(VariableOp var, bool stateShard);
};

LogicalResult Lowering::layoutVariables() {
  return VariableLayout(*this).run();
}

LogicalResult Lowering::VariableLayout::run() {
  if (failed(classify()))
    return failure();
  indexGroups();
  // ZeRO groups first: members in order, then zero padding up to the
  // group's size, in the params and the grads arena alike.
  for (auto group : module.getOps<dist::GroupOp>())
    if (failed(group.getSharded() ? recordShardedGroup(group)
                                  : layoutGroup(group)))
      return failure();
  layoutUngrouped();
  layoutGroupState();
  return success();
}

LogicalResult Lowering::VariableLayout::classify() {
  for (auto var : module.getOps<VariableOp>()) {
    if (!dtypeOfElement(var.getTensorType().getElementType()))
      return var.emitError("plan: unsupported element type");
    switch (var.getKind()) {
    case VariableKind::param:
      if (!var.getOf()) // not a group's shard
        (decays(var) ? decayed : plain).push_back(var);
      break;
    case VariableKind::grad:
      gradOf[var.getOfAttr().getValue()] = var;
      break;
    case VariableKind::opt_state:
      (plan::hasStateSuffix(var.getSymName(), plan::kExpAvgSqSuffix)
           ? vOf
           : mOf)[var.getOfAttr().getValue()] = var;
      break;
    case VariableKind::master:
      masterOf[var.getOfAttr().getValue()] = var;
      break;
    }
  }
  return success();
}

void Lowering::VariableLayout::indexGroups() {
  for (auto var : module.getOps<VariableOp>())
    if (var.getKind() == VariableKind::param && var.getOf())
      storageOf[*var.getOf()] = var;
  for (auto group : module.getOps<dist::GroupOp>()) {
    int64_t offset = 0;
    for (Attribute a : group.getMembers())
      if (auto p = symbols.lookup<VariableOp>(
              cast<FlatSymbolRefAttr>(a).getValue())) {
        offsetsOf[group.getSymName()].push_back({p, offset});
        offset += p.getTensorType().getNumElements();
      }
  }
}

VariableOp Lowering::VariableLayout::member(dist::GroupOp group, Attribute a) {
  auto p = symbols.lookup<VariableOp>(cast<FlatSymbolRefAttr>(a).getValue());
  if (!p)
    group.emitError("plan: group member ") << a << " is not a variable";
  return p;
}

void Lowering::VariableLayout::add(VariableOp var, Category c, bool decay) {
  int slot =
      lowering.fixedSlot(c, bytesOf(var.getTensorType()),
                         var.getSymName().str(), /*align=*/false, spaceOf(var));
  lowering.varSlot[var.getSymName()] = slot;
  PlanVariable pv = describe(var, decay);
  pv.buffer = lowering.buffer(slot, var.getTensorType());
  lowering.plan.variables.push_back(std::move(pv));
}

/// Stage 3's groups keep only their storage shard (laid out with the
/// group's state): here its members are only recorded with their offsets.
LogicalResult
Lowering::VariableLayout::recordShardedGroup(dist::GroupOp group) {
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
  return success();
}

LogicalResult Lowering::VariableLayout::layoutGroup(dist::GroupOp group) {
  // Stage 2 keeps gradients per group shard, not per parameter.
  bool perParamGrads = llvm::any_of(group.getMembers(), [&](Attribute a) {
    return gradOf.count(cast<FlatSymbolRefAttr>(a).getValue());
  });
  for (Category c : {Category::Params, Category::Grads}) {
    if (c == Category::Grads && !perParamGrads)
      continue;
    if (failed(layoutGroupCategory(group, c)))
      return failure();
  }
  return success();
}

/// The group's members (parameters or their gradients) back to back, then
/// padding up to the group's size; one slot over all of it is what the
/// group's flat ops (dist.flat_params, dist.flat_grads) read.
LogicalResult Lowering::VariableLayout::layoutGroupCategory(dist::GroupOp group,
                                                            Category c) {
  Space space = groupSpace(group, c);
  uint64_t start = lowering.arena(c, space), used = 0;
  Type elt;
  for (Attribute a : group.getMembers()) {
    VariableOp p = member(group, a);
    if (!p)
      return failure();
    elt = p.getTensorType().getElementType();
    VariableOp v = c == Category::Params ? p : gradOf.lookup(p.getSymName());
    if (!v)
      return group.emitError("plan: group member ") << a << " has no gradient";
    add(v, c, c == Category::Params && decays(p));
    used += bytesOf(v.getTensorType());
    grouped.insert(p.getSymName());
  }
  uint64_t bytes =
      static_cast<uint64_t>(group.getSize()) * dtypeSize(*dtypeOfElement(elt));
  if (bytes < used)
    return group.emitError("plan: group size is smaller than its members");
  if (c == Category::Grads && bytes > used)
    addGradPadding(group, bytes - used, elt, space);
  lowering.arena(c, space) = start + bytes;
  std::vector<Slot> &slots = lowering.slots;
  slots.push_back({c, true, start, bytes, group.getSymName().str(), space});
  (c == Category::Params ? lowering.groupParams
                         : lowering.groupGrads)[group.getSymName()] =
      slots.size() - 1;
  return success();
}

/// The members' space (ds-offload moves whole categories): the first
/// member's, or its gradient's.
Space Lowering::VariableLayout::groupSpace(dist::GroupOp group, Category c) {
  if (group.getMembers().empty())
    return Space::Device;
  VariableOp first = member(group, group.getMembers()[0]);
  if (!first)
    return Space::Device;
  VariableOp v =
      c == Category::Params ? first : gradOf.lookup(first.getSymName());
  return v ? spaceOf(v) : Space::Device;
}

/// Nothing writes the gradients' padding (the parameters' is written by
/// the all-gather): a zero-initialized variable of its own makes it
/// resident state, so the runtime counts it.
void Lowering::VariableLayout::addGradPadding(dist::GroupOp group,
                                              uint64_t bytes, Type elt,
                                              Space space) {
  std::string name =
      plan::stateName(group.getSymName(), plan::kGradPaddingSuffix);
  int pad =
      lowering.fixedSlot(Category::Grads, bytes, name, /*align=*/false, space);
  PlanVariable pv;
  pv.name = name;
  pv.kind = static_cast<uint8_t>(VariableKind::grad);
  pv.of = group.getSymName().str();
  pv.init = static_cast<uint8_t>(InitKind::zeros);
  int64_t n = static_cast<int64_t>(bytes / dtypeSize(*dtypeOfElement(elt)));
  pv.shape = {n};
  pv.buffer = lowering.buffer(pad, RankedTensorType::get({n}, elt));
  lowering.plan.variables.push_back(std::move(pv));
}

/// The variables outside the groups, densely in one order per category
/// (parameters with weight decay, then without; their gradients, masters
/// and moments in the same order), so that optimizer updates and zeroing
/// run over flat ranges.
void Lowering::VariableLayout::layoutUngrouped() {
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
}

/// State that belongs to a group (sharded moments, gradients and, at
/// stage 3, parameters), in module order.
void Lowering::VariableLayout::layoutGroupState() {
  for (auto var : module.getOps<VariableOp>()) {
    if (lowering.varSlot.count(var.getSymName()) ||
        grouped.contains(var.getSymName()))
      continue;
    // A group's master weights or moments (stages 1-3): one shard of
    // storage, described per member parameter, so that checkpoints and
    // initialization see each parameter's own state at its offset.
    bool stateShard = (var.getKind() == VariableKind::master ||
                       var.getKind() == VariableKind::opt_state) &&
                      var.getOf() && offsetsOf.count(*var.getOf());
    if (var.getKind() == VariableKind::param || stateShard) {
      layoutStorage(var, stateShard);
      continue;
    }
    add(var,
        var.getKind() == VariableKind::grad ? Category::Grads
                                            : Category::OptimizerState,
        false);
  }
}

/// Storage, not a checkpoint tensor: the members are the variables
/// (parameters, or their masters, which draw what the parameter draws, or
/// their moments), each at its offset in the shard.
void Lowering::VariableLayout::layoutStorage(VariableOp var, bool stateShard) {
  int slot = lowering.fixedSlot(
      stateShard ? Category::OptimizerState : Category::Params,
      bytesOf(var.getTensorType()), var.getSymName().str(),
      /*align=*/false, spaceOf(var));
  lowering.varSlot[var.getSymName()] = slot;
  uint32_t shard = lowering.buffer(slot, var.getTensorType());
  StringRef suffix =
      var.getSymName().drop_front(stateShard ? var.getOf()->size() : 0);
  for (auto [p, offset] : stateShard ? offsetsOf.lookup(*var.getOf())
                                     : membersOf.lookup(*var.getOf())) {
    PlanVariable pv = describeShare(p, var, stateShard, suffix);
    pv.buffer = shard;
    pv.sharded = true;
    pv.shardOffset = static_cast<uint64_t>(offset);
    lowering.plan.variables.push_back(std::move(pv));
  }
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
