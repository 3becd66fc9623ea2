//===- LossScaler.cpp - fp16 loss scaling with DeepSpeed's semantics ------===//

#include "runtime/tooling/LossScaler.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace dsc::rt {

LossScaler::LossScaler(const LossScaleOptions &options)
    : options_(options), dynamic_(options.lossScale == 0),
      scale_(dynamic_ ? std::ldexp(1.0, options.initialScalePower)
                      : options.lossScale),
      hysteresis_(options.hysteresis) {}

bool LossScaler::update(bool overflow, std::string &error) {
  if (!dynamic_) {
    ++iteration_;
    return true;
  }
  constexpr double kFactor = 2;
  if (overflow) {
    if (options_.hysteresis == 1 || hysteresis_ == 1) {
      if (scale_ == options_.minScale) {
        char line[160];
        std::snprintf(line, sizeof line,
                      "gradient overflow at the minimum loss scale %g "
                      "(min_loss_scale): it cannot be reduced further",
                      scale_);
        error = line;
        return false;
      }
      scale_ = std::max(scale_ / kFactor, options_.minScale);
    } else {
      --hysteresis_;
    }
    lastOverflow_ = iteration_;
  } else {
    if (options_.consecutiveHysteresis)
      hysteresis_ = options_.hysteresis;
    // Clean steps since the latest overflow, this one excluded.
    int64_t stable = iteration_ - lastOverflow_ - 1;
    if (stable > 0 && stable % options_.window == 0) {
      if (!options_.consecutiveHysteresis)
        hysteresis_ = options_.hysteresis;
      scale_ *= kFactor;
    }
  }
  ++iteration_;
  return true;
}

} // namespace dsc::rt
