//===- Schedule.h - DeepSpeed's learning-rate schedules ---------*- C++ -*-===//
//
// The schedules of deepspeed/runtime/lr_schedules.py, as a pure function of
// the optimizer step. DeepSpeed evaluates them at `last_batch_iteration`:
// the scheduler's constructor sets the lr of iteration -1, which the first
// optimizer step uses, and each scheduler.step() after an optimizer step
// moves on one; so step s (counting from 1) runs at iteration s - 2.
// Iteration -1 is the warm-up's start, min_lr, for WarmupLR and
// WarmupDecayLR, and 0 for WarmupCosineLR (its get_lr says so). Checked
// step for step against the deepspeed package (test/e2e/lr-deepspeed.test).
//
//   warmup (W = max(2, warmup_num_steps), it = s - 2 < W):
//     log:    gamma = ln(it + 1) / ln(W)      linear: gamma = it / W
//   WarmupLR:       lr = min_lr + (max_lr - min_lr) * (it < W ? gamma : 1)
//   WarmupDecayLR:  after warmup gamma = max(0, (T - it) / max(1, T - W))
//   WarmupCosineLR: warmup ratio = min_ratio + (1 - min_ratio) * gamma, then
//                   ratio = cos_min + (1 - cos_min) * (1 + cos(pi * k / K)) / 2
//                   with k = it - W + 1, K = T - W; lr = lr_peak * ratio
//   LRRangeTest:    lr = min_lr * (1 + rate * (it + 1) / size), the quotient
//                   floored with staircase
//   OneCycle:       b = it + 1 in cycles of F + S steps: up from min_lr to
//                   max_lr over F, down over S (in stair_count stairs when
//                   > 0); past the cycle (it >= F + S) min_lr / (1 +
//                   decay_lr_rate * (it - F - S + 1) / decay_step_size), or
//                   min_lr when either is 0
//   constant:       lr
//
// OneCycle's cycle_momentum moves beta1 with the same scale factor, the
// other way: cycle_max_mom - (cycle_max_mom - cycle_min_mom) * scale in
// the cycle, cycle_max_mom * (1 + decay_mom_rate * (it - F - S + 1) /
// decay_step_size) after it (cycle_max_mom when either is 0); the first
// step (iteration -1) takes cycle_min_mom, which the constructor sets.
//
// Where DeepSpeed's formula leaves its domain, dsrun holds: past
// total_num_steps the cosine stays at cos_min_ratio instead of rising again.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_TOOLING_SCHEDULE_H
#define DSC_RUNTIME_TOOLING_SCHEDULE_H

#include <cstdint>
#include <string>

namespace dsc::rt {

/// The plan's `schedule` table, as plain values.
struct ScheduleParams {
  std::string kind = "constant";
  double lr = 0;
  double warmupMinLr = 0;
  double warmupMaxLr = 0;
  int64_t warmupNumSteps = 0;
  std::string warmupType = "log";
  int64_t totalNumSteps = 0;
  double cosMinRatio = 0;
  double warmupMinRatio = 0;
  // LRRangeTest
  double rangeMinLr = 0, rangeStepRate = 0;
  int64_t rangeStepSize = 0;
  bool rangeStaircase = false;
  // OneCycle
  double cycleMinLr = 0, cycleMaxLr = 0, decayLrRate = 0;
  double cycleFirstStepSize = 0, cycleSecondStepSize = 0;
  int64_t cycleFirstStairCount = 0, cycleSecondStairCount = 0;
  double decayStepSize = 0;
  bool cycleMomentum = false; // beta1 is @apply's third input
  double cycleMinMom = 0, cycleMaxMom = 0, decayMomRate = 0;
};

class LrSchedule {
public:
  enum class Kind {
    Constant,
    WarmupLR,
    WarmupDecayLR,
    WarmupCosineLR,
    LRRangeTest,
    OneCycle
  };

  /// Checks `params` (known kind and warmup type, a cosine that has steps
  /// to decay over). False + one line on error.
  static bool create(const ScheduleParams &params, LrSchedule &schedule,
                     std::string &error);

  /// The learning rate of optimizer step `step` (1, 2, ...).
  double lrAt(uint64_t step) const;

  /// Whether beta1 moves (OneCycle's cycle_momentum), and its value at
  /// optimizer step `step`.
  bool cyclesMomentum() const {
    return kind_ == Kind::OneCycle && params_.cycleMomentum;
  }
  double beta1At(uint64_t step) const;
  /// Whether beta1 stays in [0, 1) up to step `lastStep` (after the cycle
  /// it moves one way, so the last step decides); else one line.
  bool momentumValidUntil(uint64_t lastStep, std::string &error) const;

  Kind kind() const { return kind_; }
  const ScheduleParams &params() const { return params_; }
  /// One line for the log, e.g. "WarmupLR 0 -> 0.001 over 1000 steps (log)".
  std::string describe() const;

private:
  // The warmup fraction gamma in [0, 1) for iteration `it` < warmupSteps_.
  double warmupGamma(double it) const;
  // LRRangeTest's and OneCycle's lr at iteration `it` (>= -1).
  double rangeTestLr(double it) const;
  double oneCycleLr(double it) const;
  // OneCycle's scale factor in [0, 1] at iteration `it` < its cycle.
  double oneCycleScale(double it) const;

  Kind kind_ = Kind::Constant;
  ScheduleParams params_;
  int64_t warmupSteps_ = 2;
  bool logWarmup_ = true;
};

} // namespace dsc::rt

#endif // DSC_RUNTIME_TOOLING_SCHEDULE_H
