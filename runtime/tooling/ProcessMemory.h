//===- ProcessMemory.h - this process's resident memory ---------*- C++ -*-===//
//
// What the operating system says the process holds, as opposed to what the
// plan says it should: the measurement behind dsrun's rss_* metrics. Read
// from /proc/self/status (VmRSS, VmHWM); zero where that file does not exist.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_TOOLING_PROCESSMEMORY_H
#define DSC_RUNTIME_TOOLING_PROCESSMEMORY_H

#include <cstdint>

namespace dsc::rt {

struct ProcessMemory {
  uint64_t residentBytes = 0; ///< VmRSS: resident now
  uint64_t peakBytes = 0;     ///< VmHWM: the most ever resident at once
};

/// The current reading; both fields 0 when the system does not report them.
ProcessMemory readProcessMemory();

} // namespace dsc::rt

#endif // DSC_RUNTIME_TOOLING_PROCESSMEMORY_H
