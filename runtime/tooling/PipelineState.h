//===- PipelineState.h - what a pipeline's stages hold ----------*- C++ -*-===//
//
// Each stage of a pipeline's plan holds the variables of its blocks; a
// tied parameter (GPT-2's token embedding, read by the first stage and by
// the last stage's LM head) is held, with its master and moments, by both.
// A checkpoint holds each variable once, under its one-rank name, so that
// any pipeline degree, or one rank, resumes it: the lowest stage holding a
// variable writes it, and a rank loading checks the checkpoint's names
// against every stage's, not only its own.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_TOOLING_PIPELINESTATE_H
#define DSC_RUNTIME_TOOLING_PIPELINESTATE_H

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace dsc::rt {

class LoadedPlan;

struct PipelineState {
  /// Every stage's checkpointed variables (parameters, masters, optimizer
  /// state) by name.
  std::set<std::string> state;
  /// Of stage `stage`'s variables, those a lower stage holds too.
  std::set<std::string> heldEarlier;
  /// The model's parameters in stage order, each once, their whole shapes
  /// and the plan's aliases (a streamed export's layout).
  std::vector<std::string> params;
  std::map<std::string, std::vector<int64_t>> paramShapes;
  std::vector<std::pair<std::string, std::string>> aliases;
};

/// Reads the stages of a pipeline's file (a verified LoadedPlan with
/// stageCount() > 0) as seen from stage `stage`.
PipelineState pipelineStateOf(const LoadedPlan &file, uint32_t stage);

} // namespace dsc::rt

#endif // DSC_RUNTIME_TOOLING_PIPELINESTATE_H
