//===- Communicator.cpp - the shared checks, Local and the factory --------===//

#include "runtime/comm/Communicator.h"

#include "runtime/core/NumberText.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace dsc::rt {

Communicator::~Communicator() = default;

void Communicator::setTimeout(double seconds) {
  if (seconds > 0 && std::isfinite(seconds))
    timeoutS_ = seconds;
}

std::string collectiveTimeoutLine(const std::string &who, const char *name,
                                  uint64_t sequence, double timeoutS) {
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%g", timeoutS);
  return who + ": " + name + " #" + std::to_string(sequence) +
         " timed out after " + seconds + " s (a rank stopped answering)";
}

std::string Communicator::who() const {
  if (groupName_.empty())
    return "rank " + std::to_string(rank());
  return "rank " + std::to_string(parentRank_) + " (" + groupName_ + ")";
}

std::string Communicator::prefix(const char *name) const {
  return who() + ": " + name + " #" + std::to_string(sequence_);
}

std::unique_ptr<Communicator> Communicator::split(int color, int key,
                                                  const std::string &name,
                                                  std::string &error) {
  const char *what = "split";
  if (color < 0) {
    ++sequence_;
    error = prefix(what) + ": color " + std::to_string(color) + " is negative";
    return nullptr;
  }
  // The barrier bounds the wait for a rank that never comes; the split
  // itself (MPI_Comm_split) has no non-blocking form.
  if (!barrier(error))
    return nullptr;
  std::unique_ptr<Communicator> group = doSplit(color, key, error);
  if (!group)
    return nullptr;
  group->timeoutS_ = timeoutS_;
  group->groupName_ = name;
  group->parentRank_ = groupName_.empty() ? rank() : parentRank_;
  return group;
}

bool Communicator::begin(const char *name, std::string &error, const void *in,
                         const void *out, size_t count, int root, DType dtype) {
  ++sequence_;
  if (failed()) {
    error = prefix(name) + " not started: " + failed_ +
            " failed earlier, so the ranks no longer agree on what comes next";
    return false;
  }
  if (count > 0 && (!in || !out)) {
    error = prefix(name) + ": null buffer for " + std::to_string(count) +
            " elements";
    return false;
  }
  if (dtypeSize(dtype) == 0) {
    error = prefix(name) + ": unknown dtype " + std::to_string(int(dtype));
    return false;
  }
  if (root < 0 || root >= size()) {
    error = prefix(name) + ": root " + std::to_string(root) +
            " is outside world size " + std::to_string(size());
    return false;
  }
  return true;
}

bool Communicator::doSend(const void *data, size_t count, DType dtype, int peer,
                          int, std::string &error) {
  if (!begin("send", error, data, data, count, peer, dtype))
    return false;
  error = prefix("send") + ": a " + kind() +
          " communicator has no point-to-point messages";
  return false;
}

bool Communicator::doRecv(void *data, size_t count, DType dtype, int peer, int,
                          std::string &error) {
  if (!begin("recv", error, data, data, count, peer, dtype))
    return false;
  error = prefix("recv") + ": a " + kind() +
          " communicator has no point-to-point messages";
  return false;
}

//===--- Local ------------------------------------------------------------===//

std::unique_ptr<Communicator> LocalCommunicator::doSplit(int, int,
                                                         std::string &) {
  return std::make_unique<LocalCommunicator>();
}

namespace {

void copy(const void *in, void *out, size_t count, DType dtype) {
  if (in != out && count > 0)
    std::memmove(out, in, count * dtypeSize(dtype));
}

} // namespace

bool LocalCommunicator::doAllReduceSum(const void *in, void *out, size_t count,
                                       DType dtype, void *,
                                       std::string &error) {
  if (!begin("all_reduce", error, in, out, count, 0, dtype))
    return false;
  copy(in, out, count, dtype);
  return true;
}

bool LocalCommunicator::doReduceScatterSum(const void *in, void *out,
                                           size_t count, DType dtype, void *,
                                           std::string &error) {
  if (!begin("reduce_scatter", error, in, out, count, 0, dtype))
    return false;
  copy(in, out, count, dtype);
  return true;
}

bool LocalCommunicator::doAllGather(const void *in, void *out, size_t count,
                                    DType dtype, void *, std::string &error) {
  if (!begin("all_gather", error, in, out, count, 0, dtype))
    return false;
  copy(in, out, count, dtype);
  return true;
}

bool LocalCommunicator::doAllToAll(const void *in, void *out, size_t count,
                                   DType dtype, void *, std::string &error) {
  if (!begin("all_to_all", error, in, out, count, 0, dtype))
    return false;
  copy(in, out, count, dtype);
  return true;
}

bool LocalCommunicator::doBroadcast(void *data, size_t count, DType dtype,
                                    int root, void *, std::string &error) {
  return begin("broadcast", error, data, data, count, root, dtype);
}

bool LocalCommunicator::barrier(std::string &error) {
  return begin("barrier", error);
}

//===--- Factory ----------------------------------------------------------===//

bool underMpirun() { return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr; }

bool parseCommTimeout(const char *text, double &seconds, std::string &error) {
  // Up to 30 days: the wait is kept in nanoseconds (a 64-bit count overflows
  // past ~9.2e9 s), and a stuck collective nobody hears of for longer than
  // that is a hang, not a timeout.
  constexpr double kMaxSeconds = 30.0 * 24 * 3600;
  double value = 0;
  if (!parseFiniteNumber(text, 0, kMaxSeconds, value) || !(value > 0)) {
    error = std::string("DSC_COMM_TIMEOUT: expected a positive number of "
                        "seconds up to 2592000 (30 days), got '") +
            text + "'";
    return false;
  }
  seconds = value;
  return true;
}

std::unique_ptr<Communicator> createCommunicator(std::string &error) {
  double timeout = Communicator::kDefaultTimeoutS;
  if (const char *env = std::getenv("DSC_COMM_TIMEOUT"))
    if (!parseCommTimeout(env, timeout, error))
      return nullptr;
  std::unique_ptr<Communicator> comm;
  if (underMpirun())
    comm = createMpiCommunicator(error, timeout);
  else
    comm = std::make_unique<LocalCommunicator>();
  if (comm)
    comm->setTimeout(timeout);
  return comm;
}

} // namespace dsc::rt
