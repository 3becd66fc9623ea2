//===- TestSupport.h - helpers shared by the compiler test suites ---------===//
#ifndef DSC_TEST_COMPILER_TESTSUPPORT_H
#define DSC_TEST_COMPILER_TESTSUPPORT_H

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>

namespace dsc::test {

/// A fresh seed per test, or DSC_TEST_SEED to replay a failure.
inline uint64_t testSeed() {
  if (const char *s = std::getenv("DSC_TEST_SEED"))
    return std::strtoull(s, nullptr, 0);
  std::random_device rd;
  return (uint64_t(rd()) << 32) | rd();
}

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
