//===- OptimizerFusion.cpp - plan-fuse-optimizer --------------------------===//
//
// Over @apply's calls: mixed precision's update and rounding become one
// call; adjacent per-parameter updates (and zeroings) over contiguous
// memory with equal hyper-parameters become one call over the flat range.
// The calls are read into a list, rewritten there and written back.
//
//===----------------------------------------------------------------------===//
#include "compiler/plan/PlanIR.h"
#include "compiler/plan/PlanPasses.h"

#include "dialects/ds/DsUtils.h"
#include "dialects/plan/PlanOps.h"
#include "runtime/kernels/KernelContract.h"
#include "runtime/plan/ProgramNames.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#include <optional>

namespace dsc {

#define GEN_PASS_DEF_PLANFUSEOPTIMIZER
#include "compiler/plan/PlanPasses.h.inc"

using namespace mlir;
namespace pl = mlir::plan; // dsc::plan is the plan file's names

namespace {

/// One plan.call, as the rewrite below edits it.
struct Pending {
  std::string kernel;
  SmallVector<Value> ins, outs;
  SmallVector<int64_t> ints;
  SmallVector<double> floats;
  pl::Stream stream = pl::Stream::compute;
  pl::Space space = pl::Space::device;
  SmallVector<int32_t> waits, records;
  std::optional<Location> loc; ///< none for a merged call
  double flops = 0;            ///< a merged call's: the sum of its parts
  bool tensorGroup = false;    ///< a collective over the tensor group
  /// Other passes' marks on the call (a pipeline group), kept.
  DictionaryAttr marks;
};

/// Where buffers live: each buffer's storage, and new flat storage.
class Storage {
public:
  explicit Storage(ModuleOp module) : module(module), symbols(module) {}

  pl::StorageOp of(Value buffer) {
    auto [it, inserted] = storageOfView.try_emplace(buffer);
    if (inserted)
      it->second = storageOf(buffer, symbols);
    return it->second;
  }

  /// A view of `elements` elements of `first`'s element type over new
  /// persistent storage at `first`'s storage's offset, declared at the
  /// start of `func`.
  Value flat(Value first, int64_t elements, func::FuncOp func);

private:
  ModuleOp module;
  SymbolTable symbols;
  DenseMap<Value, pl::StorageOp> storageOfView; ///< a cache
  int created = 0;
};

Value Storage::flat(Value first, int64_t elements, func::FuncOp func) {
  pl::StorageOp s = of(first);
  Type elt = cast<MemRefType>(first.getType()).getElementType();
  int64_t bytes = elements * int64_t(dtypeSize(*ds::dtypeOfElement(elt)));
  OpBuilder b(module.getContext());
  b.setInsertionPointAfter(s);
  auto storage = b.create<pl::StorageOp>(
      s.getLoc(), b.getStringAttr("flat" + std::to_string(created++)),
      b.getStringAttr(s.getName() + "+flat"), s.getCategoryAttr(),
      s.getSpaceAttr(), b.getI64IntegerAttr(bytes), s.getOffsetAttr(),
      UnitAttr(), DenseI64ArrayAttr());
  symbols.insert(storage); // renames it if the name is taken
  b.setInsertionPointToStart(&func.front());
  Value view = b.create<pl::BufferOp>(
      s.getLoc(), MemRefType::get({elements}, elt),
      FlatSymbolRefAttr::get(storage.getSymNameAttr()), IntegerAttr());
  storageOfView[view] = storage;
  return view;
}

/// One storage, one view offset, one type: the writer declares each such
/// buffer once per program, and flat views are new storage.
bool same(Value a, Value b) { return a == b; }

bool touches(Storage &storage, const Pending &p, pl::StorageOp slot) {
  for (Value r : llvm::concat<const Value>(p.ins, p.outs))
    if (storage.of(r) == slot)
      return true;
  return false;
}

/// Calls that synchronize with another stream stay as they are.
bool synced(const Pending &p) { return !p.waits.empty() || !p.records.empty(); }

int64_t elementsOf(Value r) {
  return cast<MemRefType>(r.getType()).getNumElements();
}

/// 1 for a mixed-precision update (ds.adamw_round, ds.sgd_round, ...),
/// whose last output is the 16-bit copy of the parameter, else 0.
size_t roundedOutputs(const Pending &p) {
  return StringRef(p.kernel).ends_with("_round") ? 1 : 0;
}

/// An optimizer update (its contract's aliasing is "update"): inputs
/// param, grad, the states, lr, step, scale (and the update's own scalars);
/// outputs param' and the states', each of its input's type, and for the
/// _round kernels the 16-bit parameter last.
bool isUpdate(const Pending &p) {
  const rt::KernelContract *c = rt::findKernelContract(p.kernel);
  const size_t updated = p.outs.size() - roundedOutputs(p);
  if (!c || c->alias != rt::KernelAlias::Update || updated == 0 ||
      p.ins.size() < updated + 4)
    return false;
  for (size_t k = 0; k < updated; ++k)
    if (p.outs[k].getType() != p.ins[k == 0 ? 0 : k + 1].getType())
      return false;
  return true;
}
/// The update's flat operands: param, grad and its states.
size_t flatInputs(const Pending &update) {
  return update.outs.size() - roundedOutputs(update) + 1;
}

/// The rewrite of one program's calls; `storage` knows where buffers live.
class Fusion {
public:
  Fusion(Storage &storage, func::FuncOp func) : storage(storage), func(func) {}

  /// Mixed precision's update, copy and cast as one call of its _round
  /// kernel (ds.adamw_round, ds.sgd_round, ...).
  void fuseRounding(std::vector<Pending> &pend);
  /// Adjacent same-kind calls merged into one over the flat range.
  std::vector<Pending> mergeRuns(std::vector<Pending> &pend);
  /// The gradients' zeroing moved to the end and merged over adjacent
  /// memory.
  void mergeGradientFills(std::vector<Pending> &pend);

private:
  Storage &storage;
  func::FuncOp func;

  pl::StorageOp slot(Value v) { return storage.of(v); }
  bool forwarded(const Pending &update);
  bool isMasterCopy(const Pending &q, const Pending &update);
  bool isRoundingCast(const Pending &q, const Pending &update);
  std::optional<std::pair<int, int>>
  findRounding(const std::vector<Pending> &pend, size_t i,
               const std::vector<bool> &erased);
  bool contiguous(Value a, Value b);
  bool adjacentUpdates(const Pending &last, const Pending &q);
  std::vector<size_t> extendRun(const std::vector<Pending> &pend, size_t i,
                                bool isUpdateRun);
  Pending mergeRun(std::vector<Pending> &pend, const std::vector<size_t> &run,
                   bool isUpdateRun);
  bool isGradientFill(const Pending &p);
};

/// An update that writes its parameter and states in place (outputs:
/// parameter, states; inputs: parameter, gradient, states, ...).
bool Fusion::forwarded(const Pending &update) {
  for (size_t k = 0; k + roundedOutputs(update) < update.outs.size(); ++k)
    if (slot(update.outs[k]) != slot(update.ins[k == 0 ? 0 : k + 1]))
      return false;
  return true;
}

// What mixed precision does with an update's result `tmp`: copies it into
// the master weights and casts it into the 16-bit parameter, in the
// update's space and waiting for nothing.
bool readsOnly(const Pending &q, Value tmp) {
  return q.ins.size() == 1 && same(q.ins[0], tmp);
}

bool Fusion::isMasterCopy(const Pending &q, const Pending &update) {
  return readsOnly(q, update.outs[0]) && q.kernel == "ds.copy" &&
         same(q.outs[0], update.ins[0]) && q.waits.empty() &&
         q.space == update.space;
}

bool Fusion::isRoundingCast(const Pending &q, const Pending &update) {
  auto tmp = cast<MemRefType>(update.outs[0].getType());
  auto out = cast<MemRefType>(q.outs[0].getType());
  return readsOnly(q, update.outs[0]) && q.kernel == "ds.cast" &&
         q.waits.empty() && q.space == update.space &&
         out.getShape() == tmp.getShape() &&
         out.getElementType().getIntOrFloatBitWidth() == 16;
}

/// The copy and the cast of update `i`'s result, when nothing else touches
/// the result or the master in between, nor reads the 16-bit parameter's
/// old value before the cast writes it.
std::optional<std::pair<int, int>>
Fusion::findRounding(const std::vector<Pending> &pend, size_t i,
                     const std::vector<bool> &erased) {
  const Pending &update = pend[i];
  pl::StorageOp tmp = slot(update.outs[0]), master = slot(update.ins[0]);
  int copy = -1, cast = -1;
  for (size_t j = i + 1; j < pend.size(); ++j) {
    const Pending &q = pend[j];
    if (erased[j] ||
        (!touches(storage, q, tmp) && !touches(storage, q, master)))
      continue;
    if (copy < 0 && isMasterCopy(q, update))
      copy = j;
    else if (cast < 0 && isRoundingCast(q, update))
      cast = j;
    else
      return std::nullopt;
    if (copy >= 0 && cast >= 0)
      break;
  }
  if (copy < 0 || cast < 0)
    return std::nullopt;
  pl::StorageOp p16 = slot(pend[cast].outs[0]);
  for (int j = int(i) + 1; j < std::max(copy, cast); ++j)
    if (!erased[j] && j != copy && touches(storage, pend[j], p16))
      return std::nullopt;
  return std::make_pair(copy, cast);
}

/// `b` starts where `a`'s persistent storage ends, in the same arena and
/// element type.
bool Fusion::contiguous(Value a, Value b) {
  pl::StorageOp x = slot(a), y = slot(b);
  return !x.getTransient() && !y.getTransient() &&
         x.getCategory() == y.getCategory() && x.getSpace() == y.getSpace() &&
         *x.getOffset() + x.getSize() == *y.getOffset() &&
         cast<MemRefType>(a.getType()).getElementType() ==
             cast<MemRefType>(b.getType()).getElementType();
}

/// `q` continues the run that ends in `last`: its parameter, gradient and
/// states (and 16-bit parameter) follow `last`'s, it reads the same
/// scalars (lr, step, scale) and it was forwarded into its variables.
bool Fusion::adjacentUpdates(const Pending &last, const Pending &q) {
  size_t flat = flatInputs(q);
  if (flatInputs(last) != flat || last.ins.size() != q.ins.size())
    return false;
  for (size_t k = 0; k < flat; ++k)
    if (!contiguous(last.ins[k], q.ins[k]))
      return false;
  if (roundedOutputs(q) && !contiguous(last.outs.back(), q.outs.back()))
    return false;
  for (size_t k = flat; k < q.ins.size(); ++k)
    if (slot(last.ins[k]) != slot(q.ins[k]))
      return false;
  return forwarded(q);
}

/// The calls that can merge with `pend[i]`, from `i` on.
std::vector<size_t> Fusion::extendRun(const std::vector<Pending> &pend,
                                      size_t i, bool isUpdateRun) {
  const Pending &p = pend[i];
  std::vector<size_t> run{i};
  for (size_t j = i + 1; j < pend.size(); ++j) {
    const Pending &q = pend[j];
    if (q.kernel == "ds.fill" && isUpdateRun)
      continue; // zeroing of an earlier grad may sit in between
    if (q.kernel != p.kernel || q.floats != p.floats || q.space != p.space ||
        synced(q))
      break;
    const Pending &last = pend[run.back()];
    if (isUpdateRun ? !adjacentUpdates(last, q)
                    : !contiguous(last.outs[0], q.outs[0]))
      break;
    run.push_back(j);
  }
  return run;
}

Pending Fusion::mergeRun(std::vector<Pending> &pend,
                         const std::vector<size_t> &run, bool isUpdateRun) {
  int64_t elements = 0;
  double flops = 0;
  for (size_t j : run) {
    elements += elementsOf(isUpdateRun ? pend[j].ins[0] : pend[j].outs[0]);
    flops += pend[j].flops;
  }
  Pending merged = std::move(pend[run.front()]);
  merged.flops = flops;
  merged.loc.reset();
  if (isUpdateRun) {
    for (size_t k = 0; k < flatInputs(merged); ++k)
      merged.ins[k] = storage.flat(merged.ins[k], elements, func);
    const size_t rounded = roundedOutputs(merged);
    for (size_t k = 0; k + rounded < merged.outs.size(); ++k)
      merged.outs[k] = merged.ins[k == 0 ? 0 : k + 1];
    if (rounded)
      merged.outs.back() = storage.flat(merged.outs.back(), elements, func);
  } else {
    merged.outs[0] = storage.flat(merged.outs[0], elements, func);
  }
  return merged;
}

std::vector<Pending> Fusion::mergeRuns(std::vector<Pending> &pend) {
  std::vector<Pending> out;
  for (size_t i = 0; i < pend.size(); ++i) {
    Pending &p = pend[i];
    bool isUpdateRun = isUpdate(p) && !synced(p);
    bool isFill = p.kernel == "ds.fill" && !synced(p);
    if (!isUpdateRun && !isFill) {
      out.push_back(std::move(p));
      continue;
    }
    std::vector<size_t> run = extendRun(pend, i, isUpdateRun);
    if (run.size() == 1 || (isUpdateRun && !forwarded(p))) {
      out.push_back(std::move(p));
      continue;
    }
    out.push_back(mergeRun(pend, run, isUpdateRun));
    // Keep fills that sat between merged updates, in order, after it.
    for (size_t j = i + 1; j <= run.back(); ++j)
      if (!llvm::is_contained(run, j))
        out.push_back(std::move(pend[j]));
    i = run.back();
  }
  return out;
}

bool Fusion::isGradientFill(const Pending &p) {
  return p.kernel == "ds.fill" &&
         slot(p.outs[0]).getCategory() == pl::Category::grads && !synced(p);
}

void Fusion::mergeGradientFills(std::vector<Pending> &pend) {
  std::vector<Pending> fills;
  std::vector<Pending> rest;
  for (Pending &p : pend)
    (isGradientFill(p) ? fills : rest).push_back(std::move(p));
  pend = std::move(rest);
  for (size_t i = 0; i < fills.size();) {
    size_t j = i + 1;
    int64_t elements = elementsOf(fills[i].outs[0]);
    double flops = fills[i].flops;
    while (j < fills.size() && fills[j].floats == fills[i].floats &&
           contiguous(fills[j - 1].outs[0], fills[j].outs[0])) {
      elements += elementsOf(fills[j].outs[0]);
      flops += fills[j].flops;
      ++j;
    }
    Pending merged = std::move(fills[i]);
    merged.flops = flops;
    if (j > i + 1) {
      merged.outs[0] = storage.flat(merged.outs[0], elements, func);
      merged.loc.reset();
    }
    pend.push_back(std::move(merged));
    i = j;
  }
}

// Mixed precision's update is an update (ds.adamw, ds.sgd, ds.lion,
// ds.adagrad) into a transient, a copy of it into the master weights and a
// cast of it into the 16-bit parameter: one `<update>_round` updates the
// master in place and writes the parameter in the same pass, reading the
// 16-bit gradient directly. Only when nothing else touches the transient or
// the master in between, and the copy and the cast wait for nothing (their
// events are recorded by the fused call, which finishes before they would
// have).
void Fusion::fuseRounding(std::vector<Pending> &pend) {
  std::vector<bool> erased(pend.size(), false);
  for (size_t i = 0; i < pend.size(); ++i) {
    Pending &update = pend[i];
    const std::string rounded = update.kernel + "_round";
    if (!isUpdate(update) || !rt::findKernelContract(rounded) ||
        !slot(update.outs[0]).getTransient() ||
        slot(update.ins[0]).getTransient())
      continue;
    auto rounding = findRounding(pend, i, erased);
    if (!rounding)
      continue;
    auto [copy, cast] = *rounding;
    update.kernel = rounded;
    update.outs[0] = update.ins[0]; // the master, updated in place
    update.outs.push_back(pend[cast].outs[0]);
    for (int j : {copy, cast}) {
      update.records.append(pend[j].records.begin(), pend[j].records.end());
      update.flops += pend[j].flops;
      erased[j] = true;
    }
  }
  std::vector<Pending> kept;
  for (size_t i = 0; i < pend.size(); ++i)
    if (!erased[i])
      kept.push_back(std::move(pend[i]));
  pend = std::move(kept);
}

/// The calls of `func` in order, and removed from it.
std::vector<Pending> takeCalls(func::FuncOp func) {
  std::vector<Pending> pend;
  for (auto call :
       llvm::make_early_inc_range(func.front().getOps<pl::CallOp>())) {
    Pending p;
    p.kernel = call.getKernel().str();
    p.ins.assign(call.getIns().begin(), call.getIns().end());
    p.outs.assign(call.getOuts().begin(), call.getOuts().end());
    p.ints.assign(call.getInts().begin(), call.getInts().end());
    p.floats.assign(call.getFloats().begin(), call.getFloats().end());
    p.stream = call.getStream();
    p.space = call.getPlace().value_or(pl::Space::device);
    if (auto w = call.getWait())
      p.waits.assign(w->begin(), w->end());
    if (auto r = call.getRecord())
      p.records.assign(r->begin(), r->end());
    p.loc = call.getLoc();
    p.flops = call.getFlops() ? call.getFlops()->convertToDouble() : 0.0;
    p.tensorGroup = call.getTensorGroup();
    p.marks = call->getDiscardableAttrDictionary();
    pend.push_back(std::move(p));
    call.erase();
  }
  return pend;
}

/// Writes `pend` back before the program's plan.outputs.
void putCalls(func::FuncOp func, const std::vector<Pending> &pend) {
  MLIRContext *ctx = func.getContext();
  OpBuilder b(ctx);
  // Before plan.outputs, or before the terminator of a program without.
  auto outputs = func.front().getOps<pl::OutputsOp>();
  b.setInsertionPoint(outputs.empty() ? func.front().getTerminator()
                                      : *outputs.begin());
  auto events = [&](ArrayRef<int32_t> e) {
    return e.empty() ? DenseI32ArrayAttr() : b.getDenseI32ArrayAttr(e);
  };
  for (const Pending &p : pend) {
    auto call = b.create<pl::CallOp>(
        p.loc.value_or(b.getUnknownLoc()), Type(), b.getStringAttr(p.kernel),
        p.ins, p.outs, b.getDenseI64ArrayAttr(p.ints),
        b.getDenseF64ArrayAttr(p.floats), pl::StreamAttr::get(ctx, p.stream),
        p.space == pl::Space::host ? pl::SpaceAttr::get(ctx, p.space)
                                   : pl::SpaceAttr(),
        events(p.waits), events(p.records),
        p.flops > 0 ? b.getF64FloatAttr(p.flops) : FloatAttr(),
        p.tensorGroup ? b.getUnitAttr() : UnitAttr());
    if (p.marks)
      call->setDiscardableAttrs(p.marks);
  }
}

struct FuseOptimizerPass : impl::PlanFuseOptimizerBase<FuseOptimizerPass> {
  void runOnOperation() override;
};

void FuseOptimizerPass::runOnOperation() {
  ModuleOp module = requirePlanModule(getOperation(), "plan-fuse-optimizer");
  if (!module)
    return signalPassFailure();
  auto apply = module.lookupSymbol<func::FuncOp>(plan::kApplyProgram);
  if (!apply)
    return;
  Storage storage(module);
  Fusion fusion(storage, apply);
  std::vector<Pending> pend = takeCalls(apply);
  fusion.fuseRounding(pend);
  pend = fusion.mergeRuns(pend);
  // Zeroing the accumulators is the last thing @apply does to them (the
  // norm and the updates read them first), so those fills can move to the
  // end of the program and merge over adjacent memory.
  if (llvm::count_if(
          pend, [](const Pending &p) { return p.kernel == "ds.fill"; }) > 1)
    fusion.mergeGradientFills(pend);
  putCalls(apply, pend);
  // What the fused calls no longer read: views, then storage nobody views.
  for (auto view :
       llvm::make_early_inc_range(apply.front().getOps<pl::BufferOp>()))
    if (view->use_empty())
      view.erase();
  llvm::DenseSet<StringAttr> viewed;
  module.walk([&](Operation *op) {
    if (auto b = dyn_cast<pl::BufferOp>(op))
      viewed.insert(b.getStorageAttr().getAttr());
    else if (auto c = dyn_cast<pl::ConstantOp>(op))
      viewed.insert(c.getStorageAttr().getAttr());
    else if (auto v = dyn_cast<pl::VariableOp>(op))
      viewed.insert(v.getStorageAttr().getAttr());
  });
  for (auto s : llvm::make_early_inc_range(module.getOps<pl::StorageOp>()))
    if (!viewed.contains(s.getSymNameAttr()))
      s.erase();
}

} // namespace

std::unique_ptr<mlir::Pass> createPlanFuseOptimizerPass() {
  return std::make_unique<FuseOptimizerPass>();
}

} // namespace dsc
