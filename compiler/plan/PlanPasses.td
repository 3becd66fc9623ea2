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
    plan goes on to ds-emit-plan in the same pipeline. The schedule options
    are the run-time hyper-parameters the plan records for dsrun.
  }];
  let options = [
    Option<"worldSize", "world-size", "int64_t", "1", "ranks">,
    Option<"accumulationSteps", "accumulation-steps", "int64_t", "1",
           "micro-batches per optimizer step">,
    Option<"model", "model", "std::string", "\"module\"",
           "the model's name, recorded in the plan">,
    Option<"configJson", "config-json", "std::string", "\"{}\"",
           "the ds_config.json the plan was compiled from, recorded in it">,
    Option<"scheduleKind", "lr-schedule", "std::string", "\"constant\"",
           "constant, WarmupLR, WarmupDecayLR or WarmupCosineLR">,
    Option<"lr", "lr", "double", "1e-3", "the optimizer's (peak) lr">,
    Option<"warmupMinLr", "warmup-min-lr", "double", "0", "">,
    Option<"warmupMaxLr", "warmup-max-lr", "double", "1e-3", "">,
    Option<"warmupNumSteps", "warmup-num-steps", "int64_t", "0", "">,
    Option<"warmupType", "warmup-type", "std::string", "\"log\"",
           "log or linear">,
    Option<"totalNumSteps", "total-num-steps", "int64_t", "0", "">,
    Option<"cosMinRatio", "cos-min-ratio", "double", "1e-4", "">,
    Option<"warmupMinRatio", "warmup-min-ratio", "double", "0", "">,
    Option<"staticLossScale", "static-loss-scale", "double", "0",
           "fp16 plans: a static loss scale (0: dynamic)">,
    Option<"initialScalePower", "initial-scale-power", "int64_t", "16", "">,
    Option<"lossScaleWindow", "loss-scale-window", "int64_t", "1000", "">,
    Option<"hysteresis", "hysteresis", "int64_t", "2", "">,
    Option<"consecutiveHysteresis", "consecutive-hysteresis", "bool",
           "false", "">,
    Option<"minLossScale", "min-loss-scale", "double", "1", "">
  ];
}

def DsEmitPlan : Pass<"ds-emit-plan", "::mlir::ModuleOp"> {
  let summary = "phase `emit`: the FlatBuffers plan file";
  let description = [{
    Serializes the plan ds-lower-to-plan lowered earlier in the same
    pipeline (runtime/schema/plan.fbs). With `plan-file` it writes that
    file, all or nothing; without, it hands the bytes to the tool that
    built the pipeline (dsc writes its -o). The IR is unchanged.
  }];
  let options = [Option<"planFile", "plan-file", "std::string", "\"\"",
                        "the plan file to write">];
}

#endif // DSC_PLAN_PASSES_TD
