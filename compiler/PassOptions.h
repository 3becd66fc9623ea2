//===- PassOptions.h - a ds_config.json as pass options ---------*- C++ -*-===//
//
// The one mapping from DeepSpeed's configuration keys to the options of
// dsc's passes. A key that reaches no pass is refused by dsc before this is
// called, or is a run-time setting (the LR schedule, fp16's loss scaler)
// that ds-emit-plan writes into the plan's tables straight from the config
// (compiler/plan/Emit.cpp), as it writes the config itself (config_json).
//
//===----------------------------------------------------------------------===//
#ifndef DSC_COMPILER_PASSOPTIONS_H
#define DSC_COMPILER_PASSOPTIONS_H

#include "compiler/Pipelines.h"
#include "compiler/config/Config.h"

namespace dsc {

/// Every pass option `config` sets, for a run on `worldSize` ranks; the
/// passes' defaults elsewhere.
TrainOptions passOptionsFromConfig(const DsConfig &config, int64_t worldSize);

} // namespace dsc

#endif // DSC_COMPILER_PASSOPTIONS_H
