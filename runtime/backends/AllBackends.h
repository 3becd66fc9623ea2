//===- AllBackends.h - register every backend of this build -----*- C++ -*-===//
//
// The one list of backends compiled into this build (the CPU backend always;
// others as CMake finds their toolkits). Executables call it once before
// createBackend; libraries never do, so they link no backend.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_BACKENDS_ALLBACKENDS_H
#define DSC_RUNTIME_BACKENDS_ALLBACKENDS_H

namespace dsc::rt {

void registerAvailableBackends();

} // namespace dsc::rt

#endif // DSC_RUNTIME_BACKENDS_ALLBACKENDS_H
