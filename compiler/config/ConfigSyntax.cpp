//===- ConfigSyntax.cpp - duplicate keys and nesting depth in a config ----===//
#include "compiler/config/ConfigSyntax.h"

#include "runtime/core/JsonSyntax.h"

namespace dsc::config {

bool checkConfigSyntax(llvm::StringRef text, std::string &path,
                       std::string &what) {
  JsonSyntaxRules rules;
  rules.maxDepth = kMaxConfigDepth;
  rules.duplicateHint = "DeepSpeed refuses duplicate keys; which one is meant?";
  rules.reportMalformed = false; // llvm::json says where, with its position
  return checkJsonSyntax(std::string_view(text.data(), text.size()), rules,
                         path, what);
}

} // namespace dsc::config
