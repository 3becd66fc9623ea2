//===- DscMain.h - the library behind the dsc tool --------------*- C++ -*-===//
#ifndef DSC_COMPILER_DSCMAIN_H
#define DSC_COMPILER_DSCMAIN_H

namespace dsc {
/// Runs dsc with command-line arguments; returns the process exit status.
int runDscMain(int argc, char **argv);
} // namespace dsc

#endif // DSC_COMPILER_DSCMAIN_H
