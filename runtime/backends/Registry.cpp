//===- Registry.cpp - the backends this process can use -------------------===//
#include "runtime/backends/Registry.h"

#include <map>
#include <mutex>

namespace dsc::rt {
namespace {

struct Registry {
  std::mutex mutex;
  std::map<std::string, BackendFactory, std::less<>> factories;
};

Registry &registry() {
  static Registry r;
  return r;
}

} // namespace

void registerBackend(std::string name, BackendFactory factory) {
  Registry &r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.factories[std::move(name)] = factory;
}

std::vector<std::string> backendNames() {
  Registry &r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::vector<std::string> names;
  for (const auto &entry : r.factories)
    names.push_back(entry.first);
  return names;
}

std::unique_ptr<Backend> createBackend(std::string_view name,
                                       std::string &error) {
  BackendFactory factory = nullptr;
  {
    Registry &r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    auto it = r.factories.find(name);
    if (it != r.factories.end())
      factory = it->second;
  }
  if (!factory) {
    std::string known;
    for (const std::string &n : backendNames())
      known += (known.empty() ? "" : ", ") + n;
    error = "unknown backend '" + std::string(name) +
            "' (this build has: " + (known.empty() ? "none" : known) + ")";
    return nullptr;
  }
  std::unique_ptr<Backend> backend = factory(error);
  if (!backend && error.empty())
    error = "backend '" + std::string(name) + "' is not available here";
  return backend;
}

} // namespace dsc::rt
