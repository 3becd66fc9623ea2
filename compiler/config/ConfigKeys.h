//===- ConfigKeys.h - every ds_config.json key dsc knows, and its state -*- C++
//-*-===//
//
// One table of the keys of DeepSpeed's config (and dsc's own additions),
// each with what dsc does with it. The reader takes its known keys from
// here (Section::checkKeys), so a key cannot be read without being listed;
// docs/config.md's table is printed from it (dsc-config-keys), so the
// documentation cannot drift from the reader.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_COMPILER_CONFIG_CONFIGKEYS_H
#define DSC_COMPILER_CONFIG_CONFIGKEYS_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <string>
#include <vector>

namespace dsc::config {

enum class KeyState {
  Works,        ///< read and honoured (maybe with limits in the note)
  NoEffect,     ///< accepted; the note says why it changes nothing in dsc
  Refused,      ///< read so the reader can refuse it with its own message
  NotSupported, ///< DeepSpeed's, not dsc's: "not supported yet (note)";
                ///< accepted silently when switched off
};

struct ConfigKey {
  const char *section; ///< the JSON path of the object holding the key
  const char *key;
  KeyState state;
  const char *note;
  /// For scheduler.params: the scheduler types taking the key
  /// (space-separated); null for all.
  const char *only = nullptr;
};

/// Every key, grouped by section in the order docs/config.md lists them.
llvm::ArrayRef<ConfigKey> configKeys();

/// The keys of the object at `section` that the reader reads (every state
/// but NotSupported), for a scheduler's params those `schedulerType` takes.
/// "$.bfloat16" is read as "$.bf16" (its older name).
std::vector<llvm::StringRef>
knownConfigKeys(llvm::StringRef section, llvm::StringRef schedulerType = {});

/// What dsc offers instead of a DeepSpeed key it does not implement; null
/// for other keys (and for keys DeepSpeed does not have either).
const char *unsupportedDeepSpeedKey(llvm::StringRef section,
                                    llvm::StringRef key);

/// Why a key that dsc accepts has no effect in dsc; null for other keys.
const char *noEffectConfigKey(llvm::StringRef section, llvm::StringRef key);

/// Hugging Face's Trainer fills a config's "auto" values from its
/// TrainingArguments; without the Trainer, dsc resolves these keys' "auto"
/// to those arguments' defaults (what an HF user gets by not setting them),
/// other keys' to DeepSpeed's defaults.
struct HuggingFaceAuto {
  const char *path;     ///< the key's JSON path
  double value;         ///< the TrainingArguments default
  const char *argument; ///< its name there
};
const HuggingFaceAuto *huggingFaceAuto(llvm::StringRef path);

/// docs/config.md's generated part: a table per section.
std::string configKeysMarkdown();

} // namespace dsc::config

#endif // DSC_COMPILER_CONFIG_CONFIGKEYS_H
