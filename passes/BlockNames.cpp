//===- BlockNames.cpp - which transformer block a parameter belongs to ----===//
#include "passes/BlockNames.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

std::optional<std::pair<std::string, int64_t>>
mlir::ds::blockOf(llvm::StringRef name) {
  size_t start = 0;
  while (start < name.size()) {
    size_t end = name.find('.', start);
    llvm::StringRef part = name.slice(start, end);
    int64_t n;
    if (!part.empty() && llvm::all_of(part, llvm::isDigit) &&
        !part.getAsInteger(10, n))
      return std::make_pair(name.take_front(start).str(), n);
    if (end == llvm::StringRef::npos)
      break;
    start = end + 1;
  }
  return std::nullopt;
}
