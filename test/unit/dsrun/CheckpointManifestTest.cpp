//===- CheckpointManifestTest.cpp - manifests, step names, leftovers ------===//
//
// Issue 34 item 3 at the unit level: the manifest parser refuses every field
// out of range with the line the e2e tests pin (checkpoint-verify.test runs
// them through dsrun), and findLatestCheckpoint never counts a directory
// that is not a whole commit.

#include "runtime/tooling/CheckpointManifest.h"
#include "runtime/checkpoint/Checksum.h"
#include "runtime/tooling/Checkpoint.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

using namespace dsc::rt;

namespace {

namespace fs = std::filesystem;

CheckpointManifest sample() {
  CheckpointManifest m;
  m.state.step = 6;
  m.state.applied = 5;
  m.state.skipped = 1;
  m.state.scaler = LossScaler::State{128.0, 1, 6, 4};
  m.seed = 99;
  m.worldSize = 2;
  m.model = "gpt2";
  m.plan = "0123456789abcdef";
  m.files = {{"rank-00000-of-00002.safetensors", {100, 0xfeedULL}},
             {"rank-00001-of-00002.safetensors", {200, ~0ULL}}};
  return m;
}

/// The error `text` gets as the manifest of step-00000006, "" if accepted.
std::string errorOf(const std::string &text, uint64_t dirStep = 6) {
  CheckpointManifest m;
  std::string error;
  if (parseCheckpointManifest(text, "m.json", dirStep, m, error))
    return "";
  return error;
}

/// sample()'s text with `from` replaced by `to` (once).
std::string edited(const std::string &from, const std::string &to) {
  std::string text = manifestText(sample());
  size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return at == std::string::npos ? text : text.replace(at, from.size(), to);
}

TEST(CheckpointManifest, RoundTrip) {
  CheckpointManifest m;
  std::string error;
  ASSERT_TRUE(
      parseCheckpointManifest(manifestText(sample()), "m.json", 6, m, error))
      << error;
  EXPECT_EQ(m.state.step, 6u);
  EXPECT_EQ(m.state.applied, 5u);
  EXPECT_EQ(m.state.skipped, 1u);
  ASSERT_TRUE(m.state.scaler);
  EXPECT_EQ(m.state.scaler->scale, 128.0);
  EXPECT_EQ(m.state.scaler->lastOverflow, 4);
  EXPECT_EQ(m.seed, 99u);
  EXPECT_EQ(m.worldSize, 2);
  EXPECT_EQ(m.plan, "0123456789abcdef");
  ASSERT_EQ(m.files.size(), 2u);
  EXPECT_EQ(m.files[1].name, "rank-00001-of-00002.safetensors");
  EXPECT_EQ(m.files[1].sum.bytes, 200u);
  EXPECT_EQ(m.files[1].sum.xxh3, ~0ULL);
  EXPECT_EQ(m.files[0].sum.xxh3, 0xfeedULL);
}

TEST(CheckpointManifest, EachFieldRefusedWithItsPath) {
  EXPECT_EQ(errorOf(manifestText(sample()), 9),
            "m.json: $.step: 6, but the directory is step-00000009 (a "
            "manifest from another checkpoint?)");
  EXPECT_EQ(errorOf(edited("\"applied\": 5", "\"applied\": 7")),
            "m.json: $.applied: must be <= $.step (6), got 7");
  EXPECT_EQ(errorOf(edited("\"applied\": 5", "\"applied\": -1")),
            "m.json: $.applied: expected an integer >= 0, got -1");
  EXPECT_EQ(errorOf(edited("\"applied\": 5", "\"applied\": 5.0")),
            "m.json: $.applied: expected an integer >= 0, got 5.0");
  EXPECT_EQ(errorOf(edited("\"skipped\": 1", "\"skipped\": 2")),
            "m.json: $.skipped: $.applied (5) + $.skipped (2) must equal "
            "$.step (6)");
  EXPECT_EQ(errorOf(edited("\"world_size\": 2", "\"world_size\": 0")),
            "m.json: $.world_size: must be >= 1, got 0");
  EXPECT_EQ(errorOf(edited("\"world_size\": 2", "\"world_size\": 3")),
            "m.json: $.files: lists 2 files, but $.world_size is 3");
  EXPECT_EQ(errorOf(edited("\"seed\": 99", "\"seed\": \"99\"")),
            "m.json: $.seed: expected an integer >= 0, got \"99\"");
  EXPECT_EQ(
      errorOf(edited("\"plan\": \"0123456789abcdef\"", "\"plan\": \"0123\"")),
      "m.json: $.plan: expected 16 hex digits, got \"0123\"");
  EXPECT_EQ(errorOf(edited("rank-00001-of-00002", "rank-00000-of-00002")),
            "m.json: $.files[1].name: expected "
            "\"rank-00001-of-00002.safetensors\", got "
            "\"rank-00000-of-00002.safetensors\"");
  EXPECT_EQ(errorOf(edited("\"xxh3\": \"000000000000feed\"",
                           "\"xxh3\": \"000000000000feeg\"")),
            "m.json: $.files[0].xxh3: expected 16 hex digits, got "
            "\"000000000000feeg\"");
  EXPECT_EQ(errorOf(edited("\"scale\": 128.0", "\"scale\": 0.0")),
            "m.json: $.loss_scaler.scale: expected a finite number > 0, got "
            "0.0");
  EXPECT_EQ(errorOf(edited("\"last_overflow\": 4", "\"last_overflow\": -2")),
            "m.json: $.loss_scaler.last_overflow: must be >= -1, got -2");
  EXPECT_EQ(errorOf(edited("\"model\": \"gpt2\",", "")),
            "m.json: $.model: required key is missing");
  EXPECT_EQ(errorOf(edited("\"model\"", "\"modle\"")),
            "m.json: $.modle: unknown key");
  EXPECT_EQ(errorOf(edited("dsc-checkpoint-2", "dsc-checkpoint-1")),
            "m.json: $.format: \"dsc-checkpoint-1\" is an older dsrun's "
            "checkpoint, without checksums of its rank files; this dsrun "
            "reads \"dsc-checkpoint-2\"");
}

TEST(CheckpointManifest, SyntaxBeforeFields) {
  // nlohmann::json alone keeps the last duplicate: step 6 would pass.
  EXPECT_EQ(errorOf(edited("{", "{\"step\": 9, ")),
            "m.json: $: duplicate key \"step\" (which one is meant?)");
  EXPECT_EQ(errorOf(edited("\"bytes\": 100,", "\"bytes\": 100, \"bytes\": 1,")),
            "m.json: $.files[0]: duplicate key \"bytes\" (which one is "
            "meant?)");
  EXPECT_EQ(errorOf("{\"step\": 6,"), "m.json: $: not valid JSON (at byte 11)");
  EXPECT_EQ(errorOf("[6]"), "m.json: $: expected an object, got [6]");
  EXPECT_EQ(errorOf(std::string(100, '[') + std::string(100, ']')),
            "m.json: $[0][0][0][0][0][0][0][0]: nested more than 8 levels "
            "deep");
}

TEST(CheckpointManifest, StepNames) {
  uint64_t step = 0;
  EXPECT_TRUE(parseCheckpointStepName("step-00000012", step));
  EXPECT_EQ(step, 12u);
  EXPECT_TRUE(parseCheckpointStepName("step-123456789", step));
  EXPECT_EQ(step, 123456789u);
  EXPECT_EQ(checkpointStepName(123456789), "step-123456789");
  for (const char *name :
       {"step-12", "step-000000012", "step-00000012.old",
        "step-00000012.partial", "step-00000012.pruning", "step--0000012",
        "step-0000001x", "step-99999999999999999999", "Step-00000012",
        "step-00000012/"})
    EXPECT_FALSE(parseCheckpointStepName(name, step)) << name;
}

TEST(CheckpointChecksum, TextAndFile) {
  uint64_t hash = 0;
  EXPECT_TRUE(parseChecksumText("00000000DEADbeef", hash));
  EXPECT_EQ(hash, 0xdeadbeefULL);
  EXPECT_EQ(checksumText(0xdeadbeefULL), "00000000deadbeef");
  EXPECT_FALSE(parseChecksumText("deadbeef", hash));
  EXPECT_FALSE(parseChecksumText("+0000000deadbeef", hash));

  // A file hashed in pieces equals the stream hashed at once; one flipped
  // bit changes it.
  fs::path dir = fs::path(::testing::TempDir()) / "checksum-test";
  fs::create_directories(dir);
  std::string bytes(3 << 20, 'x');
  bytes[1234567] = 'y';
  std::ofstream(dir / "f") << bytes;
  FileChecksum file;
  std::string error;
  ASSERT_TRUE(checksumFile((dir / "f").string(), file, error)) << error;
  StreamChecksum stream;
  stream.update(bytes.data(), bytes.size());
  EXPECT_EQ(file.bytes, bytes.size());
  EXPECT_EQ(file.xxh3, stream.result().xxh3);
  bytes[7] ^= 1;
  StreamChecksum flipped;
  flipped.update(bytes.data(), bytes.size());
  EXPECT_NE(flipped.result().xxh3, file.xxh3);
  EXPECT_FALSE(checksumFile((dir / "missing").string(), file, error));
  EXPECT_EQ(error, (dir / "missing").string() +
                       ": cannot open: No such file or directory");
  fs::remove_all(dir);
}

/// A step directory holding `files` (empty ones) and, if `manifest`, a
/// manifest listing the rank files of `worldSize` ranks.
void makeStep(const fs::path &dir, uint64_t step, bool manifest, int worldSize,
              const std::vector<std::string> &files) {
  fs::create_directories(dir);
  for (const std::string &f : files)
    std::ofstream(dir / f) << "";
  if (!manifest)
    return;
  CheckpointManifest m;
  m.state.step = m.state.applied = step;
  m.worldSize = worldSize;
  m.plan = "0000000000000000";
  for (int r = 0; r < worldSize; ++r)
    m.files.push_back({checkpointRankFile(r, worldSize), {}});
  std::ofstream(dir / kCheckpointManifest) << manifestText(m);
}

TEST(CheckpointDir, OnlyWholeCommitsCount) {
  fs::path dir = fs::path(::testing::TempDir()) / "checkpoint-dir-test";
  fs::remove_all(dir);
  const std::string r0 = checkpointRankFile(0, 1);
  makeStep(dir / "step-00000003", 3, true, 1, {r0});
  // Newer, but none of them a whole commit.
  makeStep(dir / "step-00000006.old", 6, true, 1, {r0});
  makeStep(dir / "step-00000007.pruning", 7, true, 1, {r0});
  makeStep(dir / "step-00000008.partial", 8, true, 1, {r0});
  makeStep(dir / "step-00000009", 9, true, 2,
           {checkpointRankFile(0, 2)}); // rank 1's file lost
  makeStep(dir / "step-00000010", 10, false, 1, {});
  makeStep(dir / "step-11", 11, true, 1, {r0});
  std::string path, error;
  std::vector<std::string> notes;
  ASSERT_TRUE(findLatestCheckpoint(dir.string(), path, notes, error)) << error;
  EXPECT_EQ(path, (dir / "step-00000003").string());
  ASSERT_EQ(notes.size(), 6u);
  EXPECT_EQ(notes[3], "ignoring '" + (dir / "step-00000009").string() +
                          "': not committed (no "
                          "rank-00001-of-00002.safetensors)");
  EXPECT_EQ(notes[5], "ignoring '" + (dir / "step-11").string() +
                          "': not a step-NNNNNNNN name");

  // A manifest that does not validate still marks a commit: resuming says
  // what is wrong with it instead of going back to step 3.
  makeStep(dir / "step-00000012", 12, false, 1, {r0});
  std::ofstream(dir / "step-00000012" / kCheckpointManifest) << "{}";
  notes.clear();
  ASSERT_TRUE(findLatestCheckpoint(dir.string(), path, notes, error)) << error;
  EXPECT_EQ(path, (dir / "step-00000012").string());
  uint64_t seed = 5;
  EXPECT_FALSE(resumedSeed(dir.string(), false, seed, error));
  EXPECT_EQ(error, (dir / "step-00000012").string() +
                       "/manifest.json: $.format: required key is missing");
  fs::remove_all(dir);
}

} // namespace
