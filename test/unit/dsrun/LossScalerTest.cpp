//===- LossScalerTest.cpp - the loss scale over scripted overflows --------===//
//
// Expected scales are worked out by hand from DeepSpeed's
// DynamicLossScaler.update_scale (deepspeed/runtime/fp16/loss_scaler.py):
// an overflow with hysteresis left decrements it; otherwise the scale halves
// (never below min_scale), an overflow at min_scale raising; with
// stable = (iteration - last overflow) - 1, a clean update doubles the
// scale when stable > 0 and stable % window == 0, refilling the hysteresis
// there (or after every clean update with consecutive_hysteresis).
//
//===----------------------------------------------------------------------===//

#include "runtime/tooling/LossScaler.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using dsc::rt::LossScaleOptions;
using dsc::rt::LossScaler;

namespace {

/// The scale after each update of `overflows` ('x' overflow, '.' clean).
std::vector<double> scalesAfter(const LossScaleOptions &o,
                                const std::string &overflows) {
  LossScaler s(o);
  std::vector<double> out;
  std::string error;
  for (char c : overflows) {
    EXPECT_TRUE(s.update(c == 'x', error)) << error;
    out.push_back(s.scale());
  }
  return out;
}

LossScaleOptions dynamic(int power, int64_t window, int hysteresis,
                         bool consecutive = false, double min = 1) {
  LossScaleOptions o;
  o.initialScalePower = power;
  o.window = window;
  o.hysteresis = hysteresis;
  o.consecutiveHysteresis = consecutive;
  o.minScale = min;
  return o;
}

TEST(LossScaler, DeepSpeedDefaults) {
  LossScaler s(LossScaleOptions{});
  EXPECT_TRUE(s.dynamic());
  EXPECT_EQ(s.scale(), 65536.0); // 2^initial_scale_power
  EXPECT_EQ(s.hysteresisLeft(), 2);
  std::string error;
  // Hysteresis 2: the first overflow only uses it up, the second halves.
  ASSERT_TRUE(s.update(true, error));
  EXPECT_EQ(s.scale(), 65536.0);
  EXPECT_EQ(s.hysteresisLeft(), 1);
  ASSERT_TRUE(s.update(true, error));
  EXPECT_EQ(s.scale(), 32768.0);
  // 1000 clean updates after the overflow at iteration 1: the one at
  // iteration 1002 is the 1000th since (stable = 1002 - 1 - 1), and doubles.
  for (int i = 2; i < 1002; ++i) {
    ASSERT_TRUE(s.update(false, error));
    ASSERT_EQ(s.scale(), 32768.0) << "iteration " << i;
    ASSERT_EQ(s.hysteresisLeft(), 1) << "iteration " << i;
  }
  ASSERT_TRUE(s.update(false, error));
  EXPECT_EQ(s.scale(), 65536.0);
  EXPECT_EQ(s.hysteresisLeft(), 2); // refilled where the scale grows
  EXPECT_EQ(s.iteration(), 1003);
}

TEST(LossScaler, WindowGrowthFromTheStart) {
  // No overflow yet (last overflow -1): stable = iteration, so the scale
  // doubles at iterations 2, 4, 6 with window 2.
  EXPECT_EQ(scalesAfter(dynamic(2, 2, 1), "......."),
            (std::vector<double>{4, 4, 8, 8, 16, 16, 32}));
  // An overflow restarts the count: at iteration 3, then growth at 3+1+2.
  EXPECT_EQ(scalesAfter(dynamic(2, 2, 1), "...x...."),
            (std::vector<double>{4, 4, 8, 4, 4, 4, 8, 8}));
}

TEST(LossScaler, HysteresisOneHalvesAtOnce) {
  EXPECT_EQ(scalesAfter(dynamic(4, 1000, 1), "xxx"),
            (std::vector<double>{8, 4, 2}));
}

TEST(LossScaler, ConsecutiveHysteresisRefillsAfterEveryCleanStep) {
  // Off: the hysteresis used by the first overflow stays used, so an
  // overflow two steps later halves the scale.
  EXPECT_EQ(scalesAfter(dynamic(4, 1000, 2, false), "x.x.x"),
            (std::vector<double>{16, 16, 8, 8, 4}));
  // On: each clean step refills it, so isolated overflows never halve.
  EXPECT_EQ(scalesAfter(dynamic(4, 1000, 2, true), "x.x.x"),
            (std::vector<double>{16, 16, 16, 16, 16}));
  // On, but back to back: the second overflow finds no hysteresis left.
  EXPECT_EQ(scalesAfter(dynamic(4, 1000, 2, true), "xx.xx"),
            (std::vector<double>{16, 8, 8, 8, 4}));
}

TEST(LossScaler, NeverBelowTheMinimumAndAnOverflowThereIsAnError) {
  // 4 -> 2 -> max(1, 1.5) would be below min 1.5: clamped to it.
  LossScaler s(dynamic(2, 1000, 1, false, 1.5));
  std::string error;
  ASSERT_TRUE(s.update(true, error));
  EXPECT_EQ(s.scale(), 2.0);
  ASSERT_TRUE(s.update(true, error));
  EXPECT_EQ(s.scale(), 1.5);
  EXPECT_FALSE(s.update(true, error));
  EXPECT_EQ(error, "gradient overflow at the minimum loss scale 1.5 "
                   "(min_loss_scale): it cannot be reduced further");
  EXPECT_EQ(s.scale(), 1.5);
  EXPECT_EQ(s.iteration(), 2); // the failed update changed nothing
  // With hysteresis left, an overflow at the minimum only uses it up.
  LossScaler h(dynamic(0, 1000, 2));
  ASSERT_TRUE(h.update(true, error));
  EXPECT_EQ(h.scale(), 1.0);
  EXPECT_FALSE(h.update(true, error));
}

TEST(LossScaler, StaticScaleNeverChanges) {
  LossScaleOptions o;
  o.lossScale = 128;
  LossScaler s(o);
  EXPECT_FALSE(s.dynamic());
  std::string error;
  for (bool overflow : {true, false, true, true})
    ASSERT_TRUE(s.update(overflow, error)) << error;
  EXPECT_EQ(s.scale(), 128.0);
  EXPECT_EQ(s.iteration(), 4);
}

} // namespace
