//===- LossScaler.h - fp16 loss scaling with DeepSpeed's semantics -*- C++
//-*-===//
//
// The loss scale of fp16 training (issue 9), as DeepSpeed's ds_config.json
// keys define it and its DynamicLossScaler.update_scale behaves:
//
//   loss_scale            0: dynamic; > 0: that static scale
//   initial_scale_power   dynamic: the first scale is 2^power (16)
//   loss_scale_window     clean steps between two doublings (1000)
//   hysteresis            overflows tolerated before the scale halves (2)
//   consecutive_hysteresis  refill the hysteresis after every clean step
//                         (false: only when the scale grows)
//   min_loss_scale        the scale never halves below this (1)
//
// One update per optimizer step, after the ranks agreed whether any
// gradient was non-finite. An overflow with hysteresis left only uses it
// up; otherwise the scale halves (not below the minimum). After an overflow
// the scale doubles once `window` clean steps have passed since it, and
// every `window` clean steps after that. An overflow at the minimum scale
// is an error: DeepSpeed raises there, dsrun ends the run. A static scale
// never changes. Whether an overflowing step is skipped is the trainer's
// business (it always is, static or dynamic, as in DeepSpeed's engine).
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_TOOLING_LOSSSCALER_H
#define DSC_RUNTIME_TOOLING_LOSSSCALER_H

#include <cstdint>
#include <string>

namespace dsc::rt {

struct LossScaleOptions {
  double lossScale = 0; ///< 0: dynamic
  int initialScalePower = 16;
  int64_t window = 1000;
  int hysteresis = 2;
  bool consecutiveHysteresis = false;
  double minScale = 1;
};

class LossScaler {
public:
  explicit LossScaler(const LossScaleOptions &options);

  bool dynamic() const { return dynamic_; }
  /// The scale the next step's loss is multiplied by.
  double scale() const { return scale_; }
  /// Overflows still tolerated before the scale halves.
  int hysteresisLeft() const { return hysteresis_; }
  /// Updates so far.
  int64_t iteration() const { return iteration_; }

  /// Everything update() changes: what a checkpoint keeps.
  struct State {
    double scale = 0;
    int hysteresis = 0;
    int64_t iteration = 0, lastOverflow = -1;
  };
  State state() const {
    return {scale_, hysteresis_, iteration_, lastOverflow_};
  }
  void restore(const State &s) {
    scale_ = s.scale;
    hysteresis_ = s.hysteresis;
    iteration_ = s.iteration;
    lastOverflow_ = s.lastOverflow;
  }

  /// Accounts for one step whose gradients did (`overflow`) or did not
  /// contain a non-finite value. False, with one line in `error`, for an
  /// overflow at the minimum scale; the state is then unchanged.
  bool update(bool overflow, std::string &error);

private:
  LossScaleOptions options_;
  bool dynamic_;
  double scale_;
  int hysteresis_;
  int64_t iteration_ = 0;
  int64_t lastOverflow_ = -1; ///< iteration of the latest overflow
};

} // namespace dsc::rt

#endif // DSC_RUNTIME_TOOLING_LOSSSCALER_H
