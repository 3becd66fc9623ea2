//===- CheckpointIndexTest.cpp - rank files that disagree -----------------===//
//
// Every element of a checkpoint is in one rank file, and every file that
// records a variable's shape records the same one: a save whose ranks did
// not agree on who writes what is refused by name when opened, not read
// as "the rank files do not hold all of" it.
//
//===----------------------------------------------------------------------===//

#include "runtime/tooling/CheckpointIndex.h"
#include "runtime/checkpoint/Checksum.h"
#include "runtime/checkpoint/Safetensors.h"
#include "runtime/tooling/CheckpointManifest.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

using namespace dsc::rt;

namespace {

namespace fs = std::filesystem;

struct RankFile {
  std::vector<TensorToSave> tensors;
  std::string shapes; ///< the "shapes" metadata, JSON
};

/// step-00000001 in a fresh directory with `files` as its rank files,
/// sealed by a manifest with their sizes and checksums; its path.
std::string writeCheckpoint(const std::string &test,
                            const std::vector<RankFile> &files) {
  fs::path dir = fs::path(::testing::TempDir()) / test;
  fs::remove_all(dir);
  fs::path step = dir / "step-00000001";
  fs::create_directories(step);
  CheckpointManifest m;
  m.state.step = m.state.applied = 1;
  m.worldSize = int(files.size());
  m.model = "test";
  m.plan = "0000000000000000";
  for (size_t r = 0; r < files.size(); ++r) {
    const std::string name = checkpointRankFile(int(r), m.worldSize);
    FileChecksum sum;
    std::string error;
    EXPECT_TRUE(saveSafetensors((step / name).string(), files[r].tensors,
                                {{"format", kCheckpointFormat},
                                 {"shapes", files[r].shapes},
                                 {"step", "1"}},
                                error, &sum))
        << error;
    m.files.push_back({name, sum});
  }
  std::ofstream(step / kCheckpointManifest) << manifestText(m);
  return step.string();
}

TEST(CheckpointIndex, PiecesOfOneVariableReadBack) {
  const float a[3] = {1, 2, 3}, b[3] = {4, 5, 6};
  const std::string path = writeCheckpoint(
      "index-pieces", {{{{"w@0", {3}, a}}, R"({"w": [2, 3]})"},
                       {{{"w@3", {3}, b}}, R"({"w": [2, 3]})"}});
  CheckpointIndex index;
  std::string error;
  ASSERT_TRUE(index.open(path, error)) << error;
  float out[4];
  ASSERT_TRUE(index.read("w", 1, 5, out, error)) << error;
  EXPECT_EQ(std::vector<float>(out, out + 4), (std::vector<float>{2, 3, 4, 5}));
}

TEST(CheckpointIndex, OneVariableWrittenTwiceIsRefused) {
  const float w[4] = {1, 2, 3, 4};
  const std::string path = writeCheckpoint(
      "index-twice", {{{{"wte", {2, 2}, w}}, R"({"wte": [2, 2]})"},
                      {{{"wte", {2, 2}, w}}, R"({"wte": [2, 2]})"}});
  CheckpointIndex index;
  std::string error;
  EXPECT_FALSE(index.open(path, error));
  EXPECT_EQ(error, path + ": rank-00000-of-00002.safetensors and "
                          "rank-00001-of-00002.safetensors both hold elements "
                          "of 'wte' from 0");
  // Overlapping pieces, too.
  const std::string pieces =
      writeCheckpoint("index-overlap", {{{{"w@0", {3}, w}}, R"({"w": [5]})"},
                                        {{{"w@2", {3}, w}}, R"({"w": [5]})"}});
  CheckpointIndex other;
  EXPECT_FALSE(other.open(pieces, error));
  EXPECT_EQ(error, pieces +
                       ": rank-00000-of-00002.safetensors and "
                       "rank-00001-of-00002.safetensors both hold elements "
                       "of 'w' from 2");
}

TEST(CheckpointIndex, ShapesMustAgree) {
  const float w[4] = {1, 2, 3, 4};
  const std::string path = writeCheckpoint(
      "index-shapes", {{{{"w@0", {2}, w}}, R"({"w": [4]})"},
                       {{{"w@2", {2}, w + 2}}, R"({"w": [2, 2]})"}});
  CheckpointIndex index;
  std::string error;
  EXPECT_FALSE(index.open(path, error));
  EXPECT_EQ(error, path +
                       "/rank-00001-of-00002.safetensors: 'w' is [2, 2] here "
                       "and [4] in an earlier rank file");
}

} // namespace
