//===- ProgramNamesTest.cpp - the names compiler and runtime share --------===//
#include "runtime/plan/ProgramNames.h"

#include <gtest/gtest.h>

using dsc::plan::sampleLength;

// dsc names the sampling programs and their forwards by their length; the
// sampler reads it back from the name, so anything else must read as none.
TEST(ProgramNames, SampleLengthReadsOnlyTheNamesDscWrites) {
  EXPECT_EQ(sampleLength("sample_64"), 64);
  EXPECT_EQ(sampleLength("sample_1024"), 1024);
  EXPECT_EQ(sampleLength("forward_sample_128"), 128);
  EXPECT_EQ(sampleLength("sample_999999999"), 999999999);
  for (const char *other :
       {"eval", "micro_step", "sample_", "sample_064", "sample_0", "sample_64x",
        "sample_-4", "sample_1234567890", "forward_sample_", "xsample_64",
        "Sample_64", "forward_eval"})
    EXPECT_EQ(sampleLength(other), 0) << other;
  EXPECT_TRUE(dsc::plan::isSampleProgram("sample_64"));
  EXPECT_FALSE(dsc::plan::isSampleProgram("forward_sample_64"));
  EXPECT_FALSE(dsc::plan::isSampleProgram("sample_064"));
  EXPECT_TRUE(dsc::plan::isSampleForward("forward_sample_64"));
  EXPECT_FALSE(dsc::plan::isSampleForward("sample_64"));
}
