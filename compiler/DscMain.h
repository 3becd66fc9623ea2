//===- DscMain.h - the library behind the dsc tool --------------*- C++ -*-===//
#ifndef DSC_COMPILER_DSCMAIN_H
#define DSC_COMPILER_DSCMAIN_H

#include "llvm/ADT/StringRef.h"

#include <string>

namespace dsc {
/// Runs dsc with command-line arguments; returns the process exit status.
int runDscMain(int argc, char **argv);

/// False + one line naming `name` and the line when `text` nests brackets
/// deeper than any model needs (MLIR's parser recurses per level).
bool checkNesting(llvm::StringRef text, llvm::StringRef name,
                  std::string &error);
} // namespace dsc

#endif // DSC_COMPILER_DSCMAIN_H
