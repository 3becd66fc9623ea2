//===- ConfigUnsupported.h - DeepSpeed keys dsc does not implement -*- C++
//-*-===//
#ifndef DSC_COMPILER_CONFIG_CONFIGUNSUPPORTED_H
#define DSC_COMPILER_CONFIG_CONFIGUNSUPPORTED_H

#include "llvm/ADT/StringRef.h"

namespace dsc::config {

/// What dsc offers instead of DeepSpeed key `key` of the object at `section`
/// ("$", "$.zero_optimization") that dsc does not implement; null for keys
/// DeepSpeed does not have either (ConfigUnsupported.cpp).
const char *unsupportedDeepSpeedKey(llvm::StringRef section,
                                    llvm::StringRef key);

} // namespace dsc::config

#endif // DSC_COMPILER_CONFIG_CONFIGUNSUPPORTED_H
