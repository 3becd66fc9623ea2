//===- DsrunMain.h - the dsrun tool as a library call -----------*- C++ -*-===//
//
// tools/dsrun.cpp is one line over runDsrunMain: parse flags, load and verify
// the plan, create a Session, initialize or load the weights, train, export.
// Exit status: 0 done, 1 training failed, 2 bad input (plan, data, flags).
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_TOOLING_DSRUNMAIN_H
#define DSC_RUNTIME_TOOLING_DSRUNMAIN_H

namespace dsc::rt {

int runDsrunMain(int argc, char **argv);

} // namespace dsc::rt

#endif // DSC_RUNTIME_TOOLING_DSRUNMAIN_H
