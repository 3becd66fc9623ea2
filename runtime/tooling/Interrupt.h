//===- Interrupt.h - SIGINT and SIGTERM stop a run between steps -*- C++
//-*-===//
//
// A single-process dsrun (not a rank under mpirun, whose SIGTERM means a
// failed job: runtime/comm) asks the training loop to stop after the step
// it is in on the first SIGINT or SIGTERM: the loop saves a checkpoint if
// --save-dir is given and dsrun exits 128 + the signal (130, 143). A second
// signal ends the process at once, as the signal's default action does.
//
// Ranks: the `dsrun --np` launcher turns its first SIGINT or SIGTERM into
// SIGUSR1 or SIGUSR2 to mpirun, which passes those on to every rank; the
// ranks agree on the step to stop after (Trainer.cpp), save, and exit 0,
// and the launcher exits 130 or 143 (Launch.cpp). A second request (the
// launcher's second signal, sent as the other user signal) ends the rank at
// once.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_TOOLING_INTERRUPT_H
#define DSC_RUNTIME_TOOLING_INTERRUPT_H

#include <csignal>

namespace dsc::rt {

/// Installs the handlers and clears the flag; returns the flag they set to
/// the signal's number (0 until a signal arrives).
const volatile std::sig_atomic_t *installStopHandlers();

/// A rank's handlers: SIGUSR1 sets the flag to SIGINT, SIGUSR2 to SIGTERM
/// (the signal the launcher got), silently: the launcher says so. Either
/// one after the first ends the rank at once (_exit, 130 or 143).
const volatile std::sig_atomic_t *installRankStopHandlers();

/// The signal a launcher sends mpirun for a stop request, and back.
int rankStopSignal(int launcherSignal);

/// "SIGINT", "SIGTERM", or "signal N".
const char *signalName(int sig);

} // namespace dsc::rt

#endif // DSC_RUNTIME_TOOLING_INTERRUPT_H
