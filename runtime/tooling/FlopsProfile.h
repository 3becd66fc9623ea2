//===- FlopsProfile.h - ds_config's flops_profiler, from the plan -*- C++
//-*-===//
//
// DeepSpeed's flops profiler measures a step with hooks on every module.
// dsc counted every kernel's FLOPs when it compiled the plan (Instr.flops),
// and every instruction names its module (Instr.loc), so the profile is a
// sum over the plan: per module, at each depth of the module tree, its
// parameters and the FLOPs of an optimizer step (forward, backward,
// recomputation and the update), largest first.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_TOOLING_FLOPSPROFILE_H
#define DSC_RUNTIME_TOOLING_FLOPSPROFILE_H

#include "runtime/plan/PlanFormat.h"

#include <cstdint>
#include <map>
#include <string>

namespace dsc::rt {

/// Measured milliseconds of one optimizer step's instructions, by their
/// module's name (Instr.loc): wall_clock_breakdown's timings.
using ModuleTimes = std::map<std::string, double>;

/// The plan's profile as text (lines ending in '\n'), or "" when the plan
/// asks for none (Plan.flops_profile). With `measured`, each module's line
/// adds the time its instructions took in the profiled step and the FLOP
/// rate that makes.
std::string flopsProfileText(const plan::Plan &plan,
                             const ModuleTimes *measured = nullptr);

/// The step after which dsrun prints it; 0: none.
uint64_t flopsProfileStep(const plan::Plan &plan);

} // namespace dsc::rt

#endif // DSC_RUNTIME_TOOLING_FLOPSPROFILE_H
