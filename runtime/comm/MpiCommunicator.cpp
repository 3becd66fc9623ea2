//===- MpiCommunicator.cpp - collectives over OpenMPI ---------------------===//
//
// Element types: MPI's own for f32, f64, i32 and i64; f16 and bf16 as
// MPI_UINT16_T with user-defined sums (add in float, round back).
//
// Each collective is MPI's nonblocking form (MPI_Iallreduce,
// MPI_Ireduce_scatter_block, MPI_Iallgather, MPI_Ialltoall, MPI_Ibcast,
// MPI_Ibarrier) polled with MPI_Test until it completes or the deadline passes,
// so a rank that stops answering costs at most the timeout, never a hang.
// Polling spins briefly, then yields, then sleeps up to 200 us between tests:
// ranks share cores when oversubscribed, and OpenMPI progresses nonblocking
// collectives only inside MPI calls, so the sleep is short.
//
// Thread level: MPI_THREAD_SERIALIZED. The comm stream's worker thread
// issues the plan's collectives and dsrun's main thread issues its own
// between programs, never at the same time; a process-wide mutex held
// around every MPI call enforces that, so SERIALIZED is always honoured
// (FUNNELED would not be: the worker is not the thread that initialized
// MPI). MPI is initialized by the first communicator and finalized at exit,
// unless a collective was left unfinished by a timeout: MPI_Finalize would
// then wait for ranks that are not coming, so the process exits without it
// and mpirun ends the job.
//
// Each communicator is a duplicate of MPI_COMM_WORLD with MPI_ERRORS_RETURN,
// so MPI errors (a TCP peer gone) come back as one line instead of aborting.
//
// A rank that dies: OpenMPI's mpirun notices at once and sends SIGTERM to
// every other rank (then SIGKILL). The SIGTERM handler installed here, before
// MPI starts (when the disposition was the default), writes this rank's
// line, prepared before each collective so the handler only calls write(2),
// and exits with 1:
//   rank 0: all_reduce #12 interrupted by signal 15 (mpirun stops every rank
//   when one dies or fails)
// MPI's own start-up (MPI_Init_thread) waits on every rank with no deadline,
// and takes seconds where the host's name does not resolve: a rank lost then
// gets the same line, and a watchdog bounds the wait.
// docs/multi-process.md records what each fault looks like.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/Communicator.h"
#include "runtime/core/Half.h"

#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <list>
#include <vector>

namespace dsc::rt {
namespace {

using Clock = std::chrono::steady_clock;

//===--- Process-wide state -----------------------------------------------===//

/// Serializes every MPI call of the process (MPI_THREAD_SERIALIZED).
std::mutex &mpiMutex() {
  static std::mutex *m = new std::mutex; // used at exit: never destroyed
  return *m;
}

std::atomic<bool> unclean{false}; ///< a request left pending: no finalize

/// What the SIGTERM handler writes: two buffers, `current` says which one
/// holds the line for the latest collective (written before it is flipped).
constexpr size_t kLineBytes = 256;
char signalLines[2][kLineBytes];
std::atomic<int> currentLine{-1};
std::atomic<bool> anyFailed{false}; ///< a collective failed: its line is out

void guardLauncher();

void onTerminate(int sig) {
  int current = currentLine.load();
  if (current >= 0 && !anyFailed.load()) {
    const char *line = signalLines[current];
    // The prepared text has "%d" where the signal number goes.
    const char *mark = std::strstr(line, "%d");
    char number[4] = {char('0' + sig / 10 % 10), char('0' + sig % 10), 0, 0};
    const char *digits = sig >= 10 ? number : number + 1;
    // One write(2) per line: ranks share mpirun's stderr, and pieces of
    // several ranks' lines would interleave.
    char out[kLineBytes + 4];
    size_t n = 0;
    for (const char *c = line; *c && n < sizeof(out); ++c) {
      if (c == mark) {
        for (const char *d = digits; *d && n < sizeof(out); ++d)
          out[n++] = *d;
        ++c; // skip "%d"
        continue;
      }
      out[n++] = *c;
    }
    ssize_t ignored = ::write(2, out, n);
    (void)ignored;
  }
  // mpirun is ending the job, and can hang doing so (a rank lost while the
  // job starts: "PMIX ERROR: UNREACHABLE").
  guardLauncher();
  ::_exit(1);
}

/// Prepares the line the handler prints from now on.
void setSignalLine(const std::string &text) {
  int next = currentLine.load() == 0 ? 1 : 0;
  std::snprintf(signalLines[next], kLineBytes, "%s\n", text.c_str());
  currentLine.store(next);
}

void installSignalHandler() {
  struct sigaction old {};
  if (sigaction(SIGTERM, nullptr, &old) != 0 || (old.sa_flags & SA_SIGINFO) ||
      (old.sa_handler != SIG_DFL && old.sa_handler != onTerminate))
    return; // someone else handles SIGTERM: leave it to them
  struct sigaction action {};
  action.sa_handler = onTerminate;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
}

/// How long a rank that gave up lets its launcher live on.
constexpr int kLauncherGraceS = 5;

/// A rank that gives up on the job leaves without MPI_Finalize, and mpirun
/// then ends the job. mpirun itself can hang doing so: with a host cut off
/// it waits on that host's daemon forever (OpenMPI 4.1.4; docs/
/// multi-process.md). So the rank leaves behind a detached guard that ends
/// its launcher (mpirun, or on another host the orted that started it) if
/// it is still there kLauncherGraceS after the rank left. Also called from
/// the SIGTERM handler, so: the raw fork system call (no atfork handlers,
/// no locks), and only system calls in the child (the rank has threads).
void guardLauncher() {
  static std::atomic<bool> started{false};
  if (started.exchange(true))
    return;
  const pid_t launcher = ::getppid();
  if (launcher <= 1 || ::syscall(SYS_fork) != 0)
    return; // the rank goes on to exit (or fork failed: nothing to do)
  ::setsid();
  // Holding none of the rank's descriptors: an inherited output pipe would
  // keep mpirun waiting for its end.
  for (int fd = 0; fd < 4096; ++fd)
    ::close(fd);
  struct timespec tick = {0, 100 * 1000 * 1000};
  for (int i = 0; i < kLauncherGraceS * 10; ++i) {
    ::nanosleep(&tick, nullptr);
    if (::kill(launcher, 0) != 0)
      ::_exit(0); // it ended the job
  }
  ::kill(launcher, SIGKILL);
  ::_exit(0);
}

void finalizeAtExit() {
  std::lock_guard<std::mutex> lock(mpiMutex());
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized || unclean.load())
    return;
  currentLine.store(-1); // nothing to report once the ranks have parted
  MPI_Finalize();
}

std::string mpiErrorText(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS)
    return "MPI error " + std::to_string(code);
  return std::string(text, size_t(length));
}

/// Ends the process with one line unless disarmed within `seconds`: MPI's
/// start-up waits on every rank with no deadline of its own, so a rank
/// that stops answering while the job starts would hang the others.
class StartWatchdog {
public:
  StartWatchdog(const std::string &rank, double seconds) {
    std::snprintf(line_, sizeof line_,
                  "rank %s: MPI start-up did not finish within %g s (a rank "
                  "stopped answering or a host is unreachable)\n",
                  rank.c_str(), seconds);
    auto deadline = std::chrono::duration<double>(seconds);
    thread_ = std::thread([this, deadline] {
      std::unique_lock<std::mutex> lock(mutex_);
      if (!cv_.wait_for(lock, deadline, [this] { return disarmed_; })) {
        ssize_t ignored = ::write(2, line_, std::strlen(line_));
        (void)ignored;
        // mpirun may be hung in its own start-up (a rank lost: "PMIX
        // ERROR: UNREACHABLE") and never end the job: as a rank that gives
        // up later, leave the guard that ends it.
        guardLauncher();
        ::_exit(1);
      }
    });
  }
  ~StartWatchdog() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      disarmed_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }

private:
  char line_[kLineBytes];
  std::mutex mutex_;
  std::condition_variable cv_;
  bool disarmed_ = false;
  std::thread thread_;
};

/// Starts MPI once for the process, at the SERIALIZED thread level.
bool ensureMpi(double timeoutS, std::string &error) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (finalized) {
    error = "MPI was already finalized in this process";
    return false;
  }
  int provided = MPI_THREAD_SINGLE;
  if (!initialized) {
    // mpirun's SIGTERM (a peer died) can come while MPI is still starting,
    // which takes seconds on some hosts: the line is there from the start.
    const char *env = std::getenv("OMPI_COMM_WORLD_RANK");
    std::string rank = env ? env : "?";
    setSignalLine("rank " + rank +
                  ": stopped by signal %d while MPI was starting (mpirun "
                  "stops every rank when one dies or fails)");
    installSignalHandler();
    int rc = MPI_SUCCESS;
    {
      StartWatchdog watchdog(rank, std::max(timeoutS, kMinStartTimeoutS));
      rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
    }
    if (rc != MPI_SUCCESS) {
      error = "MPI_Init_thread failed: " + mpiErrorText(rc);
      return false;
    }
    std::atexit(finalizeAtExit);
  } else {
    MPI_Query_thread(&provided);
  }
  if (provided < MPI_THREAD_SERIALIZED) {
    error = "this MPI provides thread level " + std::to_string(provided) +
            "; dsrun needs MPI_THREAD_SERIALIZED (" +
            std::to_string(MPI_THREAD_SERIALIZED) + ")";
    return false;
  }
  return true;
}

/// Largest element count of one MPI call (MPI counts are int).
constexpr size_t kMaxChunk = size_t(1) << 30;

//===--- Element types ----------------------------------------------------===//

// MPI has no 16-bit float types: f16 and bf16 travel as MPI_UINT16_T and
// sum through user-defined operations that add in float and round back.
template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float)>
void sum16(void *in, void *inout, int *len, MPI_Datatype *) {
  const auto *a = static_cast<const uint16_t *>(in);
  auto *b = static_cast<uint16_t *>(inout);
  for (int i = 0; i < *len; ++i)
    b[i] = FromFloat(ToFloat(a[i]) + ToFloat(b[i]));
}

MPI_Op f16Sum = MPI_OP_NULL, bf16Sum = MPI_OP_NULL;

/// Creates the 16-bit sums once MPI is up (under mpiMutex).
bool createOps(std::string &error) {
  if (f16Sum != MPI_OP_NULL)
    return true;
  if (MPI_Op_create(&sum16<f16ToFloat, floatToF16>, 1, &f16Sum) !=
          MPI_SUCCESS ||
      MPI_Op_create(&sum16<bf16ToFloat, floatToBf16>, 1, &bf16Sum) !=
          MPI_SUCCESS) {
    error = "MPI_Op_create failed for the 16-bit sums";
    return false;
  }
  return true;
}

/// MPI's datatype for `t`, and the operation that sums it.
MPI_Datatype mpiType(DType t) {
  switch (t) {
  case DType::f32:
    return MPI_FLOAT;
  case DType::f64:
    return MPI_DOUBLE;
  case DType::i32:
    return MPI_INT32_T;
  case DType::i64:
    return MPI_INT64_T;
  case DType::f16:
  case DType::bf16:
    return MPI_UINT16_T;
  }
  return MPI_DATATYPE_NULL;
}

MPI_Op mpiSum(DType t) {
  return t == DType::f16 ? f16Sum : t == DType::bf16 ? bf16Sum : MPI_SUM;
}

//===--- The communicator -------------------------------------------------===//

class MpiCommunicator final : public Communicator {
public:
  ~MpiCommunicator() override;

  bool init(double timeoutS, std::string &error);
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char *kind() const override { return "mpi"; }

  bool barrier(std::string &error) override;
  void abandon() override {
    unclean = true;
    guardLauncher();
  }

private:
  bool doAllReduceSum(const void *in, void *out, size_t count, DType dtype,
                      void *stream, std::string &error) override;
  bool doReduceScatterSum(const void *in, void *out, size_t count, DType dtype,
                          void *stream, std::string &error) override;
  bool doAllGather(const void *in, void *out, size_t count, DType dtype,
                   void *stream, std::string &error) override;
  bool doAllToAll(const void *in, void *out, size_t count, DType dtype,
                  void *stream, std::string &error) override;
  bool doBroadcast(void *data, size_t count, DType dtype, int root,
                   void *stream, std::string &error) override;
  std::unique_ptr<Communicator> doSplit(int color, int key,
                                        std::string &error) override;
  bool doSend(const void *data, size_t count, DType dtype, int peer, int tag,
              std::string &error) override;
  bool doRecv(void *data, size_t count, DType dtype, int peer, int tag,
              std::string &error) override;
  bool doCompleteSends(std::string &error) override;
  /// Drops the buffered sends that have completed (under mpiMutex).
  bool reapSends(std::string &error);
  /// Waits up to `seconds` for the buffered sends (under mpiMutex); false
  /// if some are still pending.
  bool drainSends(double seconds);

  /// Marks the start of collective `name` for the signal handler and sets
  /// the deadline.
  Clock::time_point start(const char *name);
  /// Checks an MPI_I* call's return code.
  bool started(const char *name, int rc, std::string &error);
  /// Polls `request` until it completes (true) or the deadline passes or MPI
  /// reports an error (false + the line).
  bool finish(const char *name, MPI_Request &request, Clock::time_point end,
              std::string &error);
  bool fits(const char *name, size_t count, std::string &error);

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  /// A collective that timed out still owns its buffers inside MPI.
  MPI_Request pending_ = MPI_REQUEST_NULL;
  /// Sends in flight, each with its own copy of the data (MPI_Isend's
  /// buffer must outlive the request; the plan reuses the sender's).
  struct Outgoing {
    std::vector<char> bytes;
    MPI_Request request = MPI_REQUEST_NULL;
    int peer = 0;
  };
  std::list<Outgoing> outgoing_;
};

MpiCommunicator::~MpiCommunicator() {
  std::lock_guard<std::mutex> lock(mpiMutex());
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized)
    return;
  // A peer stage may still be on its way to the receive of a message sent
  // last: give it the time a receive would have.
  if (!drainSends(timeout())) {
    unclean = true;
    return;
  }
  if (pending_ != MPI_REQUEST_NULL) {
    // The late rank may have caught up since: give it a moment.
    Clock::time_point end = Clock::now() + std::chrono::seconds(1);
    int done = 0;
    while (!done && Clock::now() < end) {
      if (MPI_Test(&pending_, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
        break;
      if (!done)
        std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    if (!done) {
      unclean = true; // MPI_Finalize would wait for it forever
      return;         // and so would MPI_Comm_free
    }
  }
  if (comm_ != MPI_COMM_NULL)
    MPI_Comm_free(&comm_);
}

bool MpiCommunicator::init(double timeoutS, std::string &error) {
  std::lock_guard<std::mutex> lock(mpiMutex());
  if (!ensureMpi(timeoutS, error) || !createOps(error))
    return false;
  int rc = MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
  if (rc != MPI_SUCCESS) {
    error = "MPI_Comm_dup failed: " + mpiErrorText(rc);
    return false;
  }
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
  setSignalLine("rank " + std::to_string(rank_) +
                ": stopped by signal %d before any collective (mpirun stops "
                "every rank when one dies or fails)");
  return true;
}

Clock::time_point MpiCommunicator::start(const char *name) {
  setSignalLine(prefix(name) +
                " interrupted by signal %d (mpirun stops every rank when one "
                "dies or fails)");
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(
                            std::chrono::duration<double>(timeout()));
}

bool MpiCommunicator::started(const char *name, int rc, std::string &error) {
  if (rc == MPI_SUCCESS)
    return true;
  markFailed(name);
  anyFailed = true;
  error = prefix(name) + " failed to start: " + mpiErrorText(rc);
  return false;
}

/// Between two polls of a request: spin for the first 64, yield until 256,
/// then sleep, doubling up to 200 us (ranks share cores when
/// oversubscribed; MPI progresses only inside its calls, so the sleep stays
/// short).
static void pauseBeforePoll(int polls, std::chrono::microseconds &nap) {
  if (polls < 64)
    return;
  if (polls < 256) {
    std::this_thread::yield();
    return;
  }
  std::this_thread::sleep_for(nap);
  nap = std::min(nap * 2, std::chrono::microseconds(200));
}

bool MpiCommunicator::finish(const char *name, MPI_Request &request,
                             Clock::time_point end, std::string &error) {
  std::chrono::microseconds nap{1};
  for (int polls = 0;; ++polls) {
    int done = 0;
    int rc = MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) {
      markFailed(name);
      anyFailed = true;
      error = prefix(name) + " failed: " + mpiErrorText(rc);
      return false;
    }
    if (done) {
      setSignalLine("rank " + std::to_string(rank_) + ": stopped by signal " +
                    "%d after " + name + " #" + std::to_string(sequence()) +
                    " (mpirun stops every rank when one dies or fails)");
      return true;
    }
    if (Clock::now() >= end) {
      pending_ = request;
      markFailed(name);
      anyFailed = true;
      error = collectiveTimeoutLine(who(), name, sequence(), timeout());
      return false;
    }
    pauseBeforePoll(polls, nap);
  }
}

bool MpiCommunicator::fits(const char *name, size_t count, std::string &error) {
  if (count <= size_t(INT_MAX) / size_t(size_))
    return true;
  error = prefix(name) + ": " + std::to_string(count) +
          " elements per rank exceed what one MPI call can move";
  return false;
}

// `stream` is for device communicators; MPI works on host memory and
// returns when the collective is complete.
bool MpiCommunicator::doAllReduceSum(const void *in, void *out, size_t count,
                                     DType dtype, void *, std::string &error) {
  std::lock_guard<std::mutex> lock(mpiMutex());
  const char *name = "all_reduce";
  if (!begin(name, error, in, out, count, 0, dtype))
    return false;
  Clock::time_point end = start(name);
  const size_t elementBytes = dtypeSize(dtype);
  const char *src = static_cast<const char *>(in);
  char *dst = static_cast<char *>(out);
  // Always at least one call, so that every rank takes part even in an
  // empty collective (they stay in step).
  size_t done = 0;
  do {
    size_t n = std::min(count - done, kMaxChunk);
    size_t offset = done * elementBytes;
    const void *send = in == out ? MPI_IN_PLACE : src + offset;
    MPI_Request request = MPI_REQUEST_NULL;
    if (!started(name,
                 MPI_Iallreduce(send, dst + offset, int(n), mpiType(dtype),
                                mpiSum(dtype), comm_, &request),
                 error) ||
        !finish(name, request, end, error))
      return false;
    done += n;
  } while (done < count);
  return true;
}

bool MpiCommunicator::doReduceScatterSum(const void *in, void *out,
                                         size_t count, DType dtype, void *,
                                         std::string &error) {
  std::lock_guard<std::mutex> lock(mpiMutex());
  const char *name = "reduce_scatter";
  if (!begin(name, error, in, out, count, 0, dtype) ||
      !fits(name, count, error))
    return false;
  Clock::time_point end = start(name);
  MPI_Request request = MPI_REQUEST_NULL;
  return started(name,
                 MPI_Ireduce_scatter_block(in, out, int(count), mpiType(dtype),
                                           mpiSum(dtype), comm_, &request),
                 error) &&
         finish(name, request, end, error);
}

bool MpiCommunicator::doAllGather(const void *in, void *out, size_t count,
                                  DType dtype, void *, std::string &error) {
  std::lock_guard<std::mutex> lock(mpiMutex());
  const char *name = "all_gather";
  if (!begin(name, error, in, out, count, 0, dtype) ||
      !fits(name, count, error))
    return false;
  Clock::time_point end = start(name);
  const char *mine =
      static_cast<const char *>(out) + size_t(rank_) * count * dtypeSize(dtype);
  const void *send = in == mine && count > 0 ? MPI_IN_PLACE : in;
  MPI_Datatype type = mpiType(dtype);
  MPI_Request request = MPI_REQUEST_NULL;
  return started(name,
                 MPI_Iallgather(send, int(count), type, out, int(count), type,
                                comm_, &request),
                 error) &&
         finish(name, request, end, error);
}

bool MpiCommunicator::doAllToAll(const void *in, void *out, size_t count,
                                 DType dtype, void *, std::string &error) {
  std::lock_guard<std::mutex> lock(mpiMutex());
  const char *name = "all_to_all";
  if (!begin(name, error, in, out, count, 0, dtype) ||
      !fits(name, count, error))
    return false;
  Clock::time_point end = start(name);
  MPI_Datatype type = mpiType(dtype);
  MPI_Request request = MPI_REQUEST_NULL;
  return started(name,
                 MPI_Ialltoall(in, int(count), type, out, int(count), type,
                               comm_, &request),
                 error) &&
         finish(name, request, end, error);
}

bool MpiCommunicator::doBroadcast(void *data, size_t count, DType dtype,
                                  int root, void *, std::string &error) {
  std::lock_guard<std::mutex> lock(mpiMutex());
  const char *name = "broadcast";
  if (!begin(name, error, data, data, count, root, dtype))
    return false;
  Clock::time_point end = start(name);
  char *bytes = static_cast<char *>(data);
  size_t done = 0;
  do {
    size_t n = std::min(count - done, kMaxChunk);
    MPI_Request request = MPI_REQUEST_NULL;
    if (!started(name,
                 MPI_Ibcast(bytes + done * dtypeSize(dtype), int(n),
                            mpiType(dtype), root, comm_, &request),
                 error) ||
        !finish(name, request, end, error))
      return false;
    done += n;
  } while (done < count);
  return true;
}

std::unique_ptr<Communicator> MpiCommunicator::doSplit(int color, int key,
                                                       std::string &error) {
  std::lock_guard<std::mutex> lock(mpiMutex());
  auto group = std::make_unique<MpiCommunicator>();
  int rc = MPI_Comm_split(comm_, color, key, &group->comm_);
  if (rc != MPI_SUCCESS) {
    error = who() + ": MPI_Comm_split failed: " + mpiErrorText(rc);
    return nullptr;
  }
  MPI_Comm_set_errhandler(group->comm_, MPI_ERRORS_RETURN);
  MPI_Comm_rank(group->comm_, &group->rank_);
  MPI_Comm_size(group->comm_, &group->size_);
  return group;
}

bool MpiCommunicator::reapSends(std::string &error) {
  for (auto it = outgoing_.begin(); it != outgoing_.end();) {
    int done = 0;
    int rc = MPI_Test(&it->request, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) {
      markFailed("send");
      anyFailed = true;
      error = prefix("send") + " failed: " + mpiErrorText(rc);
      return false;
    }
    it = done ? outgoing_.erase(it) : std::next(it);
  }
  return true;
}

bool MpiCommunicator::drainSends(double seconds) {
  Clock::time_point end =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(seconds));
  std::string ignored;
  while (!outgoing_.empty() && Clock::now() < end) {
    if (!reapSends(ignored))
      return false;
    if (!outgoing_.empty())
      std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return outgoing_.empty();
}

bool MpiCommunicator::doSend(const void *data, size_t count, DType dtype,
                             int peer, int tag, std::string &error) {
  std::lock_guard<std::mutex> lock(mpiMutex());
  const char *name = "send";
  if (!begin(name, error, data, data, count, peer, dtype) ||
      !fits(name, count, error) || !reapSends(error))
    return false;
  start(name);
  Outgoing &out = outgoing_.emplace_back();
  out.peer = peer;
  const char *bytes = static_cast<const char *>(data);
  out.bytes.assign(bytes, bytes + count * dtypeSize(dtype));
  return started(name,
                 MPI_Isend(out.bytes.data(), int(count), mpiType(dtype), peer,
                           tag, comm_, &out.request),
                 error);
}

bool MpiCommunicator::doRecv(void *data, size_t count, DType dtype, int peer,
                             int tag, std::string &error) {
  std::lock_guard<std::mutex> lock(mpiMutex());
  const std::string name =
      "recv from " + peerLabel() + " " + std::to_string(peer);
  if (!begin("recv", error, data, data, count, peer, dtype) ||
      !fits("recv", count, error) || !reapSends(error))
    return false;
  Clock::time_point end = start(name.c_str());
  MPI_Request request = MPI_REQUEST_NULL;
  return started(name.c_str(),
                 MPI_Irecv(data, int(count), mpiType(dtype), peer, tag, comm_,
                           &request),
                 error) &&
         finish(name.c_str(), request, end, error);
}

bool MpiCommunicator::doCompleteSends(std::string &error) {
  std::lock_guard<std::mutex> lock(mpiMutex());
  if (outgoing_.empty())
    return true;
  // One deadline for them all; polling progresses every request of the
  // process. Not finish(): a send that times out stays with its buffer in
  // outgoing_ (the destructor's drainSends gives it one more chance), and
  // must not also become pending_, which MPI would free twice.
  const std::string name =
      "send to " + peerLabel() + " " + std::to_string(outgoing_.front().peer);
  const Clock::time_point end = start(name.c_str());
  std::chrono::microseconds nap{1};
  for (int polls = 0;; ++polls) {
    if (!reapSends(error))
      return false;
    if (outgoing_.empty())
      return true;
    if (Clock::now() >= end) {
      const std::string late = "send to " + peerLabel() + " " +
                               std::to_string(outgoing_.front().peer);
      markFailed(late.c_str());
      anyFailed = true;
      error = collectiveTimeoutLine(who(), late.c_str(), sequence(), timeout());
      return false;
    }
    pauseBeforePoll(polls, nap);
  }
}

bool MpiCommunicator::barrier(std::string &error) {
  std::lock_guard<std::mutex> lock(mpiMutex());
  const char *name = "barrier";
  if (!begin(name, error))
    return false;
  Clock::time_point end = start(name);
  MPI_Request request = MPI_REQUEST_NULL;
  return started(name, MPI_Ibarrier(comm_, &request), error) &&
         finish(name, request, end, error);
}

} // namespace

std::unique_ptr<Communicator> createMpiCommunicator(std::string &error,
                                                    double timeoutS) {
  if (!underMpirun()) {
    error = "not started by mpirun (OMPI_COMM_WORLD_SIZE is not set)";
    return nullptr;
  }
  auto comm = std::make_unique<MpiCommunicator>();
  if (!comm->init(timeoutS, error))
    return nullptr;
  return comm;
}

} // namespace dsc::rt
