//===- Interrupt.h - SIGINT and SIGTERM stop a run between steps -*- C++
//-*-===//
//
// A single-process dsrun (not a rank under mpirun, whose SIGTERM means a
// failed job: runtime/comm) asks the training loop to stop after the step
// it is in on the first SIGINT or SIGTERM: the loop saves a checkpoint if
// --save-dir is given and dsrun exits 128 + the signal (130, 143). A second
// signal ends the process at once, as the signal's default action does.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_TOOLING_INTERRUPT_H
#define DSC_RUNTIME_TOOLING_INTERRUPT_H

#include <csignal>

namespace dsc::rt {

/// Installs the handlers; returns the flag they set to the signal's number
/// (0 until a signal arrives).
const volatile std::sig_atomic_t *installStopHandlers();

/// "SIGINT", "SIGTERM", or "signal N".
const char *signalName(int sig);

} // namespace dsc::rt

#endif // DSC_RUNTIME_TOOLING_INTERRUPT_H
