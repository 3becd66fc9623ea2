//===- PassOptions.h - a ds_config.json as pass options ---------*- C++ -*-===//
//
// The one mapping from DeepSpeed's configuration keys to the options of
// dsc's passes. A key that reaches no pass (fp16, offload) is refused by dsc
// before this is called, or recorded in the plan's config_json for dsrun.
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
