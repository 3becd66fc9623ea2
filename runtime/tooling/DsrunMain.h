//===- DsrunMain.h - the dsrun tool as a library call -----------*- C++ -*-===//
//
// tools/dsrun.cpp is one line over launchDsrun. runDsrunMain runs one rank:
// parse flags, join the other ranks (runtime/comm), load and verify the
// plan, create a Session, initialize or load the weights, agree with the
// other ranks that all are ready, train, export. Rank 0 alone prints the
// progress and summary and writes the metrics and weights; every rank prints
// its own error line ("dsrun: rank 1: ..." when there are several).
// Exit status: 0 done, 1 training failed, 2 bad input (plan, data, flags).
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_TOOLING_DSRUNMAIN_H
#define DSC_RUNTIME_TOOLING_DSRUNMAIN_H

#include "runtime/tooling/Metrics.h"

#include <functional>
#include <string>
#include <vector>

namespace dsc::rt {

/// What a caller in the same process (the Python API) sees of a run.
struct DsrunHooks {
  /// Each optimizer step's record, on rank 0 (the --metrics line's data);
  /// false stops the run after that step (TrainSetup::onStep).
  std::function<bool(const StepRecord &)> onStep;
  /// No line describing the run (the engine's caller has its own).
  bool quiet = false;
};

struct OpenedRun; // DsrunPrepare.h

/// A run opened as runDsrun opens one (flags parsed and checked, the ranks
/// joined, the rank prepared, every rank agreed to start, the plan's init
/// program run), for a caller that steps it itself (StepEngine.h).
/// kExitOk, or kExitBadInput / kExitTrainingFailed with one line in
/// `error`.
int openDsrun(const std::vector<std::string> &args, OpenedRun &run,
              std::string &error);

/// One rank of a run (the only one, or one that mpirun started).
int runDsrunMain(int argc, char **argv);

/// runDsrunMain with the flags as strings (no program name) and `hooks`.
int runDsrun(const std::vector<std::string> &args, const DsrunHooks &hooks);

/// The dsrun executable: `--np N` with N > 1 outside mpirun relaunches this
/// executable under mpirun with N ranks (runtime/tooling/Launch.h) and
/// returns the job's status; anything else is runDsrunMain.
int launchDsrun(int argc, char **argv);

} // namespace dsc::rt

#endif // DSC_RUNTIME_TOOLING_DSRUNMAIN_H
