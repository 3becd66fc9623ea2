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

/// Runs ds-opt (mlir-opt over dsc's registry) with dsc's input and output
/// rules: inputs read whole under a limit and checked for nesting, the
/// output written only when the run succeeds and never over an input.
int runDsOptMain(int argc, char **argv);

/// A tool's multi-line complaint as one line: each line without `prefix`,
/// blank lines dropped, the rest joined with "; ".
std::string joinToolLines(llvm::StringRef text, llvm::StringRef prefix);
} // namespace dsc

#endif // DSC_COMPILER_DSCMAIN_H
