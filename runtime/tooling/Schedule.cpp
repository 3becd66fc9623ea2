//===- Schedule.cpp - DeepSpeed's learning-rate schedules -----------------===//
#include "runtime/tooling/Schedule.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace dsc::rt {

namespace {

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}

} // namespace

bool LrSchedule::create(const ScheduleParams &params, LrSchedule &schedule,
                        std::string &error) {
  const std::string &k = params.kind;
  Kind kind;
  if (k == "constant")
    kind = Kind::Constant;
  else if (k == "WarmupLR")
    kind = Kind::WarmupLR;
  else if (k == "WarmupDecayLR")
    kind = Kind::WarmupDecayLR;
  else if (k == "WarmupCosineLR")
    kind = Kind::WarmupCosineLR;
  else if (k == "LRRangeTest")
    kind = Kind::LRRangeTest;
  else if (k == "OneCycle")
    kind = Kind::OneCycle;
  else {
    error = "plan: unknown learning-rate schedule '" + k +
            "' (expected constant, WarmupLR, WarmupDecayLR, WarmupCosineLR, "
            "LRRangeTest or OneCycle)";
    return false;
  }
  // A NaN rate (a hand-edited plan, its checksum resealed) trained NaN
  // weights and exported them with exit 0: every rate is a finite number
  // >= 0, and the ratios are fractions.
  const std::pair<const char *, double> rates[] = {
      {"lr", params.lr},
      {"warmup_min_lr", params.warmupMinLr},
      {"warmup_max_lr", params.warmupMaxLr},
      {"cos_min_ratio", params.cosMinRatio},
      {"warmup_min_ratio", params.warmupMinRatio},
      {"range_min_lr", params.rangeMinLr},
      {"range_step_rate", params.rangeStepRate},
      {"cycle_min_lr", params.cycleMinLr},
      {"cycle_max_lr", params.cycleMaxLr},
      {"decay_lr_rate", params.decayLrRate},
      {"cycle_second_step_size", params.cycleSecondStepSize},
      {"decay_step_size", params.decayStepSize}};
  for (const auto &[name, value] : rates)
    if (!(value >= 0) || !std::isfinite(value)) {
      error = "plan: schedule " + k + ": " + name +
              " must be a finite number >= 0, got " + std::to_string(value);
      return false;
    }
  if (params.warmupNumSteps < 0 || params.totalNumSteps < 0) {
    error = "plan: schedule " + k +
            ": warmup_num_steps and total_num_steps must be >= 0";
    return false;
  }
  // An empty warmup_type is DeepSpeed's default.
  const std::string &type = params.warmupType;
  if (!type.empty() && type != "log" && type != "linear") {
    error = "plan: schedule " + k + ": unknown warmup_type '" + type +
            "' (expected log or linear)";
    return false;
  }
  int64_t warmup = std::max<int64_t>(2, params.warmupNumSteps);
  if (kind == Kind::WarmupCosineLR && params.totalNumSteps <= warmup) {
    error = "plan: schedule WarmupCosineLR: total_num_steps (" +
            std::to_string(params.totalNumSteps) +
            ") must exceed warmup_num_steps (" + std::to_string(warmup) +
            ", at least 2)";
    return false;
  }
  // The divisors: a range test's interval, OneCycle's first half (its
  // second may be 0: the cycle then only rises).
  if ((kind == Kind::LRRangeTest && params.rangeStepSize < 1) ||
      (kind == Kind::OneCycle &&
       (!(params.cycleFirstStepSize > 0) ||
        !std::isfinite(params.cycleFirstStepSize) ||
        !std::isfinite(params.cycleSecondStepSize) ||
        params.cycleFirstStairCount < 0 || params.cycleSecondStairCount < 0))) {
    error = "plan: schedule " + k +
            ": step sizes must be > 0 (a second half >= 0) and stair counts "
            ">= 0";
    return false;
  }
  if (kind == Kind::OneCycle && params.cycleMomentum &&
      (!(params.cycleMinMom >= 0 && params.cycleMinMom < 1) ||
       !(params.cycleMaxMom >= 0 && params.cycleMaxMom < 1) ||
       !std::isfinite(params.decayMomRate))) {
    error = "plan: schedule OneCycle: cycle_min_mom and cycle_max_mom must "
            "be in [0, 1) and decay_mom_rate finite";
    return false;
  }
  schedule.kind_ = kind;
  schedule.params_ = params;
  schedule.warmupSteps_ = warmup;
  schedule.logWarmup_ = type != "linear";
  return true;
}

double LrSchedule::warmupGamma(double it) const {
  if (logWarmup_)
    return std::log(it + 1) / std::log(double(warmupSteps_));
  return it / double(warmupSteps_);
}

double LrSchedule::rangeTestLr(double it) const {
  const ScheduleParams &p = params_;
  double interval = (it + 1) / double(p.rangeStepSize);
  if (p.rangeStaircase)
    interval = std::floor(interval);
  return p.rangeMinLr * (1 + p.rangeStepRate * interval);
}

// DeepSpeed's OneCycle._get_cycle_lr and _get_decay_lr.
double LrSchedule::oneCycleLr(double it) const {
  const ScheduleParams &p = params_;
  const double total = p.cycleFirstStepSize + p.cycleSecondStepSize;
  if (it >= total) {
    if (p.decayStepSize == 0 || p.decayLrRate == 0)
      return p.cycleMinLr;
    double interval = (it - total + 1) / p.decayStepSize;
    return p.cycleMinLr / (1 + p.decayLrRate * interval);
  }
  return p.cycleMinLr + (p.cycleMaxLr - p.cycleMinLr) * oneCycleScale(it);
}

// DeepSpeed's OneCycle._get_scale_factor.
double LrSchedule::oneCycleScale(double it) const {
  const ScheduleParams &p = params_;
  const double first = p.cycleFirstStepSize, second = p.cycleSecondStepSize;
  const double total = first + second, stepRatio = first / total;
  double batch = it + 1;
  double cycle = std::floor(1 + batch / total);
  double x = 1 + batch / total - cycle;
  bool rising = x <= stepRatio;
  double scale = rising ? x / stepRatio : (x - 1) / (stepRatio - 1);
  int64_t stairs = rising ? p.cycleFirstStairCount : p.cycleSecondStairCount;
  if (stairs > 0) {
    // From the batch's place in the cycle, not from `scale` (DeepSpeed:
    // the float scale at a half's end can fall just short of a stair).
    double inCycle = std::fmod(batch, total);
    double position = inCycle <= first
                          ? inCycle * double(stairs) / first
                          : (total - inCycle) * double(stairs) / second;
    scale = std::floor(position) / double(stairs);
  }
  return scale;
}

// DeepSpeed's OneCycle._get_cycle_mom and _get_decay_mom, and the
// constructor's cycle_min_mom for the first step.
double LrSchedule::beta1At(uint64_t step) const {
  const ScheduleParams &p = params_;
  if (step < 2)
    return p.cycleMinMom;
  const double it = double(step) - 2;
  const double total = p.cycleFirstStepSize + p.cycleSecondStepSize;
  if (it < total)
    return p.cycleMaxMom - (p.cycleMaxMom - p.cycleMinMom) * oneCycleScale(it);
  if (p.decayStepSize == 0 || p.decayMomRate == 0)
    return p.cycleMaxMom;
  double interval = (it - total + 1) / p.decayStepSize;
  return p.cycleMaxMom * (1 + p.decayMomRate * interval);
}

bool LrSchedule::momentumValidUntil(uint64_t lastStep,
                                    std::string &error) const {
  if (!cyclesMomentum() || lastStep == 0)
    return true;
  double beta1 = beta1At(lastStep);
  if (beta1 >= 0 && beta1 < 1)
    return true;
  error = "plan: schedule OneCycle: beta1 reaches " + number(beta1) +
          " by step " + std::to_string(lastStep) + " (cycle_max_mom " +
          number(params_.cycleMaxMom) + " x (1 + decay_mom_rate " +
          number(params_.decayMomRate) +
          " x the decay interval)), outside [0, 1); train fewer steps or "
          "lower decay_mom_rate";
  return false;
}

double LrSchedule::lrAt(uint64_t step) const {
  const ScheduleParams &p = params_;
  if (kind_ == Kind::LRRangeTest)
    return rangeTestLr(double(step) - 2);
  if (kind_ == Kind::OneCycle)
    return oneCycleLr(double(step) - 2);
  if (step < 2) // iteration -1: what the scheduler's constructor sets
    switch (kind_) {
    case Kind::Constant:
      return p.lr;
    case Kind::WarmupLR:
    case Kind::WarmupDecayLR:
      return p.warmupMinLr;
    case Kind::WarmupCosineLR:
      return 0.0;
    default:
      break;
    }
  double it = double(step - 2);
  bool warming = it < double(warmupSteps_);
  switch (kind_) {
  case Kind::Constant:
    return p.lr;
  case Kind::WarmupLR: {
    double gamma = warming ? warmupGamma(it) : 1.0;
    return p.warmupMinLr + (p.warmupMaxLr - p.warmupMinLr) * gamma;
  }
  case Kind::WarmupDecayLR: {
    double total = double(p.totalNumSteps);
    double gamma =
        warming
            ? warmupGamma(it)
            : std::max(0.0, (total - it) /
                                std::max(1.0, total - double(warmupSteps_)));
    return p.warmupMinLr + (p.warmupMaxLr - p.warmupMinLr) * gamma;
  }
  case Kind::WarmupCosineLR: {
    if (warming)
      return p.lr *
             (p.warmupMinRatio + (1.0 - p.warmupMinRatio) * warmupGamma(it));
    double span = double(p.totalNumSteps - warmupSteps_);
    double k = std::min(it - double(warmupSteps_) + 1.0, span);
    const double kPi = 3.14159265358979323846;
    double ratio = p.cosMinRatio + (1.0 - p.cosMinRatio) *
                                       (1.0 + std::cos(kPi * k / span)) / 2.0;
    return p.lr * std::max(0.0, ratio);
  }
  default:
    break;
  }
  return p.lr;
}

std::string LrSchedule::describe() const {
  const ScheduleParams &p = params_;
  std::string warmup = " over " + std::to_string(warmupSteps_) + " steps (" +
                       (logWarmup_ ? "log" : "linear") + " warmup)";
  switch (kind_) {
  case Kind::Constant:
    return "constant lr " + number(p.lr);
  case Kind::WarmupLR:
    return "WarmupLR " + number(p.warmupMinLr) + " -> " +
           number(p.warmupMaxLr) + warmup;
  case Kind::WarmupDecayLR:
    return "WarmupDecayLR " + number(p.warmupMinLr) + " -> " +
           number(p.warmupMaxLr) + warmup +
           ", then linear decay (total_num_steps " +
           std::to_string(p.totalNumSteps) + ")";
  case Kind::WarmupCosineLR:
    return "WarmupCosineLR lr " + number(p.lr) + " x " +
           number(p.warmupMinRatio) + " -> 1" + warmup + ", cosine to x " +
           number(p.cosMinRatio) + " at step " +
           std::to_string(p.totalNumSteps);
  case Kind::LRRangeTest:
    return "LRRangeTest " + number(p.rangeMinLr) + " x (1 + " +
           number(p.rangeStepRate) + " per " + std::to_string(p.rangeStepSize) +
           " steps" + (p.rangeStaircase ? ", in stairs)" : ")");
  case Kind::OneCycle:
    return "OneCycle " + number(p.cycleMinLr) + " -> " + number(p.cycleMaxLr) +
           " over " + number(p.cycleFirstStepSize) + " steps, back over " +
           number(p.cycleSecondStepSize) +
           (p.decayLrRate > 0 && p.decayStepSize > 0
                ? ", then decay " + number(p.decayLrRate) + " per " +
                      number(p.decayStepSize) + " steps"
                : ", then flat") +
           (p.cycleMomentum ? "; beta1 " + number(p.cycleMaxMom) + " -> " +
                                  number(p.cycleMinMom) + " and back"
                            : "");
  }
  return "";
}

} // namespace dsc::rt
