//===- PlanPasses.td - phases `plan` and `emit` as passes -*- tablegen -*-===//
#ifndef DSC_PLAN_PASSES_TD
#define DSC_PLAN_PASSES_TD

include "mlir/Pass/PassBase.td"

def DsLowerToPlan : Pass<"ds-lower-to-plan", "::mlir::ModuleOp"> {
  let summary = "phase `plan`: the training step as kernel calls over storage";
  let description = [{
    Lowers @micro_step (and @micro_step_sync), @apply, @eval and each
    @sample_T to kernel calls (compiler/plan: instruction selection, store
    forwarding, streams and events, the fused optimizer) and writes them as
    the plan dialect, a module @plan nested in this one: the storage
    (persistent storage laid out, transient storage not yet placed), the
    variables, and one function per program. The `ds` functions stay as
    they are.
  }];
  let options = [
    Option<"worldSize", "world-size", "int64_t", "1", "ranks">,
    Option<"accumulationSteps", "accumulation-steps", "int64_t", "1",
           "micro-batches per optimizer step">,
    Option<"model", "model", "std::string", "\"module\"",
           "the model's name, recorded in the plan">
  ];
  let dependentDialects = ["::mlir::plan::PlanDialect",
                           "::mlir::func::FuncDialect"];
}

def PlanAssignStreams : Pass<"plan-assign-streams", "::mlir::ModuleOp"> {
  let summary = "phase `plan`: a stream for each asynchronous call";
  let description = [{
    Lowering gives each collective and each copy between memory spaces a
    token (`async !plan.token`); this pass puts collectives on the comm
    stream, copies to the host on d2h and copies to the device on h2d.
    Calls without a token stay on the compute stream.
  }];
}

def PlanInsertEvents : Pass<"plan-insert-events", "::mlir::ModuleOp"> {
  let summary = "phase `plan`: tokens and awaits as events";
  let description = [{
    An asynchronous call waits for an event the compute call before it
    records, and for the calls on other streams awaited since then; it
    records an event of its own, which the compute call after its
    `plan.await` waits for. Events are numbered per program in the order
    they are made (`plan.events` on each program); tokens and awaits are
    dropped.
  }];
}

def PlanFuseOptimizer : Pass<"plan-fuse-optimizer", "::mlir::ModuleOp"> {
  let summary = "phase `plan`: @apply's updates and zeroing over flat ranges";
  let description = [{
    In @apply: mixed precision's update into a transient, its copy into the
    master weights and its cast into the 16-bit parameter become one call
    of the update's _round kernel (`ds.adamw_round`, `ds.sgd_round`,
    `ds.lion_round`, `ds.adagrad_round`); runs of an update over
    back-to-back parameters,
    gradients and moments (and, for a _round kernel, 16-bit parameters)
    with the same hyper-parameters become one call
    over new flat storage spanning them, and so do the gradients' zeroing
    fills, moved to the end of the program. Calls that wait for or record
    an event stay as they are.
  }];
}

def PlanLiveness : Pass<"plan-liveness", "::mlir::ModuleOp"> {
  let summary = "phase `plan`: each transient's lifetime, in calls";
  let description = [{
    Writes `live [first, last]` on each transient storage: from the first
    to the last call of its program that touches it, an output to the end
    of its program, and what a collective or a copy on another stream
    touches until the compute call that waits for its event (or to the end
    when none does).
  }];
}

def PlanPlace : Pass<"plan-place", "::mlir::ModuleOp"> {
  let summary = "phase `plan`: transient storage packed by lifetime";
  let description = [{
    Places each program's transient storage in its arena (one per memory
    space and category) by the lifetimes plan-liveness wrote, greedy by
    size with first fit (ties in the order the calls first touch them).
    Sets each transient's offset, the transient arenas' sizes
    (`plan.arenas`, the largest over the programs) and each program's own
    activation peak (`plan.activation_bytes`).
  }];
}

def DsEmitPlan : Pass<"ds-emit-plan", "::mlir::ModuleOp"> {
  let summary = "phase `emit`: the FlatBuffers plan file";
  let description = [{
    Serializes the placed module @plan (runtime/schema/plan.fbs), with the run-time settings dsrun
    reads (the LR schedule, fp16's loss scaler, the config itself) taken
    straight from the ds_config.json the tool that built the pipeline
    parsed (PlanResult::config; DeepSpeed's defaults under ds-opt). They
    never touch the IR, so they are not pass options. With `plan-file` it writes that
    file, all or nothing; without, it hands the bytes to the tool that
    built the pipeline (dsc writes its -o). The IR is unchanged.
  }];
  let options = [Option<"planFile", "plan-file", "std::string", "\"\"",
                        "the plan file to write">];
}

#endif // DSC_PLAN_PASSES_TD
