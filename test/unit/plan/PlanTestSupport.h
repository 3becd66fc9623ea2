//===- PlanTestSupport.h - plans built in the plan and Session tests -*- C++
//-*-===//
//
// Plans are built with the generated FlatBuffers builder (PlanSpec.h), so
// each test states exactly what the plan holds. Good plans run through a
// Session and their results are checked by hand (SessionTest.cpp,
// ShardedVariablesTest.cpp); bad plans must give one exact error line and
// never crash, whatever bytes are flipped (PlanVerifierTest.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef DSC_TEST_UNIT_PLAN_PLANTESTSUPPORT_H
#define DSC_TEST_UNIT_PLAN_PLANTESTSUPPORT_H

#include "runtime/backends/cpu/CpuKernels.h"
#include "runtime/comm/Communicator.h"
#include "runtime/exec/Session.h"
#include "runtime/plan/PlanFormat.h"
#include "runtime/reference/RefKernels.h"
#include "runtime/rng/Philox.h"
#include "test/unit/PlanSpec.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <fstream>
#include <mutex>
#include <thread>

namespace dsc::plantest {

namespace fb = dsc::plan;
using rt::LoadedPlan;
using rt::Session;
using rt::SessionOptions;
using test::floatBytes;
using test::PlanSpec;

// Buffer ids of basicPlan().
enum : uint32_t { kX, kY, kW, kWGrad, kH, kTwo, kRamp, kNumBasicBuffers };

/// micro_step: h = (x + y) * 2; w.grad += h. apply: w -= w.grad * ramp;
/// w.grad = 0. Every arena is exactly filled by its buffers.
inline PlanSpec basicPlan() {
  using S = fb::Space;
  using C = fb::Category;
  PlanSpec p;
  uint32_t in = p.arena(S::host, C::inputs, 32);
  uint32_t params = p.arena(S::device, C::params, 16);
  uint32_t grads = p.arena(S::device, C::grads, 16);
  uint32_t acts = p.arena(S::device, C::activations, 16);
  uint32_t consts = p.arena(S::host, C::constants, 20);
  p.buffer(in, 0, {2, 2}, "x");
  p.buffer(in, 16, {2, 2}, "y");
  p.buffer(params, 0, {2, 2}, "w");
  p.buffer(grads, 0, {2, 2}, "w.grad");
  p.buffer(acts, 0, {2, 2}, "h");
  p.buffer(consts, 0, {2, 2}, "two");
  p.buffer(consts, 16, {}, "ramp");
  p.variables.push_back({"w", fb::VarKind::param, "", kW, fb::InitKind::normal,
                         0.02, rng::streamForName("w")});
  p.variables.push_back(
      {"w.grad", fb::VarKind::grad, "w", kWGrad, fb::InitKind::zeros});
  p.constants.push_back({kTwo, floatBytes({2.0f})});
  p.constants.push_back({kRamp, floatBytes({0.5f})});
  p.programs.push_back({"micro_step",
                        {{"ds.add", {kX, kY}, {kH}},
                         {"ds.mul", {kH, kTwo}, {kH}},
                         {"ds.add", {kWGrad, kH}, {kWGrad}}},
                        {kX, kY},
                        {kH}});
  p.programs.back().instrs[0].loc = "test.py:1";
  p.programs.push_back({"apply",
                        {{"ds.mul", {kWGrad, kRamp}, {kH}},
                         {"ds.sub", {kW, kH}, {kW}},
                         {"ds.sub", {kWGrad, kWGrad}, {kWGrad}}},
                        {},
                        {kW}});
  return p;
}

// Test-only kernels on top of the CPU backend's table.
inline bool failKernel(const rt::KernelArgs &, std::string &error) {
  error = "test.fail: asked to fail";
  return false;
}
inline bool slowCopyKernel(const rt::KernelArgs &args, std::string &error) {
  // Slow enough that a missing event shows as a wrong answer.
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  const rt::TensorRef &x = args.inputs[0], &out = args.outputs[0];
  std::memcpy(out.data, x.data, size_t(x.numel()) * 4);
  return true;
}
inline const rt::KernelInfo kTestKernels[] = {
    {"test.fail", "f32->f32", 1, 1, 0, 0, failKernel},
    {"test.slow_copy", "f32->f32", 1, 1, 0, 0, slowCopyKernel},
};
// The CPU backend with the test kernels added to its table.
class TestBackend : public rt::CpuBackend {
public:
  rt::KernelVariants kernelVariants(std::string_view name) const override {
    for (const rt::KernelInfo &k : kTestKernels)
      if (k.name == name)
        return {&k, 1};
    return rt::CpuBackend::kernelVariants(name);
  }
};
inline TestBackend testBackend;

inline std::unique_ptr<LoadedPlan> load(const PlanSpec &spec,
                                        std::string &error) {
  return LoadedPlan::fromBytes(spec.build(), "t.dsplan", error, testBackend);
}

/// A plan loaded and a session over it, its variables initialized (the
/// plan outlives the session); both null, with a test failure, where
/// either step fails.
struct InitializedSession {
  std::unique_ptr<LoadedPlan> plan;
  std::unique_ptr<Session> session;
};
inline InitializedSession initializedSession(const PlanSpec &spec,
                                             const SessionOptions &options) {
  std::string error;
  InitializedSession s;
  s.plan = load(spec, error);
  if (s.plan)
    s.session = Session::create(*s.plan, options, error);
  if (!s.session) {
    ADD_FAILURE() << error;
    s.plan.reset();
    return s;
  }
  s.session->initVariables();
  return s;
}

/// The error line for a plan that must not load.
inline std::string loadError(const PlanSpec &spec) {
  std::string error;
  auto plan = load(spec, error);
  EXPECT_EQ(plan, nullptr);
  return error;
}

inline void setFloats(const rt::NamedTensor &t, std::vector<float> values) {
  ASSERT_EQ(int64_t(values.size()), t.ref.numel()) << t.name;
  std::memcpy(t.ref.data, values.data(), values.size() * 4);
}
inline std::vector<float> floats(const rt::TensorRef &t) {
  return std::vector<float>(t.f32(), t.f32() + t.numel());
}

/// Parameters a [3] and b [2, 2] (normal draws) in one group of `world`
/// shards of `s` elements: a at group offset 0, b at 3, the rest padding.
/// With 2 x 5, rank 0 holds a and b[0:2], rank 1 b[2:4] and 3 padding.
inline PlanSpec shardedPlan(uint32_t world, int64_t s) {
  PlanSpec p;
  p.worldSize = world;
  uint32_t params =
      p.arena(fb::Space::device, fb::Category::params, uint64_t(s) * 4);
  uint32_t shard = p.buffer(params, 0, {s}, "params.shard");
  p.variables.push_back({"a", fb::VarKind::param, "", shard,
                         fb::InitKind::normal, 0.5, 21, true, 0,
                         std::vector<int64_t>{3}});
  p.variables.push_back({"b", fb::VarKind::param, "", shard,
                         fb::InitKind::normal, 1.0, 22, true, 3,
                         std::vector<int64_t>{2, 2}});
  p.programs.push_back({"micro_step", {}});
  p.programs.push_back({"apply", {}});
  return p;
}

} // namespace dsc::plantest

#endif // DSC_TEST_UNIT_PLAN_PLANTESTSUPPORT_H
