//===- DsOptMain.cpp - ds-opt: mlir-opt with dsc's rules for files --------===//
//
// mlir-opt's own driver opens -o before it parses the input and deletes it
// when the run fails, so `ds-opt bad.mlir -o keep.mlir` lost keep.mlir and
// `ds-opt x.mlir -o x.mlir` replaced its input. Here the input is read as
// dsc reads it (a regular file or "-", under a size limit, nesting checked
// before MLIR's recursive parser sees it), the output is checked against
// the input first (PathRules.h), and it is written only once the run has
// succeeded, through a temporary renamed into place (OutputPath.h).
//
//===----------------------------------------------------------------------===//

#include "compiler/DscMain.h"
#include "compiler/Pipelines.h"
#include "runtime/core/InputFile.h"
#include "runtime/core/OutputPath.h"
#include "runtime/core/PathRules.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

namespace dsc {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitBadInput = 2;
constexpr uint64_t kMaxInputBytes = uint64_t(1) << 30;

int failWith(const std::string &line) {
  llvm::errs() << "ds-opt: " << line << "\n";
  return kExitBadInput;
}

} // namespace

int runDsOptMain(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  mlir::DialectRegistry registry;
  registerAll(registry);
  auto [inputPath, outputPath] = mlir::registerAndParseCLIOptions(
      argc, argv, "dsc optimizer driver\n", registry);
  mlir::MlirOptMainConfig config =
      mlir::MlirOptMainConfig::createFromCLOptions();
  if (config.shouldShowDialects()) // prints, reads and writes nothing
    return mlir::asMainReturnCode(
        mlir::MlirOptMain(argc, argv, inputPath, outputPath, registry));

  std::string error;
  if (outputPath.empty())
    return failWith("-o: expected a file name (or - for standard output)");
  if (!checkOutputsDistinct({{"the input", inputPath}}, {{"-o", outputPath}},
                            error))
    return failWith(error);
  std::string text;
  if (!rt::readWholeInput(inputPath, text, error, kMaxInputBytes))
    return failWith(error);
  std::string name = inputPath == "-" ? "<stdin>" : inputPath;
  if (!checkNesting(text, name, error))
    return failWith(error);

  std::string result;
  llvm::raw_string_ostream os(result);
  llvm::raw_ostream &out =
      outputPath == "-" ? static_cast<llvm::raw_ostream &>(llvm::outs()) : os;
  if (mlir::failed(mlir::MlirOptMain(
          out, llvm::MemoryBuffer::getMemBufferCopy(text, name), registry,
          config)))
    return kExitBadInput; // MLIR has said why; -o is untouched
  if (outputPath == "-") {
    llvm::outs().flush();
    if (llvm::outs().has_error()) {
      llvm::outs().clear_error();
      return failWith("cannot write to standard output");
    }
    return kExitOk;
  }
  if (!writeOutput(outputPath, result.data(), result.size(), error))
    return failWith("cannot write '" + outputPath + "': " + error);
  return kExitOk;
}

} // namespace dsc
