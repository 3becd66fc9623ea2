//===- CommTestSupport.h - shared by the CommTest sources -------*- C++ -*-===//
//
// CommTest is one binary for every world size: ctest runs it alone
// (LocalCommunicator) and under `mpirun -np N` for N = 1..4
// (MpiCommunicator). Every rank runs every test in the same order (one
// binary, one registration order), so the collectives line up; values are
// small integers, so sums are exact in float whatever order MPI adds in.
// Ranks other than 0 print only their failures, prefixed with their rank.
//
// Sources: CommunicatorTest.cpp (the collectives), CommKernelsTest.cpp
// (comm.* kernels), CommPlanTest.cpp (plans with collectives in a Session),
// DsrunRanksTest.cpp (dsrun on every rank), MeshTest.cpp (mesh groups),
// CommMain.cpp (main).
//
//===----------------------------------------------------------------------===//
#ifndef DSC_TEST_UNIT_COMM_COMMTESTSUPPORT_H
#define DSC_TEST_UNIT_COMM_COMMTESTSUPPORT_H

#include "runtime/backends/AllBackends.h"
#include "runtime/backends/Registry.h"
#include "runtime/backends/cpu/CpuKernels.h"
#include "runtime/checkpoint/Safetensors.h"
#include "runtime/comm/Communicator.h"
#include "runtime/core/Half.h"
#include "runtime/data/DataLoader.h"
#include "runtime/exec/Session.h"
#include "runtime/rng/Philox.h"
#include "runtime/tooling/DsrunMain.h"
#include "runtime/tooling/Schedule.h"
#include "runtime/tooling/Trainer.h"
#include "runtime/tooling/Weights.h"
#include "test/unit/PlanSpec.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>

namespace dsc::commtest {

namespace fb = dsc::plan;
using rt::Communicator;
using test::floatBytes;
using test::PlanSpec;

/// Set by main before any test runs.
inline Communicator *gWorld = nullptr;

/// The job's communicator, shared by the tests (MPI allows one init).
inline Communicator &world() { return *gWorld; }

/// Element counts every collective is tried with: odd, and one large.
inline const size_t kCounts[] = {1, 7, 1000};

inline float value(int rank, size_t i) {
  return float(rank * 1000 + int(i % 1000));
}

inline std::vector<float> filled(int rank, size_t count) {
  std::vector<float> v(count);
  for (size_t i = 0; i < count; ++i)
    v[i] = value(rank, i);
  return v;
}

inline double seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since)
      .count();
}

/// Vocabulary, sequence length and rows per rank of bigramPlan.
constexpr int64_t kVocab = 8, kSeq = 4, kRows = 2;

/// A bigram model trained data-parallel on n ranks with `batch` rows each
/// (DsrunRanksTest.cpp); comm_faults.py trains it through
/// `CommTest --write-plan`.
PlanSpec bigramPlan(int n, int64_t batch);

} // namespace dsc::commtest

#endif // DSC_TEST_UNIT_COMM_COMMTESTSUPPORT_H
