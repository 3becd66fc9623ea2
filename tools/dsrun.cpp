//===- dsrun.cpp - runs a dsc plan ----------------------------------------===//
#include "runtime/backends/AllBackends.h"
#include "runtime/tooling/DsrunMain.h"

int main(int argc, char **argv) {
  dsc::rt::registerAvailableBackends(); // the tooling links none itself
  return dsc::rt::launchDsrun(argc, argv);
}
