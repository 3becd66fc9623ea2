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

include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/OpBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Plan_Dialect : Dialect {
  let name = "plan";
  let cppNamespace = "::mlir::plan";
  let summary = "kernel calls over placed buffers, per stream";
  let useDefaultAttributePrinterParser = 1;
  let useDefaultTypePrinterParser = 1;
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

def Plan_TokenType : TypeDef<Plan_Dialect, "Token"> {
  let mnemonic = "token";
  let summary = "the completion of a call on another stream";
  let description = [{
    What `plan.await` waits for. Lowering gives each collective and each
    copy between memory spaces a token and puts a `plan.await` where the
    program needs its result (`dist.wait`); plan-insert-events turns them
    into events and drops them.
  }];
}

def Plan_VarKind : I32EnumAttr<"VarKind", "what a variable holds", [
    I32EnumAttrCase<"param", 0>, I32EnumAttrCase<"grad", 1>,
    I32EnumAttrCase<"opt_state", 2>, I32EnumAttrCase<"master", 3>]> {
  let cppNamespace = "::mlir::plan";
  let genSpecializedAttr = 0;
}
def Plan_VarKindAttr : EnumAttr<Plan_Dialect, Plan_VarKind, "var_kind"> {
  let assemblyFormat = "`<` $value `>`";
}

def Plan_InitKind : I32EnumAttr<"InitKind", "how a variable starts", [
    I32EnumAttrCase<"zeros", 0>, I32EnumAttrCase<"ones", 1>,
    I32EnumAttrCase<"normal", 2>]> {
  let cppNamespace = "::mlir::plan";
  let genSpecializedAttr = 0;
}
def Plan_InitKindAttr : EnumAttr<Plan_Dialect, Plan_InitKind, "init_kind"> {
  let assemblyFormat = "`<` $value `>`";
}

def Plan_Buffer : MemRefOf<[F16, BF16, F32, F64, I32, I64]>;

def Plan_StorageOp : Plan_Op<"storage", [Symbol]> {
  let summary = "bytes in the arena of one category and memory space";
  let description = [{
    What buffers are views of. Persistent storage (variables, constants,
    inputs) is laid out by `ds-lower-to-plan` and has its offset from the
    start; `transient` storage (what a program computes) gets its offset
    from `plan-place`, which packs it by the lifetime `plan-liveness` wrote
    (`live [first, last]`, in calls of its program). `size` is the bytes
    written; transient storage is placed at 64-byte multiples.

    ```mlir
    plan.storage @s0 "transformer.wte.weight" <params> <device> size 65536 at 0
    plan.storage @s41 "matmul.12" <activations> <device> size 4096 transient live [3, 9]
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, StrAttr:$name,
                       Plan_CategoryAttr:$category, Plan_SpaceAttr:$space,
                       I64Attr:$size, OptionalAttr<I64Attr>:$offset,
                       UnitAttr:$transient,
                       OptionalAttr<DenseI64ArrayAttr>:$live);
  let assemblyFormat = [{
    $sym_name $name $category $space `size` $size (`at` $offset^)?
    (`transient` $transient^)? (`live` $live^)? attr-dict
  }];
  let hasVerifier = 1;
}

def Plan_BufferOp : Plan_Op<"buffer",
    [Pure, DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "a typed view of storage, `view_offset` bytes into it";
  let description = [{
    Buffers are the operands of calls; two buffers of one storage and
    offset with different types are two views of the same bytes. The
    plan's buffer table numbers them in the order they first appear.

    ```mlir
    %w = plan.buffer @s0 : memref<64x16xf32>
    %b = plan.buffer @s7 + 256 : memref<16xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$storage,
                       OptionalAttr<I64Attr>:$view_offset);
  let results = (outs Plan_Buffer:$buffer);
  let assemblyFormat = [{
    $storage (`+` $view_offset^)? attr-dict `:` type($buffer)
  }];
  let hasVerifier = 1;
}

def Plan_ConstantOp : Plan_Op<"constant",
    [Pure, DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "a buffer whose storage holds these values when a run starts";
  let description = [{
    Declared in the first program that reads it; later programs view the
    same storage with `plan.buffer`.

    ```mlir
    %c = plan.constant @s9 = dense<[0, 1]> : tensor<2xi32> : memref<2xi32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$storage, ElementsAttr:$value);
  let results = (outs Plan_Buffer:$buffer);
  let assemblyFormat = "$storage `=` $value attr-dict `:` type($buffer)";
}

def Plan_VariableOp : Plan_Op<"variable",
    [DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "a named tensor of the model's state, and where it lives";
  let description = [{
    A parameter, gradient, optimizer moment or master weight, as the plan's
    variable table and checkpoints name it. With ZeRO stage 3, `shard_offset`
    says the storage holds this rank's shard of a group of variables,
    starting at that element of the group. With tensor parallelism,
    `tensor_split` [dim, blocks] says the storage holds the rank's part of
    dimension `dim` of `shape` (of each of its `blocks` blocks).

    ```mlir
    plan.variable "transformer.wte.weight" <param> in @s0 : memref<64x16xf32> init <normal> std 2.000000e-02 rng 7 shape [64, 16] decay
    ```
  }];
  let arguments = (ins StrAttr:$name, Plan_VarKindAttr:$kind,
                       OptionalAttr<StrAttr>:$of, FlatSymbolRefAttr:$storage,
                       TypeAttrOf<Plan_Buffer>:$type, Plan_InitKindAttr:$init,
                       F64Attr:$std, I64Attr:$rng, DenseI64ArrayAttr:$shape,
                       UnitAttr:$decay, OptionalAttr<I64Attr>:$shard_offset,
                       OptionalAttr<DenseI64ArrayAttr>:$tensor_split);
  let assemblyFormat = [{
    $name $kind (`of` $of^)? `in` $storage `:` $type `init` $init `std` $std
    `rng` $rng `shape` $shape (`decay` $decay^)?
    (`shard` `at` $shard_offset^)? (`tensor_split` $tensor_split^)? attr-dict
  }];
}

def Plan_CallOp : Plan_Op<"call", [AttrSizedOperandSegments]> {
  let summary = "one kernel call: reads `ins`, writes `outs`";
  let description = [{
    Calls the kernel named `kernel` on a stream with its positional
    attributes, on the device or (`in <host>`, offload) on the host. It
    waits for the events in `wait` before it starts and records those in
    `record` when it ends. `flops` (in the attribute dictionary) is what the
    kernel computes, as its op counts it. The verifier holds the call to the kernel's
    contract (runtime/kernels/KernelContract.h, generated from ODS): the
    number of inputs, outputs, int and float attributes, and a dtype
    signature of one of its columns that takes the buffers' element types.

    ```mlir
    plan.call "ds.matmul"(%x, %w) -> (%y) ints [0, 1] floats [] on <compute> : (memref<2x16xf32>, memref<16x16xf32>) -> memref<2x16xf32>
    plan.call "comm.all_reduce"(%g) -> (%r) ints [] floats [] on <comm> wait [0] record [1] : (memref<16xf32>) -> memref<16xf32>
    ```
  }];
  let arguments = (ins StrAttr:$kernel, Variadic<Plan_Buffer>:$ins,
                       Variadic<Plan_Buffer>:$outs,
                       DenseI64ArrayAttr:$ints, DenseF64ArrayAttr:$floats,
                       Plan_StreamAttr:$stream,
                       OptionalAttr<Plan_SpaceAttr>:$place,
                       OptionalAttr<DenseI32ArrayAttr>:$wait,
                       OptionalAttr<DenseI32ArrayAttr>:$record,
                       OptionalAttr<F64Attr>:$flops,
                       UnitAttr:$tensor_group);
  let results = (outs Optional<Plan_TokenType>:$token);
  let assemblyFormat = [{
    $kernel `(` $ins `)` `->` `(` $outs `)` `ints` $ints `floats` $floats
    `on` $stream (`in` $place^)? (`wait` $wait^)? (`record` $record^)?
    attr-dict `:` functional-type($ins, $outs) (`async` type($token)^)?
  }];
  let hasVerifier = 1;
}

def Plan_AwaitOp : Plan_Op<"await"> {
  let summary = "where the program needs an asynchronous call's result";
  let description = [{
    The next compute call waits for the call that made `token`, and so does
    a call on another stream issued after this point (a copy of a
    collective's result). plan-insert-events turns it into events.

    ```mlir
    %t = plan.call "comm.all_reduce"(%g) -> (%r) ints [] floats [1.0] on <comm> : (memref<16xf32>) -> memref<16xf32> async !plan.token
    plan.await %t
    ```
  }];
  let arguments = (ins Plan_TokenType:$token);
  let assemblyFormat = "$token attr-dict";
}

def Plan_InputsOp : Plan_Op<"inputs"> {
  let summary = "the buffers a program's caller fills (its batch)";
  let arguments = (ins Variadic<Plan_Buffer>:$buffers);
  let assemblyFormat = "($buffers^ `:` type($buffers))? attr-dict";
}

def Plan_OutputsOp : Plan_Op<"outputs"> {
  let summary = "the buffers a program hands back (its loss, its metrics)";
  let arguments = (ins Variadic<Plan_Buffer>:$buffers);
  let assemblyFormat = "($buffers^ `:` type($buffers))? attr-dict";
}

#endif // PLAN_OPS_TD
