//===- AllBackends.cpp - register every backend of this build -------------===//
#include "runtime/backends/AllBackends.h"

#include "runtime/backends/cpu/CpuBackend.h"

namespace dsc::rt {

void registerAvailableBackends() { registerCpuBackend(); }

} // namespace dsc::rt
