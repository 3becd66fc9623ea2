//===- Config.cpp - DeepSpeed's ds_config.json for dsc --config -----------===//
//
// What this relies on from DeepSpeed ("DeepSpeed Configuration JSON",
// deepspeed.runtime.lr_schedules, the engine's optimizer set-up and
// runtime/constants.py):
//
// - Batch: train_batch_size = train_micro_batch_size_per_gpu *
//   gradient_accumulation_steps * number of GPUs. Any two give the third;
//   train_batch_size alone or the micro batch alone means
//   gradient_accumulation_steps 1. DeepSpeed needs one of the first two;
//   dsc uses the caller's default micro batch instead.
// - optimizer.type: DeepSpeed lower-cases the names of its own optimizers,
//   so "adam", "ADAMW" work. params are the optimizer's constructor
//   arguments. "Adam" runs as AdamW (decoupled decay) unless adam_w_mode is
//   false; "AdamW" ignores adam_w_mode. max_grad_norm in params is an error
//   there too (use gradient_clipping). Defaults lr 1e-3, betas
//   (0.9, 0.999), eps 1e-8. DeepSpeed's fused kernels default weight_decay
//   to 0 for both names; dsc follows torch.optim instead: 0 for Adam, 0.01
//   for AdamW.
// - scheduler.type is a class name of deepspeed.runtime.lr_schedules, case
//   sensitive; params are its constructor's keyword arguments (an unknown
//   one is a TypeError there, an unknown key here):
//     WarmupLR(warmup_min_lr=0, warmup_max_lr=1e-3, warmup_num_steps=1000,
//              warmup_type="log", last_batch_iteration=-1)
//     WarmupDecayLR(total_num_steps, <WarmupLR's>): total_num_steps <
//              warmup_num_steps is only a warning there (a note here)
//     WarmupCosineLR(total_num_steps, warmup_min_ratio=0,
//              warmup_num_steps=1000, warmup_type="log",
//              cos_min_ratio=1e-4, last_batch_iteration=-1)
//   WarmupLR sets the lr itself (warmup_max_lr after warm-up), ignoring
//   optimizer.params.lr; WarmupCosineLR scales optimizer.params.lr. Hugging
//   Face's "auto" for warmup_max_lr means the optimizer's lr.
// - fp16 (runtime defaults; the docs table still shows 32 and 1000):
//   loss_scale 0 = dynamic, initial_scale_power 16, loss_scale_window 1000,
//   hysteresis 2, min_loss_scale 1. bf16 cannot be combined with fp16;
//   "bfloat16" is bf16's older name.
// - gradient_clipping: runtime default 0.0, i.e. off (the docs table shows
//   1.0).
// - zero_optimization (runtime defaults): stage 0, reduce_bucket_size 5e8,
//   contiguous_gradients true, overlap_comm false,
//   stage3_prefetch_bucket_size 5e7, stage3_param_persistence_threshold 1e5,
//   stage3_max_live_parameters 1e9. offload_param is for stage 3 only,
//   offload_optimizer for stages 1-3 (DeepSpeed silently ignores them
//   elsewhere; dsc says so). Devices none | cpu | nvme; dsc has no nvme.
// - activation_checkpointing: six keys, booleans default false,
//   number_checkpoints default null.
// - Logging and communication-tuning keys (steps_per_print,
//   wall_clock_breakdown, dump_state, prescale_gradients,
//   gradient_predivide_factor, ...) do not change what a step computes.
//
// Duplicate keys are refused, as DeepSpeed does (ConfigSyntax.h: llvm::json
// would keep the last). Every problem of a file is reported in one run, one
// line each (Reader in ConfigReader.h): the keys of a section in sorted order
// (llvm::json::Object is unordered), the sections in the order read below.
//
//===----------------------------------------------------------------------===//

#include "compiler/config/Config.h"
#include "compiler/config/ConfigReader.h"
#include "compiler/config/ConfigSyntax.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>

using namespace dsc;
using llvm::StringRef;
using llvm::Twine;
namespace json = llvm::json;
using namespace dsc::config;

namespace {

//===----------------------------------------------------------------------===//
// Sections
//===----------------------------------------------------------------------===//

constexpr StringRef kTrainBatch = "train_batch_size";
constexpr StringRef kMicroBatch = "train_micro_batch_size_per_gpu";
constexpr StringRef kGradAccum = "gradient_accumulation_steps";

/// One member of the batch triple as written: absent, "auto" or a value.
struct BatchKey {
  StringRef key;
  std::optional<int64_t> value;
  bool isAuto = false;
};

bool readBatchKey(Reader &r, Section &root, BatchKey &out) {
  const json::Value *v = root.get(out.key);
  if (!v)
    return true;
  if (isAuto(*v)) {
    out.isAuto = true;
    return true;
  }
  int64_t value;
  if (!r.toInteger(root.at(out.key), *v, value) ||
      !r.atLeast<int64_t>(root.at(out.key), value, 1))
    return false;
  out.value = value;
  return true;
}

/// `a * b`, failing at `path` on overflow.
bool multiply(Reader &r, StringRef path, int64_t a, int64_t b, int64_t &out) {
  if (llvm::MulOverflow(a, b, out))
    return r.fail(path, "batch size overflows: " + formatNumber(a) + " * " +
                            formatNumber(b));
  return true;
}

/// Resolves the triple (DeepSpeed's rules; see the top of this file).
bool readBatch(Reader &r, Section &root, int64_t worldSize,
               int64_t defaultMicroBatch, DsConfig &c) {
  BatchKey train{kTrainBatch, std::nullopt, false};
  BatchKey micro{kMicroBatch, std::nullopt, false};
  BatchKey accum{kGradAccum, std::nullopt, false};
  if (!Reader::all({readBatchKey(r, root, train), readBatchKey(r, root, micro),
                    readBatchKey(r, root, accum)}))
    return false;

  std::string trainPath = root.at(kTrainBatch);
  std::string worldText = "world size " + formatNumber(worldSize);
  auto notDivisible = [&](int64_t divisor, const std::string &factors,
                          StringRef derived) {
    std::string product = StringRef(factors).contains(" * ")
                              ? " (= " + formatNumber(divisor) + ")"
                              : "";
    return r.fail(trainPath, formatNumber(*train.value) +
                                 " is not divisible by " + factors + product +
                                 ", so " + derived.str() +
                                 " cannot be derived");
  };
  bool usedDefaultMicro = false;

  if (train.value && micro.value && accum.value) {
    int64_t mg, product;
    if (!multiply(r, trainPath, *micro.value, *accum.value, mg) ||
        !multiply(r, trainPath, mg, worldSize, product))
      return false;
    if (*train.value != product)
      return r.fail(trainPath,
                    formatNumber(*train.value) + " != " + kMicroBatch + " " +
                        formatNumber(*micro.value) + " * " + kGradAccum + " " +
                        formatNumber(*accum.value) + " * " + worldText +
                        " (= " + formatNumber(product) + ")");
    c.trainBatchSize = *train.value;
    c.microBatchSize = *micro.value;
    c.gradientAccumulationSteps = *accum.value;
  } else if (train.value && micro.value) {
    int64_t divisor;
    if (!multiply(r, trainPath, *micro.value, worldSize, divisor))
      return false;
    if (*train.value % divisor != 0)
      return notDivisible(
          divisor,
          (kMicroBatch + " " + formatNumber(*micro.value) + " * " + worldText)
              .str(),
          kGradAccum);
    c.trainBatchSize = *train.value;
    c.microBatchSize = *micro.value;
    c.gradientAccumulationSteps = *train.value / divisor;
  } else if (train.value && accum.value) {
    int64_t divisor;
    if (!multiply(r, trainPath, *accum.value, worldSize, divisor))
      return false;
    if (*train.value % divisor != 0)
      return notDivisible(
          divisor,
          (kGradAccum + " " + formatNumber(*accum.value) + " * " + worldText)
              .str(),
          kMicroBatch);
    c.trainBatchSize = *train.value;
    c.gradientAccumulationSteps = *accum.value;
    c.microBatchSize = *train.value / divisor;
  } else if (train.value) {
    if (*train.value % worldSize != 0)
      return notDivisible(worldSize, worldText, kMicroBatch);
    c.trainBatchSize = *train.value;
    c.gradientAccumulationSteps = 1;
    c.microBatchSize = *train.value / worldSize;
  } else {
    // No train_batch_size: the micro batch (given or dsc's default) times
    // the accumulation steps (given or 1) times the world size.
    usedDefaultMicro = !micro.value;
    c.microBatchSize = micro.value ? *micro.value : defaultMicroBatch;
    c.gradientAccumulationSteps = accum.value ? *accum.value : 1;
    int64_t mg;
    if (!multiply(r, trainPath, c.microBatchSize, c.gradientAccumulationSteps,
                  mg) ||
        !multiply(r, trainPath, mg, worldSize, c.trainBatchSize))
      return false;
  }

  std::string identity =
      "(" + kTrainBatch.str() + " " + formatNumber(c.trainBatchSize) + " = " +
      kMicroBatch.str() + " " + formatNumber(c.microBatchSize) + " * " +
      kGradAccum.str() + " " + formatNumber(c.gradientAccumulationSteps) +
      " * " + worldText + ")";
  auto autoNote = [&](StringRef key, int64_t value) {
    r.note(root.at(key),
           "\"auto\" resolved to " + formatNumber(value) + " " + identity);
  };
  if (train.isAuto)
    autoNote(kTrainBatch, c.trainBatchSize);
  if (usedDefaultMicro)
    r.note(root.at(kMicroBatch),
           (micro.isAuto ? "\"auto\" resolved to " : "not given; using ") +
               formatNumber(c.microBatchSize) + " (dsc's default micro batch)");
  else if (micro.isAuto)
    autoNote(kMicroBatch, c.microBatchSize);
  if (accum.isAuto)
    autoNote(kGradAccum, c.gradientAccumulationSteps);
  return true;
}

bool readFp16(Reader &r, Section &root, DsConfig::Fp16 &f) {
  std::optional<Section> fp16;
  if (!root.section("fp16", fp16))
    return false;
  return Reader::all(
      {fp16->checkKeys(), fp16->boolean("enabled", f.enabled),
       fp16->number("loss_scale", f.lossScale) &&
           r.atLeast(fp16->at("loss_scale"), f.lossScale, 0.0),
       fp16->integer("initial_scale_power", f.initialScalePower) &&
           r.atLeast<int64_t>(fp16->at("initial_scale_power"),
                              f.initialScalePower, 0) &&
           // 2^127 is the largest power of two a float holds.
           r.atMost<int64_t>(fp16->at("initial_scale_power"),
                             f.initialScalePower, 127),
       fp16->integer("loss_scale_window", f.lossScaleWindow) &&
           r.atLeast<int64_t>(fp16->at("loss_scale_window"), f.lossScaleWindow,
                              1),
       fp16->integer("hysteresis", f.hysteresis) &&
           r.atLeast<int64_t>(fp16->at("hysteresis"), f.hysteresis, 1),
       fp16->boolean("consecutive_hysteresis", f.consecutiveHysteresis),
       fp16->number("min_loss_scale", f.minLossScale) &&
           (f.minLossScale > 0 ||
            r.fail(fp16->at("min_loss_scale"),
                   "must be > 0, got " + formatNumber(f.minLossScale))),
       fp16->onlyBoolean("auto_cast", false,
                         "dsc does not cast the model's inputs")});
}

bool readBf16(Reader &r, Section &root, DsConfig::Bf16 &b) {
  StringRef key = "bf16";
  if (root.get("bfloat16")) {
    if (root.get("bf16"))
      return r.fail(root.at("bfloat16"),
                    "duplicates $.bf16 (bfloat16 is its older name)");
    key = "bfloat16";
  }
  std::optional<Section> bf16;
  return root.section(key, bf16) &&
         Reader::all(
             {bf16->checkKeys(), bf16->boolean("enabled", b.enabled),
              bf16->boolean("check_grad_overflow", b.checkGradOverflow)});
}

// DeepSpeed's offload keys. dsc offloads to host memory only, all of the
// optimizer or all of the parameter shards: the NVMe keys have no effect
// (checkKeys notes them), a partial `ratio` is refused.
bool readOffload(Reader &r, Section &zero, StringRef key, int64_t stage,
                 int64_t minStage, std::string &device) {
  std::optional<Section> offload;
  if (!zero.section(key, offload))
    return false;
  bool param = key == "offload_param";
  double ratio = 1;
  bool pin = true;
  if (!Reader::all({offload->checkKeys(),
                    offload->choice("device", {"none", "cpu", "nvme"}, device,
                                    /*allowAuto=*/false),
                    offload->boolean("pin_memory", pin),
                    param || offload->number("ratio", ratio)}))
    return false;
  if (device == "nvme")
    return r.fail(offload->at("device"),
                  "\"nvme\" is not supported yet (dsc offloads to \"cpu\", "
                  "host memory)");
  if (device != "none" && stage < minStage) {
    std::string stages = minStage == 3 ? "3" : "1, 2 or 3";
    return r.fail(offload->at("device"), quote(device) + " needs ZeRO stage " +
                                             stages + ", got stage " +
                                             formatNumber(stage));
  }
  if (!param && device == "cpu" && ratio != 1)
    return r.fail(offload->at("ratio"),
                  formatNumber(ratio) +
                      " is not supported yet: dsc runs the whole optimizer "
                      "on the host (ratio 1)");
  if (!pin)
    r.note(offload->at("pin_memory"),
           "false has no effect in dsc: the copies read and write the host "
           "arenas directly, which a GPU backend allocates page-locked");
  return true;
}

bool readZero(Reader &r, Section &root, DsConfig::Zero &z) {
  std::optional<Section> zero;
  if (!root.section("zero_optimization", zero))
    return false;
  bool keysOk = zero->checkKeys();

  // DeepSpeed's field names for three stage-3 keys (pydantic aliases):
  // either spelling, not both.
  bool aliasesOk = true;
  auto either = [&](StringRef name, StringRef alias) {
    if (!zero->get(alias))
      return name;
    if (zero->get(name))
      aliasesOk = r.fail(zero->at(alias), "duplicates $.zero_optimization." +
                                              name + " (its other name)");
    return alias;
  };
  const StringRef prefetch =
      either("stage3_prefetch_bucket_size", "prefetch_bucket_size");
  const StringRef persistence = either("stage3_param_persistence_threshold",
                                       "param_persistence_threshold");
  const StringRef maxLive =
      either("stage3_max_live_parameters", "max_live_parameters");
  // The offload checks need a valid stage.
  bool stageOk = zero->integer("stage", z.stage) &&
                 ((z.stage >= 0 && z.stage <= 3) ||
                  r.fail(zero->at("stage"),
                         "must be 0, 1, 2 or 3, got " + formatNumber(z.stage)));
  return Reader::all(
      {keysOk, stageOk,
       !stageOk || readOffload(r, *zero, "offload_optimizer", z.stage, 1,
                               z.offloadOptimizer),
       !stageOk ||
           readOffload(r, *zero, "offload_param", z.stage, 3, z.offloadParam),
       zero->integer("reduce_bucket_size", z.reduceBucketSize) &&
           r.atLeast<int64_t>(zero->at("reduce_bucket_size"),
                              z.reduceBucketSize, 1),
       zero->boolean("contiguous_gradients", z.contiguousGradients),
       zero->boolean("overlap_comm", z.overlapComm), aliasesOk,
       zero->integer(prefetch, z.stage3PrefetchBucketSize) &&
           r.atLeast<int64_t>(zero->at(prefetch), z.stage3PrefetchBucketSize,
                              0),
       zero->integer(persistence, z.stage3ParamPersistenceThreshold) &&
           r.atLeast<int64_t>(zero->at(persistence),
                              z.stage3ParamPersistenceThreshold, 0),
       zero->integer(maxLive, z.stage3MaxLiveParameters) &&
           r.atLeast<int64_t>(zero->at(maxLive), z.stage3MaxLiveParameters, 0),
       zero->ignoredBoolean("allgather_partitions"),
       zero->ignoredInteger("allgather_bucket_size"),
       zero->ignoredBoolean("reduce_scatter"),
       zero->ignoredBoolean("round_robin_gradients"),
       zero->ignoredInteger("sub_group_size"),
       zero->ignoredInteger("stage3_max_reuse_distance"),
       zero->ignoredBoolean("stage3_gather_16bit_weights_on_model_save"),
       zero->ignoredBoolean("ignore_unused_parameters")});
}

bool readActivationCheckpointing(Reader &r, Section &root,
                                 DsConfig::ActivationCheckpointing &a) {
  std::optional<Section> ac;
  if (!root.section("activation_checkpointing", ac))
    return false;
  const json::Value *n = ac->get("number_checkpoints");
  const bool numbered = n && n->kind() != json::Value::Null;
  if (!Reader::all(
          {ac->checkKeys(),
           ac->boolean("partition_activations", a.partitionActivations),
           ac->boolean("cpu_checkpointing", a.cpuCheckpointing),
           ac->boolean("contiguous_memory_optimization",
                       a.contiguousMemoryOptimization),
           ac->boolean("synchronize_checkpoint_boundary",
                       a.synchronizeCheckpointBoundary),
           ac->boolean("profile", a.profile),
           ac->choice("remat", mlir::ds::remat::kPolicies, a.remat,
                      /*allowAuto=*/false),
           ac->integer("remat_every", a.rematEvery) &&
               r.atLeast<int64_t>(ac->at("remat_every"), a.rematEvery, 1),
           ac->integer("activation_memory", a.activationMemory) &&
               r.atLeast<int64_t>(ac->at("activation_memory"),
                                  a.activationMemory, 0),
           !numbered ||
               (ac->integer("number_checkpoints", a.numberCheckpoints) &&
                (a.numberCheckpoints == -1 ||
                 r.atLeast<int64_t>(ac->at("number_checkpoints"),
                                    a.numberCheckpoints, 1)))}))
    return false;
  return true;
}

/// llvm::json's "[L:C, byte=B]: message" as "line L, column C: message".
/// The parser reports the position just after the character it stopped at,
/// which is that character's 1-based column (at the end of the text, the
/// last character's).
std::string describeParseError(llvm::Error err) {
  std::string message = llvm::toString(std::move(err));
  StringRef rest = message;
  unsigned line, column;
  size_t offset;
  if (rest.consume_front("[") && !rest.consumeInteger(10, line) &&
      rest.consume_front(":") && !rest.consumeInteger(10, column) &&
      rest.consume_front(", byte=") && !rest.consumeInteger(10, offset) &&
      rest.consume_front("]: "))
    return ("line " + Twine(line) + ", column " + Twine(std::max(column, 1u)) +
            ": " + rest)
        .str();
  return message;
}

} // namespace

//===----------------------------------------------------------------------===//
// API
//===----------------------------------------------------------------------===//

namespace {

/// DeepSpeed's `compile` section configures torch.compile (and DeepCompile)
/// over the engine's module: an object (checkKeys notes it has no effect).
/// tensor_parallel.autotp_size (0 and 1: off), which must divide the
/// world size, and dsc's sequence_parallel beside it.
bool readTensorParallel(Reader &r, Section &root, int64_t worldSize,
                        DsConfig &c) {
  std::optional<Section> s;
  if (!root.section("tensor_parallel", s))
    return false;
  if (!s->present())
    return true;
  int64_t size = 0;
  if (!s->checkKeys() || !s->integer("autotp_size", size) ||
      !r.atLeast(s->at("autotp_size"), size, int64_t(0)) ||
      !s->boolean("sequence_parallel", c.sequenceParallel) ||
      !s->integer("micro_batch_chunks", c.microBatchChunks) ||
      !r.atLeast(s->at("micro_batch_chunks"), c.microBatchChunks, int64_t(1)))
    return false;
  c.tensorParallel = std::max<int64_t>(size, 1);
  if (c.sequenceParallel && c.tensorParallel == 1)
    return r.fail(s->at("sequence_parallel"),
                  "needs a tensor-parallel group (autotp_size > 1)");
  if (c.microBatchChunks > 1 && c.tensorParallel == 1)
    return r.fail(s->at("micro_batch_chunks"),
                  "needs a tensor-parallel group (autotp_size > 1)");
  if (worldSize % c.tensorParallel != 0) {
    r.fail(s->at("autotp_size"), formatNumber(size) +
                                     " does not divide the world size " +
                                     formatNumber(worldSize));
    c.tensorParallel = 1;
    return false;
  }
  return true;
}

/// sequence_parallel_size (Ulysses): at least 1, dividing the world size,
/// and not beside a tensor-parallel group yet.
bool readSequenceParallel(Reader &r, Section &root, int64_t worldSize,
                          DsConfig &c) {
  int64_t size = 1;
  if (!root.integer("sequence_parallel_size", size) ||
      !r.atLeast(root.at("sequence_parallel_size"), size, int64_t(1)))
    return false;
  if (worldSize % size != 0)
    return r.fail(root.at("sequence_parallel_size"),
                  formatNumber(size) + " does not divide the world size " +
                      formatNumber(worldSize));
  if (size > 1 && c.tensorParallel > 1)
    return r.fail(root.at("sequence_parallel_size"),
                  "Ulysses sequence parallelism beside tensor_parallel is "
                  "not supported yet: use one of them");
  c.sequenceParallelSize = size;
  return true;
}

bool readCompile(Section &root) {
  std::optional<Section> compile;
  return root.section("compile", compile);
}

/// Keys whose DeepSpeed default is the only behaviour dsc has: that value
/// is accepted, another is refused by name.
bool readPinnedValues(Reader &r, Section &root) {
  std::string op = "mean";
  return Reader::all(
      {root.onlyBoolean("managed_gradient_accumulation", true,
                        "the plan runs gradient_accumulation_steps "
                        "micro-steps per optimizer step"),
       root.choice("gradient_allreduce_op", {"mean", "sum"}, op,
                   /*allowAuto=*/false) &&
           (op == "mean" ||
            r.fail(root.at("gradient_allreduce_op"),
                   "\"sum\" is not supported: dsc averages gradients over "
                   "the ranks")),
       root.ignoredBoolean("disable_allgather"),
       root.ignoredBoolean("graph_harvesting"),
       root.ignoredBoolean("dataloader_drop_last")});
}

/// fp16 and bf16 exclude each other, and a 16-bit communication type needs
/// its model dtype.
bool checkPrecisionChoice(Reader &r, Section &root, const DsConfig &c) {
  bool ok = true;
  if (c.fp16.enabled && c.bf16.enabled)
    ok =
        r.fail(root.at(root.get("bfloat16") ? "bfloat16" : "bf16") + ".enabled",
               "fp16 and bf16 cannot both be enabled");
  const std::string &comm = c.communicationDataType;
  if ((comm == "fp16" && !c.fp16.enabled) ||
      (comm == "bf16" && !c.bf16.enabled))
    ok = r.fail(root.at("communication_data_type"),
                "\"" + comm + "\" needs " + comm +
                    ".enabled: dsc communicates in the model's dtype or in "
                    "fp32");
  return ok;
}

/// DeepSpeed's schedulers but WarmupCosineLR set every parameter group's
/// lr to the same value, so Muon's two halves step at the scheduler's lr.
void muonHalvesUnderScheduler(Reader &r, Section &root, DsConfig &c) {
  const std::string &type = c.scheduler.type;
  if (c.optimizer.type != "Muon" || type == "constant" ||
      type == "WarmupCosineLR" || c.optimizer.muonLr == c.optimizer.lr)
    return;
  r.note(root.at("optimizer") + ".params",
         "Muon's lr for its matrices (" + formatNumber(c.optimizer.muonLr) +
             ") and for the rest (" + formatNumber(c.optimizer.lr) +
             ") give way to " + type +
             "'s, which DeepSpeed sets for every parameter group");
  c.optimizer.muonLr = c.optimizer.lr;
}

} // namespace

bool dsc::parseDsConfig(StringRef text, StringRef fileName, int64_t worldSize,
                        int64_t defaultMicroBatch, DsConfig &out,
                        std::string &error) {
  DsConfig c;
  Reader r(fileName, c.notes, error);
  if (worldSize < 1)
    return r.fail("$",
                  "world size must be >= 1, got " + formatNumber(worldSize));
  if (defaultMicroBatch < 1)
    return r.fail("$", "default micro batch must be >= 1, got " +
                           formatNumber(defaultMicroBatch));

  // What llvm::json does not check: duplicate keys, and nesting so deep
  // that its recursive parser would overflow the stack.
  std::string syntaxPath, syntaxWhat;
  if (!checkConfigSyntax(text, syntaxPath, syntaxWhat))
    return r.fail(syntaxPath, syntaxWhat);
  llvm::Expected<json::Value> parsed = json::parse(text);
  if (!parsed)
    return r.fail("$",
                  "invalid JSON at " + describeParseError(parsed.takeError()));
  const json::Object *object = parsed->getAsObject();
  if (!object)
    return r.fail("$", Twine("expected an object, got ") + kindName(*parsed));

  Section root(r, object, "$");
  bool keysOk = root.checkKeys();

  // Every section is read even after a problem, so one run lists them all
  // (a failed optimizer leaves the lr an "auto" warmup_max_lr reads at its
  // default: the run fails anyway). The checks across sections follow,
  // each once the sections it reads were read.
  // The batch is per data-parallel replica: a tensor-parallel group shares
  // one.
  const bool tpOk = readTensorParallel(r, root, worldSize, c);
  const bool spOk = readSequenceParallel(r, root, worldSize, c);
  const bool ppOk = readPipeline(r, root, worldSize, c);
  const bool batchOk =
      readBatch(r, root,
                tpOk && spOk && ppOk
                    ? worldSize / (c.tensorParallel * c.sequenceParallelSize *
                                   c.pipelineStages)
                    : worldSize,
                defaultMicroBatch, c);
  const bool clipOk =
      root.number("gradient_clipping", c.gradientClipping) &&
      r.atLeast(root.at("gradient_clipping"), c.gradientClipping, 0.0);
  const bool optimizerOk = readOptimizer(r, root, c.optimizer);
  const bool schedulerOk = readScheduler(r, root, c.optimizer, c.scheduler);
  const bool fp16Ok = readFp16(r, root, c.fp16);
  const bool bf16Ok = readBf16(r, root, c.bf16);
  const bool zeroOk = readZero(r, root, c.zero);
  const bool commOk =
      root.choice("communication_data_type", {"fp32", "fp16", "bf16"},
                  c.communicationDataType, /*allowAuto=*/false);
  bool ok = Reader::all(
      {keysOk,
       tpOk,
       spOk,
       ppOk,
       batchOk,
       clipOk,
       optimizerOk,
       schedulerOk,
       fp16Ok,
       bf16Ok,
       commOk,
       zeroOk,
       readActivationCheckpointing(r, root, c.activationCheckpointing),
       readMonitors(r, root),
       readFlopsProfiler(r, root, c.flopsProfiler),
       root.ignoredInteger("steps_per_print"),
       readCommsLogger(r, root, c.commsLogger),
       root.boolean("wall_clock_breakdown", c.wallClockBreakdown),
       root.boolean("memory_breakdown", c.memoryBreakdown),
       root.ignoredBoolean("dump_state"),
       root.ignoredBoolean("prescale_gradients"),
       root.ignoredNumber("gradient_predivide_factor"),
       root.ignoredBoolean("zero_allow_untested_optimizer"),
       root.ignoredBoolean("zero_force_ds_cpu_optimizer"),
       readCompile(root),
       readPinnedValues(r, root)});
  if (fp16Ok && bf16Ok && commOk)
    ok &= checkPrecisionChoice(r, root, c);
  if (tpOk && batchOk && c.microBatchSize % c.microBatchChunks != 0)
    ok = r.fail(root.at("tensor_parallel") + ".micro_batch_chunks",
                formatNumber(c.microBatchChunks) +
                    " chunks do not divide the micro-batch of " +
                    formatNumber(c.microBatchSize) + " samples");
  if (optimizerOk && schedulerOk)
    muonHalvesUnderScheduler(r, root, c);
  if (tpOk && spOk && ppOk && fp16Ok && bf16Ok && zeroOk)
    ok &= checkPipelineComposition(r, root, c);
  if (!ok)
    return false;

  out = std::move(c);
  return true;
}
