//===- Interrupt.cpp - SIGINT and SIGTERM stop a run between steps --------===//
#include "runtime/tooling/Interrupt.h"

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

void onRankStop(int sig) {
  if (requested == 0)
    requested = sig == SIGUSR1 ? SIGINT : SIGTERM;
}

} // namespace

int rankStopSignal(int launcherSignal) {
  return launcherSignal == SIGINT ? SIGUSR1 : SIGUSR2;
}

const volatile std::sig_atomic_t *installRankStopHandlers() {
  struct sigaction action {};
  action.sa_handler = onRankStop;
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
