//===- PlanFuzzer.cpp - libFuzzer target: the plan loader and a Session ---===//
//
// Any bytes as a plan file: the loader must refuse them with one line or
// load them, and a loaded plan must create a Session, initialize and run
// its programs or fail with one line, never crash. Most mutations fail the
// checksum, so each input is resealed first (when it still verifies as a
// FlatBuffer) to reach the semantic checks and the kernels behind them.
//
//===----------------------------------------------------------------------===//

#include "runtime/backends/AllBackends.h"
#include "runtime/backends/Registry.h"
#include "runtime/exec/Session.h"
#include "runtime/plan/PlanChecksum.h"
#include "runtime/schema/plan_generated.h"

#include <cstdlib>
#include <string>
#include <vector>

using namespace dsc;
using namespace dsc::rt;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static std::unique_ptr<Backend> backend = [] {
    registerAvailableBackends();
    std::string error;
    return createBackend("cpu", error);
  }();
  std::vector<uint8_t> bytes(data, data + size);
  std::string error;
  if (size >= 8 && flatbuffers::Verifier(bytes.data(), bytes.size())
                       .VerifyBuffer<plan::Plan>(nullptr))
    plan::sealPlan(bytes);
  auto loaded =
      LoadedPlan::fromBytes(std::move(bytes), "fuzz.dsplan", error, *backend);
  if (!loaded) {
    if (error.empty() || error.find('\n') != std::string::npos)
      std::abort(); // one line, always
    return 0;
  }
  // A pipeline's file: each stage's plan is loaded as a file is (its own
  // checksum guards it, so mutations reach the stages' checks rarely).
  for (uint32_t s = 0; s < loaded->stageCount(); ++s)
    if (!loaded->stage(s, error) &&
        (error.empty() || error.find('\n') != std::string::npos))
      std::abort();
  if (loaded->stageCount())
    return 0;
  // Small arenas only: a plan may ask for any size, legitimately.
  uint64_t total = 0;
  if (const auto *arenas = loaded->plan().arenas())
    for (const plan::Arena *a : *arenas)
      total += a->bytes();
  if (total > (1u << 20))
    return 0;
  SessionOptions options;
  options.worldSize = int(loaded->plan().world_size());
  auto session = Session::create(*loaded, options, error);
  if (!session)
    return 0;
  session->initVariables();
  for (const char *program : {"init", "micro_step", "apply"})
    if (session->hasProgram(program))
      session->run(program, 1, error);
  return 0;
}
