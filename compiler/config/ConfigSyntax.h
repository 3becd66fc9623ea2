//===- ConfigSyntax.h - what llvm::json does not check in a config -*- C++
//-*-===//
//
// Internal to compiler/config. llvm::json keeps the last of duplicate keys
// (DeepSpeed's loader refuses them) and parses nesting recursively (a file
// of 50000 '[' overflows the stack). Before it parses, one iterative pass
// (nlohmann::json's SAX parser) refuses both.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_COMPILER_CONFIG_CONFIGSYNTAX_H
#define DSC_COMPILER_CONFIG_CONFIGSYNTAX_H

#include "llvm/ADT/StringRef.h"

#include <string>

namespace dsc::config {

/// Nesting a config may have; DeepSpeed's go four levels deep.
constexpr size_t kMaxConfigDepth = 64;

/// False with `path` ("$.optimizer.params") and `what` set for the first
/// duplicate key or the first container nested deeper than
/// kMaxConfigDepth. Malformed JSON passes: the parser that follows says
/// where it is malformed.
bool checkConfigSyntax(llvm::StringRef text, std::string &path,
                       std::string &what);

} // namespace dsc::config

#endif // DSC_COMPILER_CONFIG_CONFIGSYNTAX_H
