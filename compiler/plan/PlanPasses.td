//===- PlanPasses.td - phases `plan` and `emit` as passes ----*- tablegen
//-*-===//
#ifndef DSC_PLAN_PASSES_TD
#define DSC_PLAN_PASSES_TD

include "mlir/Pass/PassBase.td"

def DsLowerToPlan : Pass<"ds-lower-to-plan", "::mlir::ModuleOp"> {
  let summary = "phase `plan`: every value placed at an arena offset";
  let description = [{
    Lowers @micro_step (and @micro_step_sync), @apply and @init to kernel
    calls over buffers placed in arenas (compiler/plan), and annotates the
    IR with the placement: each lowered op gets `plan.out` (its outputs as
    "CATEGORY+OFFSET:BYTES") and the module `plan.arenas`, so
    --mlir-print-ir-after-all shows where every value lives. The lowered
    plan goes on to ds-emit-plan in the same pipeline.
  }];
  let options = [
    Option<"worldSize", "world-size", "int64_t", "1", "ranks">,
    Option<"accumulationSteps", "accumulation-steps", "int64_t", "1",
           "micro-batches per optimizer step">,
    Option<"model", "model", "std::string", "\"module\"",
           "the model's name, recorded in the plan">
  ];
}

def DsEmitPlan : Pass<"ds-emit-plan", "::mlir::ModuleOp"> {
  let summary = "phase `emit`: the FlatBuffers plan file";
  let description = [{
    Serializes the plan ds-lower-to-plan lowered earlier in the same
    pipeline (runtime/schema/plan.fbs), with the run-time settings dsrun
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
