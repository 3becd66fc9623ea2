//===- MeshTest.cpp - mesh coordinates and group communicators ------------===//
//
// The mesh's arithmetic alone, then its groups on the job's ranks: a data x
// tensor mesh (tensor 2 when the world size is even), each rank's tensor
// and data group summing and gathering the world ranks it holds, and a
// group's lines naming the group.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/Mesh.h"
#include "test/unit/comm/CommTestSupport.h"

using namespace dsc;
using namespace dsc::commtest;
using rt::Mesh;

namespace {

Mesh meshOf(std::vector<Mesh::Axis> axes) {
  std::string error;
  Mesh mesh = Mesh::make(std::move(axes), error);
  EXPECT_TRUE(mesh.valid()) << error;
  return mesh;
}

TEST(Mesh, CoordinatesAndGroups) {
  Mesh dt = meshOf({{"data", 2}, {"tensor", 4}});
  EXPECT_EQ(dt.size(), 8);
  EXPECT_EQ(dt.describe(), "data 2 x tensor 4");
  EXPECT_EQ(dt.axisIndex("tensor"), 1);
  EXPECT_EQ(dt.axisIndex("pipe"), -1);
  // Tensor innermost: ranks 4-7 are data replica 1's tensor group.
  EXPECT_EQ(dt.coordinates(5), (std::vector<int>{1, 1}));
  EXPECT_EQ(dt.groupOf(5, 1), 1);
  EXPECT_EQ(dt.placeIn(5, 1), 1);
  EXPECT_EQ(dt.groupOf(6, 0), 2); // data group of tensor shard 2
  EXPECT_EQ(dt.placeIn(6, 0), 1);
  Mesh three = meshOf({{"a", 2}, {"b", 3}, {"c", 2}});
  EXPECT_EQ(three.coordinates(7), (std::vector<int>{1, 0, 1}));
  EXPECT_EQ(three.groupOf(7, 1), 3); // (a, c) = (1, 1)
  EXPECT_EQ(three.placeIn(7, 1), 0);
}

TEST(Mesh, BadAxesAreOneLine) {
  std::string error;
  EXPECT_FALSE(Mesh::make({{"data", 2}, {"tensor", 0}}, error).valid());
  EXPECT_EQ(error,
            "mesh axis 1 ('tensor'): needs a name and a size >= 1, got 0");
  EXPECT_FALSE(Mesh::make({{"data", 2}, {"data", 2}}, error).valid());
  EXPECT_EQ(error, "mesh axis 'data' appears twice");
  EXPECT_FALSE(Mesh::make({}, error).valid());
  EXPECT_EQ(error, "a mesh needs at least one axis");
}

TEST(Mesh, GroupsSumAndGatherTheirRanks) {
  Communicator &world = commtest::world();
  const int n = world.size(), me = world.rank();
  const int tensor = n % 2 == 0 ? 2 : 1, data = n / tensor;
  Mesh mesh = meshOf({{"data", data}, {"tensor", tensor}});
  std::string error;
  std::unique_ptr<Communicator> tp = rt::splitAlong(world, mesh, 1, error);
  ASSERT_TRUE(tp) << error;
  std::unique_ptr<Communicator> dp = rt::splitAlong(world, mesh, 0, error);
  ASSERT_TRUE(dp) << error;
  const int d = me / tensor, t = me % tensor;
  EXPECT_EQ(tp->size(), tensor);
  EXPECT_EQ(tp->rank(), t);
  EXPECT_EQ(dp->size(), data);
  EXPECT_EQ(dp->rank(), d);
  EXPECT_EQ(tp->who(), "rank " + std::to_string(me) + " (tensor group " +
                           std::to_string(d) + ")");
  EXPECT_EQ(tp->timeout(), world.timeout());

  float mine = float(me), sum = -1;
  ASSERT_TRUE(tp->allReduceSum(&mine, &sum, 1, error)) << error;
  EXPECT_EQ(sum, float(tensor * d * tensor + tensor * (tensor - 1) / 2));
  ASSERT_TRUE(dp->allReduceSum(&mine, &sum, 1, error)) << error;
  EXPECT_EQ(sum, float(tensor * data * (data - 1) / 2 + data * t));
  std::vector<float> gathered(size_t(data), -1);
  ASSERT_TRUE(dp->allGather(&mine, gathered.data(), 1, error)) << error;
  for (int i = 0; i < data; ++i)
    EXPECT_EQ(gathered[size_t(i)], float(i * tensor + t));

  // A group counts its own collectives and names itself.
  float out[4];
  EXPECT_FALSE(tp->allReduceSum(nullptr, out, 4, error));
  EXPECT_EQ(error, tp->who() + ": all_reduce #2: null buffer for 4 elements");
  EXPECT_FALSE(world.split(-1, 0, "bad", error));
  EXPECT_EQ(error.substr(error.find(':')),
            ": split #" + std::to_string(world.sequence()) +
                ": color -1 is negative");
}

} // namespace
