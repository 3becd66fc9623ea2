//===- CollectiveWatchTest.cpp - naming the NCCL collective that hangs ----===//
//
// The CUDA backend's rules for a stuck collective (CollectiveWatch.h), which
// need no GPU: the clock runs only while a collective is in flight and
// restarts at every marker, and the collective named is the one in flight.
// (The line itself is the shared collectiveTimeoutLine, which
// test/unit/comm/CommunicatorTest.cpp asserts.)
//
//===----------------------------------------------------------------------===//
#include "runtime/backends/cuda/CollectiveWatch.h"

#include <gtest/gtest.h>

using dsc::rt::cuda::CollectiveWatch;

namespace {

TEST(CollectiveWatch, TimesOnlyACollectiveInFlight) {
  CollectiveWatch w(10.0, 0.0);
  EXPECT_EQ(w.observe(0, 50.0), 0u);  // computing before the first one
  EXPECT_EQ(w.observe(2, 60.0), 0u);  // #1 done, computing again
  EXPECT_EQ(w.observe(2, 500.0), 0u); // long compute is not a hang
  EXPECT_EQ(w.observe(3, 501.0), 0u); // #2 starts: the clock restarts
  EXPECT_EQ(w.observe(3, 511.0), 0u); // exactly the timeout: not yet
  EXPECT_EQ(w.observe(3, 511.5), 2u); // past it: #2 is named
}

TEST(CollectiveWatch, EveryMarkerRestartsTheClock) {
  CollectiveWatch w(10.0, 0.0);
  double t = 0;
  for (uint32_t word = 1; word < 40; ++word, t += 9.0)
    EXPECT_EQ(w.observe(word, t), 0u) << word; // each takes 9 s: in time
  EXPECT_EQ(w.observe(39, t + 2.0), 20u);      // #20 began at t - 9
}

TEST(CollectiveWatch, AFailureBelongsToTheCollectiveInFlightOrTheNext) {
  CollectiveWatch w(10.0, 0.0);
  EXPECT_EQ(w.current(), 1u);
  w.observe(5, 1.0); // #3 in flight
  EXPECT_EQ(w.current(), 3u);
  w.observe(6, 2.0); // #3 done
  EXPECT_EQ(w.current(), 4u);
  EXPECT_EQ(CollectiveWatch::completed(6), 3u);
  EXPECT_EQ(CollectiveWatch::completed(7), 3u);
}

} // namespace
