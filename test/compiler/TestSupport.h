//===- TestSupport.h - helpers shared by the compiler test suites ---------===//
#ifndef DSC_TEST_COMPILER_TESTSUPPORT_H
#define DSC_TEST_COMPILER_TESTSUPPORT_H

#include "test/support/TestSeed.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>

namespace dsc::test {

/// Collects the context's diagnostics, for assertion messages.
class DiagnosticCapture {
public:
  explicit DiagnosticCapture(mlir::MLIRContext &ctx)
      : handler(&ctx, [this](mlir::Diagnostic &d) {
          llvm::raw_string_ostream os(text);
          os << d.getLocation() << ": " << d << "\n";
          return mlir::success();
        }) {}
  std::string text;

private:
  mlir::ScopedDiagnosticHandler handler;
};

} // namespace dsc::test

#endif // DSC_TEST_COMPILER_TESTSUPPORT_H
