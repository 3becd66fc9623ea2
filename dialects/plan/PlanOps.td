//===- PlanOps.td - the plan dialect -------------------*- tablegen -*-===//
//
// The executable schedule before it is serialized: buffers with their arena
// category and memory space (and, once placed, their offset), and kernel
// calls over them on a stream, each checked against its kernel's contract
// (DsKernelContract.td). docs/phases.md has the design: plan lowering's
// jobs (selection, optimizer fusion, streams, events, liveness, placement)
// become passes over this dialect, and ds-emit-plan reads only it.
//
//===----------------------------------------------------------------------===//

#ifndef PLAN_OPS_TD
#define PLAN_OPS_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Plan_Dialect : Dialect {
  let name = "plan";
  let cppNamespace = "::mlir::plan";
  let summary = "kernel calls over placed buffers, per stream";
  let useDefaultAttributePrinterParser = 1;
}

class Plan_Op<string mnemonic, list<Trait> traits = []>
    : Op<Plan_Dialect, mnemonic, traits>;

// The arena categories and streams of runtime/schema/plan.fbs, in its order
// and under its names.
def Plan_Category : I32EnumAttr<"Category", "an arena category", [
    I32EnumAttrCase<"params", 0>, I32EnumAttrCase<"grads", 1>,
    I32EnumAttrCase<"optimizer_state", 2>, I32EnumAttrCase<"activations", 3>,
    I32EnumAttrCase<"comm_buffers", 4>, I32EnumAttrCase<"workspace", 5>,
    I32EnumAttrCase<"inputs", 6>, I32EnumAttrCase<"constants", 7>]> {
  let cppNamespace = "::mlir::plan";
  let genSpecializedAttr = 0;
}
def Plan_CategoryAttr : EnumAttr<Plan_Dialect, Plan_Category, "category"> {
  let assemblyFormat = "`<` $value `>`";
}

def Plan_Space : I32EnumAttr<"Space", "a memory space", [
    I32EnumAttrCase<"device", 0>, I32EnumAttrCase<"host", 1>]> {
  let cppNamespace = "::mlir::plan";
  let genSpecializedAttr = 0;
}
def Plan_SpaceAttr : EnumAttr<Plan_Dialect, Plan_Space, "space"> {
  let assemblyFormat = "`<` $value `>`";
}

def Plan_Stream : I32EnumAttr<"Stream", "an execution stream", [
    I32EnumAttrCase<"compute", 0>, I32EnumAttrCase<"comm", 1>,
    I32EnumAttrCase<"h2d", 2>, I32EnumAttrCase<"d2h", 3>]> {
  let cppNamespace = "::mlir::plan";
  let genSpecializedAttr = 0;
}
def Plan_StreamAttr : EnumAttr<Plan_Dialect, Plan_Stream, "stream"> {
  let assemblyFormat = "`<` $value `>`";
}

def Plan_Buffer : MemRefOf<[F16, BF16, F32, F64, I32, I64]>;

def Plan_BufferOp : Plan_Op<"buffer", [Pure]> {
  let summary = "a buffer in an arena of one category and memory space";
  let description = [{
    `offset` is its byte offset in the arena once placement ran; before,
    it is absent.

    ```mlir
    %w = plan.buffer "wte" <params> <device> at 0 : memref<64x16xf32>
    ```
  }];
  let arguments = (ins StrAttr:$name, Plan_CategoryAttr:$category,
                       Plan_SpaceAttr:$space, OptionalAttr<I64Attr>:$offset);
  let results = (outs Plan_Buffer:$buffer);
  let assemblyFormat = [{
    $name $category $space (`at` $offset^)? attr-dict `:` type($buffer)
  }];
  let hasVerifier = 1;
}

def Plan_CallOp : Plan_Op<"call", [AttrSizedOperandSegments]> {
  let summary = "one kernel call: reads `ins`, writes `outs`";
  let description = [{
    Calls the kernel named `kernel` on a stream with its positional
    attributes. The verifier holds the call to the kernel's contract
    (runtime/kernels/KernelContract.h, generated from ODS): the number of
    inputs, outputs, int and float attributes, and a dtype signature of
    one of its columns that takes the buffers' element types.

    ```mlir
    plan.call "ds.matmul"(%x, %w) -> (%y) ints [0, 1] floats [] on <compute> : memref<2x16xf32>, memref<16x16xf32> -> memref<2x16xf32>
    ```
  }];
  let arguments = (ins StrAttr:$kernel, Variadic<Plan_Buffer>:$ins,
                       Variadic<Plan_Buffer>:$outs,
                       DenseI64ArrayAttr:$ints, DenseF64ArrayAttr:$floats,
                       Plan_StreamAttr:$stream);
  let assemblyFormat = [{
    $kernel `(` $ins `)` `->` `(` $outs `)` `ints` $ints `floats` $floats
    `on` $stream attr-dict `:` type($ins) `->` type($outs)
  }];
  let hasVerifier = 1;
}

#endif // PLAN_OPS_TD
