//===- dsrun.cpp - runs a dsc plan ----------------------------------------===//
#include "runtime/tooling/DsrunMain.h"

int main(int argc, char **argv) { return dsc::rt::launchDsrun(argc, argv); }
