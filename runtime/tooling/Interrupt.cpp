//===- Interrupt.cpp - SIGINT and SIGTERM stop a run between steps --------===//
#include "runtime/tooling/Interrupt.h"

#include <atomic>
#include <cstring>
#include <unistd.h>

namespace dsc::rt {
namespace {

volatile std::sig_atomic_t requested = 0;

void onStop(int sig) {
  if (requested != 0) {
    // The second one: what the signal would have done without dsrun.
    std::signal(sig, SIG_DFL);
    std::raise(sig);
    return;
  }
  requested = sig;
  const char *line = sig == SIGINT ? "\ndsrun: SIGINT: stopping after this "
                                     "step (again to stop now)\n"
                                   : "\ndsrun: SIGTERM: stopping after this "
                                     "step (again to stop now)\n";
  ssize_t ignored = ::write(2, line, std::strlen(line));
  (void)ignored;
}

/// A rank's requests so far. Counted atomically: the two user signals can
/// run their handlers on two threads at once (both pending while the rank
/// was stopped), and exactly one of them must be the second.
std::atomic<int> rankRequests{0};
static_assert(std::atomic<int>::is_always_lock_free,
              "used in a signal handler");

void onRankStop(int sig) {
  const int stop = sig == SIGUSR1 ? SIGINT : SIGTERM;
  if (rankRequests.fetch_add(1) == 0) {
    requested = stop;
    return;
  }
  // The launcher's second signal: stop now, as a single process does.
  // Without MPI_Finalize: mpirun ends the job on this status.
  ::_exit(128 + stop);
}

} // namespace

int rankStopSignal(int launcherSignal) {
  return launcherSignal == SIGINT ? SIGUSR1 : SIGUSR2;
}

const volatile std::sig_atomic_t *installRankStopHandlers() {
  struct sigaction action {};
  action.sa_handler = onRankStop;
  action.sa_flags = SA_RESTART; // see installStopHandlers
  sigemptyset(&action.sa_mask);
  sigaction(SIGUSR1, &action, nullptr);
  sigaction(SIGUSR2, &action, nullptr);
  return &requested;
}

const volatile std::sig_atomic_t *installStopHandlers() {
  // A new run (a process may run several: the Python API) starts unasked.
  requested = 0;
  struct sigaction action {};
  action.sa_handler = onStop;
  // The run goes on after the first signal: a write it was blocked in (a
  // progress line to a full pipe, a checkpoint, the metrics) resumes
  // instead of failing with EINTR.
  action.sa_flags = SA_RESTART;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  return &requested;
}

const char *signalName(int sig) {
  switch (sig) {
  case SIGINT:
    return "SIGINT";
  case SIGTERM:
    return "SIGTERM";
  default:
    return "a signal";
  }
}

} // namespace dsc::rt
