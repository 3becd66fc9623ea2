//===- Launch.cpp - starting dsrun's ranks --------------------------------===//
//
// The launcher forks mpirun and waits rather than exec'ing it, so that it
// can turn mpirun's statuses into dsrun's (0 done, 1 failed, 2 bad input).
// mpirun runs in a process group of its own, so a terminal's Ctrl-C reaches
// the launcher only (mpirun would end the job at once). The launcher's first
// SIGINT or SIGTERM becomes SIGUSR1 or SIGUSR2 to mpirun, which passes it to
// every rank: they stop after the same step, save, and exit 0, and the
// launcher exits 130 or 143 (Interrupt.h). A second one becomes the other
// user signal to mpirun (every rank stops at once) and then the signal's
// own action on the launcher; a third, SIGTERM to mpirun. SIGHUP is passed
// on. mpirun dies with the launcher (PR_SET_PDEATHSIG: a SIGKILLed launcher
// cannot pass anything on), and each rank with its mpirun
// (stopWhenOrphaned).
//
//===----------------------------------------------------------------------===//

#include "runtime/tooling/Launch.h"
#include "runtime/tooling/Interrupt.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include <ftw.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

namespace dsc::rt {

namespace {

volatile sig_atomic_t childPid = 0;
volatile sig_atomic_t stopSignal = 0; ///< the first SIGINT/SIGTERM
volatile sig_atomic_t killSignal = 0; ///< the second

void forwardSignal(int sig) {
  if (childPid > 0)
    ::kill(pid_t(childPid), sig);
}

void writeLine(const char *line) {
  ssize_t ignored = ::write(2, line, std::strlen(line));
  (void)ignored;
}

void onStopSignal(int sig) {
  if (childPid <= 0)
    return;
  if (stopSignal == 0) {
    stopSignal = sig;
    // The line first: a small step ends, and rank 0's "stopped by" line
    // reaches the terminal through mpirun, before a write made after the
    // kill (seen in CI as the two lines swapped).
    writeLine(sig == SIGINT ? "\ndsrun: SIGINT: every rank stops after this "
                              "step (again to stop now)\n"
                            : "\ndsrun: SIGTERM: every rank stops after "
                              "this step (again to stop now)\n");
    ::kill(pid_t(childPid), rankStopSignal(sig));
    return;
  }
  if (killSignal) {
    ::kill(pid_t(childPid), SIGTERM); // a third: mpirun's own teardown
    return;
  }
  killSignal = sig;
  // Not mpirun's SIGTERM: it ends the job only after a grace period
  // (SIGCONT, one second, SIGTERM to each rank) in which the ranks would
  // finish the step and save. Every rank gets a second request, as the
  // other user signal (two of one kind pending would merge into one), which
  // a rank that has had one takes as "stop now" (Interrupt.h); mpirun ends
  // the job as the ranks exit.
  ::kill(pid_t(childPid),
         rankStopSignal(int(stopSignal)) == SIGUSR1 ? SIGUSR2 : SIGUSR1);
}

/// MemAvailable from /proc/meminfo, in bytes; false where there is none.
bool readMemAvailable(uint64_t &bytes) {
  std::FILE *f = std::fopen("/proc/meminfo", "r");
  if (!f)
    return false;
  char line[256];
  bool found = false;
  unsigned long long kib = 0;
  while (!found && std::fgets(line, sizeof line, f))
    found = std::sscanf(line, "MemAvailable: %llu kB", &kib) == 1;
  std::fclose(f);
  bytes = uint64_t(kib) * 1024;
  return found;
}

/// This executable's path, for mpirun to start again.
std::string selfPath() {
  std::vector<char> buffer(4096);
  ssize_t n = ::readlink("/proc/self/exe", buffer.data(), buffer.size() - 1);
  if (n <= 0)
    return "";
  return std::string(buffer.data(), size_t(n));
}

} // namespace

bool checkLocalCapacity(uint64_t np, uint64_t planBytes, std::string &error) {
  const uint64_t cores = std::max(1u, std::thread::hardware_concurrency());
  const uint64_t byCores = std::max(kMinLocalRanks, kRanksPerCore * cores);
  if (np > byCores) {
    error = "this machine has " + std::to_string(cores) + " core" +
            (cores == 1 ? "" : "s") + ", and dsrun starts at most " +
            std::to_string(byCores) +
            " ranks on it (2 per core); pass --oversubscribe to start more, "
            "or mpirun --hostfile to spread them";
    return false;
  }
  uint64_t available = 0;
  if (planBytes && readMemAvailable(available) && planBytes > available / np) {
    error = std::to_string(np) + " ranks of " + std::to_string(planBytes) +
            " bytes each (the plan's arenas) need more than the " +
            std::to_string(available) +
            " bytes of memory available; pass --oversubscribe to start them "
            "anyway";
    return false;
  }
  return true;
}

std::vector<std::string> mpirunCommand(const std::string &mpirun,
                                       const std::string &self, unsigned np,
                                       const std::vector<std::string> &args,
                                       const std::string &hostfile,
                                       const std::string &sessionBase) {
  // No stdin: mpirun runs in a background process group (Ctrl-C is the
  // launcher's), where reading the terminal would stop it.
  std::vector<std::string> cmd = {mpirun,
                                  "--allow-run-as-root",
                                  "--oversubscribe",
                                  "--bind-to",
                                  "none",
                                  "--stdin",
                                  "none",
                                  "-np",
                                  std::to_string(np),
                                  self};
  if (!hostfile.empty())
    cmd.insert(cmd.end() - 3, {"--hostfile", hostfile});
  if (!sessionBase.empty())
    cmd.insert(cmd.end() - 3, {"--mca", "orte_tmpdir_base", sessionBase});
  cmd.insert(cmd.end(), args.begin(), args.end());
  return cmd;
}

std::string makeSessionBase() {
  for (const char *chosen :
       {"OMPI_MCA_orte_tmpdir_base", "OMPI_MCA_orte_local_tmpdir_base"})
    if (const char *v = std::getenv(chosen); v && *v)
      return "";
  const char *tmp = std::getenv("TMPDIR");
  std::string pattern =
      std::string(tmp && *tmp ? tmp : "/tmp") + "/dsrun-mpi-XXXXXX";
  if (!::mkdtemp(pattern.data()))
    return "";
  // The session's sockets live under it, and a socket's path has ~100
  // bytes: a long TMPDIR keeps Open MPI's default.
  if (pattern.size() > 64) {
    ::rmdir(pattern.c_str());
    return "";
  }
  return pattern;
}

namespace {
int removeEntry(const char *path, const struct stat *, int, struct FTW *) {
  ::remove(path); // what cannot go stays: a leftover, not a failure
  return 0;
}
} // namespace

void removeSessionBase(const std::string &dir) {
  struct stat st;
  if (dir.empty() || ::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) ||
      st.st_uid != ::getuid())
    return;
  // Depth first, never following a link out of the folder.
  ::nftw(dir.c_str(), removeEntry, 16, FTW_DEPTH | FTW_PHYS);
}

std::string findOnPath(const std::string &name) {
  const char *path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos)
      end = dirs.size();
    std::string dir = dirs.substr(start, end - start);
    std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    struct stat st;
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        ::access(candidate.c_str(), X_OK) == 0)
      return candidate;
    start = end + 1;
  }
  return "";
}

int relaunchUnderMpirun(const std::vector<std::string> &args, unsigned np,
                        const std::string &hostfile, std::string &error) {
  std::string flag = "--np " + std::to_string(np);
  std::string mpirun = findOnPath("mpirun");
  if (mpirun.empty()) {
    error = flag + ": mpirun is not on PATH (Debian: openmpi-bin); start the "
                   "ranks with an MPI launcher or run one rank";
    return 2;
  }
  std::string self = selfPath();
  if (self.empty()) {
    error = flag + ": cannot find this dsrun's own path (/proc/self/exe)";
    return 2;
  }
  // Across hosts the folder would have to exist on each of them; there
  // Open MPI's default stays.
  const std::string sessionBase = hostfile.empty() ? makeSessionBase() : "";
  std::vector<std::string> cmd =
      mpirunCommand(mpirun, self, np, args, hostfile, sessionBase);
  std::vector<char *> argv;
  for (std::string &a : cmd)
    argv.push_back(a.data());
  argv.push_back(nullptr);

  struct sigaction forward {
  }, stop{}, oldInt{}, oldTerm{}, oldHup{};
  forward.sa_handler = forwardSignal;
  sigemptyset(&forward.sa_mask);
  stop.sa_handler = onStopSignal;
  sigemptyset(&stop.sa_mask);
  stopSignal = killSignal = 0;
  sigaction(SIGINT, &stop, &oldInt);
  sigaction(SIGTERM, &stop, &oldTerm);
  sigaction(SIGHUP, &forward, &oldHup);
  std::fflush(nullptr);
  const pid_t launcher = ::getpid();
  pid_t pid = ::fork();
  if (pid == 0) {
    // Ended with the launcher, however it dies; and not started at all if
    // it already has. SIGTERM, not SIGKILL: mpirun then ends its ranks and
    // removes its session folder (ompi.HOST.UID) itself; a rank it cannot
    // reach still stops on its own (stopWhenOrphaned).
    if (::prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || ::getppid() != launcher)
      ::_exit(1);
    ::setpgid(0, 0); // Ctrl-C is the launcher's to pass on
    sigaction(SIGINT, &oldInt, nullptr);
    sigaction(SIGTERM, &oldTerm, nullptr);
    sigaction(SIGHUP, &oldHup, nullptr);
    ::execv(argv[0], argv.data());
    std::fprintf(stderr, "dsrun: %s: cannot run %s: %s\n", flag.c_str(),
                 argv[0], std::strerror(errno));
    ::_exit(127);
  }
  int status = 0;
  int result = 2;
  if (pid < 0) {
    error = flag + ": cannot start mpirun: " + std::strerror(errno);
    removeSessionBase(sessionBase);
  } else {
    childPid = pid;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    childPid = 0;
    removeSessionBase(sessionBase); // before a second signal's own action
    if (killSignal) {
      // The second signal: every rank is gone; now its own action here.
      sigaction(SIGINT, &oldInt, nullptr);
      sigaction(SIGTERM, &oldTerm, nullptr);
      std::signal(int(killSignal), SIG_DFL);
      std::raise(int(killSignal));
    }
    if (stopSignal && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
      result = 128 + int(stopSignal); // the ranks stopped as asked
    } else if (WIFEXITED(status) && WEXITSTATUS(status) <= 2) {
      result = WEXITSTATUS(status);
    } else if (WIFEXITED(status) && WEXITSTATUS(status) == 127) {
      result = 2; // the child printed why mpirun did not start
      error = flag + ": mpirun did not start";
    } else {
      result = 1;
      int code = WIFEXITED(status) ? WEXITSTATUS(status) : 0;
      if (WIFSIGNALED(status))
        error = flag + ": mpirun was killed by signal " +
                std::to_string(WTERMSIG(status));
      else if (code > 128)
        error = flag + ": mpirun exited with status " + std::to_string(code) +
                ": a rank was killed by signal " + std::to_string(code - 128);
      else
        error = flag + ": mpirun exited with status " + std::to_string(code);
    }
  }
  sigaction(SIGINT, &oldInt, nullptr);
  sigaction(SIGTERM, &oldTerm, nullptr);
  sigaction(SIGHUP, &oldHup, nullptr);
  return result;
}

void limitThreadsPerRank() {
  const char *local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  int ranksHere = local ? std::atoi(local) : 0;
  if (ranksHere <= 1)
    return;
  unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  std::string threads = std::to_string(std::max(1u, cores / ranksHere));
  setenv("OPENBLAS_NUM_THREADS", threads.c_str(), 0);
  setenv("DSC_CPU_THREADS", threads.c_str(), 0);
  setenv("OMP_NUM_THREADS", threads.c_str(), 0); // oneDNN's (OneDnn.cpp)
}

void stopWhenOrphaned(int rank) {
  const pid_t parent = ::getppid();
  std::thread([parent, rank] {
    for (;;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      if (::getppid() != parent) {
        std::fprintf(stderr,
                     "dsrun: rank %d: mpirun is gone (it or the launcher was "
                     "killed); stopping\n",
                     rank);
        ::_exit(1);
      }
    }
  }).detach();
}

} // namespace dsc::rt
