//===- Precision.cpp - phase `precision`: fp16/bf16 with fp32 masters -----===//
//
// What DeepSpeed's fp16/bf16 optimizers do at run time, written into the
// step once (docs/precision.md):
//   - parameters and gradient accumulators are 16-bit; the forward and
//     backward compute in 16 bits (the kernels accumulate in fp32 and
//     round their results once; the loss stays fp32);
//   - each updated parameter has an fp32 `master` copy: @apply runs AdamW on
//     it with the fp32 moments and casts the result into the parameter;
//   - the global gradient norm sums the 16-bit gradients in fp32;
//   - loss scaling (fp16): a `loss_scale` input multiplies the reverse
//     pass's seed; @apply divides the norm and the update scale by it;
//   - the overflow check: a non-finite norm makes the update scale NaN
//     (ds.overflow_guard), and ds.adamw skips an update with such a scale.
// Casts appear only where a 16-bit value meets an fp32 one.
//
//===----------------------------------------------------------------------===//

#include "dialects/dist/DistOps.h"
#include "dialects/ds/Contracts.h"
#include "dialects/ds/DsUtils.h"
#include "passes/Passes.h"
#include "runtime/plan/ProgramNames.h"
#include "runtime/plan/VariableNames.h"

#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "llvm/ADT/StringSet.h"

namespace mlir::ds {
#define GEN_PASS_DEF_DSPRECISION
#include "passes/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;
namespace plan = dsc::plan;

namespace {

constexpr llvm::StringLiteral kPass = "ds-precision";
constexpr llvm::StringLiteral kLossScaleName = "loss_scale";

bool isF32Tensor(Type t) {
  auto r = dyn_cast<RankedTensorType>(t);
  return r && r.getElementType().isF32();
}

struct PrecisionPass : ds::impl::DsPrecisionBase<PrecisionPass> {
  using Base::Base;

  Type low; ///< bf16 or f16
  SymbolTable *symbols = nullptr;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTable table(module);
    symbols = &table;
    if (failed(run(module)))
      signalPassFailure();
  }

  /// `t` with a 16-bit element type if it is an f32 tensor.
  Type lowered(Type t) const {
    if (!isF32Tensor(t))
      return t;
    return cast<RankedTensorType>(t).clone(low);
  }

  LogicalResult run(ModuleOp module) {
    MLIRContext *ctx = module.getContext();
    low = dtype == LowPrecision::bf16 ? Type(BFloat16Type::get(ctx))
                                      : Type(Float16Type::get(ctx));
    auto apply = module.lookupSymbol<func::FuncOp>(plan::kApplyProgram);
    auto micro = module.lookupSymbol<func::FuncOp>(plan::kMicroStepProgram);
    if (!apply || !micro)
      return module.emitError(kPass)
             << ": no @micro_step and @apply; run ds-autodiff and ds-adamw "
                "first";
    for (auto var : module.getOps<VariableOp>())
      if (var.getKind() == VariableKind::master)
        return var.emitError(kPass) << ": the module has master weights "
                                       "already";

    // Parameters and gradients become 16-bit; the moments stay fp32.
    for (auto var : module.getOps<VariableOp>())
      if (var.getKind() == VariableKind::param ||
          var.getKind() == VariableKind::grad)
        var.setTypeAttr(TypeAttr::get(lowered(var.getType())));

    FailureOr<SqrtOp> norm = findGlobalGradNorm(apply, kPass);
    if (failed(norm) || failed(addMasters(module, apply)) ||
        failed(rewriteApply(apply, *norm)))
      return failure();
    if (lossScaling && failed(scaleSeed(micro)))
      return failure();
    for (auto func : module.getOps<func::FuncOp>())
      if (func != apply && failed(lowerFunction(func)))
        return failure();
    return success();
  }

  /// Each optimizer update now updates an fp32 master of its parameter and the
  /// parameter receives the rounded result.
  LogicalResult addMasters(ModuleOp module, func::FuncOp apply) {
    SmallVector<OptimizerUpdateOpInterface> updates;
    apply.walk([&](OptimizerUpdateOpInterface op) { updates.push_back(op); });
    OpBuilder mb(module.getContext());
    for (OptimizerUpdateOpInterface op : updates) {
      auto load = op.getParam().getDefiningOp<LoadOp>();
      VariableOp param =
          load ? symbols->lookup<VariableOp>(load.getName()) : VariableOp();
      if (!param || param.getKind() != VariableKind::param)
        return op.emitError(kPass) << ": the update does not read a parameter";
      std::string name =
          plan::stateName(param.getSymName(), plan::kMasterSuffix);
      if (symbols->lookup(name))
        return param.emitError(kPass) << ": @" << name << " exists already";
      mb.setInsertionPointAfter(param);
      // Initialized as the parameter is (the plan keys its draw by the
      // parameter's name): the 16-bit parameter is its rounding.
      auto master =
          mb.create<VariableOp>(param.getLoc(), VariableKind::master, name,
                                FlatSymbolRefAttr::get(param),
                                cast<RankedTensorType>(op.getParam().getType()),
                                param.getInit(), param.getStdAttr());
      // A tensor-parallel part's master is the same part (phase shard).
      if (Attribute split = param->getAttr(dist::kTensorSplitAttr))
        master->setAttr(dist::kTensorSplitAttr, split);
      symbols->insert(master);
      load.setName(master.getSymName());
      for (Operation *user :
           llvm::make_early_inc_range(op.getNewParam().getUsers())) {
        auto store = dyn_cast<StoreOp>(user);
        if (!store || store.getName() != param.getSymName())
          continue;
        store.setName(master.getSymName());
        OpBuilder b(store->getBlock(), ++Block::iterator(store));
        Value rounded =
            b.create<CastOp>(store.getLoc(), param.getType(), op.getNewParam());
        b.create<StoreOp>(store.getLoc(), rounded, param.getSymName());
      }
    }
    return success();
  }

  /// @apply: 16-bit gradient loads, their squares summed in fp32, the
  /// accumulators zeroed in 16 bits, the loss scale divided out and the
  /// overflow check on the update scale.
  LogicalResult rewriteApply(func::FuncOp apply, SqrtOp sqrt) {
    MLIRContext *ctx = apply.getContext();
    auto scalar = RankedTensorType::get({}, Float32Type::get(ctx));
    for (Operation &op : llvm::make_early_inc_range(apply.front())) {
      if (auto load = dyn_cast<LoadOp>(op)) {
        auto var = symbols->lookup<VariableOp>(load.getName());
        if (!var || load.getType() == var.getType())
          continue;
        load.getResult().setType(var.getType());
        if (var.getKind() != VariableKind::grad)
          continue;
        // The norm's squares in fp32 (a 16-bit square overflows early);
        // the optimizer update reads the 16-bit gradient directly.
        OpBuilder b(load->getBlock(), ++Block::iterator(load));
        Value wide;
        for (OpOperand &use :
             llvm::make_early_inc_range(load.getResult().getUses())) {
          if (isa<OptimizerUpdateOpInterface, StoreOp>(use.getOwner()))
            continue;
          if (!wide)
            wide = b.create<CastOp>(
                load.getLoc(),
                RankedTensorType::get(load.getType().getShape(),
                                      Float32Type::get(ctx)),
                load);
          use.set(wide);
        }
      } else if (auto store = dyn_cast<StoreOp>(op)) {
        auto var = symbols->lookup<VariableOp>(store.getName());
        if (var && store.getValue().getType() != var.getType())
          convertOperand(store, 0, var.getType());
      }
    }

    Value normValue = sqrt;
    Value lossScale;
    if (lossScaling) {
      lossScale = addLossScaleInput(apply);
      OpBuilder b(sqrt->getBlock(), ++Block::iterator(sqrt));
      auto unscaled = b.create<DivOp>(sqrt.getLoc(), sqrt, lossScale);
      sqrt.getResult().replaceAllUsesExcept(unscaled, unscaled);
      normValue = unscaled;
    }
    llvm::DenseMap<Value, Value> scaleOf;
    SmallVector<OptimizerUpdateOpInterface> updates;
    apply.walk([&](OptimizerUpdateOpInterface op) { updates.push_back(op); });
    for (OptimizerUpdateOpInterface op : updates) {
      OpOperand &operand = op.getScaleOperand();
      Value &scale = scaleOf[operand.get()];
      if (!scale) {
        OpBuilder b(op);
        scale = operand.get();
        if (lossScale)
          scale = b.create<DivOp>(op.getLoc(), scale, lossScale);
        if (checkOverflow)
          scale =
              b.create<OverflowGuardOp>(op.getLoc(), scalar, scale, normValue);
      }
      operand.set(scale);
    }
    return success();
  }

  /// A new last input `loss_scale` (an f32 scalar) of `func`.
  Value addLossScaleInput(func::FuncOp func) {
    MLIRContext *ctx = func.getContext();
    auto scalar = RankedTensorType::get({}, Float32Type::get(ctx));
    unsigned index = func.getNumArguments();
    auto name = NamedAttribute(StringAttr::get(ctx, kArgNameAttr),
                               StringAttr::get(ctx, kLossScaleName));
    func.insertArgument(index, scalar, DictionaryAttr::get(ctx, {name}),
                        func.getLoc());
    return func.getArgument(index);
  }

  /// @micro_step: the reverse pass starts from seed x loss_scale (in fp32:
  /// 2^16 is not an f16 number).
  LogicalResult scaleSeed(func::FuncOp micro) {
    // A pipeline stage before the last has no loss: its backward starts
    // from the gradients the next stage sends, scaled there. It takes the
    // scale as every stage's micro_step does, and does not read it.
    auto module = micro->getParentOfType<ModuleOp>();
    auto stage = module->getAttrOfType<IntegerAttr>(dist::kStageAttr);
    auto stages = module->getAttrOfType<IntegerAttr>(dist::kPipelineStagesAttr);
    if (stage && stages && stage.getInt() + 1 < stages.getInt()) {
      addLossScaleInput(micro);
      return success();
    }
    FailureOr<ConstantOp> seed = findLossSeed(micro, kPass);
    if (failed(seed))
      return failure();
    Value lossScale = addLossScaleInput(micro);
    OpBuilder b(seed->getOperation()->getBlock(),
                ++Block::iterator(seed->getOperation()));
    auto scaled = b.create<MulOp>(seed->getLoc(), *seed, lossScale);
    seed->getResult().replaceAllUsesExcept(scaled, scaled);
    return success();
  }

  /// `value` as `type` for its use by `user` (replaced there): a splat
  /// constant is rebuilt (and erased when that was its last use), anything
  /// else cast.
  void convertOperand(Operation *user, unsigned index, Type type) {
    OpBuilder b(user);
    Value value = user->getOperand(index);
    auto c = value.getDefiningOp<ConstantOp>();
    auto dense =
        c ? dyn_cast<DenseElementsAttr>(c.getValue()) : DenseElementsAttr();
    if (dense && dense.isSplat() && !c->hasAttr(kLossSeedAttr)) {
      user->setOperand(index,
                       splat(b, c.getLoc(), cast<RankedTensorType>(type),
                             dense.getSplatValue<APFloat>().convertToDouble()));
      if (c->use_empty())
        c->erase();
      return;
    }
    user->setOperand(index, b.create<CastOp>(user->getLoc(), type, value));
  }

  /// Operands of `op` that stay fp32 next to 16-bit ones.
  static bool keepsF32(Operation *op, unsigned index) {
    // The seed; a vocabulary-parallel gradient's summed statistics too.
    return (isa<CrossEntropyGradOp>(op) && index == 2) ||
           (isa<CrossEntropyPartGradOp>(op) && index >= 3);
  }

  /// Every op of `func` computes in 16 bits: loads take their variables'
  /// types, fp32 constants and results become 16-bit, and an fp32 operand
  /// of an op with 16-bit ones is cast. The results keep their types.
  LogicalResult lowerFunction(func::FuncOp func) {
    MLIRContext *ctx = func.getContext();
    for (Operation &op : llvm::make_early_inc_range(func.front())) {
      if (auto load = dyn_cast<LoadOp>(op)) {
        if (auto var = symbols->lookup<VariableOp>(load.getName()))
          load.getResult().setType(var.getType());
        continue;
      }
      if (auto c = dyn_cast<ConstantOp>(op)) {
        auto dense = dyn_cast<DenseElementsAttr>(c.getValue());
        if (c->hasAttr(kLossSeedAttr) || !dense || !isF32Tensor(c.getType()))
          continue;
        auto type = cast<RankedTensorType>(lowered(c.getType()));
        auto values =
            llvm::map_to_vector(dense.getValues<APFloat>(), [&](APFloat v) {
              bool lost;
              v.convert(cast<FloatType>(low).getFloatSemantics(),
                        APFloat::rmNearestTiesToEven, &lost);
              return v;
            });
        c.setValueAttr(DenseElementsAttr::get(type, values));
        c.getResult().setType(type);
        continue;
      }
      if (auto ret = dyn_cast<func::ReturnOp>(op)) {
        for (auto [i, type] :
             llvm::enumerate(func.getFunctionType().getResults()))
          if (ret.getOperand(i).getType() != type)
            convertOperand(ret, i, type);
        continue;
      }
      if (auto store = dyn_cast<StoreOp>(op)) {
        auto var = symbols->lookup<VariableOp>(store.getName());
        if (var && store.getValue().getType() != var.getType())
          convertOperand(store, 0, var.getType());
        continue;
      }
      if (isa<CastOp>(op))
        continue; // the model's own conversion
      // A pipeline's stages exchange 16-bit activations and gradients: a
      // send sends one, a receive gets one.
      if (auto send = dyn_cast<dist::SendOp>(op)) {
        if (isF32Tensor(send.getX().getType()))
          convertOperand(send, 0, lowered(send.getX().getType()));
        continue;
      }
      if (auto recv = dyn_cast<dist::RecvOp>(op)) {
        if (isF32Tensor(recv.getType()))
          recv.getResult().setType(
              cast<RankedTensorType>(lowered(recv.getType())));
        continue;
      }

      bool anyLow = false;
      for (auto [i, v] : llvm::enumerate(op.getOperands()))
        if (auto t = dyn_cast<RankedTensorType>(v.getType()))
          anyLow |= !keepsF32(&op, i) && t.getElementType() == low;
      if (anyLow)
        for (auto [i, v] : llvm::enumerate(op.getOperands()))
          if (isF32Tensor(v.getType()) && !keepsF32(&op, i))
            convertOperand(&op, i, lowered(v.getType()));
      if (auto infer = dyn_cast<InferTypeOpInterface>(op)) {
        SmallVector<Type> types;
        if (failed(infer.inferReturnTypes(
                ctx, op.getLoc(), op.getOperands(), op.getRawDictionaryAttrs(),
                op.getPropertiesStorage(), op.getRegions(), types)))
          return op.emitError(kPass) << ": no 16-bit form of this op";
        for (auto [r, t] : llvm::zip(op.getResults(), types))
          r.setType(t);
      } else if (anyLow) {
        for (Value r : op.getResults())
          r.setType(lowered(r.getType()));
      }
    }
    return success();
  }
};

} // namespace

DsPrecisionOptions mlir::ds::precisionOptionsFor(LowPrecision dtype) {
  DsPrecisionOptions options;
  options.dtype = dtype;
  // f16's 5-bit exponent flushes small gradients to zero unless the loss is
  // scaled up first; bf16 has f32's range.
  options.lossScaling = dtype == LowPrecision::f16;
  return options;
}
