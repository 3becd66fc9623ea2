//===- ConfigTestSupport.h - parsing helpers of the config tests -*- C++
//-*-===//
#ifndef DSC_TEST_COMPILER_CONFIGTESTSUPPORT_H
#define DSC_TEST_COMPILER_CONFIGTESTSUPPORT_H

#include "compiler/config/Config.h"

#include "llvm/ADT/StringRef.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace dsc::configtest {

using dsc::DsConfig;
using dsc::parseDsConfig;
using dsc::toJson;

inline constexpr const char *kFile = "ds_config.json";

/// Parses `text`, expecting success.
inline DsConfig parseOk(llvm::StringRef text, int64_t worldSize = 1,
                        int64_t defaultMicroBatch = 4) {
  DsConfig config;
  std::string error;
  EXPECT_TRUE(
      parseDsConfig(text, kFile, worldSize, defaultMicroBatch, config, error))
      << text.str();
  EXPECT_EQ(error, "");
  return config;
}

/// Parses `text`, expecting failure; returns the error after checking it is
/// one line starting with the file name and a JSON path.
inline std::string errorOf(llvm::StringRef text, int64_t worldSize = 1) {
  DsConfig config;
  config.trainBatchSize = 12345;
  std::string error;
  EXPECT_FALSE(parseDsConfig(text, kFile, worldSize, 4, config, error))
      << text.str();
  EXPECT_EQ(error.find('\n'), std::string::npos) << error;
  EXPECT_EQ(error.rfind("ds_config.json: $", 0), 0u) << error;
  EXPECT_EQ(config.trainBatchSize, 12345) << "output changed on failure";
  return error;
}

struct ErrorCase {
  const char *json;
  const char *error;
  int64_t worldSize = 1;
};

inline void expectErrors(const std::vector<ErrorCase> &cases) {
  for (const ErrorCase &c : cases) {
    SCOPED_TRACE(c.json);
    EXPECT_EQ(errorOf(c.json, c.worldSize), c.error);
  }
}

} // namespace dsc::configtest

#endif // DSC_TEST_COMPILER_CONFIGTESTSUPPORT_H
