//===- ProcessMemory.cpp - this process's resident memory -----------------===//
#include "runtime/tooling/ProcessMemory.h"

#include <cstdio>
#include <cstring>

namespace dsc::rt {

ProcessMemory readProcessMemory() {
  ProcessMemory m;
  std::FILE *f = std::fopen("/proc/self/status", "r");
  if (!f)
    return m;
  char line[256];
  unsigned long long kib = 0;
  while (std::fgets(line, sizeof(line), f)) {
    if (std::sscanf(line, "VmRSS: %llu kB", &kib) == 1)
      m.residentBytes = uint64_t(kib) * 1024;
    else if (std::sscanf(line, "VmHWM: %llu kB", &kib) == 1)
      m.peakBytes = uint64_t(kib) * 1024;
  }
  std::fclose(f);
  return m;
}

} // namespace dsc::rt
