//===- PipelineMessagesTest.cpp - send, recv and their kernels ------------===//
//
// A pipeline's stages exchange activations with Communicator::send/recv
// (comm.send, comm.recv): buffered sends that never wait for the peer,
// receives matched by (peer, tag) in any order, a receive that times out
// naming the peer, and the kernels' checks.
//
//===----------------------------------------------------------------------===//

#include "test/unit/comm/CommTestSupport.h"

#include <array>

using namespace dsc;
using namespace dsc::commtest;

namespace {

// Every rank sends two messages to the next one before receiving any, and
// overwrites its buffer at once; the receiver takes them in the other
// order. Only buffered sends and matching by tag make this complete.
TEST(PipelineMessages, SendsAreBufferedAndMatchedByTag) {
  Communicator &c = world();
  if (c.size() < 2)
    GTEST_SKIP() << "needs two or more ranks";
  const int n = c.size(), next = (c.rank() + 1) % n,
            prev = (c.rank() + n - 1) % n;
  std::string error;
  for (size_t count : kCounts) {
    std::vector<float> first = filled(c.rank(), count),
                       second = filled(c.rank() + n, count);
    ASSERT_TRUE(c.send(first.data(), count, DType::f32, next, 7, error))
        << error;
    ASSERT_TRUE(c.send(second.data(), count, DType::f32, next, 3, error))
        << error;
    std::fill(first.begin(), first.end(), -1.0f);
    std::fill(second.begin(), second.end(), -1.0f);
    std::vector<float> got3(count), got7(count);
    ASSERT_TRUE(c.recv(got3.data(), count, DType::f32, prev, 3, error))
        << error;
    ASSERT_TRUE(c.recv(got7.data(), count, DType::f32, prev, 7, error))
        << error;
    EXPECT_EQ(got7, filled(prev, count)) << count;
    EXPECT_EQ(got3, filled(prev + n, count)) << count;
  }
  ASSERT_TRUE(c.barrier(error)) << error;
}

// A receive whose message never comes fails after the timeout with one
// line naming the peer; the peer then sends it, so nothing stays pending
// when MPI finishes.
TEST(PipelineMessages, ReceiveTimesOutNamingThePeer) {
  if (world().size() < 2)
    GTEST_SKIP() << "needs two or more ranks";
  std::string error;
  std::unique_ptr<Communicator> c = rt::createCommunicator(error);
  ASSERT_TRUE(c) << error;
  c->setTimeout(1);
  float x = 0;
  if (c->rank() == 1) {
    auto start = std::chrono::steady_clock::now();
    EXPECT_FALSE(c->recv(&x, 1, DType::f32, 0, 5, error));
    EXPECT_GE(seconds(start), 1.0);
    EXPECT_EQ(error, "rank 1: recv from rank 0 #1 timed out after 1 s (a "
                     "rank stopped answering)");
  }
  ASSERT_TRUE(world().barrier(error)) << error;
  if (c->rank() == 0) {
    x = 4;
    ASSERT_TRUE(c->send(&x, 1, DType::f32, 1, 5, error)) << error;
  }
  ASSERT_TRUE(world().barrier(error)) << error;
}

// comm.send and comm.recv on the stages of the world: stage s sends its
// values to s + 1, tagged by transfer and micro-batch.
TEST(PipelineMessages, KernelsMoveTheValues) {
  Communicator &c = world();
  if (c.size() < 2)
    GTEST_SKIP() << "needs two or more ranks";
  const int n = c.size(), rank = c.rank();
  rt::KernelContext ctx;
  ctx.comm = &c;
  ctx.rank = rank;
  ctx.worldSize = n;
  std::string error;
  int64_t three[] = {3};
  auto call = [&](const char *name, std::vector<float> &data,
                  std::vector<int64_t> ints) {
    rt::TensorRef t{data.data(), rt::DType::f32, three, 1};
    const bool send = std::string(name) == "comm.send";
    std::vector<rt::TensorRef> one{t}, none;
    std::vector<double> floats;
    rt::KernelArgs a = send ? rt::makeKernelArgs(one, none, ints, floats, &ctx)
                            : rt::makeKernelArgs(none, one, ints, floats, &ctx);
    return rt::findCpuKernel(name)->fn(a, error);
  };
  std::vector<float> mine = {float(rank), 1, 2}, got(3, -1);
  if (rank + 1 < n)
    ASSERT_TRUE(call("comm.send", mine, {rank + 1, 2, 1})) << error;
  if (rank > 0) {
    ASSERT_TRUE(call("comm.recv", got, {rank - 1, 2, 1})) << error;
    EXPECT_EQ(got, (std::vector<float>{float(rank - 1), 1, 2}));
  }
  EXPECT_FALSE(call("comm.send", mine, {rank, 0, 0}));
  EXPECT_EQ(error, "comm.send: peer stage " + std::to_string(rank) +
                       " is not another of the " + std::to_string(n) +
                       " stages (this is stage " + std::to_string(rank) + ")");
  EXPECT_FALSE(call("comm.recv", got, {(rank + 1) % n, 1 << 14, 0}));
  EXPECT_EQ(error, "comm.recv: transfer 16384 or micro-batch 0 is outside "
                   "the message tags (transfer < 16384, micro-batch < "
                   "65536)");
  ASSERT_TRUE(c.barrier(error)) << error;
}

// One rank has no peer; a communicator without messages says so.
TEST(PipelineMessages, LocalHasNoPeers) {
  rt::LocalCommunicator local;
  std::string error;
  float x = 1;
  EXPECT_FALSE(local.send(&x, 1, DType::f32, 0, 0, error));
  EXPECT_EQ(error, "rank 0: send #1: a local communicator has no "
                   "point-to-point messages");
  EXPECT_FALSE(local.recv(&x, 1, DType::f32, 1, 0, error));
  EXPECT_EQ(error, "rank 0: recv #2: root 1 is outside world size 1");
}

} // namespace
