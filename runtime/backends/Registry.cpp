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
  HostKernelLookup hostKernels = nullptr;
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

void registerHostKernels(HostKernelLookup lookup) {
  Registry &r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.hostKernels = lookup;
}

KernelVariants hostKernelVariants(std::string_view name) {
  Registry &r = registry();
  HostKernelLookup lookup = nullptr;
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    lookup = r.hostKernels;
  }
  return lookup ? lookup(name) : KernelVariants{};
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

void addKernelVariants(std::vector<KernelInfo> &table,
                       const KernelContract &contract, KernelColumn column,
                       KernelFn fn) {
  for (std::string_view signature : contract.column(column))
    table.push_back(KernelInfo{contract.name, signature, contract.numInputs,
                               contract.numOutputs, contract.numIntAttrs,
                               contract.numFloatAttrs, fn});
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

bool checkBackendOptions(std::string_view backend,
                         const BackendOptions &options,
                         std::initializer_list<std::string_view> known,
                         std::string &error) {
  for (const auto &[key, value] : options) {
    if (std::find(known.begin(), known.end(), key) != known.end())
      continue;
    std::string takes;
    for (std::string_view k : known)
      takes += (takes.empty() ? "" : ", ") + std::string(k);
    error = "unknown option '" + key + "' (backend " + std::string(backend) +
            " takes " + (takes.empty() ? "none" : takes) + ")";
    return false;
  }
  return true;
}

bool backendSwitch(const BackendOptions &options, std::string_view key,
                   bool fallback, bool &value, std::string &error) {
  auto it = options.find(key);
  if (it == options.end()) {
    value = fallback;
    return true;
  }
  if (it->second != "on" && it->second != "off") {
    error =
        "option " + it->first + " must be on or off, got '" + it->second + "'";
    return false;
  }
  value = it->second == "on";
  return true;
}

namespace {
/// "a=1,b=2" into `options`; false + one line on an item without '=' or
/// a key given twice.
bool parseOptions(std::string_view text, BackendOptions &options,
                  std::string &error) {
  if (text.empty())
    return true;
  for (bool more = true; more;) {
    size_t comma = text.find(',');
    more = comma != std::string_view::npos;
    std::string_view item = text.substr(0, comma);
    text = more ? text.substr(comma + 1) : "";
    size_t eq = item.find('=');
    if (eq == 0 || eq == std::string_view::npos) {
      error = "option '" + std::string(item) + "' is not KEY=VALUE";
      return false;
    }
    std::string key(item.substr(0, eq));
    if (!options.emplace(key, std::string(item.substr(eq + 1))).second) {
      error = "option '" + key + "' given twice";
      return false;
    }
  }
  return true;
}
} // namespace

std::unique_ptr<Backend> createBackend(std::string_view spec,
                                       std::string &error) {
  const size_t colon = spec.find(':');
  const std::string_view name = spec.substr(0, colon);
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
  BackendOptions options;
  if (colon != std::string_view::npos &&
      !parseOptions(spec.substr(colon + 1), options, error))
    return nullptr;
  std::unique_ptr<Backend> backend = factory(options, error);
  if (!backend && error.empty())
    error = "backend '" + std::string(name) + "' is not available here";
  return backend;
}

} // namespace dsc::rt
