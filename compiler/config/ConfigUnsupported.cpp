//===- ConfigUnsupported.cpp - DeepSpeed keys dsc does not implement ------===//
//
// A key DeepSpeed knows and dsc does not is not a typo: it gets "not
// supported yet" and what dsc offers instead, not "unknown key (did you
// mean ...)". The list follows DeepSpeed's config documentation; keys that
// do not change what a step computes and that dsc accepts and ignores are
// in Config.cpp instead.
//
//===----------------------------------------------------------------------===//
#include "compiler/config/ConfigUnsupported.h"

namespace dsc::config {
namespace {

struct Unsupported {
  const char *section; ///< the JSON path of the object holding the key
  const char *key;
  const char *instead;
};

constexpr const char *kMonitor =
    "dsc writes tensorboard, csv_monitor and wandb (through dsc-train and "
    "dsc.train), and dsrun --metrics every step's loss, lr, grad norm, loss "
    "scale, tokens/s and memory as JSON lines";

constexpr Unsupported kUnsupported[] = {
    {"$", "comet", kMonitor},
    {"$", "flops_profiler",
     "dsc --report gives each program's FLOPs before launch"},
    {"$", "comms_logger",
     "dsc --report gives the bytes each step hands to collectives; dsrun "
     "--trace times them"},
    {"$", "memory_breakdown",
     "dsc --report gives the bytes per category before launch; dsrun "
     "--metrics measures them"},
    {"$", "autotuning",
     "dsc --report predicts the memory of a configuration without running "
     "it"},
    {"$", "elasticity", "a plan is compiled for one world size"},
    {"$", "pipeline", "dsc has no pipeline parallelism"},
    {"$", "sparse_attention", "dsc's attention is dense and causal"},
    {"$", "amp", "use bf16 or fp16 (docs/precision.md)"},
    {"$", "data_efficiency", "dsrun draws batches uniformly"},
    {"$", "curriculum_learning", "dsrun draws batches uniformly"},
    {"$", "compression_training", "dsc trains in fp32, bf16 or fp16"},
    {"$", "aio", "dsc has no NVMe offload"},
    {"$", "checkpoint",
     "dsrun --save-dir checkpoints, in dsc's layout (docs/checkpoints.md)"},
    {"$", "data_types", "use communication_data_type"},
    {"$.zero_optimization", "cpu_offload",
     "DeepSpeed's old name; write offload_optimizer {\"device\": \"cpu\"} "
     "(docs/offload.md)"},
    {"$.zero_optimization", "zero_hpz_partition_size",
     "dsc shards over all ranks"},
    {"$.zero_optimization", "zero_quantized_weights",
     "dsc's collectives carry the model's dtype"},
    {"$.zero_optimization", "zero_quantized_gradients",
     "dsc's collectives carry the model's dtype"},
    {"$.zero_optimization", "mics_shard_size", "dsc shards over all ranks"},
    {"$.optimizer.params", "amsgrad",
     "dsc's AdamW keeps no maximum of the second moments"},
    {"$.fp16", "fp16_master_weights_and_grads",
     "dsc keeps fp32 master weights and 16-bit gradients"},
};

} // namespace

const char *unsupportedDeepSpeedKey(llvm::StringRef section,
                                    llvm::StringRef key) {
  for (const Unsupported &u : kUnsupported)
    if (section == u.section && key == u.key)
      return u.instead;
  return nullptr;
}

} // namespace dsc::config
