//===- DistOps.td - the dist dialect: collectives across ranks -*- tablegen -*-===//
//
// Collectives are values: the plan runs each on the comm stream, started
// where it stands in the program, and the compute stream waits for it only
// at its `dist.wait`. Moving a collective up and its wait down is how the
// compiler overlaps communication with compute.
//
//===----------------------------------------------------------------------===//

#ifndef DIST_OPS_TD
#define DIST_OPS_TD

include "mlir/IR/OpBase.td"
include "dialects/ds/DsKernelContract.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Dist_Dialect : Dialect {
  let name = "dist";
  let cppNamespace = "::mlir::dist";
  let summary = "collectives, their completion and shards across ranks";
  // The marks the passes put on ops of other dialects, each read by a later
  // phase; C++ names them through DistOps.h's constants.
  //   host         ds-offload: on a ds.variable, the variable lives in host
  //                memory; on an op, it runs on the host. Read by plan
  //                lowering (arena and instruction placement).
  //   activation   ds-offload (cpu_checkpointing): on a copy of a kept
  //                forward value; plan lowering counts its buffer as an
  //                activation, not a communication buffer.
  //   world_size   ds-zero: on the module, the ranks it was compiled for.
  //   tensor_parallel  ds-shard: on the module, the ranks of a
  //                tensor-parallel group.
  //   tensor_split ds-shard: on a ds.variable cut over the group,
  //                array<i64: dim, blocks>: the dimension cut (of `blocks`
  //                equal blocks, each cut alike); the variable's type is
  //                one rank's part.
  //   tensor_group ds-shard, ds-ulysses: on a collective, it runs over the
  //                rank's tensor-parallel (or sequence-parallel) group
  //                (else over its data-parallel group, the world without
  //                tensor parallelism).
  //   sequence_parallel ds-ulysses: on the module, the ranks of a
  //                sequence-parallel group; data parallelism spans the
  //                world.
  //   pipeline_stages ds-pipeline-cut: on the module, the pipeline's
  //                stages (the cut's chunks, until ds-pipeline puts
  //                virtual_stages of them on each stage).
  //   virtual_stages ds-pipeline: on the module, the model chunks each
  //                stage runs (the interleaved schedule; 1 otherwise).
  //   stage        ds-pipeline-cut: on a forward op, the pipeline stage
  //                that runs it.
  //   pipeline_group ds-pipeline: on a collective of a stage's @apply, the
  //                stages it runs over (a bit each): the global norm's
  //                partial sums over all stages, a tied parameter's
  //                gradient over the stages that hold it.
  let discardableAttrs = (ins
    "::mlir::UnitAttr":$tensor_group,
    "::mlir::UnitAttr":$host,
    "::mlir::UnitAttr":$activation,
    "::mlir::IntegerAttr":$world_size,
    "::mlir::IntegerAttr":$tensor_parallel,
    "::mlir::IntegerAttr":$sequence_parallel,
    "::mlir::IntegerAttr":$pipeline_stages,
    "::mlir::IntegerAttr":$virtual_stages,
    "::mlir::IntegerAttr":$stage,
    "::mlir::IntegerAttr":$pipeline_group,
    "::mlir::DenseI64ArrayAttr":$tensor_split
  );
}

class Dist_Op<string mnemonic, list<Trait> traits = []>
    : Op<Dist_Dialect, mnemonic, traits>;

def Dist_FloatTensor : RankedTensorOf<[F16, BF16, F32, F64]>;
/// dist.shard also cuts integer tensors (Ulysses' positions).
def Dist_ShardableTensor : RankedTensorOf<[F16, BF16, F32, F64, I32, I64]>;

def Dist_AllReduceOp : Dist_Op<"all_reduce",
    [Pure, AllTypesMatch<["x", "result"]>]> {
  let summary = "sum over ranks, times `scale` (1/N averages)";
  let arguments = (ins Dist_FloatTensor:$x, F64Attr:$scale);
  let results = (outs Dist_FloatTensor:$result);
  let assemblyFormat = "$x `scale` $scale attr-dict `:` type($x)";
}

def Dist_ReduceScatterOp : Dist_Op<"reduce_scatter", [Pure]> {
  let summary = "sum over ranks, times `scale`; rank r keeps slice r";
  let arguments = (ins Dist_FloatTensor:$x, F64Attr:$scale,
                       I64Attr:$world_size);
  let results = (outs Dist_FloatTensor:$result);
  let assemblyFormat = [{
    $x `scale` $scale `ranks` $world_size attr-dict `:` type($x) `->`
    type($result)
  }];
  let hasVerifier = 1;
}

def Dist_AllGatherOp : Dist_Op<"all_gather", [Pure]> {
  let summary = "every rank's slice, concatenated in rank order";
  let arguments = (ins Dist_FloatTensor:$x, I64Attr:$world_size);
  let results = (outs Dist_FloatTensor:$result);
  let assemblyFormat = [{
    $x `ranks` $world_size attr-dict `:` type($x) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Dist_AllToAllOp : Dist_Op<"all_to_all",
    [Pure, AllTypesMatch<["x", "result"]>]> {
  let summary = "block j of each rank's x to rank j, in rank order";
  let description = [{
    x holds `world_size` equal blocks; rank r's block j becomes block r of
    rank j's result (MPI_Alltoall). Ulysses sequence parallelism trades
    tokens for heads with it around attention.
  }];
  let arguments = (ins Dist_FloatTensor:$x, I64Attr:$world_size);
  let results = (outs Dist_FloatTensor:$result);
  let assemblyFormat = "$x `ranks` $world_size attr-dict `:` type($x)";
  let hasVerifier = 1;
}

def Dist_CopyToHostOp : Dist_Op<"copy_to_host",
    [Pure, AllTypesMatch<["x", "result"]>]> {
  let summary = "a device value copied into host memory (d2h stream)";
  let description = [{
    Phase `offload`: the plan runs the copy on the d2h stream, started where
    it stands, and whatever needs the host copy waits for it at its
    `dist.wait`. The result lives in the host memory space.
  }];
  let arguments = (ins Dist_FloatTensor:$x);
  let results = (outs Dist_FloatTensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x)";
}

def Dist_CopyToDeviceOp : Dist_Op<"copy_to_device",
    [Pure, AllTypesMatch<["x", "result"]>]> {
  let summary = "a host value copied into device memory (h2d stream)";
  let description = [{
    Phase `offload`: the plan runs the copy on the h2d stream, started where
    it stands; device work waits for it at its `dist.wait`. The result
    lives in the device memory space.
  }];
  let arguments = (ins Dist_FloatTensor:$x);
  let results = (outs Dist_FloatTensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x)";
}

def Dist_WaitOp : Dist_Op<"wait", [Pure, AllTypesMatch<["x", "result"]>]> {
  let summary = "the point where compute needs a collective's or copy's result";
  let description = [{
    The identity on values. In the plan, the stream of the op that needs
    `x` waits here for the collective or copy that produced it; until then
    both streams run.
  }];
  let arguments = (ins Dist_FloatTensor:$x);
  let results = (outs Dist_FloatTensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x)";
}

def Dist_GroupOp : Dist_Op<"group", [Symbol]> {
  let summary = "parameters packed into one flat, padded range";
  let description = [{
    The plan lays `members` out contiguously, in order, in the params arena
    (and their gradients likewise in the grads arena), followed by zero
    padding up to `size` elements, a multiple of the world size. ZeRO
    stages shard such groups: rank r owns elements [r S, (r + 1) S) with
    S = size / world size. Padding never reaches results or checkpoints.

    A `sharded` group (ZeRO stage 3) has no whole copy: each rank stores
    only its S elements, in the group's `param` variable (`of` the group),
    and the members are views of an all-gathered copy where they are used.
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       FlatSymbolRefArrayAttr:$members, I64Attr:$size,
                       UnitAttr:$sharded);
  let assemblyFormat = [{
    $sym_name $members `size` $size (`sharded` $sharded^)? attr-dict
  }];
}

def Dist_FlatParamsOp : Dist_Op<"flat_params", [MemoryEffects<[MemRead]>]> {
  let summary = "a group's parameters (with padding) as one flat tensor";
  let arguments = (ins FlatSymbolRefAttr:$group);
  let results = (outs Dist_FloatTensor:$result);
  let assemblyFormat = "$group attr-dict `:` type($result)";
}

def Dist_FlatGradsOp : Dist_Op<"flat_grads", [MemoryEffects<[MemRead]>]> {
  let summary = "a group's gradient accumulators (with padding), flat";
  let arguments = (ins FlatSymbolRefAttr:$group);
  let results = (outs Dist_FloatTensor:$result);
  let assemblyFormat = "$group attr-dict `:` type($result)";
}

def Dist_StoreParamsOp : Dist_Op<"store_params", [MemoryEffects<[MemWrite]>]> {
  let summary = "writes a group's parameters (with padding) from a flat tensor";
  let arguments = (ins Dist_FloatTensor:$value, FlatSymbolRefAttr:$group);
  let assemblyFormat = "$value `,` $group attr-dict `:` type($value)";
}

def Dist_TransferOp : Dist_Op<"transfer",
    [Pure, AllTypesMatch<["x", "result"]>]> {
  let summary = "a value made on one pipeline stage, read on another";
  let description = [{
    The identity on values; `x` is computed by stage `from` and the result
    read by stage `to`. ds-pipeline-cut puts one on every value of the
    forward that crosses stages, before autodiff; its gradient is the
    transfer of the cotangent the other way. When the stages are split
    into their own programs, it becomes a send on `from` and a receive on
    `to`.
  }];
  let arguments = (ins Dist_FloatTensor:$x, I64Attr:$from, I64Attr:$to);
  let results = (outs Dist_FloatTensor:$result);
  let assemblyFormat = "$x `from` $from `to` $to attr-dict `:` type($x)";
  let hasVerifier = 1;
}

def Dist_SendOp : Dist_Op<"send", [MemoryEffects<[MemWrite]>]> {
  let summary = "a value sent to another pipeline stage";
  let description = [{
    Phase `pipeline`: the sending half of a dist.transfer in micro-batch
    `micro_batch`, matched by the stage `peer`'s dist.recv with the same
    `transfer` and `micro_batch`.
  }];
  let arguments = (ins Dist_FloatTensor:$x, I64Attr:$peer, I64Attr:$transfer,
                       I64Attr:$micro_batch);
  let assemblyFormat = [{
    $x `to` $peer `transfer` $transfer `micro_batch` $micro_batch attr-dict
    `:` type($x)
  }];
}

def Dist_RecvOp : Dist_Op<"recv", [MemoryEffects<[MemWrite]>]> {
  let summary = "a value received from another pipeline stage";
  let description = [{
    Phase `pipeline`: the receiving half of a dist.transfer in micro-batch
    `micro_batch` (see dist.send).
  }];
  let arguments = (ins I64Attr:$peer, I64Attr:$transfer, I64Attr:$micro_batch);
  let results = (outs Dist_FloatTensor:$result);
  let assemblyFormat = [{
    `from` $peer `transfer` $transfer `micro_batch` $micro_batch attr-dict
    `:` type($result)
  }];
}

def Dist_ShardOp : Dist_Op<"shard", [Pure]> {
  let summary = "this rank's slice [r S, (r + 1) S) of a flat tensor";
  let arguments = (ins Dist_ShardableTensor:$x, I64Attr:$world_size);
  let results = (outs Dist_ShardableTensor:$result);
  let assemblyFormat = [{
    $x `ranks` $world_size attr-dict `:` type($x) `->` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// The collectives' kernels (comm stream) and the shard's
//===----------------------------------------------------------------------===//

class Dist_SumKernel<string aliasing>
    : DS_Kernel<[], ["scale"], ["f32->f32", "f64->f64"],
                ["f16->f16", "bf16->bf16"], aliasing>;

def Dist_AllReduceKernel : DS_KernelDef<"comm.all_reduce", ["x"], ["out"],
                                        Dist_SumKernel<"any_input">>;
def Dist_ReduceScatterKernel
    : DS_KernelDef<"comm.reduce_scatter", ["x"], ["out"],
                   Dist_SumKernel<"none">>;
def Dist_AllGatherKernel : DS_KernelDef<"comm.all_gather", ["x"], ["out"],
                                        DS_GenericKernel<[], "T->T">>;
def Dist_AllToAllKernel : DS_KernelDef<"comm.all_to_all", ["x"], ["out"],
                                       DS_GenericKernel<[], "T->T">>;
def Dist_BroadcastKernel
    : DS_KernelDef<"comm.broadcast", ["x"], ["out"],
                   DS_GenericKernel<["root"], "T->T", "any_input">>;
// A pipeline stage's halves of a transfer (dist.send, dist.recv): peer is
// the other stage, (transfer, micro_batch) the message's key.
def Dist_SendKernel
    : DS_KernelDef<"comm.send", ["x"], [],
                   DS_GenericKernel<["peer", "transfer", "micro_batch"],
                                    "any->">>;
def Dist_RecvKernel
    : DS_KernelDef<"comm.recv", [], ["out"],
                   DS_GenericKernel<["peer", "transfer", "micro_batch"],
                                    "->any">>;
def Dist_ShardKernel : DS_KernelDef<"dist.shard", ["x"], ["out"],
                                    DS_GenericKernel<["world_size"], "T->T">>;

#endif // DIST_OPS_TD
