//===- Report.h - dsc --report: a plan's memory and work --------*- C++ -*-===//
#ifndef DSC_COMPILER_REPORT_H
#define DSC_COMPILER_REPORT_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <vector>

namespace dsc {

struct PlanModel;
struct MachineModel;

/// Elements of the model's parameters (each tensor once, however sharded).
uint64_t parameterCount(const PlanModel &plan);

/// `--report`: what one rank holds, by category and memory space, the work
/// of each program, remat's recomputation and the model state by dtype;
/// for several ranks their collectives and, played on `machine`, the time
/// of them not hidden under compute (StepTimeline.h). `remat` is the policy
/// the remat phase ran ("" for none).
void printReport(const PlanModel &plan, llvm::StringRef remat,
                 const MachineModel &machine, llvm::raw_ostream &os);

/// `--report` of a pipeline: the mesh, per stage its blocks, parameters,
/// FLOPs, activation peak (the in-flight micro-batches the schedule keeps)
/// and device memory, the step and the bubble the stages played together
/// predict (StepTimeline.h: playPipeline), then each stage's own report.
void printPipelineReport(const std::vector<PlanModel> &stages,
                         llvm::StringRef remat, const MachineModel &machine,
                         llvm::raw_ostream &os);

/// `plan`'s report, or the pipeline's when `stages` holds its stages'
/// plans (PlanResult::stages).
void printPlanReport(const PlanModel &plan,
                     const std::vector<PlanModel> &stages,
                     llvm::StringRef remat, const MachineModel &machine,
                     llvm::raw_ostream &os);

} // namespace dsc

#endif // DSC_COMPILER_REPORT_H
