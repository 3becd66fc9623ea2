//===- Registry.cpp - the backends this process can use -------------------===//
#include "runtime/backends/Registry.h"

#include <algorithm>
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

void sortKernelTable(std::vector<KernelInfo> &table) {
  std::stable_sort(
      table.begin(), table.end(),
      [](const KernelInfo &x, const KernelInfo &y) { return x.name < y.name; });
}

KernelVariants variantsOf(const std::vector<KernelInfo> &table,
                          std::string_view name) {
  auto first = std::lower_bound(
      table.begin(), table.end(), name,
      [](const KernelInfo &k, std::string_view n) { return k.name < n; });
  auto last = first;
  while (last != table.end() && last->name == name)
    ++last;
  return {table.data() + (first - table.begin()), size_t(last - first)};
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
