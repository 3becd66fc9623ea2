//===- DsrunTestSupport.h - helpers of dsrun's unit tests --------*- C++
//-*-===//
//
// dsrun's pieces tested without a compiled model: the data loader,
// safetensors files, schedules, flags, metrics, and the training loop and
// weights I/O driven by a fake Session (one file each in this directory).
// Error messages are compared exactly: they are part of the tool's
// contract. Temporary files from tempPath are removed at exit.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_TEST_UNIT_DSRUN_DSRUNTESTSUPPORT_H
#define DSC_TEST_UNIT_DSRUN_DSRUNTESTSUPPORT_H

#include "runtime/backends/AllBackends.h"
#include "runtime/backends/Registry.h"
#include "runtime/checkpoint/Safetensors.h"
#include "runtime/comm/Communicator.h"
#include "runtime/data/DataLoader.h"
#include "runtime/plan/PlanChecksum.h"
#include "runtime/plan/PlanFormat.h"
#include "runtime/rng/Philox.h"
#include "runtime/tooling/DsrunMain.h"
#include "runtime/tooling/Flags.h"
#include "runtime/tooling/Launch.h"
#include "runtime/tooling/Metrics.h"
#include "runtime/tooling/Schedule.h"
#include "runtime/tooling/Trace.h"
#include "runtime/tooling/Trainer.h"
#include "runtime/tooling/Weights.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <list>
#include <optional>
#include <set>
#include <sstream>
#include <utility>

#include <unistd.h>

namespace dsc::rt::dsruntest {

using Json = nlohmann::json;

// dsrun's main registers the backends; these in-process runs do it here.
inline const bool kBackendsRegistered = [] {
  registerAvailableBackends();
  return true;
}();

// Every path tempPath handed out (and its .tmp twin) is removed at exit.
inline std::set<std::string> &tempPaths() {
  static std::set<std::string> paths;
  return paths;
}

struct RemoveTempFiles : ::testing::Environment {
  void TearDown() override {
    for (const std::string &p : tempPaths()) {
      std::remove(p.c_str());
      std::remove((p + ".tmp").c_str());
    }
  }
};
inline const auto *const kCleanup =
    ::testing::AddGlobalTestEnvironment(new RemoveTempFiles);

// A fresh path under the test temp directory, unique per test and process.
inline std::string tempPath(const std::string &name) {
  const auto *info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string path = ::testing::TempDir() + "dsrun_" +
                     std::to_string(::getpid()) + "_" +
                     info->test_suite_name() + "_" + info->name() + "_" + name;
  tempPaths().insert(path);
  return path;
}

inline std::string writeFile(const std::string &name,
                             const std::string &bytes) {
  std::string path = tempPath(name);
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

inline std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

inline bool exists(const std::string &path) {
  return ::access(path.c_str(), F_OK) == 0;
}

inline std::string uint16File(const std::vector<uint16_t> &tokens) {
  std::string bytes;
  for (uint16_t t : tokens) {
    bytes.push_back(char(t & 0xff));
    bytes.push_back(char(t >> 8));
  }
  return bytes;
}

inline std::string readBack(std::FILE *f) {
  std::fflush(f);
  std::string text;
  std::rewind(f);
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0)
    text.append(buf, n);
  return text;
}

inline std::vector<std::string> lines(const std::string &text) {
  std::vector<std::string> out;
  std::stringstream s(text);
  for (std::string line; std::getline(s, line);)
    out.push_back(line);
  return out;
}

// 200 bytes whose value is their position: a sample's first token is its
// start offset.
inline std::string countingBytes(size_t n) {
  std::string bytes;
  for (size_t i = 0; i < n; ++i)
    bytes.push_back(char(i));
  return bytes;
}

inline ScheduleParams warmup(const char *kind, double minLr, double maxLr,
                             int64_t steps, const char *type,
                             int64_t total = 0) {
  ScheduleParams p;
  p.kind = kind;
  p.warmupMinLr = minLr;
  p.warmupMaxLr = maxLr;
  p.warmupNumSteps = steps;
  p.warmupType = type;
  p.totalNumSteps = total;
  return p;
}

} // namespace dsc::rt::dsruntest

#endif // DSC_TEST_UNIT_DSRUN_DSRUNTESTSUPPORT_H
