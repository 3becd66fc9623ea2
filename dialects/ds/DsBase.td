//===- DsBase.td - ds dialect, types, enums, interfaces ---*- tablegen -*-===//
//
// The `ds` dialect is dsc's graph IR: tensors with value semantics, model
// state in module-level variables, and one op per kernel family.
//
//===----------------------------------------------------------------------===//

#ifndef DS_BASE_TD
#define DS_BASE_TD

include "mlir/IR/OpBase.td"
include "dialects/ds/DsKernelContract.td"
include "mlir/IR/EnumAttr.td"
include "mlir/IR/AttrTypeBase.td"

def DS_Dialect : Dialect {
  let name = "ds";
  let cppNamespace = "::mlir::ds";
  let summary = "Graph IR of dsc: model state, tensor ops and their VJPs";
  let description = [{
    Tensors are builtin ranked tensors with static shapes. Model state
    (parameters, gradient accumulators, optimizer moments) lives in
    `ds.variable` symbols read with `ds.load` and written with `ds.store`.
    Randomness (`ds.dropout`) is counter-based: its mask is a function of the
    run seed, the op's `id`, the step and the element index, so recomputing an
    op gives the same mask.
  }];
  let dependentDialects = ["::mlir::func::FuncDialect"];
  let hasConstantMaterializer = 1;
  // The marks passes leave on ops, arguments and the module for later
  // phases; dialects/ds/Contracts.h says who sets and who reads each, and
  // names them in C++.
  let discardableAttrs = (ins
    "::mlir::UnitAttr":$grad_accumulation,
    "::mlir::UnitAttr":$global_grad_norm,
    "::mlir::UnitAttr":$loss_seed,
    "::mlir::UnitAttr":$recompute,
    "::mlir::StringAttr":$remat,
    "::mlir::DictionaryAttr":$aliases,
    "::mlir::StringAttr":$name,
    "::mlir::BoolAttr":$decay,
    "::mlir::IntegerAttr":$attention_heads
  );
}

//===----------------------------------------------------------------------===//
// Types
//===----------------------------------------------------------------------===//

def DS_FloatTensor : RankedTensorOf<[F16, BF16, F32, F64]>;
def DS_IndexTensor : RankedTensorOf<[I32, I64]>;
def DS_AnyTensor : RankedTensorOf<[F16, BF16, F32, F64, I32, I64]>;
def DS_ScalarF32 : 0DTensorOf<[F32]>,
    BuildableType<"::mlir::RankedTensorType::get({}, $_builder.getF32Type())">;

//===----------------------------------------------------------------------===//
// Enums
//===----------------------------------------------------------------------===//

def DS_VariableKindAttr : I32EnumAttr<"VariableKind", "what a variable holds", [
    I32EnumAttrCase<"param", 0>,
    I32EnumAttrCase<"grad", 1>,
    I32EnumAttrCase<"opt_state", 2>,
    // Mixed precision: the fp32 copy of a 16-bit parameter that the
    // optimizer updates (DeepSpeed's fp32 master weights).
    I32EnumAttrCase<"master", 3>
  ]> {
  let cppNamespace = "::mlir::ds";
}

def DS_InitKindAttr : I32EnumAttr<"InitKind", "how a variable is initialized", [
    I32EnumAttrCase<"zeros", 0>,
    I32EnumAttrCase<"ones", 1>,
    I32EnumAttrCase<"normal", 2>
  ]> {
  let cppNamespace = "::mlir::ds";
}

def DS_GeluApproximationAttr : I32EnumAttr<"GeluApproximation",
    "which GELU formula", [
    I32EnumAttrCase<"none", 0>,
    I32EnumAttrCase<"tanh", 1>
  ]> {
  let cppNamespace = "::mlir::ds";
}

//===----------------------------------------------------------------------===//
// Interfaces
//===----------------------------------------------------------------------===//

def DS_VJPOpInterface : OpInterface<"VJPOpInterface"> {
  let cppNamespace = "::mlir::ds";
  let description = [{
    The reverse-mode rule of an op. Given the cotangent of each result (a
    null Value when no gradient reaches that result) and which operands need
    a gradient, builds the cotangent of those operands at the builder's
    insertion point. Operands whose gradient is not needed get a null Value.
  }];
  let methods = [
    InterfaceMethod<"Builds the operands' cotangents.",
      "::mlir::LogicalResult", "buildVJP",
      (ins "::mlir::OpBuilder &":$b,
           "::mlir::ArrayRef<::mlir::Value>":$resultGrads,
           "::llvm::ArrayRef<bool>":$needed,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$operandGrads)>
  ];
}

def DS_KernelOpInterface : OpInterface<"KernelOpInterface"> {
  let cppNamespace = "::mlir::ds";
  let description = [{
    The facts plan lowering, `--report` and the runtime's kernel table share
    about an op that runs as one kernel call: the kernel's name, its
    positional attributes (runtime/kernels/Kernel.h gives the encoding of
    each kernel), its FLOP count and whether its result may overwrite a
    same-shaped operand. The kernel's inputs are the op's operands and its
    outputs the op's results, in order (the arity is the op's). Adding an op
    touches its definition here, its VJP, its kernels and its tests;
    test/compiler/KernelFactsTest.cpp checks every op against the CPU
    backend's table.
  }];
  let methods = [
    InterfaceMethod<"The kernel's name in plans (\"ds.matmul\").",
      "::llvm::StringRef", "getKernelName", (ins), [{}],
      [{ return $_op->getName().getStringRef(); }]>,
    InterfaceMethod<"Appends the kernel's int and float attributes.",
      "void", "getKernelAttributes",
      (ins "::llvm::SmallVectorImpl<int64_t> &":$ints,
           "::llvm::SmallVectorImpl<double> &":$floats), [{}],
      [{ (void)ints; (void)floats; }]>,
    InterfaceMethod<"Floating-point operations of one call (elementwise: "
                    "one per element of the first result).",
      "double", "getFlops", (ins), [{}],
      [{ return ::mlir::ds::elementwiseFlops($_op); }]>,
    InterfaceMethod<"Whether the kernel reads element i of each operand "
                    "before writing element i of its results, so a result "
                    "may overwrite a same-shaped operand (the DS_InPlaceSafe "
                    "trait).",
      "bool", "isInPlaceSafe", (ins), [{}],
      [{ return ConcreteOp::template hasTrait<::mlir::ds::InPlaceSafe>(); }]>
  ];
}

def DS_OptimizerUpdateOpInterface : OpInterface<"OptimizerUpdateOpInterface"> {
  let cppNamespace = "::mlir::ds";
  let description = [{
    One optimizer step of one parameter (or of one flat shard of a ZeRO
    group): what ds-zero, ds-precision, ds-offload and plan lowering need
    to shard, widen, move and fuse an update without knowing its rule. The
    operands are, in order, the parameter, its gradient, the optimizer's
    state tensors (as many as the op has results after the new parameter),
    then the scalars lr, step and scale, then the update's own optional
    scalars (ds.adamw's and ds.lion's beta1_value); the results are the
    new parameter and the new states, each of the parameter's type.
    `scale` carries clipping and the inverse loss scale; a non-finite
    scale skips the step.
  }];
  let methods = [
    InterfaceMethod<"The parameter (or its fp32 master).", "::mlir::Value",
      "getParam", (ins), [{}], [{ return $_op->getOperand(0); }]>,
    InterfaceMethod<"The gradient.", "::mlir::Value", "getGrad", (ins), [{}],
      [{ return $_op->getOperand(1); }]>,
    InterfaceMethod<"The state tensors (Adam's moments, SGD's momentum).",
      "::mlir::OperandRange", "getStates", (ins), [{}],
      [{ return $_op->getOperands().slice(2, $_op->getNumResults() - 1); }]>,
    InterfaceMethod<"The new parameter.", "::mlir::Value", "getNewParam",
      (ins), [{}], [{ return $_op->getResult(0); }]>,
    InterfaceMethod<"The new states, in the order of getStates.",
      "::mlir::ResultRange", "getNewStates", (ins), [{}],
      [{ return $_op->getResults().drop_front(); }]>,
    InterfaceMethod<"The update's scale operand (clipping, loss scale).",
      "::mlir::OpOperand &", "getScaleOperand", (ins), [{}],
      [{ return $_op->getOpOperand($_op->getNumResults() + 3); }]>,
    StaticInterfaceMethod<"The suffix of each state's variable, in order "
                          "(runtime/plan/VariableNames.h).",
      "::llvm::SmallVector<::llvm::StringRef>", "getStateSuffixes">,
    InterfaceMethod<"Whether the update decays the parameter (its weight "
                    "decay group).", "bool", "decaysWeights">,
    InterfaceMethod<"The same update with the same hyper-parameters over "
                    "other tensors (a shard), of `param`'s type.",
      "::mlir::Operation *", "cloneOver",
      (ins "::mlir::OpBuilder &":$b, "::mlir::Location":$loc,
           "::mlir::Value":$param, "::mlir::Value":$grad,
           "::mlir::ValueRange":$states), [{}],
      [{ return ::mlir::ds::cloneUpdateOver($_op, b, loc, param, grad,
                                            states); }]>
  ];
  let verify = [{ return ::mlir::ds::verifyOptimizerUpdate($_op); }];
}

/// An optimizer update whose state names and weight-decay group are
/// written by hand (DsOps.cpp).
def DS_OptimizerUpdate : DeclareOpInterfaceMethods<
    DS_OptimizerUpdateOpInterface, ["getStateSuffixes", "decaysWeights"]>;

/// Marks a kernel op whose result may overwrite a same-shaped operand
/// (KernelOpInterface::isInPlaceSafe).
def DS_InPlaceSafe : NativeOpTrait<"InPlaceSafe"> {
  let cppNamespace = "::mlir::ds";
}

/// The interface with the attribute encoding written by hand (in
/// DsKernelFacts.cpp).
def DS_KernelWithAttrs
    : DeclareOpInterfaceMethods<DS_KernelOpInterface, ["getKernelAttributes"]>;

/// A ds op; a kernel op declares its kernel's contract (DsKernelContract.td).
class DS_Op<string mnemonic, list<Trait> traits = []>
    : Op<DS_Dialect, mnemonic, traits> {
  DS_Kernel kernel = ?;
}

#endif // DS_BASE_TD
