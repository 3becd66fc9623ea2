//===- CommunicatorTest.cpp - the collectives on N ranks
//--------------------===//

#include "test/unit/comm/CommTestSupport.h"

using namespace dsc;
using namespace dsc::commtest;

namespace {

//===----------------------------------------------------------------------===//
// Communicator collectives
//===----------------------------------------------------------------------===//

TEST(Communicator, RankAndSize) {
  Communicator &c = world();
  EXPECT_GE(c.rank(), 0);
  EXPECT_LT(c.rank(), c.size());
  if (const char *size = std::getenv("OMPI_COMM_WORLD_SIZE")) {
    EXPECT_STREQ(c.kind(), "mpi");
    EXPECT_EQ(c.size(), std::atoi(size));
    EXPECT_EQ(c.rank(), std::atoi(std::getenv("OMPI_COMM_WORLD_RANK")));
  } else {
    EXPECT_STREQ(c.kind(), "local");
    EXPECT_EQ(c.size(), 1);
  }
  std::string error;
  EXPECT_TRUE(c.barrier(error)) << error;
}

TEST(Communicator, AllReduceSum) {
  Communicator &c = world();
  const int n = c.size();
  std::string error;
  for (size_t count : {size_t(0), size_t(1), size_t(7), size_t(1000)}) {
    std::vector<float> in = filled(c.rank(), count), out(count, -1);
    ASSERT_TRUE(c.allReduceSum(in.data(), out.data(), count, error)) << error;
    for (size_t i = 0; i < count; ++i) {
      float want = 0;
      for (int r = 0; r < n; ++r)
        want += value(r, i);
      ASSERT_EQ(out[i], want) << "count " << count << " element " << i;
    }
    // In place.
    ASSERT_TRUE(c.allReduceSum(in.data(), in.data(), count, error)) << error;
    EXPECT_EQ(in, out) << "count " << count;
  }
}

TEST(Communicator, AllReduceSumDouble) {
  Communicator &c = world();
  std::string error;
  for (size_t count : kCounts) {
    std::vector<double> in(count);
    for (size_t i = 0; i < count; ++i)
      in[i] = 0.25 * (c.rank() + 1) + double(i);
    ASSERT_TRUE(c.allReduceSum(in.data(), in.data(), count, error)) << error;
    const int n = c.size();
    for (size_t i = 0; i < count; ++i)
      ASSERT_EQ(in[i], 0.125 * n * (n + 1) + double(n) * double(i)) << i;
  }
}

// 16-bit floats and integers: small integers, exact in every format, so the
// sums do not depend on the order MPI adds in.
TEST(Communicator, EveryElementType) {
  Communicator &c = world();
  const int n = c.size(), rank = c.rank();
  std::string error;
  for (rt::DType t : {rt::DType::bf16, rt::DType::f16}) {
    const bool bf = t == rt::DType::bf16;
    auto encode = [&](float v) { return bf ? floatToBf16(v) : floatToF16(v); };
    auto decode = [&](uint16_t h) {
      return bf ? bf16ToFloat(h) : f16ToFloat(h);
    };
    for (size_t count : kCounts) {
      std::vector<uint16_t> in(count), out(count);
      for (size_t i = 0; i < count; ++i)
        in[i] = encode(float(rank + 1 + int(i % 8)));
      ASSERT_TRUE(
          c.allReduceSum(in.data(), out.data(), count, t, nullptr, error))
          << error;
      for (size_t i = 0; i < count; ++i)
        ASSERT_EQ(decode(out[i]), float(n * (n + 1) / 2 + n * int(i % 8)))
            << rt::dtypeName(t) << " element " << i;
      // reduce_scatter: block b of rank r holds r + b + 1.
      std::vector<uint16_t> blocks(count * size_t(n)), mine(count);
      for (size_t i = 0; i < blocks.size(); ++i)
        blocks[i] = encode(float(rank + int(i / count) + 1));
      ASSERT_TRUE(c.reduceScatterSum(blocks.data(), mine.data(), count, t,
                                     nullptr, error))
          << error;
      for (size_t i = 0; i < count; ++i)
        ASSERT_EQ(decode(mine[i]), float(n * (n - 1) / 2 + n * (rank + 1)))
            << rt::dtypeName(t) << " element " << i;
    }
  }
  // Integers: a sum, a gather and a broadcast move them unchanged.
  std::vector<int32_t> i32(3, rank + 1), sum(3);
  ASSERT_TRUE(
      c.allReduceSum(i32.data(), sum.data(), 3, rt::DType::i32, nullptr, error))
      << error;
  EXPECT_EQ(sum, std::vector<int32_t>(3, n * (n + 1) / 2));
  std::vector<int32_t> gathered(3 * size_t(n));
  ASSERT_TRUE(c.allGather(i32.data(), gathered.data(), 3, rt::DType::i32,
                          nullptr, error))
      << error;
  for (size_t i = 0; i < gathered.size(); ++i)
    ASSERT_EQ(gathered[i], int32_t(i / 3 + 1)) << i;
  std::vector<int64_t> big = {int64_t(rank) << 40, -int64_t(rank)};
  ASSERT_TRUE(c.broadcast(big.data(), 2, rt::DType::i64, n - 1, nullptr, error))
      << error;
  EXPECT_EQ(big, (std::vector<int64_t>{int64_t(n - 1) << 40, -(n - 1)}));
  // A dtype outside the enum is refused on every rank alike.
  EXPECT_FALSE(
      c.allReduceSum(i32.data(), sum.data(), 3, rt::DType(9), nullptr, error));
  EXPECT_EQ(error, "rank " + std::to_string(rank) + ": all_reduce #" +
                       std::to_string(c.sequence()) + ": unknown dtype 9");
  ASSERT_TRUE(c.barrier(error)) << error;
}

TEST(Communicator, ReduceScatterSum) {
  Communicator &c = world();
  const int n = c.size();
  std::string error;
  for (size_t count : kCounts) {
    // Block b of rank r's input: value(r, b * count + i).
    std::vector<float> in = filled(c.rank(), n * count), out(count, -1);
    ASSERT_TRUE(c.reduceScatterSum(in.data(), out.data(), count, error))
        << error;
    for (size_t i = 0; i < count; ++i) {
      float want = 0;
      for (int r = 0; r < n; ++r)
        want += value(r, c.rank() * count + i);
      ASSERT_EQ(out[i], want) << "count " << count << " element " << i;
    }
  }
}

TEST(Communicator, AllGather) {
  Communicator &c = world();
  const int n = c.size();
  std::string error;
  for (size_t count : kCounts) {
    std::vector<float> in = filled(c.rank(), count), out(n * count, -1);
    ASSERT_TRUE(c.allGather(in.data(), out.data(), count, error)) << error;
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < count; ++i)
        ASSERT_EQ(out[r * count + i], value(r, i))
            << "count " << count << " block " << r << " element " << i;
    // In place: this rank's block already sits in the output.
    std::vector<float> inPlace(n * count, -1);
    std::copy(in.begin(), in.end(), inPlace.begin() + c.rank() * count);
    const float *mine = inPlace.data() + c.rank() * count;
    ASSERT_TRUE(c.allGather(mine, inPlace.data(), count, error)) << error;
    EXPECT_EQ(inPlace, out) << "count " << count;
  }
}

// Block j of each rank's input lands as block `rank` on rank j: rank r's
// output block s holds what rank s sent it, value(s, r * count + i).
TEST(Communicator, AllToAll) {
  Communicator &c = world();
  const int n = c.size();
  std::string error;
  for (size_t count : kCounts) {
    std::vector<float> in = filled(c.rank(), n * count), out(n * count, -1);
    ASSERT_TRUE(c.allToAll(in.data(), out.data(), count, error)) << error;
    for (int s = 0; s < n; ++s)
      for (size_t i = 0; i < count; ++i)
        ASSERT_EQ(out[s * count + i], value(s, c.rank() * count + i))
            << "count " << count << " from rank " << s << " element " << i;
  }
}

TEST(Communicator, Broadcast) {
  Communicator &c = world();
  std::string error;
  for (size_t count : kCounts)
    for (int root = 0; root < c.size(); ++root) {
      std::vector<float> data = filled(c.rank(), count);
      ASSERT_TRUE(c.broadcast(data.data(), count, root, error)) << error;
      EXPECT_EQ(data, filled(root, count))
          << "count " << count << " root " << root;
    }
}

TEST(Communicator, LargeAllReduce) {
  Communicator &c = world();
  const size_t count = size_t(1) << 20;
  std::vector<float> data(count);
  for (size_t i = 0; i < count; ++i)
    data[i] = float((i + size_t(c.rank())) % 4096);
  std::string error;
  ASSERT_TRUE(c.allReduceSum(data.data(), data.data(), count, error)) << error;
  for (size_t i = 0; i < count; i += 4097) {
    float want = 0;
    for (int r = 0; r < c.size(); ++r)
      want += float((i + size_t(r)) % 4096);
    ASSERT_EQ(data[i], want) << i;
  }
}

TEST(Communicator, BadArgumentsFailOnEveryRankAlike) {
  Communicator &c = world();
  std::string error;
  std::vector<float> data(4, 1);
  uint64_t before = c.sequence();
  EXPECT_FALSE(c.broadcast(data.data(), 4, c.size(), error));
  std::string me = "rank " + std::to_string(c.rank()) + ": ";
  EXPECT_EQ(error, me + "broadcast #" + std::to_string(before + 1) + ": root " +
                       std::to_string(c.size()) + " is outside world size " +
                       std::to_string(c.size()));
  EXPECT_FALSE(
      c.allReduceSum(static_cast<const float *>(nullptr), nullptr, 3, error));
  EXPECT_EQ(error, me + "all_reduce #" + std::to_string(before + 2) +
                       ": null buffer for 3 elements");
  // Nothing was sent, and the communicator still works.
  EXPECT_TRUE(c.barrier(error)) << error;
  EXPECT_EQ(c.sequence(), before + 3);
}

TEST(Communicator, LocalCopies) {
  rt::LocalCommunicator local;
  std::string error;
  std::vector<float> in = {1, 2, 3}, out(3);
  ASSERT_TRUE(local.allReduceSum(in.data(), out.data(), 3, error));
  EXPECT_EQ(out, in);
  std::fill(out.begin(), out.end(), 0);
  ASSERT_TRUE(local.reduceScatterSum(in.data(), out.data(), 3, error));
  EXPECT_EQ(out, in);
  std::fill(out.begin(), out.end(), 0);
  ASSERT_TRUE(local.allGather(in.data(), out.data(), 3, error));
  EXPECT_EQ(out, in);
  std::fill(out.begin(), out.end(), 0);
  ASSERT_TRUE(local.allToAll(in.data(), out.data(), 3, error));
  EXPECT_EQ(out, in);
  ASSERT_TRUE(local.broadcast(in.data(), 3, 0, error));
  EXPECT_EQ(in, (std::vector<float>{1, 2, 3}));
  ASSERT_TRUE(local.barrier(error));
  EXPECT_EQ(local.sequence(), 6u);
  EXPECT_EQ(local.timeout(), 300);
  local.setTimeout(-1); // ignored
  EXPECT_EQ(local.timeout(), 300);
  local.setTimeout(2.5);
  EXPECT_EQ(local.timeout(), 2.5);
}

TEST(Communicator, TimeoutFromEnvironment) {
  std::string error;
  double s = 0;
  EXPECT_TRUE(rt::parseCommTimeout("30", s, error));
  EXPECT_EQ(s, 30);
  EXPECT_TRUE(rt::parseCommTimeout("0.5", s, error));
  EXPECT_EQ(s, 0.5);
  EXPECT_TRUE(rt::parseCommTimeout("2592000", s, error));
  // Past 30 days, and 9.3e9 s, which overflowed the wait's nanoseconds.
  for (const char *bad : {"", "soon", "0", "-3", "inf", "nan", "5s", "2592001",
                          "9.3e9", "1e400", " 5"}) {
    EXPECT_FALSE(rt::parseCommTimeout(bad, s, error)) << bad;
    EXPECT_EQ(error, std::string("DSC_COMM_TIMEOUT: expected a positive "
                                 "number of seconds up to 2592000 (30 "
                                 "days), got '") +
                         bad + "'");
  }
  // Every rank does the same, so the MPI communicator's creation (a
  // collective) lines up.
  setenv("DSC_COMM_TIMEOUT", "soon", 1);
  EXPECT_EQ(rt::createCommunicator(error), nullptr);
  EXPECT_EQ(error, "DSC_COMM_TIMEOUT: expected a positive number of seconds "
                   "up to 2592000 (30 days), got 'soon'");
  setenv("DSC_COMM_TIMEOUT", "7.5", 1);
  std::unique_ptr<Communicator> c = rt::createCommunicator(error);
  unsetenv("DSC_COMM_TIMEOUT");
  ASSERT_TRUE(c) << error;
  EXPECT_EQ(c->timeout(), 7.5);
  EXPECT_EQ(c->size(), world().size());
  float one = 1, sum = 0;
  ASSERT_TRUE(c->allReduceSum(&one, &sum, 1, error)) << error;
  EXPECT_EQ(sum, float(c->size()));
}

TEST(Communicator, SilentRankTimesOut) {
  if (world().size() < 2)
    GTEST_SKIP() << "needs two or more ranks";
  std::string error;
  std::unique_ptr<Communicator> c = rt::createCommunicator(error);
  ASSERT_TRUE(c) << error;
  c->setTimeout(2);
  const int n = c->size(), silent = n - 1;
  float x = 1, y = 0;
  ASSERT_TRUE(c->allReduceSum(&x, &y, 1, error)) << error; // #1
  EXPECT_EQ(y, float(n));
  std::string me = "rank " + std::to_string(c->rank()) + ": ";
  if (c->rank() != silent) {
    // The last rank skips all_reduce #2: the others give up after 2 s.
    auto start = std::chrono::steady_clock::now();
    EXPECT_FALSE(c->allReduceSum(&x, &y, 1, error));
    double took = seconds(start);
    EXPECT_EQ(error, me + "all_reduce #2 timed out after 2 s (a rank stopped "
                          "answering)");
    EXPECT_GE(took, 2.0);
    EXPECT_LT(took, 5.0);
    // Failed for good: nothing more is sent on it.
    start = std::chrono::steady_clock::now();
    EXPECT_FALSE(c->barrier(error));
    EXPECT_LT(seconds(start), 0.5);
    EXPECT_EQ(error, me + "barrier #3 not started: all_reduce #2 failed "
                          "earlier, so the ranks no longer agree on what "
                          "comes next");
  }
  // Once the others gave up, the silent rank catches up on all_reduce #2,
  // so that no request stays pending at MPI_Finalize.
  ASSERT_TRUE(world().barrier(error)) << error;
  if (c->rank() == silent) {
    ASSERT_TRUE(c->allReduceSum(&x, &y, 1, error)) << error;
    EXPECT_EQ(y, float(n));
  }
  ASSERT_TRUE(world().barrier(error)) << error;
}

} // namespace
