//===- DsrunUnitTest.cpp - dsrun's pieces without a plan ------------------===//
//
// The data loader, safetensors files, learning-rate schedules, flags,
// metrics, and the training loop and weights I/O driven by a fake Session,
// so every convention dsrun relies on is pinned without compiling a model.
// Error messages are compared exactly: they are part of the tool's contract.
//
//===----------------------------------------------------------------------===//

#include "runtime/backends/AllBackends.h"
#include "runtime/backends/Registry.h"
#include "runtime/checkpoint/Safetensors.h"
#include "runtime/comm/Communicator.h"
#include "runtime/data/DataLoader.h"
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

using namespace dsc::rt;
using Json = nlohmann::json;

// dsrun's main registers the backends; these in-process runs do it here.
static const bool kBackendsRegistered = [] {
  dsc::rt::registerAvailableBackends();
  return true;
}();

namespace {

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

// Every path tempPath handed out (and its .tmp twin) is removed at exit.
std::set<std::string> &tempPaths() {
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
const auto *const kCleanup =
    ::testing::AddGlobalTestEnvironment(new RemoveTempFiles);

// A fresh path under the test temp directory, unique per test and process.
std::string tempPath(const std::string &name) {
  const auto *info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string path = ::testing::TempDir() + "dsrun_" +
                     std::to_string(::getpid()) + "_" +
                     info->test_suite_name() + "_" + info->name() + "_" + name;
  tempPaths().insert(path);
  return path;
}

std::string writeFile(const std::string &name, const std::string &bytes) {
  std::string path = tempPath(name);
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

bool exists(const std::string &path) {
  return ::access(path.c_str(), F_OK) == 0;
}

std::string uint16File(const std::vector<uint16_t> &tokens) {
  std::string bytes;
  for (uint16_t t : tokens) {
    bytes.push_back(char(t & 0xff));
    bytes.push_back(char(t >> 8));
  }
  return bytes;
}

std::string readBack(std::FILE *f) {
  std::fflush(f);
  std::string text;
  std::rewind(f);
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0)
    text.append(buf, n);
  return text;
}

std::vector<std::string> lines(const std::string &text) {
  std::vector<std::string> out;
  std::stringstream s(text);
  for (std::string line; std::getline(s, line);)
    out.push_back(line);
  return out;
}

//===----------------------------------------------------------------------===//
// DataLoader
//===----------------------------------------------------------------------===//

// 200 bytes whose value is their position: a sample's first token is its
// start offset.
std::string countingBytes(size_t n) {
  std::string bytes;
  for (size_t i = 0; i < n; ++i)
    bytes.push_back(char(i));
  return bytes;
}

TEST(DataLoader, BytesFileSamplesAreSlicesOfTheFile) {
  std::string path = writeFile("data.txt", countingBytes(200));
  std::string error;
  auto data = DataLoader::open(path, 256, 3, 8, error);
  ASSERT_TRUE(data) << error;
  EXPECT_EQ(data->numTokens(), 200u);
  std::vector<int32_t> tokens(24), targets(24);
  BatchKey key{7, 3, 1, 0, 1};
  data->fill(key, tokens.data(), targets.data());
  for (uint32_t row = 0; row < 3; ++row) {
    uint64_t s = data->startOffset(key, row);
    for (uint32_t t = 0; t < 8; ++t) {
      EXPECT_EQ(tokens[row * 8 + t], int32_t(s + t));
      EXPECT_EQ(targets[row * 8 + t], int32_t(s + t + 1));
    }
  }
}

TEST(DataLoader, DeterministicInSeedStepMicroAndRank) {
  std::string path = writeFile("data.txt", countingBytes(4000));
  std::string error;
  auto a = DataLoader::open(path, 256, 4, 16, error);
  auto b = DataLoader::open(path, 256, 4, 16, error);
  ASSERT_TRUE(a && b) << error;
  auto batch = [](const DataLoader &d, BatchKey key) {
    std::vector<int32_t> tokens(64), targets(64);
    d.fill(key, tokens.data(), targets.data());
    return tokens;
  };
  BatchKey key{1337, 5, 1, 1, 2};
  EXPECT_EQ(batch(*a, key), batch(*b, key));
  std::set<std::vector<int32_t>> distinct = {batch(*a, key)};
  for (BatchKey other :
       {BatchKey{1338, 5, 1, 1, 2}, BatchKey{1337, 6, 1, 1, 2},
        BatchKey{1337, 5, 0, 1, 2}, BatchKey{1337, 5, 1, 0, 2}})
    distinct.insert(batch(*a, other));
  EXPECT_EQ(distinct.size(), 5u);
}

TEST(DataLoader, SampleDependsOnGlobalIndexOnly) {
  // Sample (micro * worldSize + rank) * batch + row: 2 ranks x batch 2 at
  // micro-step 1, one rank x batch 4, and one rank x batch 8 all see the
  // same row 7 of the step.
  std::string path = writeFile("data.txt", countingBytes(5000));
  std::string error;
  auto b2 = DataLoader::open(path, 256, 2, 16, error);
  auto b4 = DataLoader::open(path, 256, 4, 16, error);
  auto b8 = DataLoader::open(path, 256, 8, 16, error);
  ASSERT_TRUE(b2 && b4 && b8) << error;
  uint64_t s = b2->startOffset({9, 4, 1, 1, 2}, 1);
  EXPECT_EQ(b4->startOffset({9, 4, 1, 0, 1}, 3), s);
  EXPECT_EQ(b8->startOffset({9, 4, 0, 0, 1}, 7), s);
}

TEST(DataLoader, StartsCoverExactlyTheValidRange) {
  // 11 bytes, seq_len 8: starts 0, 1 and 2 are the only valid ones.
  std::string path = writeFile("data.txt", countingBytes(11));
  std::string error;
  auto data = DataLoader::open(path, 256, 1, 8, error);
  ASSERT_TRUE(data) << error;
  std::set<uint64_t> seen;
  for (uint32_t step = 1; step <= 300; ++step)
    seen.insert(data->startOffset({1, step, 0, 0, 1}, 0));
  EXPECT_EQ(seen, (std::set<uint64_t>{0, 1, 2}));
}

TEST(DataLoader, ExactlyOneSampleFits) {
  std::string path = writeFile("data.txt", countingBytes(9));
  std::string error;
  auto data = DataLoader::open(path, 256, 2, 8, error);
  ASSERT_TRUE(data) << error;
  for (uint32_t step = 1; step < 20; ++step)
    EXPECT_EQ(data->startOffset({3, step, 0, 0, 1}, 1), 0u);
}

TEST(DataLoader, NanoGptBinIsLittleEndianUint16) {
  std::vector<uint16_t> tokens;
  for (uint16_t i = 0; i < 100; ++i)
    tokens.push_back(uint16_t(0x1200 + i));
  std::string path = writeFile("train.bin", uint16File(tokens));
  std::string error;
  auto data = DataLoader::open(path, 50257, 2, 4, error);
  ASSERT_TRUE(data) << error;
  EXPECT_EQ(data->numTokens(), 100u);
  EXPECT_EQ(data->tokenAt(5), 0x1205u);
  std::vector<int32_t> tok(8), tgt(8);
  data->fill({1, 1, 0, 0, 1}, tok.data(), tgt.data());
  uint64_t s = data->startOffset({1, 1, 0, 0, 1}, 0);
  EXPECT_EQ(tok[0], int32_t(0x1200 + s));
  EXPECT_EQ(tgt[3], int32_t(0x1200 + s + 4));
}

TEST(DataLoader, Errors) {
  std::string error;
  std::string missing = tempPath("missing.bin");
  EXPECT_FALSE(DataLoader::open(missing, 256, 1, 8, error));
  EXPECT_EQ(error, missing + ": cannot open: No such file or directory");

  std::string empty = writeFile("empty.txt", "");
  EXPECT_FALSE(DataLoader::open(empty, 256, 1, 8, error));
  EXPECT_EQ(error, empty + ": empty file");

  std::string shortText = writeFile("short.txt", countingBytes(8));
  EXPECT_FALSE(DataLoader::open(shortText, 256, 1, 8, error));
  EXPECT_EQ(error,
            shortText + ": 8 bytes, but one sample needs seq_len + 1 = 9");

  std::string shortBin = writeFile("short.bin", uint16File({1, 2, 3}));
  EXPECT_FALSE(DataLoader::open(shortBin, 256, 1, 3, error));
  EXPECT_EQ(error,
            shortBin + ": 3 tokens, but one sample needs seq_len + 1 = 4");

  std::string odd = writeFile("odd.bin", "abc");
  EXPECT_FALSE(DataLoader::open(odd, 256, 1, 1, error));
  EXPECT_EQ(error, odd + ": 3 bytes; a nanoGPT .bin file holds uint16 tokens, "
                         "so its size must be even");

  std::string big = writeFile("big.bin", uint16File({1, 2, 3, 4, 5, 300, 6}));
  EXPECT_FALSE(DataLoader::open(big, 256, 1, 2, error));
  EXPECT_EQ(error, big + ": token 300 at position 5 is outside the plan's "
                         "vocabulary (vocab_size 256)");
  EXPECT_TRUE(DataLoader::open(big, 301, 1, 2, error)) << error;

  std::string text = writeFile("text.txt", countingBytes(100));
  EXPECT_FALSE(DataLoader::open(text, 100, 1, 8, error));
  EXPECT_EQ(error, text + ": read as bytes (256 symbols), but the plan's "
                          "vocab_size is 100; use a nanoGPT .bin token file "
                          "or a plan with vocab_size >= 256");
}

TEST(DataLoader, SyntheticIsAFibonacciSequence) {
  auto data = DataLoader::synthetic(50, 2, 16);
  std::vector<int32_t> tok(32), tgt(32), again(32), tgt2(32);
  data->fill({4, 2, 0, 0, 1}, tok.data(), tgt.data());
  DataLoader::synthetic(50, 2, 16)->fill({4, 2, 0, 0, 1}, again.data(),
                                         tgt2.data());
  EXPECT_EQ(tok, again);
  for (int i = 0; i < 32; ++i) {
    EXPECT_LT(tok[i], 50);
    if (i % 16 != 0) { // the next token follows from the previous two
      EXPECT_EQ(tgt[i], (tok[i] + tok[i - 1]) % 50);
    }
  }
}

//===----------------------------------------------------------------------===//
// Safetensors
//===----------------------------------------------------------------------===//

TEST(Safetensors, RoundTrip) {
  std::vector<float> a = {1, 2, 3, 4, 5, 6}, b = {-0.5f};
  std::string path = tempPath("w.safetensors");
  std::string error;
  ASSERT_TRUE(saveSafetensors(path,
                              {{"a", {2, 3}, a.data()}, {"b", {}, b.data()}},
                              {{"format", "pt"}}, error))
      << error;
  EXPECT_FALSE(exists(path + ".tmp"));
  std::string bytes = readFile(path);
  uint64_t headerBytes = 0;
  for (int i = 0; i < 8; ++i)
    headerBytes |= uint64_t(uint8_t(bytes[i])) << (8 * i);
  EXPECT_EQ((8 + headerBytes) % 8, 0u) << "data must start 8-byte aligned";
  EXPECT_EQ(bytes.size(), 8 + headerBytes + 7 * 4);

  auto file = SafetensorsFile::read(path, error);
  ASSERT_TRUE(file) << error;
  ASSERT_EQ(file->tensors().size(), 2u);
  const SafetensorsEntry *ea = file->find("a");
  ASSERT_TRUE(ea);
  EXPECT_EQ(ea->dtype, "F32");
  EXPECT_EQ(ea->shape, (std::vector<int64_t>{2, 3}));
  std::vector<float> back(6);
  ASSERT_TRUE(file->readF32(*ea, back.data(), error)) << error;
  EXPECT_EQ(back, a);
  const SafetensorsEntry *eb = file->find("b");
  ASSERT_TRUE(eb);
  EXPECT_TRUE(eb->shape.empty());
  float scalar = 0;
  ASSERT_TRUE(file->readF32(*eb, &scalar, error));
  EXPECT_EQ(scalar, -0.5f);
  EXPECT_EQ(file->metadata(),
            (std::map<std::string, std::string>{{"format", "pt"}}));
}

TEST(Safetensors, FailedSaveLeavesNothing) {
  std::string dir = tempPath("no-such-dir");
  std::string path = dir + "/w.safetensors";
  float x = 1;
  std::string error;
  EXPECT_FALSE(saveSafetensors(path, {{"x", {1}, &x}}, {}, error));
  EXPECT_EQ(error, path + ".tmp: cannot open for writing: No such file or "
                          "directory");
  EXPECT_FALSE(saveSafetensors(tempPath("w.safetensors"),
                               {{"x", {1}, &x}, {"x", {1}, &x}}, {}, error));
  EXPECT_EQ(error, tempPath("w.safetensors") +
                       ": cannot save a tensor named 'x' (empty, reserved or "
                       "repeated)");
  EXPECT_FALSE(exists(tempPath("w.safetensors")));
}

// A file with `header` as its JSON and `dataBytes` zero bytes of data.
std::vector<uint8_t> fileWith(const std::string &header, size_t dataBytes) {
  std::vector<uint8_t> bytes(8 + header.size() + dataBytes, 0);
  for (int i = 0; i < 8; ++i)
    bytes[i] = uint8_t(uint64_t(header.size()) >> (8 * i));
  std::copy(header.begin(), header.end(), bytes.begin() + 8);
  return bytes;
}

std::string parseError(std::vector<uint8_t> bytes) {
  std::string error;
  EXPECT_FALSE(SafetensorsFile::parse(std::move(bytes), "w.st", error));
  return error;
}

TEST(Safetensors, RejectsCorruptFiles) {
  EXPECT_EQ(parseError({1, 2, 3, 4, 5}),
            "w.st: 5 bytes, too short for a safetensors file (it starts with "
            "an 8-byte header length)");
  std::vector<uint8_t> longHeader = fileWith("{}", 10);
  longHeader[0] = 0xe8, longHeader[1] = 0x03; // 1000
  EXPECT_EQ(parseError(longHeader), "w.st: header length 1000 runs past the "
                                    "end of the file (20 bytes)");
  EXPECT_EQ(parseError(fileWith("{not json", 0)),
            "w.st: header is not valid JSON");
  EXPECT_EQ(parseError(fileWith("[1, 2]", 0)),
            "w.st: header is not a JSON object");
  EXPECT_EQ(parseError(fileWith(R"({"a": 3})", 0)),
            "w.st: tensor 'a': expected an object with dtype, shape and "
            "data_offsets");
  EXPECT_EQ(
      parseError(fileWith(
          R"({"a": {"dtype": "F7", "shape": [1], "data_offsets": [0, 4]}})",
          4)),
      "w.st: tensor 'a': unknown dtype 'F7'");
  EXPECT_EQ(
      parseError(fileWith(
          R"({"a": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})",
          4)),
      "w.st: tensor 'a': shape must be a list of non-negative integers");
  EXPECT_EQ(
      parseError(fileWith(
          R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [8, 4]}})",
          8)),
      "w.st: tensor 'a': data_offsets must be [begin, end] with begin <= end");
  EXPECT_EQ(
      parseError(fileWith(
          R"({"a": {"dtype": "F32", "shape": [8], "data_offsets": [0, 32]}})",
          16)),
      "w.st: tensor 'a': data_offsets [0, 32] run past the end of the data "
      "(16 bytes)");
  EXPECT_EQ(
      parseError(fileWith(
          R"({"a": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 12]}})",
          12)),
      "w.st: tensor 'a': F32 [2, 2] needs 16 bytes, but data_offsets [0, 12] "
      "hold 12");
  EXPECT_EQ(
      parseError(fileWith(
          R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                    "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
          12)),
      "w.st: tensors 'a' and 'b' overlap (data_offsets [0, 8] and [4, 12])");
  EXPECT_EQ(
      parseError(fileWith(
          R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})",
          12)),
      "w.st: data bytes [8, 12) belong to no tensor");
  EXPECT_EQ(parseError(fileWith(
                R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                    "b": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]}})",
                12)),
            "w.st: data bytes [4, 8) belong to no tensor");
  EXPECT_EQ(parseError(fileWith(R"({"__metadata__": {"k": 1}})", 0)),
            "w.st: __metadata__ is not an object of strings");
}

TEST(Safetensors, ReadsOnlyF32IntoFloats) {
  std::string error;
  auto file = SafetensorsFile::parse(
      fileWith(
          R"({"h": {"dtype": "BF16", "shape": [2], "data_offsets": [0, 4]}})",
          4),
      "w.st", error);
  ASSERT_TRUE(file) << error;
  float out[2];
  EXPECT_FALSE(file->readF32(file->tensors()[0], out, error));
  EXPECT_EQ(error, "w.st: tensor 'h' is BF16; only F32 can be loaded");
}

//===----------------------------------------------------------------------===//
// Schedules (DeepSpeed's lr_schedules.py at last_batch_iteration = step - 1)
//===----------------------------------------------------------------------===//

LrSchedule schedule(ScheduleParams p) {
  LrSchedule s;
  std::string error;
  EXPECT_TRUE(LrSchedule::create(p, s, error)) << error;
  return s;
}

ScheduleParams warmup(const char *kind, double minLr, double maxLr,
                      int64_t steps, const char *type, int64_t total = 0) {
  ScheduleParams p;
  p.kind = kind;
  p.warmupMinLr = minLr;
  p.warmupMaxLr = maxLr;
  p.warmupNumSteps = steps;
  p.warmupType = type;
  p.totalNumSteps = total;
  return p;
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
  EXPECT_DOUBLE_EQ(s.lrAt(1), 0.0);
  EXPECT_NEAR(s.lrAt(2), 1e-3 * 0.30102999566398120, 1e-15); // ln 2 / ln 10
  EXPECT_NEAR(s.lrAt(5), 1e-3 * 0.69897000433601886, 1e-15); // ln 5 / ln 10
  EXPECT_DOUBLE_EQ(s.lrAt(10), 1e-3);
  EXPECT_DOUBLE_EQ(s.lrAt(11), 1e-3);
  EXPECT_DOUBLE_EQ(s.lrAt(5000), 1e-3);
  // An empty warmup_type is DeepSpeed's default, log.
  EXPECT_DOUBLE_EQ(schedule(warmup("WarmupLR", 0, 1e-3, 10, "")).lrAt(2),
                   s.lrAt(2));
}

TEST(Schedule, WarmupLRLinear) {
  LrSchedule s = schedule(warmup("WarmupLR", 1e-4, 5e-4, 4, "linear"));
  EXPECT_DOUBLE_EQ(s.lrAt(1), 1e-4);
  EXPECT_DOUBLE_EQ(s.lrAt(2), 2e-4);
  EXPECT_DOUBLE_EQ(s.lrAt(3), 3e-4);
  EXPECT_DOUBLE_EQ(s.lrAt(4), 4e-4);
  EXPECT_DOUBLE_EQ(s.lrAt(5), 5e-4);
  EXPECT_DOUBLE_EQ(s.lrAt(50), 5e-4);
  // DeepSpeed warms up over at least 2 steps.
  LrSchedule one = schedule(warmup("WarmupLR", 0, 1, 1, "linear"));
  EXPECT_DOUBLE_EQ(one.lrAt(1), 0.0);
  EXPECT_DOUBLE_EQ(one.lrAt(2), 0.5);
  EXPECT_DOUBLE_EQ(one.lrAt(3), 1.0);
}

TEST(Schedule, WarmupDecayLR) {
  LrSchedule s = schedule(warmup("WarmupDecayLR", 0, 1e-3, 4, "linear", 10));
  EXPECT_DOUBLE_EQ(s.lrAt(1), 0.0);
  EXPECT_DOUBLE_EQ(s.lrAt(4), 7.5e-4);
  EXPECT_DOUBLE_EQ(s.lrAt(5), 1e-3); // (10 - 4) / 6
  EXPECT_DOUBLE_EQ(s.lrAt(8), 5e-4); // (10 - 7) / 6
  EXPECT_DOUBLE_EQ(s.lrAt(10), 1e-3 / 6);
  EXPECT_DOUBLE_EQ(s.lrAt(11), 0.0);
  EXPECT_DOUBLE_EQ(s.lrAt(30), 0.0);
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
  EXPECT_DOUBLE_EQ(s.lrAt(1), 1e-4);                    // ratio 0.1
  EXPECT_DOUBLE_EQ(s.lrAt(3), 5.5e-4);                  // 0.1 + 0.5 * 0.9
  EXPECT_NEAR(s.lrAt(5), 9.6193976625564337e-4, 1e-15); // (1 + cos(pi/8))/2
  EXPECT_NEAR(s.lrAt(8), 5e-4, 1e-15);                  // cos(pi/2) = 0
  EXPECT_NEAR(s.lrAt(12), 0.0, 1e-15);                  // total_num_steps
  EXPECT_NEAR(s.lrAt(20), 0.0, 1e-15);                  // held, not rising

  LrSchedule floor = schedule(cosine(0.0, 4, "linear", 12, 0.1));
  EXPECT_NEAR(floor.lrAt(8), 5.5e-4, 1e-15);
  EXPECT_NEAR(floor.lrAt(12), 1e-4, 1e-15);
  EXPECT_NEAR(floor.lrAt(13), 1e-4, 1e-15);

  LrSchedule log = schedule(cosine(0.0, 10, "log", 100, 0.0));
  EXPECT_NEAR(log.lrAt(2), 1e-3 * 0.30102999566398120, 1e-15);
}

TEST(Schedule, Errors) {
  LrSchedule s;
  std::string error;
  ScheduleParams p;
  p.kind = "Cosine";
  EXPECT_FALSE(LrSchedule::create(p, s, error));
  EXPECT_EQ(error, "plan: unknown learning-rate schedule 'Cosine' (expected "
                   "constant, WarmupLR, WarmupDecayLR or WarmupCosineLR)");
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
  EXPECT_EQ(o.steps, 0u);
  EXPECT_EQ(o.np, 1u);
  EXPECT_EQ(o.backend, "cpu");
  EXPECT_EQ(o.seed, 1337u);
  EXPECT_EQ(o.deviceMemory, 0u);
  EXPECT_FALSE(o.resume);
  EXPECT_TRUE(checkDsrunSupport(o, error)) << error;
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
            "--steps: expected a positive integer, got 'x'");
  EXPECT_EQ(flagError({"p", "--steps", "0"}),
            "--steps: expected a positive integer, got '0'");
  EXPECT_EQ(flagError({"p", "--steps=-3"}),
            "--steps: expected a positive integer, got '-3'");
  EXPECT_EQ(flagError({"p", "--steps", "12abc"}),
            "--steps: expected a positive integer, got '12abc'");
  EXPECT_EQ(flagError({"p", "--steps", "4294967296"}),
            "--steps: expected a positive integer below 2^32, got "
            "'4294967296'");
  EXPECT_EQ(flagError({"p", "--steps"}), "--steps: missing value (N)");
  EXPECT_EQ(flagError({"p", "--np", "two"}),
            "--np: expected a positive integer, got 'two'");
  EXPECT_EQ(flagError({"p", "--seed", "-1"}),
            "--seed: expected a non-negative integer, got '-1'");
  EXPECT_EQ(flagError({"p", "--seed", "99999999999999999999"}),
            "--seed: expected a non-negative integer, got "
            "'99999999999999999999'");
  EXPECT_EQ(flagError({"p", "--device-memory", "lots"}),
            "--device-memory: expected a byte count such as 1073741824 or "
            "8GiB, got 'lots'");
  EXPECT_EQ(flagError({"p", "--device-memory", "1.5GiB"}),
            "--device-memory: expected a byte count such as 1073741824 or "
            "8GiB, got '1.5GiB'");
  EXPECT_EQ(flagError({"p", "--device-memory", "17179869184TiB"}),
            "--device-memory: expected a byte count such as 1073741824 or "
            "8GiB, got '17179869184TiB'");
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
       {"--data PATH", "--steps N", "--np N", "--backend NAME", "--seed S",
        "--device-memory BYTES", "--init-from W.safetensors",
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
               "--bind-to", "none", "-np", "3", "/x/dsrun", "p.dsplan",
               "--steps", "5"}));
  EXPECT_NE(findOnPath("sh"), "");
  EXPECT_EQ(findOnPath("dsrun-no-such-program"), "");
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

TEST(Flags, NotImplementedYet) {
  auto unsupported = [](std::vector<std::string> args) {
    DsrunOptions o;
    std::string error;
    EXPECT_TRUE(parseDsrunFlags(args, o, error)) << error;
    EXPECT_FALSE(checkDsrunSupport(o, error));
    return error;
  };
  EXPECT_EQ(unsupported({"p", "--save-dir", "d"}),
            "--save-dir: training checkpoints are not implemented yet");
  EXPECT_EQ(unsupported({"p", "--save-every", "5"}),
            "--save-every: training checkpoints are not implemented yet");
  EXPECT_EQ(unsupported({"p", "--resume"}),
            "--resume: training checkpoints are not implemented yet");
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

//===----------------------------------------------------------------------===//
// A fake Session: two parameters, micro_step reporting a loss derived from
// its batch, apply doing SGD on one weight. It logs every run.
//===----------------------------------------------------------------------===//

struct RunLog {
  std::string program;
  uint32_t step;
  float lr = 0, stepInput = 0;
};

class FakeSession : public Session {
public:
  struct Options {
    uint32_t batch = 2, seqLen = 4;
    DType tokenType = DType::i32;
    uint64_t badLossAt = 0; ///< report `badLoss` at this step
    float badLoss = NAN;
    uint64_t failApplyAt = 0;
    bool lossScale = false;
    std::vector<int64_t> embeddingShape = {4, 2};
    bool sync = false; ///< has micro_step_sync, with buffers of its own
  };

  explicit FakeSession(Options o) : o_(o) {
    auto add = [&](std::vector<NamedTensor> &list, const std::string &name,
                   std::vector<int64_t> shape, DType dtype) {
      NamedTensor t;
      t.name = name;
      t.shape = std::move(shape);
      int64_t n = 1;
      for (int64_t d : t.shape)
        n *= d;
      storage_.emplace_back(size_t(n), 0.0f); // 4 bytes: f32 and i32 alike
      t.ref.data = storage_.back().data();
      t.ref.dtype = dtype;
      list.push_back(std::move(t));
    };
    int64_t b = o.batch, t = o.seqLen;
    add(variables_, "transformer.wte.weight", o.embeddingShape, DType::f32);
    add(variables_, "transformer.ln_f.weight", {2}, DType::f32);
    add(variables_, "transformer.ln_f.weight.grad", {2}, DType::f32);
    if (o.lossScale)
      add(variables_, "loss_scale", {}, DType::f32);
    add(microIn_, "tokens", {b, t}, o.tokenType);
    add(microIn_, "targets", {b, t}, DType::i32);
    add(microOut_, "loss", {}, DType::f32);
    add(syncIn_, "tokens", {b, t}, o.tokenType);
    add(syncIn_, "targets", {b, t}, DType::i32);
    add(syncOut_, "loss", {}, DType::f32);
    add(applyIn_, "lr", {}, DType::f32);
    add(applyIn_, "step", {1}, DType::f32);
    add(applyOut_, "grad_norm", {}, DType::f32);
    for (auto *list : {&variables_, &microIn_, &microOut_, &syncIn_, &syncOut_,
                       &applyIn_, &applyOut_})
      for (NamedTensor &v : *list) {
        v.ref.shape = v.shape.data();
        v.ref.rank = int(v.shape.size());
      }
    if (o.lossScale)
      *findVariable("loss_scale")->ref.f32() = 1024;
  }

  void initVariables() override {
    float x = 0.25f;
    for (NamedTensor &v : variables_)
      for (int64_t i = 0; i < v.ref.numel(); ++i)
        v.ref.f32()[i] = (x += 0.25f);
  }
  const std::vector<NamedTensor> &variables() const override {
    return variables_;
  }
  NamedTensor *findVariable(std::string_view name) override {
    for (NamedTensor &v : variables_)
      if (v.name == name)
        return &v;
    return nullptr;
  }
  std::vector<NamedTensor> programInputs(std::string_view p) override {
    return p == "micro_step"                   ? microIn_
           : p == "apply"                      ? applyIn_
           : p == "micro_step_sync" && o_.sync ? syncIn_
                                               : std::vector<NamedTensor>();
  }
  std::vector<NamedTensor> programOutputs(std::string_view p) override {
    return p == "micro_step"                   ? microOut_
           : p == "apply"                      ? applyOut_
           : p == "micro_step_sync" && o_.sync ? syncOut_
                                               : std::vector<NamedTensor>();
  }
  bool hasProgram(std::string_view p) const override {
    return p == "micro_step" || p == "apply" ||
           (p == "micro_step_sync" && o_.sync);
  }
  bool run(std::string_view program, uint32_t step,
           std::string &error) override {
    RunLog entry{std::string(program), step};
    if (program == "micro_step" || program == "micro_step_sync") {
      // The loss is the batch's first token plus the weight, so tests can
      // recompute it from the DataLoader.
      bool sync = program == "micro_step_sync";
      float loss =
          float((sync ? syncIn_ : microIn_)[0].ref.i32()[0]) + weight();
      if (step == o_.badLossAt)
        loss = o_.badLoss;
      *(sync ? syncOut_ : microOut_)[0].ref.f32() = loss;
    } else {
      entry.lr = *applyIn_[0].ref.f32();
      entry.stepInput = *applyIn_[1].ref.f32();
      if (step == o_.failApplyAt) {
        error = "apply: instr 3 (ds.adamw): boom";
        return false;
      }
      weight() -= entry.lr;
      *applyOut_[0].ref.f32() = 0.5f * float(step);
    }
    log.push_back(entry);
    if (tracing_)
      trace_.push_back({program == "micro_step" ? "micro_step" : "apply",
                        "ds.matmul", "model.py:3", "compute", 0,
                        int64_t(step) * 1000, int64_t(step) * 1000 + 500});
    return true;
  }
  std::vector<ArenaUsage> arenaUsage() const override {
    return {{"params", "device", 100, 80},
            {"activations", "device", 64, 50},
            {"optimizer_state", "host", 30, 30}};
  }
  void setTracing(bool on) override { tracing_ = on; }
  std::vector<TraceRecord> takeTrace() override {
    return std::exchange(trace_, {});
  }

  float &weight() {
    return findVariable("transformer.ln_f.weight")->ref.f32()[0];
  }

  std::vector<RunLog> log;

private:
  Options o_;
  std::list<std::vector<float>> storage_; // stable addresses
  std::vector<NamedTensor> variables_, microIn_, microOut_, syncIn_, syncOut_,
      applyIn_, applyOut_;
  bool tracing_ = false;
  std::vector<TraceRecord> trace_;
};

const std::vector<std::string> kParams = {"transformer.wte.weight",
                                          "transformer.ln_f.weight"};

struct TrainerFixture : ::testing::Test {
  void SetUp() override {
    data = DataLoader::open(writeFile("data.txt", countingBytes(300)), 256, 2,
                            4, error);
    ASSERT_TRUE(data) << error;
    setup.microBatch = 2;
    setup.seqLen = 4;
    setup.accumulationSteps = 2;
    setup.seed = 11;
    setup.steps = 3;
    setup.rssBaselineBytes = 12345;
    ScheduleParams p = warmup("WarmupLR", 0, 1e-2, 4, "linear");
    ASSERT_TRUE(LrSchedule::create(p, setup.schedule, error)) << error;
  }

  std::unique_ptr<DataLoader> data;
  TrainSetup setup;
  std::string error;
};

TEST_F(TrainerFixture, RunsMicroStepsThenApplyWithTheScheduledLr) {
  FakeSession session({});
  session.initVariables();
  float w0 = session.weight();
  std::FILE *metrics = std::tmpfile();
  setup.metrics = metrics;
  ASSERT_EQ(train(session, *data, setup, error), kExitOk) << error;

  ASSERT_EQ(session.log.size(), 9u);
  for (uint32_t s = 1; s <= 3; ++s) {
    const RunLog *step = &session.log[(s - 1) * 3];
    EXPECT_EQ(step[0].program, "micro_step");
    EXPECT_EQ(step[1].program, "micro_step");
    EXPECT_EQ(step[2].program, "apply");
    for (int k = 0; k < 3; ++k)
      EXPECT_EQ(step[k].step, s);
    EXPECT_EQ(step[2].lr, float(setup.schedule.lrAt(s)));
    EXPECT_EQ(step[2].stepInput, float(s));
  }

  std::vector<std::string> records = lines(readBack(metrics));
  std::fclose(metrics);
  ASSERT_EQ(records.size(), 3u);
  float w = w0;
  for (uint32_t s = 1; s <= 3; ++s) {
    Json j = Json::parse(records[s - 1]);
    // The step's loss is the mean of its micro-steps' losses, each computed
    // by the fake from the micro-batch the loader draws for (seed, s, m).
    double expected = 0;
    for (uint32_t m = 0; m < 2; ++m) {
      std::vector<int32_t> tok(8), tgt(8);
      data->fill({11, s, m, 0, 1}, tok.data(), tgt.data());
      expected += double(float(tok[0]) + w);
    }
    w -= float(setup.schedule.lrAt(s));
    EXPECT_EQ(j["step"], s);
    EXPECT_DOUBLE_EQ(j["loss"].get<double>(), expected / 2);
    EXPECT_DOUBLE_EQ(j["lr"].get<double>(), setup.schedule.lrAt(s));
    EXPECT_EQ(j["grad_norm"], 0.5 * s);
    EXPECT_EQ(j["loss_scale"], 1.0);
    EXPECT_EQ(j["tokens"], s * 16);
    EXPECT_GT(j["step_s"].get<double>(), 0);
    EXPECT_GT(j["tokens_per_s"].get<double>(), 0);
    EXPECT_EQ(j["plan_written_bytes"], Json::parse(R"({"activations": 50,
        "optimizer_state": 30, "params": 80})"));
    EXPECT_EQ(j["predicted_bytes"], Json::parse(R"({"activations": 64,
        "optimizer_state": 30, "params": 100})"));
    EXPECT_EQ(j["plan_written_bytes_per_space"],
              Json::parse(R"({"device": 130, "host": 30})"));
    EXPECT_EQ(j["predicted_bytes_per_space"],
              Json::parse(R"({"device": 164, "host": 30})"));
    // The operating system's reading, not the plan's: this test process is
    // resident, and the trainer passes the baseline it was given.
    EXPECT_EQ(j["rank"], 0);
    EXPECT_EQ(j["world_size"], 1);
    EXPECT_EQ(j["rss_baseline_bytes"], setup.rssBaselineBytes);
    EXPECT_GT(j["rss_peak_bytes"].get<uint64_t>(), 1u << 20);
  }
}

// A plan with micro_step_sync (ZeRO stages 0-1 with accumulation) runs it for
// each step's last micro-batch, filling its own inputs with that batch.
TEST_F(TrainerFixture, LastMicroBatchRunsMicroStepSync) {
  FakeSession::Options o;
  o.sync = true;
  FakeSession session(o);
  session.initVariables();
  float w0 = session.weight();
  std::FILE *metrics = std::tmpfile();
  setup.metrics = metrics;
  setup.accumulationSteps = 3;
  ASSERT_EQ(train(session, *data, setup, error), kExitOk) << error;

  ASSERT_EQ(session.log.size(), 12u);
  for (uint32_t s = 1; s <= 3; ++s) {
    const RunLog *step = &session.log[(s - 1) * 4];
    EXPECT_EQ(step[0].program, "micro_step");
    EXPECT_EQ(step[1].program, "micro_step");
    EXPECT_EQ(step[2].program, "micro_step_sync");
    EXPECT_EQ(step[3].program, "apply");
  }
  std::vector<std::string> records = lines(readBack(metrics));
  std::fclose(metrics);
  ASSERT_EQ(records.size(), 3u);
  float w = w0;
  for (uint32_t s = 1; s <= 3; ++s) {
    double expected = 0;
    for (uint32_t m = 0; m < 3; ++m) {
      std::vector<int32_t> tok(8), tgt(8);
      data->fill({11, s, m, 0, 1}, tok.data(), tgt.data());
      expected += double(float(tok[0]) + w);
    }
    w -= float(setup.schedule.lrAt(s));
    EXPECT_DOUBLE_EQ(Json::parse(records[s - 1])["loss"].get<double>(),
                     expected / 3);
  }
}

TEST_F(TrainerFixture, ReportsTheLossScaleVariable) {
  FakeSession::Options o;
  o.lossScale = true;
  FakeSession session(o);
  std::FILE *metrics = std::tmpfile();
  setup.metrics = metrics;
  setup.steps = 1;
  ASSERT_EQ(train(session, *data, setup, error), kExitOk) << error;
  EXPECT_EQ(Json::parse(readBack(metrics))["loss_scale"], 1024.0);
  std::fclose(metrics);
}

TEST_F(TrainerFixture, NonFiniteLossFailsTheRun) {
  for (float bad : {float(NAN), float(INFINITY), -float(INFINITY)}) {
    FakeSession::Options o;
    o.badLossAt = 2;
    o.badLoss = bad;
    FakeSession session(o);
    std::FILE *metrics = std::tmpfile();
    setup.metrics = metrics;
    EXPECT_EQ(train(session, *data, setup, error), kExitTrainingFailed);
    EXPECT_EQ(error, std::string("step 2: loss is ") + (std::isnan(bad) ? "nan"
                                                        : bad > 0       ? "inf"
                                                                  : "-inf"));
    EXPECT_EQ(lines(readBack(metrics)).size(), 1u);
    EXPECT_EQ(session.log.back().program, "micro_step"); // no apply after it
    std::fclose(metrics);
  }
}

/// Rank `rank` of two; the other rank's loss is always `otherLoss`, or the
/// all-reduce times out.
class TwoRankComm : public Communicator {
public:
  explicit TwoRankComm(int rank) : rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return 2; }
  const char *kind() const override { return "fake"; }
  bool allReduceSum(const float *, float *, size_t, std::string &) override {
    return false;
  }
  bool allReduceSum(const double *in, double *out, size_t count,
                    std::string &error) override {
    if (!begin("all_reduce", error, in, out, count))
      return false;
    if (sequence() == failAt) {
      error = prefix("all_reduce") + " timed out after 2 s (a rank stopped "
                                     "answering)";
      return false;
    }
    for (size_t i = 0; i < count; ++i)
      out[i] = in[i] + otherLoss;
    return true;
  }
  bool reduceScatterSum(const float *, float *, size_t,
                        std::string &) override {
    return false;
  }
  bool allGather(const float *, float *, size_t, std::string &) override {
    return false;
  }
  bool broadcast(float *, size_t, int, std::string &) override { return false; }
  bool barrier(std::string &) override { return false; }

  double otherLoss = 10;
  uint64_t failAt = 0;

private:
  int rank_;
};

TEST_F(TrainerFixture, LossIsTheMeanOverRanks) {
  FakeSession session({});
  session.initVariables();
  float w = session.weight();
  TwoRankComm comm(1);
  setup.rank = 1;
  setup.worldSize = 2;
  setup.comm = &comm;
  std::FILE *metrics = std::tmpfile();
  setup.metrics = metrics;
  ASSERT_EQ(train(session, *data, setup, error), kExitOk) << error;
  std::vector<std::string> records = lines(readBack(metrics));
  std::fclose(metrics);
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(comm.sequence(), 3u); // one all-reduce per step
  for (uint32_t s = 1; s <= 3; ++s) {
    Json j = Json::parse(records[s - 1]);
    double mine = 0;
    for (uint32_t m = 0; m < 2; ++m) {
      std::vector<int32_t> tok(8), tgt(8);
      data->fill({11, s, m, 1, 2}, tok.data(), tgt.data()); // rank 1 of 2
      mine += double(float(tok[0]) + w);
    }
    w -= float(setup.schedule.lrAt(s));
    EXPECT_DOUBLE_EQ(j["loss"].get<double>(), (mine / 2 + 10) / 2);
    EXPECT_EQ(j["tokens"], s * 32); // both ranks' tokens
  }

  // A lost rank fails the step, naming the collective.
  FakeSession again({});
  comm.failAt = 5;
  setup.metrics = nullptr;
  EXPECT_EQ(train(again, *data, setup, error), kExitTrainingFailed);
  EXPECT_EQ(error, "step 2: averaging the loss over the ranks: rank 1: "
                   "all_reduce #5 timed out after 2 s (a rank stopped "
                   "answering)");
  setup.comm = nullptr;
  EXPECT_EQ(train(again, *data, setup, error), kExitTrainingFailed);
  EXPECT_EQ(error, "step 1: no communicator for 2 ranks");
}

TEST_F(TrainerFixture, KernelFailureFailsTheRun) {
  FakeSession::Options o;
  o.failApplyAt = 2;
  FakeSession session(o);
  EXPECT_EQ(train(session, *data, setup, error), kExitTrainingFailed);
  EXPECT_EQ(error, "step 2: apply: instr 3 (ds.adamw): boom");
}

TEST_F(TrainerFixture, ProgramsMustFollowTheConventions) {
  FakeSession::Options o;
  o.tokenType = DType::f32;
  FakeSession session(o);
  EXPECT_EQ(train(session, *data, setup, error), kExitBadInput);
  EXPECT_EQ(error, "plan: micro_step input 0 ('tokens') is f32 [2, 4]; dsrun "
                   "passes i32 [2, 4]");
  EXPECT_TRUE(session.log.empty());

  FakeSession::Options wrongBatch;
  wrongBatch.batch = 3;
  FakeSession other(wrongBatch);
  EXPECT_EQ(train(other, *data, setup, error), kExitBadInput);
  EXPECT_EQ(error, "plan: micro_step input 0 ('tokens') is i32 [3, 4]; dsrun "
                   "passes i32 [2, 4]");
}

TEST_F(TrainerFixture, PlainProgressEveryTwentiethAndSummary) {
  FakeSession session({});
  std::FILE *out = std::tmpfile();
  setup.out = out;
  setup.steps = 45; // a line every 2 steps, and the last
  ASSERT_EQ(train(session, *data, setup, error), kExitOk) << error;
  std::vector<std::string> text = lines(readBack(out));
  std::fclose(out);
  std::vector<std::string> progress;
  for (const std::string &l : text)
    if (l.rfind("step ", 0) == 0)
      progress.push_back(l);
  ASSERT_EQ(progress.size(), 23u);
  EXPECT_EQ(progress.front().rfind("step 2/45  loss ", 0), 0u);
  EXPECT_EQ(progress.back().rfind("step 45/45  loss ", 0), 0u);
  EXPECT_NE(progress.back().find("  mem 160 B"), std::string::npos);
  std::string all;
  for (const std::string &l : text)
    all += l + "\n";
  EXPECT_NE(all.find("done: 45 steps in "), std::string::npos);
  EXPECT_NE(all.find("optimizer_state (host)"), std::string::npos);
  EXPECT_NE(all.find("total"), std::string::npos);
}

TEST_F(TrainerFixture, TraceHasOneEventPerInstruction) {
  FakeSession session({});
  std::string path = tempPath("trace.json");
  auto trace = TraceWriter::open(path, 0, error);
  ASSERT_TRUE(trace) << error;
  setup.trace = trace.get();
  ASSERT_EQ(train(session, *data, setup, error), kExitOk) << error;
  ASSERT_TRUE(trace->close(error)) << error;
  Json events = Json::parse(readFile(path));
  ASSERT_TRUE(events.is_array());
  int complete = 0, named = 0;
  for (const Json &e : events) {
    if (e["ph"] == "X") {
      ++complete;
      EXPECT_EQ(e["name"], "ds.matmul");
      EXPECT_EQ(e["tid"], 0);
      EXPECT_DOUBLE_EQ(e["dur"].get<double>(), 0.5);
      EXPECT_EQ(e["args"]["loc"], "model.py:3");
    } else if (e["name"] == "thread_name") {
      ++named;
    }
  }
  EXPECT_EQ(complete, 9); // 3 steps x (2 micro-steps + apply)
  EXPECT_EQ(named, 5);    // compute, comm, h2d, d2h, other
}

//===----------------------------------------------------------------------===//
// Weights in and out
//===----------------------------------------------------------------------===//

TEST(Weights, ExportWritesTiedLmHeadAndImportRoundTrips) {
  FakeSession trained({});
  trained.initVariables();
  WeightsLayout layout = WeightsLayout::forModel("gpt2", kParams);
  EXPECT_TRUE(layout.tiedLmHead);
  std::string path = tempPath("w.safetensors");
  std::string error;
  ASSERT_TRUE(
      exportWeights(trained, layout, path, {{"step", "3"}}, true, error))
      << error;

  auto file = SafetensorsFile::read(path, error);
  ASSERT_TRUE(file) << error;
  std::vector<std::string> names;
  for (const SafetensorsEntry &e : file->tensors())
    names.push_back(e.name);
  EXPECT_EQ(names, (std::vector<std::string>{"transformer.wte.weight",
                                             "lm_head.weight",
                                             "transformer.ln_f.weight"}));
  std::vector<float> wte(8), head(8);
  ASSERT_TRUE(
      file->readF32(*file->find("transformer.wte.weight"), wte.data(), error));
  ASSERT_TRUE(file->readF32(*file->find("lm_head.weight"), head.data(), error));
  EXPECT_EQ(wte, head);
  EXPECT_EQ(file->metadata().at("format"), "pt");
  EXPECT_EQ(file->metadata().at("step"), "3");

  FakeSession fresh({});
  ASSERT_TRUE(importWeights(fresh, layout, path, error)) << error;
  for (const std::string &name : kParams) {
    const NamedTensor *a = trained.findVariable(name);
    const NamedTensor *b = fresh.findVariable(name);
    EXPECT_EQ(std::vector<float>(a->ref.f32(), a->ref.f32() + a->ref.numel()),
              std::vector<float>(b->ref.f32(), b->ref.f32() + b->ref.numel()))
        << name;
  }
  // Untied models write no lm_head of their own making.
  EXPECT_FALSE(WeightsLayout::forModel("llama", kParams).tiedLmHead);
  std::vector<std::string> withHead = kParams;
  withHead.push_back("lm_head.weight");
  EXPECT_FALSE(WeightsLayout::forModel("gpt2", withHead).tiedLmHead);
}

TEST(Weights, ImportRejectsMismatchesAndLoadsNothing) {
  WeightsLayout gpt2 = WeightsLayout::forModel("gpt2", kParams);
  std::string error;
  std::vector<float> wte(8, 1.0f), other(8, 2.0f), ln(2, 3.0f), ln3(3, 3.0f);
  auto importError = [&](const std::vector<TensorToSave> &tensors,
                         const WeightsLayout &layout) {
    std::string path = tempPath("in.safetensors");
    EXPECT_TRUE(saveSafetensors(path, tensors, {}, error)) << error;
    FakeSession session({});
    session.initVariables();
    float before = session.weight();
    EXPECT_FALSE(importWeights(session, layout, path, error));
    EXPECT_EQ(session.weight(), before) << "nothing may be loaded";
    return error.substr(path.size() + 2);
  };
  EXPECT_EQ(importError({{"transformer.wte.weight", {4, 2}, wte.data()}}, gpt2),
            "missing parameter 'transformer.ln_f.weight' [2]");
  EXPECT_EQ(importError({{"transformer.wte.weight", {4, 2}, wte.data()},
                         {"transformer.ln_f.weight", {3}, ln3.data()}},
                        gpt2),
            "'transformer.ln_f.weight' has shape [3], the plan expects [2]");
  EXPECT_EQ(importError({{"transformer.wte.weight", {4, 2}, wte.data()},
                         {"transformer.ln_f.weight", {2}, ln.data()},
                         {"extra", {2}, ln.data()}},
                        gpt2),
            "unexpected tensor 'extra' (not a parameter of this plan)");
  EXPECT_EQ(importError({{"transformer.wte.weight", {8}, wte.data()},
                         {"extra", {2}, ln.data()}},
                        gpt2),
            "'transformer.wte.weight' has shape [8], the plan expects [4, 2] "
            "(and 2 more problems)");
  EXPECT_EQ(importError({{"transformer.wte.weight", {4, 2}, wte.data()},
                         {"lm_head.weight", {4, 2}, other.data()},
                         {"transformer.ln_f.weight", {2}, ln.data()}},
                        gpt2),
            "lm_head.weight differs from transformer.wte.weight, but this "
            "gpt2 plan ties them");
  EXPECT_EQ(
      importError({{"transformer.wte.weight", {4, 2}, wte.data()},
                   {"lm_head.weight", {4, 2}, wte.data()},
                   {"transformer.ln_f.weight", {2}, ln.data()}},
                  WeightsLayout::forModel("llama", kParams)),
      "unexpected tensor 'lm_head.weight' (not a parameter of this plan)");
  std::string missing = tempPath("missing.safetensors");
  FakeSession session({});
  EXPECT_FALSE(importWeights(session, gpt2, missing, error));
  EXPECT_EQ(error, missing + ": cannot open: No such file or directory");
}

//===----------------------------------------------------------------------===//
// dsrun end to end on a real Session: a bigram model (logits = table[token])
// trained by SGD, in a plan built here with the FlatBuffers builder.
//===----------------------------------------------------------------------===//

namespace fb = dsc::plan;

constexpr int kV = 8, kB = 2, kT = 4;

std::string writeBigramPlan(const std::string &name) {
  flatbuffers::FlatBufferBuilder b;
  enum { Params, Grads, Activations, Inputs, Constants };
  std::vector<flatbuffers::Offset<fb::Arena>> arenas = {
      fb::CreateArena(b, fb::Space::device, fb::Category::params, 256),
      fb::CreateArena(b, fb::Space::device, fb::Category::grads, 256),
      fb::CreateArena(b, fb::Space::device, fb::Category::activations, 1152),
      fb::CreateArena(b, fb::Space::device, fb::Category::inputs, 72),
      fb::CreateArena(b, fb::Space::device, fb::Category::constants, 4)};
  std::vector<flatbuffers::Offset<fb::Buffer>> buffers;
  auto buffer = [&](uint32_t arena, uint64_t offset, fb::DType dtype,
                    std::vector<int64_t> shape, const char *name) {
    buffers.push_back(
        fb::CreateBufferDirect(b, arena, offset, dtype, &shape, name));
    return uint32_t(buffers.size() - 1);
  };
  const fb::DType f32 = fb::DType::f32, i32 = fb::DType::i32;
  uint32_t table = buffer(Params, 0, f32, {kV, kV}, "table");
  uint32_t grad = buffer(Grads, 0, f32, {kV, kV}, "table.grad");
  uint32_t logits = buffer(Activations, 0, f32, {kB, kT, kV}, "logits");
  uint32_t dlogits = buffer(Activations, 256, f32, {kB, kT, kV}, "dlogits");
  uint32_t loss = buffer(Activations, 512, f32, {}, "loss");
  uint32_t square = buffer(Activations, 576, f32, {kV, kV}, "square");
  uint32_t sum = buffer(Activations, 832, f32, {}, "sum");
  uint32_t norm = buffer(Activations, 836, f32, {}, "grad_norm");
  uint32_t update = buffer(Activations, 896, f32, {kV, kV}, "update");
  uint32_t tokens = buffer(Inputs, 0, i32, {kB, kT}, "tokens");
  uint32_t targets = buffer(Inputs, 32, i32, {kB, kT}, "targets");
  uint32_t lr = buffer(Inputs, 64, f32, {}, "lr");
  uint32_t step = buffer(Inputs, 68, f32, {}, "step");
  uint32_t one = buffer(Constants, 0, f32, {}, "one");

  std::vector<flatbuffers::Offset<fb::Variable>> variables = {
      fb::CreateVariableDirect(b, "table", fb::VarKind::param, "", table,
                               fb::InitKind::normal, 0.1,
                               dsc::rng::streamForName("table"), false),
      fb::CreateVariableDirect(b, "table.grad", fb::VarKind::grad, "table",
                               grad, fb::InitKind::zeros, 0, 0, false)};
  float oneValue = 1.0f;
  std::vector<uint8_t> oneBytes(4);
  std::memcpy(oneBytes.data(), &oneValue, 4);
  std::vector<flatbuffers::Offset<fb::Constant>> constants = {
      fb::CreateConstantDirect(b, one, &oneBytes)};

  auto instr = [&](const char *kernel, std::vector<uint32_t> in,
                   std::vector<uint32_t> out, std::vector<int64_t> ints = {}) {
    std::vector<double> floats;
    return fb::CreateInstrDirect(b, kernel, &in, &out, &ints, &floats,
                                 fb::Stream::compute, nullptr, nullptr, "");
  };
  std::vector<flatbuffers::Offset<fb::Instr>> micro = {
      instr("ds.embedding", {table, tokens}, {logits}),
      instr("ds.cross_entropy", {logits, targets}, {loss}, {-1}),
      instr("ds.cross_entropy_grad", {logits, targets, one}, {dlogits}, {-1}),
      instr("ds.embedding_grad", {tokens, dlogits}, {grad})};
  std::vector<flatbuffers::Offset<fb::Instr>> apply = {
      instr("ds.mul", {grad, grad}, {square}),
      instr("ds.reduce_sum", {square}, {sum}, {0, 1}),
      instr("ds.sqrt", {sum}, {norm}), instr("ds.mul", {grad, lr}, {update}),
      instr("ds.sub", {table, update}, {table})};
  std::vector<uint32_t> microIn = {tokens, targets}, microOut = {loss};
  std::vector<uint32_t> applyIn = {lr, step}, applyOut = {norm};
  std::vector<flatbuffers::Offset<fb::Program>> programs = {
      fb::CreateProgramDirect(b, "micro_step", &micro, &microIn, &microOut),
      fb::CreateProgramDirect(b, "apply", &apply, &applyIn, &applyOut)};
  auto schedule =
      fb::CreateScheduleDirect(b, "WarmupLR", 0.5, 0.05, 0.5, 4, "linear");
  auto root = fb::CreatePlanDirect(b, fb::kSchemaVersion, 1, "bigram", "{}", kB,
                                   kT, kV, 2, schedule, &arenas, &buffers,
                                   &variables, &constants, &programs);
  fb::FinishPlanBuffer(b, root);
  return writeFile(
      name, std::string(reinterpret_cast<const char *>(b.GetBufferPointer()),
                        b.GetSize()));
}

int dsrun(std::vector<std::string> args) {
  args.insert(args.begin(), "dsrun");
  std::vector<char *> argv;
  for (std::string &a : args)
    argv.push_back(a.data());
  return runDsrunMain(int(argv.size()), argv.data());
}

std::vector<Json> readMetrics(const std::string &path) {
  std::vector<Json> records;
  for (const std::string &line : lines(readFile(path)))
    records.push_back(Json::parse(line));
  return records;
}

TEST(DsrunMain, TrainsExportsAndReloadsABigramModel) {
  std::string plan = writeBigramPlan("bigram.dsplan");
  std::string metrics = tempPath("m.jsonl"),
              weights = tempPath("w.safetensors");
  ASSERT_EQ(dsrun({plan, "--steps", "40", "--metrics", metrics,
                   "--export-weights", weights}),
            kExitOk);
  std::vector<Json> run = readMetrics(metrics);
  ASSERT_EQ(run.size(), 40u);
  EXPECT_NEAR(run[0]["lr"].get<double>(), 0.05, 1e-12); // WarmupLR, linear
  EXPECT_NEAR(run[1]["lr"].get<double>(), 0.1625, 1e-12);
  EXPECT_NEAR(run[39]["lr"].get<double>(), 0.5, 1e-12);
  EXPECT_LT(run[39]["loss"].get<double>(), run[0]["loss"].get<double>() - 0.3);
  EXPECT_EQ(run[0]["tokens"], kB * kT * 2);
  EXPECT_EQ(run[0]["plan_written_bytes"]["params"], 256);
  EXPECT_EQ(run[0]["predicted_bytes"]["activations"], 1152);

  std::string error;
  auto file = SafetensorsFile::read(weights, error);
  ASSERT_TRUE(file) << error;
  ASSERT_EQ(file->tensors().size(), 1u); // not gpt2: no lm_head alias
  EXPECT_EQ(file->tensors()[0].name, "table");
  EXPECT_EQ(file->metadata().at("step"), "40");

  // The trained weights give a lower loss on step 1's batch than the
  // initialization did.
  std::string again = tempPath("again.jsonl");
  ASSERT_EQ(
      dsrun({plan, "--steps", "1", "--init-from", weights, "--metrics", again}),
      kExitOk);
  EXPECT_LT(readMetrics(again)[0]["loss"].get<double>(),
            run[0]["loss"].get<double>() - 0.3);
}

TEST(DsrunMain, ExitStatuses) {
  std::string plan = writeBigramPlan("bigram.dsplan");
  EXPECT_EQ(dsrun({"--help"}), kExitOk);
  EXPECT_EQ(dsrun({plan, "--steps", "x"}), kExitBadInput);
  EXPECT_EQ(dsrun({plan, "--np", "2"}), kExitBadInput);
  EXPECT_EQ(dsrun({tempPath("missing.dsplan"), "--steps", "1"}), kExitBadInput);
  EXPECT_EQ(dsrun({plan}), kExitBadInput); // no total_num_steps: --steps
  std::string outOfVocab = writeFile("oov.bin", uint16File({1, 2, 3, 9, 4, 5}));
  EXPECT_EQ(dsrun({plan, "--steps", "1", "--data", outOfVocab}), kExitBadInput);
  EXPECT_EQ(dsrun({plan, "--steps", "1", "--init-from",
                   tempPath("missing.safetensors")}),
            kExitBadInput);
  std::string noDir = tempPath("no-such-dir") + "/out";
  EXPECT_EQ(dsrun({plan, "--steps", "1", "--metrics", noDir}), kExitBadInput);
  EXPECT_EQ(dsrun({plan, "--steps", "1", "--export-weights", noDir}),
            kExitBadInput);
  EXPECT_EQ(dsrun({plan, "--steps", "1", "--device-memory", "1K"}),
            kExitBadInput);
  // A backend this build does not have (Backends.Registry pins the line).
  EXPECT_EQ(dsrun({plan, "--steps", "1", "--backend", "tpu"}), kExitBadInput);
  EXPECT_EQ(dsrun({plan, "--steps", "1", "--backend", "cuda"}), kExitBadInput);
  std::string trace = tempPath("trace.json");
  EXPECT_EQ(dsrun({plan, "--steps", "2", "--trace", trace}), kExitOk);
  EXPECT_EQ(Json::parse(readFile(trace)).size(), 6u + 2 * (2 * 4 + 5));
}

// The registry knows the backends of this build by name; the core
// libraries know none (dsrun registers them, as this test does).
TEST(Backends, Registry) {
  std::string error;
  EXPECT_EQ(backendNames(), std::vector<std::string>{"cpu"});
  std::unique_ptr<Backend> cpu = createBackend("cpu", error);
  ASSERT_TRUE(cpu) << error;
  EXPECT_EQ(cpu->name(), "cpu");
  EXPECT_NE(cpu->findKernel("ds.matmul"), nullptr);
  EXPECT_EQ(cpu->findKernel("ds.nope"), nullptr);
  void *block = cpu->allocate(MemorySpace::device, 100, error);
  ASSERT_NE(block, nullptr) << error;
  EXPECT_EQ(reinterpret_cast<uintptr_t>(block) % 64, 0u);
  const uint8_t bytes[3] = {1, 2, 3};
  uint8_t back[3] = {};
  cpu->copyToArena(block, bytes, 3);
  cpu->copyFromArena(back, block, 3);
  EXPECT_EQ(std::vector<uint8_t>(back, back + 3),
            std::vector<uint8_t>(bytes, bytes + 3));
  cpu->release(block);
  EXPECT_EQ(createBackend("tpu", error), nullptr);
  EXPECT_EQ(error, "unknown backend 'tpu' (this build has: cpu)");
}

} // namespace
