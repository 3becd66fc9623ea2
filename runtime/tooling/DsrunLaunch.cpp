//===- DsrunLaunch.cpp - dsrun --np: the launcher that starts the ranks ---===//
//
// `dsrun --np N` outside mpirun checks what it can before N processes start
// (the plan's world size, the machine's capacity: Launch.h) and relaunches
// this executable under mpirun; anything else is one rank's run.
//
//===----------------------------------------------------------------------===//
#include "runtime/tooling/DsrunMain.h"

#include "runtime/backends/Registry.h"
#include "runtime/comm/Communicator.h"
#include "runtime/plan/LoadedPlan.h"
#include "runtime/plan/PlanFormat.h"
#include "runtime/tooling/Flags.h"
#include "runtime/tooling/Launch.h"
#include "runtime/tooling/Trainer.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>

namespace dsc::rt {

namespace fb = dsc::plan;

namespace {
bool isRegularFile(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}
} // namespace

int launchDsrun(int argc, char **argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  DsrunOptions options;
  std::string error;
  if (underMpirun() || !parseDsrunFlags(args, options, error) || options.help ||
      options.np <= 1 || !checkDsrunFlags(options, error))
    return runDsrunMain(argc, argv); // reports any error itself
  int status = kExitBadInput;
  // A plan for another world size is refused here, before mpirun starts a
  // thousand ranks to say so. (A plan that does not load is left to the
  // ranks, which say why.)
  uint64_t planRanks = 0, planBytes = 0;
  {
    // The CPU backend reads any plan: no GPU context for a launcher.
    std::string ignored;
    std::unique_ptr<Backend> backend = createBackend("cpu", ignored);
    std::unique_ptr<LoadedPlan> plan =
        backend ? LoadedPlan::load(options.plan, ignored, *backend) : nullptr;
    if (plan) {
      planRanks = plan->plan().world_size();
      // What a rank holds in this machine's memory: every arena on the
      // CPU backend, the host arenas beside a GPU; a pipeline's stages'
      // largest.
      const bool cpu = options.backend.rfind("cpu", 0) == 0;
      auto bytesOf = [&](const fb::Plan &p) {
        uint64_t n = 0;
        if (const auto *arenas = p.arenas())
          for (const fb::Arena *a : *arenas)
            if (cpu || a->space() == fb::Space::host)
              n += a->bytes();
        return n;
      };
      planBytes = bytesOf(plan->plan());
      for (uint32_t s = 0; s < plan->stageCount(); ++s)
        if (std::unique_ptr<LoadedPlan> stage = plan->stage(s, ignored))
          planBytes = std::max(planBytes, bytesOf(stage->plan()));
    }
  }
  if (planRanks && planRanks != options.np)
    error = "--np " + std::to_string(options.np) + ": " + options.plan +
            " is compiled for " + std::to_string(planRanks) +
            (planRanks == 1 ? " rank" : " ranks") + " (dsc --world-size " +
            std::to_string(planRanks) + ")";
  else if (!options.hostfile.empty() && !isRegularFile(options.hostfile))
    error = "--hostfile " + options.hostfile + ": no such file";
  // This machine's capacity says nothing of a hostfile's hosts.
  else if (!options.oversubscribe && options.hostfile.empty() &&
           !checkLocalCapacity(options.np, planBytes, error))
    error = "--np " + std::to_string(options.np) + ": " + error;
  else
    // The ranks' flags: --np and --hostfile are the launcher's.
    status = relaunchUnderMpirun(
        withoutDsrunFlag(withoutDsrunFlag(args, "--np"), "--hostfile"),
        unsigned(options.np), options.hostfile, error);
  if (!error.empty()) {
    std::fflush(stdout);
    std::fprintf(stderr, "dsrun: %s\n", error.c_str());
  }
  return status;
}
} // namespace dsc::rt
