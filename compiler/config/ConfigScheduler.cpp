//===- ConfigScheduler.cpp - the scheduler section ------------------------===//
//
// DeepSpeed's learning-rate schedules (deepspeed/runtime/lr_schedules.py):
// WarmupLR, WarmupDecayLR and WarmupCosineLR, LRRangeTest and OneCycle,
// with their defaults; dsrun evaluates them (runtime/tooling/Schedule.h).
//
//===----------------------------------------------------------------------===//
#include "compiler/config/ConfigReader.h"

#include "llvm/ADT/StringExtras.h"

namespace dsc::config {

namespace {

/// last_batch_iteration: only a schedule that starts at step 0.
bool readFirstIteration(Reader &r, Section &params) {
  int64_t last = -1;
  return params.integer("last_batch_iteration", last) &&
         (last == -1 || r.fail(params.at("last_batch_iteration"),
                               "only -1 (start at step 0) is supported, got " +
                                   formatNumber(last)));
}

/// OneCycle's cycle_momentum (on): DeepSpeed's OneCycle moves the betas of
/// an optimizer that has them, (momentum, 0.99), and warns and leaves the
/// others alone.
void cycleMomentumOf(Reader &r, Section &p, DsConfig::Optimizer &o,
                     DsConfig::Scheduler &s) {
  if (o.type != "Adam" && o.type != "AdamW" && o.type != "Lion") {
    r.note(p.at("cycle_momentum"),
           "true has no effect: " + o.type +
               " has no betas to cycle (DeepSpeed turns it off too)");
    return;
  }
  s.cycleMomentum = true;
  r.note(p.at("cycle_momentum"),
         "beta1 cycles between cycle_max_mom " + formatNumber(s.cycleMaxMom) +
             " and cycle_min_mom " + formatNumber(s.cycleMinMom) +
             " and beta2 is 0.99, as DeepSpeed's OneCycle sets them "
             "(optimizer.params.betas [" +
             formatNumber(o.beta1) + ", " + formatNumber(o.beta2) +
             "] is not used)");
  o.beta1 = s.cycleMinMom; // the first step's
  o.beta2 = 0.99;
}

/// LRRangeTest's and OneCycle's params (deepspeed/runtime/lr_schedules.py:
/// its defaults, and OneCycle's second half and stairs defaulting to the
/// first's).
bool readCyclicParams(Reader &r, Section &p, DsConfig::Optimizer &o,
                      DsConfig::Scheduler &s) {
  auto atLeast = [&](StringRef key, auto value, decltype(value) min) {
    return r.atLeast(p.at(key), value, min);
  };
  if (s.type == "LRRangeTest")
    return Reader::all(
        {p.number("lr_range_test_min_lr", s.rangeMinLr) &&
             atLeast("lr_range_test_min_lr", s.rangeMinLr, 0.0),
         p.integer("lr_range_test_step_size", s.rangeStepSize) &&
             atLeast("lr_range_test_step_size", s.rangeStepSize, int64_t(1)),
         p.number("lr_range_test_step_rate", s.rangeStepRate) &&
             atLeast("lr_range_test_step_rate", s.rangeStepRate, 0.0),
         p.boolean("lr_range_test_staircase", s.rangeStaircase)});
  auto required = [&](StringRef key, double &out) {
    if (!p.get(key))
      return r.fail(p.at(key), "required by OneCycle but missing");
    return p.number(key, out) && atLeast(key, out, 0.0);
  };
  auto isBeta = [&](StringRef key) {
    double mom = key == "cycle_min_mom" ? s.cycleMinMom : s.cycleMaxMom;
    return (mom >= 0 && mom < 1) ||
           r.fail(p.at(key), "must be in [0, 1), got " + formatNumber(mom));
  };
  bool cycleMomentum = true; // DeepSpeed's default
  bool hasSecond = p.get("cycle_second_step_size"),
       hasSecondStairs = p.get("cycle_second_stair_count");
  bool ok = Reader::all(
      {required("cycle_min_lr", s.cycleMinLr),
       required("cycle_max_lr", s.cycleMaxLr),
       p.number("decay_lr_rate", s.decayLrRate) &&
           atLeast("decay_lr_rate", s.decayLrRate, 0.0),
       p.number("cycle_first_step_size", s.cycleFirstStepSize) &&
           (s.cycleFirstStepSize > 0 ||
            r.fail(p.at("cycle_first_step_size"),
                   "must be > 0, got " + formatNumber(s.cycleFirstStepSize))),
       p.number("cycle_second_step_size", s.cycleSecondStepSize) &&
           atLeast("cycle_second_step_size", s.cycleSecondStepSize, 0.0),
       p.integer("cycle_first_stair_count", s.cycleFirstStairCount) &&
           atLeast("cycle_first_stair_count", s.cycleFirstStairCount,
                   int64_t(0)),
       p.integer("cycle_second_stair_count", s.cycleSecondStairCount) &&
           atLeast("cycle_second_stair_count", s.cycleSecondStairCount,
                   int64_t(0)),
       p.number("decay_step_size", s.decayStepSize) &&
           atLeast("decay_step_size", s.decayStepSize, 0.0),
       p.boolean("cycle_momentum", cycleMomentum),
       p.number("cycle_min_mom", s.cycleMinMom) && isBeta("cycle_min_mom"),
       p.number("cycle_max_mom", s.cycleMaxMom) && isBeta("cycle_max_mom"),
       p.number("decay_mom_rate", s.decayMomRate)});
  if (!hasSecond)
    s.cycleSecondStepSize = s.cycleFirstStepSize;
  if (!hasSecondStairs)
    s.cycleSecondStairCount = s.cycleFirstStairCount;
  if (ok && cycleMomentum)
    cycleMomentumOf(r, p, o, s);
  return ok;
}

} // namespace

bool readScheduler(Reader &r, Section &root, DsConfig::Optimizer &o,
                   DsConfig::Scheduler &s) {
  std::optional<Section> sched;
  if (!root.section("scheduler", sched))
    return false;
  if (!sched->present())
    return true;
  bool keysOk = sched->checkKeys();

  static constexpr StringRef kTypeNames[] = {
      "WarmupLR", "WarmupDecayLR", "WarmupCosineLR", "LRRangeTest", "OneCycle"};
  llvm::ArrayRef<StringRef> types(kTypeNames);
  const json::Value *type = sched->get("type");
  if (!type)
    return r.fail(sched->at("type"), "required key is missing (supported: " +
                                         llvm::join(types, ", ") + ")");
  std::optional<StringRef> name = type->getAsString();
  if (!name)
    return r.fail(sched->at("type"),
                  Twine("expected a string, got ") + kindName(*type));
  if (!llvm::is_contained(types, *name))
    return r.fail(sched->at("type"),
                  "unsupported scheduler " + quote(*name) +
                      " (supported: " + llvm::join(types, ", ") + ")");
  s.type = name->str();
  bool cosine = s.type == "WarmupCosineLR";
  bool needsTotal = s.type != "WarmupLR";

  std::optional<Section> params;
  if (!sched->section("params", params))
    return false;
  if (s.type == "LRRangeTest" || s.type == "OneCycle")
    return Reader::all({keysOk, params->checkKeys(s.type),
                        readCyclicParams(r, *params, o, s),
                        readFirstIteration(r, *params)});

  auto readTotal = [&]() {
    if (!needsTotal)
      return true;
    const json::Value *total = params->get("total_num_steps");
    std::string path = params->at("total_num_steps");
    if (!total)
      return r.fail(path, "required by " + s.type + " but missing");
    if (isAuto(*total))
      return r.fail(path, "\"auto\" cannot be resolved: dsc does not know "
                          "the number of training steps; give a number");
    return r.toInteger(path, *total, s.totalNumSteps) &&
           r.atLeast<int64_t>(path, s.totalNumSteps, 1);
  };
  auto readMaxLr = [&]() {
    const json::Value *maxLr = params->get("warmup_max_lr");
    if (maxLr && isAuto(*maxLr)) {
      s.warmupMaxLr = o.lr;
      r.note(params->at("warmup_max_lr"), "\"auto\" resolved to " +
                                              formatNumber(o.lr) +
                                              " (optimizer.params.lr)");
      return true;
    }
    return params->number("warmup_max_lr", s.warmupMaxLr) &&
           r.atLeast(params->at("warmup_max_lr"), s.warmupMaxLr, 0.0);
  };
  bool ok = Reader::all(
      {keysOk, params->checkKeys(s.type), readTotal(),
       !cosine ||
           (params->number("warmup_min_ratio", s.warmupMinRatio) &&
            r.atLeast(params->at("warmup_min_ratio"), s.warmupMinRatio, 0.0)),
       !cosine || (params->number("cos_min_ratio", s.cosMinRatio) &&
                   r.atLeast(params->at("cos_min_ratio"), s.cosMinRatio, 0.0)),
       cosine || (params->number("warmup_min_lr", s.warmupMinLr) &&
                  r.atLeast(params->at("warmup_min_lr"), s.warmupMinLr, 0.0)),
       cosine || readMaxLr(),
       params->integer("warmup_num_steps", s.warmupNumSteps) &&
           r.atLeast<int64_t>(params->at("warmup_num_steps"), s.warmupNumSteps,
                              0),
       params->choice("warmup_type", {"log", "linear"}, s.warmupType,
                      /*allowAuto=*/true),
       readFirstIteration(r, *params)});
  if (!ok)
    return false;

  if (needsTotal && s.totalNumSteps < s.warmupNumSteps)
    r.note(params->at("total_num_steps"),
           formatNumber(s.totalNumSteps) + " is less than warmup_num_steps " +
               formatNumber(s.warmupNumSteps) + " (DeepSpeed warns too)");
  return true;
}

} // namespace dsc::config
