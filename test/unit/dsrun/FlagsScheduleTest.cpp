//===- FlagsScheduleTest.cpp - schedules, flags, launch and metrics ---===//

#include "runtime/tooling/Launch.h"
#include "test/unit/dsrun/DsrunTestSupport.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include <sys/stat.h>

using namespace dsc::rt;
using namespace dsc::rt::dsruntest;

namespace {

//===----------------------------------------------------------------------===//
// Schedules (DeepSpeed's lr_schedules.py at last_batch_iteration = step - 2:
// the first step runs at the constructor's iteration -1; the values are
// checked against the deepspeed package in test/e2e/lr-deepspeed.test)
//===----------------------------------------------------------------------===//

LrSchedule schedule(ScheduleParams p) {
  LrSchedule s;
  std::string error;
  EXPECT_TRUE(LrSchedule::create(p, s, error)) << error;
  return s;
}

TEST(Schedule, Constant) {
  ScheduleParams p;
  p.lr = 6e-4;
  LrSchedule s = schedule(p);
  EXPECT_EQ(s.lrAt(1), 6e-4);
  EXPECT_EQ(s.lrAt(100000), 6e-4);
}

TEST(Schedule, WarmupLRLog) {
  LrSchedule s = schedule(warmup("WarmupLR", 0, 1e-3, 10, "log"));
  EXPECT_DOUBLE_EQ(s.lrAt(1), 0.0); // iteration -1: min_lr
  EXPECT_DOUBLE_EQ(s.lrAt(2), 0.0); // iteration 0: ln 1 = 0
  EXPECT_NEAR(s.lrAt(3), 1e-3 * 0.30102999566398120, 1e-15); // ln 2 / ln 10
  EXPECT_NEAR(s.lrAt(6), 1e-3 * 0.69897000433601886, 1e-15); // ln 5 / ln 10
  EXPECT_DOUBLE_EQ(s.lrAt(11), 1e-3);
  EXPECT_DOUBLE_EQ(s.lrAt(12), 1e-3);
  EXPECT_DOUBLE_EQ(s.lrAt(5000), 1e-3);
  // An empty warmup_type is DeepSpeed's default, log.
  EXPECT_DOUBLE_EQ(schedule(warmup("WarmupLR", 0, 1e-3, 10, "")).lrAt(3),
                   s.lrAt(3));
}

TEST(Schedule, WarmupLRLinear) {
  LrSchedule s = schedule(warmup("WarmupLR", 1e-4, 5e-4, 4, "linear"));
  EXPECT_DOUBLE_EQ(s.lrAt(1), 1e-4);
  EXPECT_DOUBLE_EQ(s.lrAt(2), 1e-4);
  EXPECT_DOUBLE_EQ(s.lrAt(3), 2e-4);
  EXPECT_DOUBLE_EQ(s.lrAt(4), 3e-4);
  EXPECT_DOUBLE_EQ(s.lrAt(5), 4e-4);
  EXPECT_DOUBLE_EQ(s.lrAt(6), 5e-4);
  EXPECT_DOUBLE_EQ(s.lrAt(50), 5e-4);
  // DeepSpeed warms up over at least 2 steps.
  LrSchedule one = schedule(warmup("WarmupLR", 0, 1, 1, "linear"));
  EXPECT_DOUBLE_EQ(one.lrAt(1), 0.0);
  EXPECT_DOUBLE_EQ(one.lrAt(2), 0.0);
  EXPECT_DOUBLE_EQ(one.lrAt(3), 0.5);
  EXPECT_DOUBLE_EQ(one.lrAt(4), 1.0);
}

TEST(Schedule, WarmupDecayLR) {
  LrSchedule s = schedule(warmup("WarmupDecayLR", 0, 1e-3, 4, "linear", 10));
  EXPECT_DOUBLE_EQ(s.lrAt(1), 0.0);
  EXPECT_DOUBLE_EQ(s.lrAt(5), 7.5e-4);
  EXPECT_DOUBLE_EQ(s.lrAt(6), 1e-3); // (10 - 4) / 6
  EXPECT_DOUBLE_EQ(s.lrAt(9), 5e-4); // (10 - 7) / 6
  EXPECT_DOUBLE_EQ(s.lrAt(11), 1e-3 / 6);
  EXPECT_DOUBLE_EQ(s.lrAt(12), 0.0);
  EXPECT_DOUBLE_EQ(s.lrAt(30), 0.0);
  // Iteration -1 is the warm-up's start.
  EXPECT_DOUBLE_EQ(
      schedule(warmup("WarmupDecayLR", 2e-5, 1e-3, 4, "linear", 10)).lrAt(1),
      2e-5);
}

ScheduleParams cosine(double minRatio, int64_t steps, const char *type,
                      int64_t total, double cosMin) {
  ScheduleParams p;
  p.kind = "WarmupCosineLR";
  p.lr = 1e-3;
  p.warmupMinRatio = minRatio;
  p.warmupNumSteps = steps;
  p.warmupType = type;
  p.totalNumSteps = total;
  p.cosMinRatio = cosMin;
  return p;
}

TEST(Schedule, WarmupCosineLR) {
  LrSchedule s = schedule(cosine(0.1, 4, "linear", 12, 0.0));
  EXPECT_DOUBLE_EQ(s.lrAt(1), 0.0);                     // iteration -1: 0
  EXPECT_DOUBLE_EQ(s.lrAt(2), 1e-4);                    // ratio 0.1
  EXPECT_DOUBLE_EQ(s.lrAt(4), 5.5e-4);                  // 0.1 + 0.5 * 0.9
  EXPECT_NEAR(s.lrAt(6), 9.6193976625564337e-4, 1e-15); // (1 + cos(pi/8))/2
  EXPECT_NEAR(s.lrAt(9), 5e-4, 1e-15);                  // cos(pi/2) = 0
  EXPECT_NEAR(s.lrAt(13), 0.0, 1e-15);                  // total_num_steps
  EXPECT_NEAR(s.lrAt(20), 0.0, 1e-15);                  // held, not rising

  LrSchedule floor = schedule(cosine(0.0, 4, "linear", 12, 0.1));
  EXPECT_NEAR(floor.lrAt(9), 5.5e-4, 1e-15);
  EXPECT_NEAR(floor.lrAt(13), 1e-4, 1e-15);
  EXPECT_NEAR(floor.lrAt(14), 1e-4, 1e-15);

  LrSchedule log = schedule(cosine(0.0, 10, "log", 100, 0.0));
  EXPECT_NEAR(log.lrAt(3), 1e-3 * 0.30102999566398120, 1e-15);
}

// DeepSpeed's OneCycle with a second half of 0 steps only rises, then
// holds cycle_min_lr (no decay): the range of the cycle's scale is [0, 1].
TEST(Schedule, OneCycleWithoutASecondHalf) {
  ScheduleParams p;
  p.kind = "OneCycle";
  p.cycleMinLr = 1;
  p.cycleMaxLr = 5;
  p.cycleFirstStepSize = 4;
  LrSchedule s;
  std::string error;
  ASSERT_TRUE(LrSchedule::create(p, s, error)) << error;
  const double expected[] = {1, 2, 3, 4, 1, 1, 1};
  for (uint64_t step = 1; step <= 7; ++step)
    EXPECT_DOUBLE_EQ(s.lrAt(step), expected[step - 1]) << "step " << step;
}

// OneCycle's cycle_momentum, DeepSpeed's OneCycle: the first step takes
// cycle_min_mom (the constructor's), then beta1 runs against the lr: the
// cycle's maximum where the lr is lowest, its minimum at the lr's peak;
// after the cycle it grows by decay_mom_rate, and a run that would take it
// to 1 is refused before it starts.
TEST(Schedule, OneCycleMomentum) {
  ScheduleParams p;
  p.kind = "OneCycle";
  p.cycleMinLr = 1;
  p.cycleMaxLr = 5;
  p.cycleFirstStepSize = 4;
  p.cycleSecondStepSize = 4;
  p.cycleMomentum = true;
  p.cycleMinMom = 0.8;
  p.cycleMaxMom = 0.9;
  p.decayStepSize = 2;
  p.decayMomRate = 0.01;
  LrSchedule s;
  std::string error;
  ASSERT_TRUE(LrSchedule::create(p, s, error)) << error;
  EXPECT_TRUE(s.cyclesMomentum());
  // steps 1..12: iteration -1, then the cycle's 8 (up 4, down 4), then
  // the decay: 0.9 * (1 + 0.01 * (it - 8 + 1) / 2)
  const double lr[] = {1, 2, 3, 4, 5, 4, 3, 2, 1, 1, 1, 1};
  const double beta1[] = {0.8, 0.875,       0.85,       0.825,
                          0.8, 0.825,       0.85,       0.875,
                          0.9, 0.9 * 1.005, 0.9 * 1.01, 0.9 * 1.015};
  for (uint64_t step = 1; step <= 12; ++step) {
    EXPECT_NEAR(s.lrAt(step), lr[step - 1], 1e-12) << "step " << step;
    EXPECT_NEAR(s.beta1At(step), beta1[step - 1], 1e-12) << "step " << step;
  }
  EXPECT_TRUE(s.momentumValidUntil(30, error)) << error;
  // 0.9 * (1 + 0.01 * (it - 7) / 2) >= 1 from it = 30 (step 32) on
  EXPECT_TRUE(s.momentumValidUntil(31, error)) << error;
  EXPECT_FALSE(s.momentumValidUntil(40, error));
  EXPECT_EQ(error, "plan: schedule OneCycle: beta1 reaches 1.0395 by step 40 "
                   "(cycle_max_mom 0.9 x (1 + decay_mom_rate 0.01 x the "
                   "decay interval)), outside [0, 1); train fewer steps or "
                   "lower decay_mom_rate");
  EXPECT_EQ(s.describe(), "OneCycle 1 -> 5 over 4 steps, back over 4, then "
                          "flat; beta1 0.9 -> 0.8 and back");

  p.cycleMaxMom = 1.0;
  EXPECT_FALSE(LrSchedule::create(p, s, error));
  EXPECT_EQ(error, "plan: schedule OneCycle: cycle_min_mom and cycle_max_mom "
                   "must be in [0, 1) and decay_mom_rate finite");
  p.cycleMomentum = false; // off: the momenta are not read
  EXPECT_TRUE(LrSchedule::create(p, s, error)) << error;
  EXPECT_FALSE(s.cyclesMomentum());
  EXPECT_TRUE(s.momentumValidUntil(1000, error));
}

TEST(Schedule, Errors) {
  LrSchedule s;
  std::string error;
  ScheduleParams p;
  p.kind = "Cosine";
  EXPECT_FALSE(LrSchedule::create(p, s, error));
  EXPECT_EQ(error, "plan: unknown learning-rate schedule 'Cosine' (expected "
                   "constant, WarmupLR, WarmupDecayLR, WarmupCosineLR, "
                   "LRRangeTest or OneCycle)");
  // A hand-edited plan's divisors: a range test over 0 steps, a cycle
  // whose first half is empty, a negative rate.
  ScheduleParams range;
  range.kind = "LRRangeTest";
  EXPECT_FALSE(LrSchedule::create(range, s, error));
  EXPECT_EQ(error, "plan: schedule LRRangeTest: step sizes must be > 0 (a "
                   "second half >= 0) and stair counts >= 0");
  ScheduleParams cycle;
  cycle.kind = "OneCycle";
  EXPECT_FALSE(LrSchedule::create(cycle, s, error));
  EXPECT_EQ(error, "plan: schedule OneCycle: step sizes must be > 0 (a "
                   "second half >= 0) and stair counts >= 0");
  cycle.cycleFirstStepSize = 4;
  cycle.decayLrRate = -1;
  EXPECT_FALSE(LrSchedule::create(cycle, s, error));
  EXPECT_EQ(error, "plan: schedule OneCycle: decay_lr_rate must be a finite "
                   "number >= 0, got -1.000000");
  EXPECT_FALSE(
      LrSchedule::create(warmup("WarmupLR", 0, 1, 10, "exp"), s, error));
  EXPECT_EQ(error, "plan: schedule WarmupLR: unknown warmup_type 'exp' "
                   "(expected log or linear)");
  EXPECT_FALSE(LrSchedule::create(cosine(0, 4, "log", 4, 0), s, error));
  EXPECT_EQ(error, "plan: schedule WarmupCosineLR: total_num_steps (4) must "
                   "exceed warmup_num_steps (4, at least 2)");
}

//===----------------------------------------------------------------------===//
// Flags
//===----------------------------------------------------------------------===//

std::string flagError(std::vector<std::string> args) {
  DsrunOptions options;
  std::string error;
  EXPECT_FALSE(parseDsrunFlags(args, options, error));
  return error;
}

TEST(Flags, Defaults) {
  DsrunOptions o;
  std::string error;
  ASSERT_TRUE(parseDsrunFlags({"p.dsplan"}, o, error)) << error;
  EXPECT_EQ(o.plan, "p.dsplan");
  EXPECT_EQ(o.data, "");
  EXPECT_FALSE(o.wasGiven("--steps"));
  EXPECT_EQ(o.np, 1u);
  EXPECT_EQ(o.backend, "cpu");
  EXPECT_EQ(o.seed, 1337u);
  EXPECT_EQ(o.deviceMemory, 0u);
  EXPECT_FALSE(o.resume);
  EXPECT_TRUE(checkDsrunFlags(o, error)) << error;
}

TEST(Flags, EveryFlag) {
  DsrunOptions o;
  std::string error;
  ASSERT_TRUE(parseDsrunFlags({"--data",
                               "d.bin",
                               "--steps=5",
                               "p.dsplan",
                               "--np",
                               "1",
                               "--backend",
                               "cpu",
                               "--seed",
                               "0",
                               "--device-memory",
                               "8GiB",
                               "--init-from",
                               "w.safetensors",
                               "--metrics",
                               "m.jsonl",
                               "--trace",
                               "t.json",
                               "--export-weights",
                               "out.safetensors",
                               "--save-dir",
                               "ck",
                               "--save-every",
                               "10",
                               "--resume"},
                              o, error))
      << error;
  EXPECT_EQ(o.plan, "p.dsplan");
  EXPECT_EQ(o.data, "d.bin");
  EXPECT_EQ(o.steps, 5u);
  EXPECT_EQ(o.seed, 0u);
  EXPECT_EQ(o.deviceMemory, uint64_t(8) << 30);
  EXPECT_EQ(o.initFrom, "w.safetensors");
  EXPECT_EQ(o.metrics, "m.jsonl");
  EXPECT_EQ(o.trace, "t.json");
  EXPECT_EQ(o.exportWeights, "out.safetensors");
  EXPECT_EQ(o.saveDir, "ck");
  EXPECT_EQ(o.saveEvery, 10u);
  EXPECT_TRUE(o.resume);

  DsrunOptions bytes;
  ASSERT_TRUE(
      parseDsrunFlags({"p", "--device-memory", "1048576"}, bytes, error));
  EXPECT_EQ(bytes.deviceMemory, 1048576u);
  DsrunOptions suffixed;
  ASSERT_TRUE(parseDsrunFlags({"p", "--device-memory=64M"}, suffixed, error));
  EXPECT_EQ(suffixed.deviceMemory, uint64_t(64) << 20);
}

TEST(Flags, Errors) {
  EXPECT_EQ(flagError({"p", "--steps", "x"}),
            "--steps: expected a non-negative integer up to 4294967295, got "
            "'x'");
  EXPECT_EQ(flagError({"p", "--steps=-3"}),
            "--steps: expected a non-negative integer up to 4294967295, got "
            "'-3'");
  EXPECT_EQ(flagError({"p", "--steps", "12abc"}),
            "--steps: expected a non-negative integer up to 4294967295, got "
            "'12abc'");
  EXPECT_EQ(flagError({"p", "--steps", "4294967296"}),
            "--steps: expected a non-negative integer up to 4294967295, got "
            "'4294967296'");
  // 2^64 - 1 was the "not given" marker and read as "--steps is required".
  EXPECT_EQ(flagError({"p", "--steps", "18446744073709551615"}),
            "--steps: expected a non-negative integer up to 4294967295, got "
            "'18446744073709551615'");
  EXPECT_EQ(flagError({"p", "--steps", "18446744073709551616"}),
            "--steps: expected a non-negative integer up to 4294967295, got "
            "'18446744073709551616'");
  EXPECT_EQ(flagError({"p", "--steps", "+3"}),
            "--steps: expected a non-negative integer up to 4294967295, got "
            "'+3'");
  EXPECT_EQ(flagError({"p", "--np", "4097"}),
            "--np: expected an integer from 1 to 4096, got '4097'");
  EXPECT_EQ(flagError({"p", "--np", "0"}),
            "--np: expected an integer from 1 to 4096, got '0'");
  // An empty path was silently "not given".
  EXPECT_EQ(flagError({"p", "--data", ""}), "--data: expected PATH, got ''");
  EXPECT_EQ(flagError({"p", "--metrics="}),
            "--metrics: expected FILE.jsonl, got ''");
  EXPECT_EQ(flagError({"p", "--export-weights", ""}),
            "--export-weights: expected OUT.safetensors, got ''");
  EXPECT_EQ(flagError({"p", "--steps"}), "--steps: missing value (N)");
  EXPECT_EQ(flagError({"p", "--np", "two"}),
            "--np: expected an integer from 1 to 4096, got 'two'");
  EXPECT_EQ(flagError({"p", "--seed", "-1"}),
            "--seed: expected a non-negative integer, got '-1'");
  EXPECT_EQ(flagError({"p", "--seed", "99999999999999999999"}),
            "--seed: expected a non-negative integer, got "
            "'99999999999999999999'");
  EXPECT_EQ(
      flagError({"p", "--device-memory", "lots"}),
      "--device-memory: expected a positive byte count such as 1073741824 or "
      "8GiB, got 'lots'");
  EXPECT_EQ(
      flagError({"p", "--device-memory", "1.5GiB"}),
      "--device-memory: expected a positive byte count such as 1073741824 or "
      "8GiB, got '1.5GiB'");
  EXPECT_EQ(
      flagError({"p", "--device-memory", "17179869184TiB"}),
      "--device-memory: expected a positive byte count such as 1073741824 or "
      "8GiB, got '17179869184TiB'");
  // dsc refuses a budget of 0; here it meant "unlimited".
  EXPECT_EQ(flagError({"p", "--device-memory", "0"}),
            "--device-memory: expected a positive byte count such as "
            "1073741824 or 8GiB, got '0'");
  EXPECT_EQ(flagError({"p", "--stepz", "3"}),
            "unknown flag '--stepz' (did you mean --steps?)");
  EXPECT_EQ(flagError({"p", "--frobnicate"}), "unknown flag '--frobnicate'");
  EXPECT_EQ(flagError({"p", "-s"}), "unknown flag '-s'");
  EXPECT_EQ(flagError({"p", "--resume=yes"}),
            "--resume: takes no value, got 'yes'");
  EXPECT_EQ(flagError({"p", "q"}), "unexpected argument 'q' (the plan is 'p')");
  EXPECT_EQ(flagError({}), "missing the plan file (usage: dsrun PLAN.dsplan "
                           "[flags]; see dsrun --help)");
}

TEST(Flags, HelpListsEveryFlag) {
  DsrunOptions o;
  std::string error;
  ASSERT_TRUE(parseDsrunFlags({"--help"}, o, error)) << error;
  EXPECT_TRUE(o.help);
  std::string usage = dsrunUsage();
  for (const char *flag :
       {"--data PATH", "--steps N", "--np N", "--backend NAME[:K=V,...]",
        "--seed S", "--device-memory BYTES", "--init-from W.safetensors",
        "--metrics FILE.jsonl", "--trace FILE.json",
        "--export-weights OUT.safetensors", "--save-dir DIR", "--save-every K",
        "--resume"})
    EXPECT_NE(usage.find(flag), std::string::npos) << flag;
}

TEST(Flags, WithoutOneFlag) {
  using V = std::vector<std::string>;
  EXPECT_EQ(withoutDsrunFlag({"p", "--np", "2", "--steps", "3"}, "--np"),
            (V{"p", "--steps", "3"}));
  EXPECT_EQ(withoutDsrunFlag({"--np=4", "p", "--resume"}, "--np"),
            (V{"p", "--resume"}));
  // A value that looks like the flag belongs to the flag before it.
  EXPECT_EQ(withoutDsrunFlag({"--data", "--np", "p", "--np", "3"}, "--np"),
            (V{"--data", "--np", "p"}));
  EXPECT_EQ(withoutDsrunFlag({"p"}, "--np"), (V{"p"}));
}

TEST(Launch, MpirunCommandLine) {
  using V = std::vector<std::string>;
  EXPECT_EQ(mpirunCommand("/usr/bin/mpirun", "/x/dsrun", 3,
                          {"p.dsplan", "--steps", "5"}),
            (V{"/usr/bin/mpirun", "--allow-run-as-root", "--oversubscribe",
               "--bind-to", "none", "--stdin", "none", "-np", "3", "/x/dsrun",
               "p.dsplan", "--steps", "5"}));
  // A hostfile goes to mpirun, before the program.
  EXPECT_EQ(mpirunCommand("/usr/bin/mpirun", "/x/dsrun", 3, {"p.dsplan"},
                          "hosts.txt"),
            (V{"/usr/bin/mpirun", "--allow-run-as-root", "--oversubscribe",
               "--bind-to", "none", "--stdin", "none", "--hostfile",
               "hosts.txt", "-np", "3", "/x/dsrun", "p.dsplan"}));
  // Session files in a folder of the launch's own, on this host only.
  EXPECT_EQ(
      mpirunCommand("/usr/bin/mpirun", "/x/dsrun", 2, {"p.dsplan"}, "",
                    "/tmp/dsrun-mpi-abc"),
      (V{"/usr/bin/mpirun", "--allow-run-as-root", "--oversubscribe",
         "--bind-to", "none", "--stdin", "none", "--mca", "orte_tmpdir_base",
         "/tmp/dsrun-mpi-abc", "-np", "2", "/x/dsrun", "p.dsplan"}));
  EXPECT_NE(findOnPath("sh"), "");
  EXPECT_EQ(findOnPath("dsrun-no-such-program"), "");
}

TEST(Launch, SessionBaseIsNewAndRemovedWithWhatIsInIt) {
  std::string base = makeSessionBase();
  ASSERT_NE(base, "");
  struct stat st;
  ASSERT_EQ(::lstat(base.c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  std::string other = makeSessionBase();
  EXPECT_NE(other, base) << "each launch has its own";
  removeSessionBase(other);
  // What a killed mpirun leaves: ompi.HOST.UID/pid.N/... with files.
  std::string deep = base + "/ompi.h.0/pid.1";
  ASSERT_EQ(::mkdir((base + "/ompi.h.0").c_str(), 0700), 0);
  ASSERT_EQ(::mkdir(deep.c_str(), 0700), 0);
  std::FILE *f = std::fopen((deep + "/contact.txt").c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fclose(f);
  removeSessionBase(base);
  EXPECT_NE(::lstat(base.c_str(), &st), 0);
  removeSessionBase(""); // nothing to do
  // The user's own choice is kept: no folder of dsrun's.
  ::setenv("OMPI_MCA_orte_tmpdir_base", "/var/tmp", 1);
  EXPECT_EQ(makeSessionBase(), "");
  ::unsetenv("OMPI_MCA_orte_tmpdir_base");
}

TEST(Launch, LocalCapacity) {
  std::string error;
  // The tests' 3-4 ranks start on any machine.
  EXPECT_TRUE(checkLocalCapacity(4, 0, error)) << error;
  const uint64_t cores = std::max(1u, std::thread::hardware_concurrency());
  const uint64_t most = std::max<uint64_t>(4, 2 * cores);
  EXPECT_TRUE(checkLocalCapacity(most, 0, error)) << error;
  ASSERT_FALSE(checkLocalCapacity(most + 1, 0, error));
  EXPECT_EQ(error, "this machine has " + std::to_string(cores) +
                       (cores == 1 ? " core" : " cores") +
                       ", and dsrun starts at most " + std::to_string(most) +
                       " ranks on it (2 per core); pass --oversubscribe to "
                       "start more, or mpirun --hostfile to spread them");
  // Two plans of 2^60 bytes hold more than any machine's memory.
  ASSERT_FALSE(checkLocalCapacity(2, uint64_t(1) << 60, error));
  EXPECT_EQ(error.rfind("2 ranks of 1152921504606846976 bytes each (the "
                        "plan's arenas) need more than the ",
                        0),
            0u)
      << error;
  EXPECT_NE(error.find("pass --oversubscribe to start them anyway"),
            std::string::npos);
}

TEST(Launch, ThreadsPerRank) {
  // Saves and restores the variables so that other tests see no change.
  auto saved = [](const char *name) {
    const char *v = std::getenv(name);
    return v ? std::optional<std::string>(v) : std::nullopt;
  };
  auto restore = [](const char *name, const std::optional<std::string> &v) {
    if (v)
      setenv(name, v->c_str(), 1);
    else
      unsetenv(name);
  };
  auto blas = saved("OPENBLAS_NUM_THREADS"), cpu = saved("DSC_CPU_THREADS"),
       local = saved("OMPI_COMM_WORLD_LOCAL_SIZE");
  unsetenv("OPENBLAS_NUM_THREADS");
  setenv("DSC_CPU_THREADS", "3", 1); // the user's choice stays
  setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "1024", 1);
  limitThreadsPerRank();
  EXPECT_STREQ(std::getenv("OPENBLAS_NUM_THREADS"), "1");
  EXPECT_STREQ(std::getenv("DSC_CPU_THREADS"), "3");
  unsetenv("OPENBLAS_NUM_THREADS");
  setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "1", 1); // one rank here: no change
  limitThreadsPerRank();
  EXPECT_EQ(std::getenv("OPENBLAS_NUM_THREADS"), nullptr);
  restore("OPENBLAS_NUM_THREADS", blas);
  restore("DSC_CPU_THREADS", cpu);
  restore("OMPI_COMM_WORLD_LOCAL_SIZE", local);
}

TEST(Flags, CheckpointFlagsGoTogether) {
  auto refused = [](std::vector<std::string> args) {
    DsrunOptions o;
    std::string error;
    EXPECT_TRUE(parseDsrunFlags(args, o, error)) << error;
    EXPECT_FALSE(checkDsrunFlags(o, error));
    return error;
  };
  EXPECT_EQ(refused({"p", "--save-every", "5"}),
            "--save-every needs --save-dir (where to write checkpoints)");
  EXPECT_EQ(refused({"p", "--keep", "2"}),
            "--keep needs --save-dir (where the checkpoints are)");
  EXPECT_EQ(refused({"p", "--resume"}),
            "--resume needs --save-dir (where the checkpoints are)");
  EXPECT_EQ(refused({"p", "--save-dir", "d", "--resume", "--init-from",
                     "w.safetensors"}),
            "--resume and --init-from both set the weights; give one");
  EXPECT_EQ(refused({"p", "--steps", "0"}),
            "--steps 0 trains nothing: it goes with --resume (e.g. to "
            "--export-weights a checkpoint's weights)");
  // Sampling's settings without --sample were silently ignored.
  EXPECT_EQ(refused({"p", "--prompt", "Once"}),
            "--prompt is a setting of --sample N (generate N tokens); give "
            "--sample too");
  EXPECT_EQ(refused({"p", "--top-k", "5"}),
            "--top-k is a setting of --sample N (generate N tokens); give "
            "--sample too");
  DsrunOptions zero;
  std::string zeroError;
  ASSERT_TRUE(parseDsrunFlags(
      {"p", "--save-dir", "d", "--resume", "--steps", "0"}, zero, zeroError));
  EXPECT_TRUE(checkDsrunFlags(zero, zeroError)) << zeroError;
  EXPECT_EQ(zero.steps, 0u);
  DsrunOptions o;
  std::string error;
  ASSERT_TRUE(parseDsrunFlags(
      {"p", "--save-dir", "d", "--save-every", "3", "--keep", "2", "--resume"},
      o, error));
  EXPECT_TRUE(checkDsrunFlags(o, error)) << error;
  EXPECT_EQ(o.saveDir, "d");
  EXPECT_EQ(o.saveEvery, 3u);
  EXPECT_EQ(o.keep, 2u);
  EXPECT_TRUE(o.resume);
}

//===----------------------------------------------------------------------===//
// Metrics formatting
//===----------------------------------------------------------------------===//

TEST(Metrics, Formatting) {
  EXPECT_EQ(formatBytes(512), "512 B");
  EXPECT_EQ(formatBytes(1536), "1.5 KiB");
  EXPECT_EQ(formatBytes(uint64_t(12.3 * 1024 * 1024)), "12.3 MiB");
  EXPECT_EQ(formatBytes(uint64_t(3) << 30), "3.0 GiB");
  EXPECT_EQ(formatRate(950), "950");
  EXPECT_EQ(formatRate(1900), "1.9k");
  EXPECT_EQ(formatRate(2.34e6), "2.3M");

  StepRecord r;
  r.step = 120;
  r.loss = 2.41321;
  r.lr = 6e-4;
  r.tokensPerS = 1900;
  r.memory = {{"params", "device", 0, uint64_t(10.3 * 1024 * 1024)},
              {"activations", "device", 0, uint64_t(2 * 1024 * 1024)}};
  EXPECT_EQ(progressLine(r, 500),
            "step 120/500  loss 2.4132  lr 6.0e-04  1.9k tok/s  mem 12.3 MiB");
}

// A backend with device memory (CUDA) adds the driver's readings: the
// progress line's "gpu", three metrics and a summary line beside the
// plan's device arenas. Without one, none of them appears.
TEST(Metrics, DeviceMemoryReadings) {
  StepRecord r;
  r.step = 3;
  r.memory = {{"params", "device", uint64_t(5) << 30, 0},
              {"activations", "device", uint64_t(3) << 30, 0},
              {"optimizer_state", "host", uint64_t(7) << 30, 0}};
  EXPECT_EQ(metricsJson(r).find("device_"), std::string::npos);
  EXPECT_EQ(progressLine(r, 10).find("gpu"), std::string::npos);
  r.hasDevice = true;
  r.device.used = uint64_t(9) << 30;
  r.device.baseline = uint64_t(1) << 29;
  r.device.total = uint64_t(140) << 30;
  EXPECT_EQ(progressLine(r, 10), "step 3/10  loss 0.0000  lr 0.0e+00  0 "
                                 "tok/s  mem 0 B  gpu 9.0 GiB");
  const auto j = nlohmann::json::parse(metricsJson(r));
  EXPECT_EQ(j["device_peak_bytes"], uint64_t(9) << 30);
  EXPECT_EQ(j["device_baseline_bytes"], uint64_t(1) << 29);
  EXPECT_EQ(j["device_total_bytes"], uint64_t(140) << 30);
  RunSummary s;
  s.memory = r.memory;
  s.hasDevice = true;
  s.device = r.device;
  const std::string text = summaryText(s);
  EXPECT_NE(text.find("  device peak in use 9.0 GiB of 140.0 GiB = 512.0 MiB "
                      "before the arenas + 8.5 GiB (device arenas 8.0 GiB)\n"),
            std::string::npos)
      << text;
}

} // namespace
