//===- Registry.h - the backends this process can use -----------*- C++ -*-===//
//
// Backends register a factory under their name; dsrun creates the one
// `--backend` names, with the options written after a colon
// (`cuda:graphs=off,tf32=on`), which the factory checks before it touches
// any device. The registry depends on no backend: executables link
// the backends they want and call registerAvailableBackends()
// (AllBackends.h) before the first createBackend.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_BACKENDS_REGISTRY_H
#define DSC_RUNTIME_BACKENDS_REGISTRY_H

#include "runtime/backends/Backend.h"

#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace dsc::rt {

/// `key=value` pairs from `--backend NAME:key=value,...`.
using BackendOptions = std::map<std::string, std::string, std::less<>>;

/// Creates a backend, or returns null with one line in `error` when an
/// option is not the backend's or it is compiled in but cannot run here
/// (no GPU, say).
using BackendFactory = std::unique_ptr<Backend> (*)(
    const BackendOptions &options, std::string &error);

/// False + "unknown option 'k' (backend NAME takes: a, b)" ("takes none")
/// unless every key of `options` is in `known`.
bool checkBackendOptions(std::string_view backend,
                         const BackendOptions &options,
                         std::initializer_list<std::string_view> known,
                         std::string &error);

/// The switch `key` (on or off; `fallback` when absent), or false + one
/// line when its value is neither.
bool backendSwitch(const BackendOptions &options, std::string_view key,
                   bool fallback, bool &value, std::string &error);

/// The kernels any backend's host-placed instructions run (offload's CPU
/// optimizer beside a GPU). The CPU backend provides them when it
/// registers; other backends look them up here rather than include that
/// backend's headers. Empty when no provider is registered.
using HostKernelLookup = KernelVariants (*)(std::string_view name);
void registerHostKernels(HostKernelLookup lookup);
KernelVariants hostKernelVariants(std::string_view name);

/// Registers (or replaces) the backend `name`.
void registerBackend(std::string name, BackendFactory factory);

/// The registered names, sorted.
std::vector<std::string> backendNames();

/// The backend `spec` names (`NAME` or `NAME:key=value,...`); null and one
/// line ("unknown backend 'x' (this build has: cpu)", a malformed option,
/// or the factory's reason) otherwise.
std::unique_ptr<Backend> createBackend(std::string_view spec,
                                       std::string &error);

} // namespace dsc::rt

#endif // DSC_RUNTIME_BACKENDS_REGISTRY_H
