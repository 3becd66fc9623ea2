//===- DsrunPrepare.h - what a dsrun rank makes ready before it runs -*- C++
//-*-===//
//
// Everything a rank prepares before its first collective: the backend and
// the plan, the steps to train, the data, the output files, the Session
// with its weights (initialized, --init-from, or a checkpoint). Nothing
// here talks to the other ranks, so a rank that fails here cannot leave
// another waiting; the ranks agree on whether all got ready right after
// (DsrunMain.cpp's agreeToStart).
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_TOOLING_DSRUNPREPARE_H
#define DSC_RUNTIME_TOOLING_DSRUNPREPARE_H

#include "runtime/backends/Backend.h"
#include "runtime/comm/Communicator.h"
#include "runtime/data/DataLoader.h"
#include "runtime/exec/Session.h"
#include "runtime/tooling/Checkpoint.h"
#include "runtime/tooling/Flags.h"
#include "runtime/tooling/PlanInfo.h"
#include "runtime/tooling/StepTimings.h"
#include "runtime/tooling/Trace.h"
#include "runtime/tooling/Trainer.h"
#include "runtime/tooling/Weights.h"

#include <cstdio>
#include <memory>
#include <string>

namespace dsc::rt {

// Owns the files a run writes to, so every early return closes them.
struct OutputFiles {
  std::FILE *metrics = nullptr;
  std::FILE *dumpBatch = nullptr;
  std::unique_ptr<TraceWriter> trace;
  ~OutputFiles() {
    if (metrics)
      std::fclose(metrics);
    if (dumpBatch)
      std::fclose(dumpBatch);
  }
};

// Everything a rank prepares before its first collective. Nothing here
// talks to the other ranks, so a rank that fails here cannot leave another
// waiting; the ranks agree on whether all got ready right after
// (agreeToStart).
struct Prepared {
  std::unique_ptr<Backend> backend; // first: it outlives the plan and Session
  std::unique_ptr<LoadedPlan> loaded;
  /// A pipeline's file (every stage's plan; `loaded` is this rank's
  /// stage), else null.
  std::unique_ptr<LoadedPlan> pipelineFile;
  PlanInfo info;
  TrainSetup setup;
  std::unique_ptr<DataLoader> data;
  std::unique_ptr<DataLoader> evalData; ///< --eval-data, or null
  OutputFiles files;
  std::unique_ptr<Session> session;
  /// wall_clock_breakdown and comms_logger's sums, or null (neither on).
  std::unique_ptr<StepTimings> timings;
  WeightsLayout layout;
  bool exported = false; ///< the weights came out of a checkpoint; done
};

/// A run opened for a caller that steps it itself (openDsrun).
struct OpenedRun {
  DsrunOptions options;
  std::unique_ptr<Communicator> comm; ///< first: the Session's collectives
  Prepared prepared;
};

/// Prepares this rank's run into `p`: kExitOk, or kExitBadInput with one
/// line in `error`. With p.exported set, the run is done (--resume
/// --export-weights streamed a checkpoint's weights out).
int prepare(const DsrunOptions &options, Communicator &comm, Prepared &p,
            std::string &error);

/// What saving and loading checkpoints needs to know of this run.
CheckpointRun checkpointRun(const DsrunOptions &options, Communicator &comm,
                            Prepared &p);

} // namespace dsc::rt

#endif // DSC_RUNTIME_TOOLING_DSRUNPREPARE_H
