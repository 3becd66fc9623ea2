//===- Registry.h - the backends this process can use -----------*- C++ -*-===//
//
// Backends register a factory under their name; dsrun creates the one
// `--backend` names. The registry depends on no backend: executables link
// the backends they want and call registerAvailableBackends()
// (AllBackends.h) before the first createBackend.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_BACKENDS_REGISTRY_H
#define DSC_RUNTIME_BACKENDS_REGISTRY_H

#include "runtime/backends/Backend.h"

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace dsc::rt {

/// Creates a backend, or returns null with one line in `error` when it is
/// compiled in but cannot run here (no GPU, say).
using BackendFactory = std::unique_ptr<Backend> (*)(std::string &error);

/// Registers (or replaces) the backend `name`.
void registerBackend(std::string name, BackendFactory factory);

/// The registered names, sorted.
std::vector<std::string> backendNames();

/// The backend `name`; null and one line ("unknown backend 'x' (this build
/// has: cpu)", or the factory's reason) otherwise.
std::unique_ptr<Backend> createBackend(std::string_view name,
                                       std::string &error);

} // namespace dsc::rt

#endif // DSC_RUNTIME_BACKENDS_REGISTRY_H
