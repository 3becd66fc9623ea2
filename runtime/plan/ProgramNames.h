//===- ProgramNames.h - the names compiler and runtime share ----*- C++ -*-===//
//
// The functions the compiler's phases build and the programs the plan
// carries are found by name on both sides: @forward and @micro_step in the
// IR, "micro_step" and "apply" in the plan dsrun runs. Each name is
// declared here once, for the passes (as llvm::StringRef converts from
// std::string_view), the plan lowering and the runtime. Header-only, no
// dependencies, so the runtime's MLIR-free build can include it.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_PLAN_PROGRAMNAMES_H
#define DSC_RUNTIME_PLAN_PROGRAMNAMES_H

#include <string>
#include <string_view>

namespace dsc::plan {

/// The model's forward graph (the input contract): tokens and targets in,
/// the loss out; and its copy at the eval batch (dsc
/// --eval-micro-batch-size), from which the eval program is built.
constexpr std::string_view kForwardFunction = "forward";
constexpr std::string_view kForwardEvalFunction = "forward_eval";

/// Program names. dsrun requires micro_step and apply; init is optional,
/// and so is micro_step_sync: when present, dsrun runs it instead of
/// micro_step for the last micro-batch of each step (same inputs and
/// output; it reduces the accumulated gradients across the ranks).
constexpr std::string_view kInitProgram = "init";
constexpr std::string_view kMicroStepProgram = "micro_step";
constexpr std::string_view kMicroStepSyncProgram = "micro_step_sync";
constexpr std::string_view kApplyProgram = "apply";
/// Forward and loss only, dropout off (optional): inputs (tokens, targets),
/// output 0 the loss, output 1 (when present) the logits [B, T, V] in f32.
constexpr std::string_view kEvalProgram = "eval";

/// Sampling programs (optional, dsc builds them for its built-in models):
/// "sample_<T>" runs the forward on one row of T tokens (input 0, [1, T])
/// with dropout off and returns f32 logits, its LM head on the one row at
/// input 1, the position ([1], i32): [1, 1, V] (or, for logits that are no
/// such head, every position's, [1, T, V], and no position input). T is
/// one of a few lengths up to the block size, so that a short context runs
/// a short forward. Built from @forward_sample_<T>, the model at one row
/// of that length.
constexpr std::string_view kSampleProgramPrefix = "sample_";
constexpr std::string_view kForwardSamplePrefix = "forward_sample_";

/// T of a sampling program or its forward ("sample_64" and
/// "forward_sample_64" give 64), or 0 for any other name.
inline long long sampleLength(std::string_view name) {
  for (std::string_view prefix : {kSampleProgramPrefix, kForwardSamplePrefix})
    if (name.substr(0, prefix.size()) == prefix) {
      std::string_view digits = name.substr(prefix.size());
      if (digits.empty() || digits.size() > 9 || digits[0] == '0')
        return 0;
      long long t = 0;
      for (char c : digits) {
        if (c < '0' || c > '9')
          return 0;
        t = t * 10 + (c - '0');
      }
      return t;
    }
  return 0;
}

/// "sample_<T>": a sampling program (and @sample_<T> in the IR).
inline bool isSampleProgram(std::string_view name) {
  return sampleLength(name) &&
         name.substr(0, kSampleProgramPrefix.size()) == kSampleProgramPrefix;
}

/// "forward_sample_<T>": the model copy ds-eval makes @sample_<T> of.
inline bool isSampleForward(std::string_view name) {
  return sampleLength(name) &&
         name.substr(0, kForwardSamplePrefix.size()) == kForwardSamplePrefix;
}

/// The plan buffer that holds input `index` of `program`, e.g. "eval.arg0".
inline std::string inputBufferName(std::string_view program, unsigned index) {
  std::string name(program);
  name += ".arg";
  name += std::to_string(index);
  return name;
}

} // namespace dsc::plan

#endif // DSC_RUNTIME_PLAN_PROGRAMNAMES_H
