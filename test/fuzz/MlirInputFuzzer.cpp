//===- MlirInputFuzzer.cpp - libFuzzer target: dsc's MLIR input path ------===//
//
// Any bytes as a model.mlir, through what dsc does with one before the
// compile proper: the nesting check, MLIR's parser with the ds dialect,
// the verifier, and the input contract (ds-verify-input with dsrun's
// inputs). Each refuses with diagnostics or passes; none may crash.
//
//===----------------------------------------------------------------------===//

#include "compiler/DscMain.h"
#include "compiler/Pipelines.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/SourceMgr.h"

#include <string>

using namespace mlir;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static MLIRContext *context = [] {
    DialectRegistry registry;
    dsc::registerAll(registry); // dsc's dialects, as dsc registers them
    auto *c = new MLIRContext(registry);
    c->loadAllAvailableDialects();
    c->printOpOnDiagnostic(false);
    return c;
  }();
  llvm::StringRef text(reinterpret_cast<const char *>(data), size);
  std::string error;
  if (!dsc::checkNesting(text, "fuzz.mlir", error))
    return 0;
  // Diagnostics are the expected outcome for most inputs: swallow them.
  ScopedDiagnosticHandler quiet(context,
                                [](Diagnostic &) { return success(); });
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBufferCopy(text),
                               llvm::SMLoc());
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, context);
  if (!module || failed(verify(*module)))
    return 0;
  PassManager pm(context);
  ds::DsVerifyInputOptions options;
  options.dsrunInputs = true;
  pm.addPass(ds::createDsVerifyInput(options));
  (void)pm.run(*module);
  return 0;
}
