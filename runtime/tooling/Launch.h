//===- Launch.h - starting dsrun's ranks ------------------------*- C++ -*-===//
//
// `dsrun --np N` (N > 1) outside mpirun runs `mpirun --allow-run-as-root
// --oversubscribe --bind-to none -np N <this dsrun> <the same arguments
// without --np>` and waits for it; each rank then finds its rank and the world
// size through MPI (runtime/comm). `mpirun -np N dsrun ...` and multi-node
// `mpirun --hostfile H -np N dsrun ...` start the same ranks directly.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_TOOLING_LAUNCH_H
#define DSC_RUNTIME_TOOLING_LAUNCH_H

#include <cstdint>
#include <string>
#include <vector>

namespace dsc::rt {

/// The mpirun command line that starts `np` ranks of `self` with `args`,
/// on the hosts of `hostfile` when one is given, with Open MPI's session
/// files under `sessionBase` (orte_tmpdir_base) when one is given.
std::vector<std::string> mpirunCommand(const std::string &mpirun,
                                       const std::string &self, unsigned np,
                                       const std::vector<std::string> &args,
                                       const std::string &hostfile = "",
                                       const std::string &sessionBase = "");

/// A new folder of this launch's own (mkdtemp under $TMPDIR, else /tmp) for
/// mpirun's session files on this host. Open MPI 4 keeps every job's files
/// under one ompi.HOST.UID folder and removes that folder when its job ends
/// and finds it empty; a job starting at that moment on the same host loses
/// the folder it has just made ("A call to mkdir was unable to create the
/// desired directory", mpirun exits 1 before any rank starts). Two jobs
/// with folders of their own cannot race. Empty, and mpirun's default kept,
/// when the user chose a place (OMPI_MCA_orte_tmpdir_base or
/// OMPI_MCA_orte_local_tmpdir_base) or none could be made, or its path is
/// over 64 bytes (the session's sockets live under it). For one host
/// only: under --hostfile the folder would have to exist on every host.
std::string makeSessionBase();

/// Removes what makeSessionBase made and all under it (mpirun removes its
/// own files when it ends well; a killed one leaves them). Does nothing for
/// an empty path or one that is no longer a folder of this user's.
void removeSessionBase(const std::string &dir);

/// The first executable `name` on PATH; empty if none.
std::string findOnPath(const std::string &name);

/// Runs mpirun for `np` ranks of this executable with `args` (argv without
/// the program name and without --np) and returns dsrun's status for the
/// job: mpirun's 0, 1 or 2 as they are, any other failure (a rank killed by
/// a signal: mpirun exits 128 + the signal) as 1 with a line in `error`.
/// Returns 2 with `error` when mpirun cannot be found or started.
int relaunchUnderMpirun(const std::vector<std::string> &args, unsigned np,
                        const std::string &hostfile, std::string &error);

/// `dsrun --np N` on one machine, without --oversubscribe: at most
/// kRanksPerCore ranks per core (and never fewer than kMinLocalRanks, the
/// 3-4 ranks tests run on 2 cores), and no more plans than the memory
/// available holds (`planBytes` per rank, from the plan's arenas; 0:
/// unknown). False + one line saying which limit and how to pass it.
constexpr uint64_t kRanksPerCore = 2;
constexpr uint64_t kMinLocalRanks = 4;
bool checkLocalCapacity(uint64_t np, uint64_t planBytes, std::string &error);

/// Under mpirun with several ranks on this machine, sets OPENBLAS_NUM_THREADS,
/// OMP_NUM_THREADS (oneDNN's) and DSC_CPU_THREADS to this machine's cores /
/// local ranks (at least 1) unless the user set them, so oversubscribed
/// ranks do not fight over cores. Call before any kernel runs (all are read
/// once).
void limitThreadsPerRank();

/// Under mpirun: a rank whose mpirun dies (killed, or its launcher killed)
/// stops within a fraction of a second instead of training on as an
/// orphan: a watcher thread notices the rank's parent is gone, says so on
/// stderr and exits the process with status 1.
void stopWhenOrphaned(int rank);

} // namespace dsc::rt

#endif // DSC_RUNTIME_TOOLING_LAUNCH_H
