//===- PlanInfo.cpp - what dsrun reads from a plan besides its programs ---===//
#include "runtime/tooling/PlanInfo.h"

namespace dsc::rt {

namespace fb = dsc::plan;

namespace {

std::string str(const flatbuffers::String *s) { return s ? s->str() : ""; }

} // namespace

bool readPlanInfo(const fb::Plan &plan, PlanInfo &info, std::string &error) {
  info.model = str(plan.model());
  info.microBatch = plan.micro_batch();
  info.seqLen = plan.seq_len();
  info.vocabSize = plan.vocab_size();
  info.accumulationSteps = plan.accumulation_steps();
  info.tensorParallel = std::max<uint32_t>(1, plan.tensor_parallel());
  info.sequenceParallel = std::max<uint32_t>(1, plan.sequence_parallel());
  info.pipelineStages = std::max<uint32_t>(1, plan.pipeline_parallel());
  info.pipelineStage = plan.pipeline_stage();
  if (!info.microBatch || !info.seqLen || !info.vocabSize ||
      !info.accumulationSteps) {
    error = "plan: micro_batch, seq_len, vocab_size and accumulation_steps "
            "must be positive (got " +
            std::to_string(info.microBatch) + ", " +
            std::to_string(info.seqLen) + ", " +
            std::to_string(info.vocabSize) + ", " +
            std::to_string(info.accumulationSteps) + ")";
    return false;
  }
  const fb::Schedule *s = plan.schedule();
  if (!s) {
    error = "plan: no schedule table, so the learning rate is unknown";
    return false;
  }
  info.schedule.kind = str(s->kind());
  info.schedule.lr = s->lr();
  info.schedule.warmupMinLr = s->warmup_min_lr();
  info.schedule.warmupMaxLr = s->warmup_max_lr();
  info.schedule.warmupNumSteps = s->warmup_num_steps();
  info.schedule.warmupType = str(s->warmup_type());
  info.schedule.totalNumSteps = s->total_num_steps();
  info.schedule.cosMinRatio = s->cos_min_ratio();
  info.schedule.warmupMinRatio = s->warmup_min_ratio();
  info.schedule.rangeMinLr = s->range_min_lr();
  info.schedule.rangeStepSize = s->range_step_size();
  info.schedule.rangeStepRate = s->range_step_rate();
  info.schedule.rangeStaircase = s->range_staircase();
  info.schedule.cycleMinLr = s->cycle_min_lr();
  info.schedule.cycleMaxLr = s->cycle_max_lr();
  info.schedule.decayLrRate = s->decay_lr_rate();
  info.schedule.cycleFirstStepSize = s->cycle_first_step_size();
  info.schedule.cycleSecondStepSize = s->cycle_second_step_size();
  info.schedule.cycleFirstStairCount = s->cycle_first_stair_count();
  info.schedule.cycleSecondStairCount = s->cycle_second_stair_count();
  info.schedule.decayStepSize = s->decay_step_size();
  info.schedule.cycleMomentum = s->cycle_momentum();
  info.schedule.cycleMinMom = s->cycle_min_mom();
  info.schedule.cycleMaxMom = s->cycle_max_mom();
  info.schedule.decayMomRate = s->decay_mom_rate();
  if (plan.variables())
    for (const fb::Variable *v : *plan.variables())
      if (v->kind() == fb::VarKind::param)
        info.params.push_back(str(v->name()));
  if (plan.aliases()) // checked by the loader: each ties to a parameter
    for (const fb::Alias *a : *plan.aliases())
      info.aliases.push_back({str(a->name()), str(a->of())});
  if (const fb::LossScale *l = plan.loss_scale()) {
    LossScaleOptions o;
    o.lossScale = l->static_scale();
    o.initialScalePower = l->initial_scale_power();
    o.window = l->window();
    o.hysteresis = l->hysteresis();
    o.consecutiveHysteresis = l->consecutive_hysteresis();
    o.minScale = l->min_scale();
    if (!(o.lossScale >= 0) || o.initialScalePower < 0 ||
        o.initialScalePower > 60 || o.window < 1 || o.hysteresis < 1 ||
        !(o.minScale > 0)) {
      error = "plan: the loss_scale table is out of range (static scale >= "
              "0, initial power 0-60, window >= 1, hysteresis >= 1, minimum "
              "> 0)";
      return false;
    }
    info.lossScale = o;
  }
  info.skipsOverflow = plan.skips_overflow();
  // The eval program's batch (dsc --eval-micro-batch-size), from its first
  // input, the tokens [rows, seq_len].
  if (plan.programs() && plan.buffers())
    for (const fb::Program *prog : *plan.programs())
      if (prog->name() && prog->name()->string_view() == plan::kEvalProgram &&
          prog->inputs() && prog->inputs()->size() > 0) {
        const fb::Buffer *b = plan.buffers()->Get(prog->inputs()->Get(0));
        if (b->shape() && b->shape()->size() == 2)
          info.evalBatch = uint32_t(b->shape()->Get(0));
      }
  return true;
}

std::map<std::string, std::vector<int64_t>> paramShapes(const fb::Plan &plan) {
  std::map<std::string, std::vector<int64_t>> shapes;
  if (!plan.variables() || !plan.buffers())
    return shapes;
  for (const fb::Variable *v : *plan.variables()) {
    if (v->kind() != fb::VarKind::param || !v->name())
      continue;
    const auto *dims =
        v->shape() ? v->shape() : plan.buffers()->Get(v->buffer())->shape();
    shapes[v->name()->str()] =
        dims ? std::vector<int64_t>(dims->begin(), dims->end())
             : std::vector<int64_t>();
  }
  return shapes;
}

} // namespace dsc::rt
