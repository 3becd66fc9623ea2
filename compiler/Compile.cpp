//===- Compile.cpp - one compilation, for dsc and the Python API ---------===//
//
// Exit status: 0 compiled, 2 bad input (options, config, IR, model spec, a
// violated input contract). Nothing is written here: callers write outputs
// after the whole compilation succeeded.
//
//===----------------------------------------------------------------------===//

#include "compiler/Compile.h"

#include "compiler/DscMain.h"
#include "compiler/PassOptions.h"
#include "compiler/config/Config.h"
#include "compiler/plan/PlanModel.h"
#include "dialects/ds/Contracts.h"
#include "models/Models.h"
#include "passes/remat/RematPolicy.h"
#include "runtime/core/ByteCount.h"
#include "runtime/core/InputFile.h"
#include "runtime/core/NumberText.h"
#include "runtime/plan/ProgramNames.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"

#include <optional>
#include <vector>

using namespace mlir;

namespace dsc {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitBadInput = 2;
constexpr int64_t kDefaultMicroBatch = 4;
/// Beyond the largest jobs run today (~100k GPUs); the plan stores 32 bits.
constexpr uint64_t kMaxWorldSize = uint64_t(1) << 20;
constexpr uint64_t kMaxBatch = uint64_t(1) << 31;
/// Inputs read whole: a ds_config.json is a page of JSON, a model's MLIR
/// holds no weights. Past these a path is wrong (an image, /dev/zero).
constexpr uint64_t kMaxConfigBytes = uint64_t(16) << 20;
constexpr uint64_t kMaxMlirBytes = uint64_t(1) << 30;

/// `path` ("-": standard input) read whole as the runtime reads its inputs
/// (InputFile.h: a regular file, under `limit`); null + one line naming it.
std::unique_ptr<llvm::MemoryBuffer>
readInput(const std::string &path, uint64_t limit, std::string &error) {
  std::string bytes;
  if (!rt::readWholeInput(path, bytes, error, limit))
    return nullptr;
  return llvm::MemoryBuffer::getMemBufferCopy(bytes,
                                              path == "-" ? "<stdin>" : path);
}

/// "file:line:col", a NameLoc's name, or "dsc": where to point the user.
std::string describe(Location loc) {
  if (auto file = dyn_cast<FileLineColLoc>(loc)) {
    if (file.getLine() == 0) // an implicit module: the file as a whole
      return file.getFilename().str();
    return (file.getFilename().getValue() + ":" + Twine(file.getLine()) + ":" +
            Twine(file.getColumn()))
        .str();
  }
  if (auto name = dyn_cast<NameLoc>(loc)) {
    std::string child = describe(name.getChildLoc());
    return child == "dsc"
               ? name.getName().str()
               : (child + " (" + name.getName().getValue() + ")").str();
  }
  if (auto fused = dyn_cast<FusedLoc>(loc))
    return fused.getLocations().empty() ? "dsc"
                                        : describe(fused.getLocations()[0]);
  if (auto callSite = dyn_cast<CallSiteLoc>(loc))
    return describe(callSite.getCallee());
  return "dsc";
}

/// One line per diagnostic: "<where>: error: <what>". An op whose result
/// type inference failed reports why and then, again, that it failed; the
/// second line says nothing new and is dropped.
class DiagnosticPrinter {
public:
  explicit DiagnosticPrinter(const CompileSink &sink) : sink(sink) {}

  void print(Diagnostic &diag) {
    if (diag.getSeverity() == DiagnosticSeverity::Error) {
      bool repeat =
          lastError && *lastError == diag.getLocation() &&
          StringRef(diag.str()).ends_with("op failed to infer returned types");
      lastError = diag.getLocation();
      if (repeat)
        return;
    }
    StringRef severity = "error";
    switch (diag.getSeverity()) {
    case DiagnosticSeverity::Note:
      severity = "note";
      break;
    case DiagnosticSeverity::Warning:
      severity = "warning";
      break;
    case DiagnosticSeverity::Remark:
      severity = "remark";
      break;
    case DiagnosticSeverity::Error:
      break;
    }
    // One line per diagnostic: its notes ride along in parentheses, so a
    // caller that reads the first line of stderr gets the whole story.
    std::string line = describe(diag.getLocation()) + ": " + severity.str() +
                       ": " + diag.str();
    for (Diagnostic &note : diag.getNotes())
      line +=
          " (note: " + describe(note.getLocation()) + ": " + note.str() + ")";
    sink(CompileMessage::Diagnostic, line);
  }

private:
  const CompileSink &sink;
  std::optional<Location> lastError;
};

/// "" when the plan's device memory per rank fits `budget`; otherwise why
/// not, in one line: the need, each category (largest first) and the
/// largest variables.
std::string checkDeviceBudget(const PlanModel &plan, uint64_t budget) {
  uint64_t total = 0;
  std::vector<std::pair<uint64_t, std::string>> categories, variables;
  for (int c = 0; c < kNumCategories; ++c) {
    total += plan.arenaBytes[c];
    if (plan.arenaBytes[c])
      categories.push_back(
          {plan.arenaBytes[c], categoryName(static_cast<Category>(c)).str()});
  }
  if (total <= budget)
    return "";
  for (const PlanVariable &v : plan.variables)
    if (plan.buffers[v.buffer].space == Space::Device)
      variables.push_back({plan.buffers[v.buffer].bytes(), v.name});
  auto largestFirst = [](const auto &a, const auto &b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  };
  llvm::sort(categories, largestFirst);
  llvm::sort(variables, largestFirst);
  auto mib = [](uint64_t b) {
    return llvm::formatv("{0:F2} MiB", double(b) / (1 << 20)).str();
  };
  std::string text = "the plan needs " + mib(total) + " (" +
                     std::to_string(total) +
                     " bytes) of device memory per "
                     "rank, the budget is " +
                     mib(budget) + " (" + std::to_string(budget) + " bytes): ";
  for (size_t i = 0; i < categories.size(); ++i)
    text +=
        (i ? ", " : "") + categories[i].second + " " + mib(categories[i].first);
  text += "; largest variables:";
  for (size_t i = 0; i < std::min<size_t>(3, variables.size()); ++i)
    text +=
        (i ? ", " : " ") + variables[i].second + " " + mib(variables[i].first);
  return text;
}

} // namespace

namespace {

/// One compilation (compile() below), split by what each step decides: the
/// request's own numbers, the config, the options the passes take, the
/// module (built or parsed), the pipeline, and the checks on the plan.
/// Each step returns kExitOk to go on, or compile()'s status after
/// reporting through `sink`.
class Compiler {
public:
  Compiler(const CompileRequest &req, Compilation &out, const CompileSink &sink)
      : req(req), out(out), sink(sink),
        configName(req.configPath.empty() ? req.configName : req.configPath),
        sourceName(req.inputPath.empty() ? req.inputName : req.inputPath) {}

  int run();

private:
  /// One line per problem: a config file reports all of its problems.
  int fail(const Twine &message) {
    std::string text = message.str();
    llvm::SmallVector<StringRef> lines;
    StringRef(text).split(lines, '\n');
    for (StringRef line : lines)
      sink(CompileMessage::Error, line.str());
    return kExitBadInput;
  }
  int checkRequest();
  int readConfig();
  int passOptions();
  int buildModule(MLIRContext &context);
  int addForwardCopy(MLIRContext &context, int64_t batch, int64_t seqLen,
                     const std::string &name);
  int addSampleForwards(MLIRContext &context);
  int parseModule(MLIRContext &context, llvm::SourceMgr &sourceMgr);
  int runPipeline(MLIRContext &context);
  int checkPlan();

  const CompileRequest &req;
  Compilation &out;
  const CompileSink &sink;
  const std::string configName, sourceName;
  DsConfig config;
  bool haveConfig = false;
  TrainOptions train;
  uint64_t deviceBudget = 0;
};

int Compiler::checkRequest() {
  int sources =
      !req.inputPath.empty() + !req.inputText.empty() + !req.model.empty();
  if (sources != 1)
    return fail("give exactly one of MODEL.mlir or --model NAME[:options]");
  if (req.worldSize < 1 || req.worldSize > int64_t(kMaxWorldSize))
    return fail("--world-size: expected " + expectedCount(1, kMaxWorldSize) +
                ", got " + std::to_string(req.worldSize));
  if (req.evalMicroBatch &&
      (*req.evalMicroBatch < 1 || *req.evalMicroBatch > int64_t(kMaxBatch)))
    return fail("--eval-micro-batch-size: expected " +
                expectedCount(1, kMaxBatch) + ", got " +
                std::to_string(*req.evalMicroBatch));
  if (!req.deviceMemory.empty()) {
    if (!parseByteCount(req.deviceMemory, deviceBudget) || deviceBudget == 0)
      return fail("--device-memory: expected a byte count such as "
                  "85899345920 or 80GiB, got '" +
                  req.deviceMemory + "'");
    if (req.phase < Phase::Plan)
      return fail("--device-memory is checked against the plan: give "
                  "--compile-to=plan or emit");
  }
  return kExitOk;
}

int Compiler::readConfig() {
  haveConfig = !req.configPath.empty() || !req.configText.empty();
  if (!haveConfig)
    return kExitOk;
  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> file;
  if (!req.configPath.empty()) {
    if (!(file = readInput(req.configPath, kMaxConfigBytes, error)))
      return fail("--config " + error);
  } else {
    file = llvm::MemoryBuffer::getMemBuffer(req.configText, configName);
  }
  if (!parseDsConfig(file->getBuffer(), configName, req.worldSize,
                     kDefaultMicroBatch, config, error))
    return fail(error);
  for (const std::string &note : config.notes)
    sink(CompileMessage::Note, note);
  return kExitOk;
}

// The config's options, then --remat, --remat-every and --activation-memory
// over them.
int Compiler::passOptions() {
  train.setWorldSize(req.worldSize);
  if (haveConfig) {
    if (config.activationCheckpointing.partitionActivations)
      return fail(configName +
                  ": activation_checkpointing.partition_activations splits "
                  "activations over tensor-parallel ranks, and dsc has no "
                  "tensor parallelism");
    train = passOptionsFromConfig(config, req.worldSize);
  }
  // The balanced partition weighs ops on --machine within --device-memory.
  if (req.flopsPerByte > 0)
    train.pipelineCut.flopsPerByte = req.flopsPerByte;
  train.pipelineCut.stageMemory = int64_t(deviceBudget);
  if (!req.remat.empty()) {
    if (!ds::remat::isPolicy(req.remat))
      return fail("--remat: expected none, layers, selective or auto, got '" +
                  req.remat + "'");
    train.remat.policy = ds::remat::policyNamed(req.remat);
  }
  train.fuseLmHead.enabled = req.fuseLmHead;
  train.fuseLmHead.chunkRows = req.lmHeadChunkRows;
  train.fuseElementwise.enabled = req.fuseElementwise;
  train.foldAttentionLayout.enabled = req.foldAttentionLayout;
  if (req.noDecay) {
    train.adamw.decayAll = true;
    train.adamw.noDecay = llvm::join(*req.noDecay, ",");
  }
  if (req.rematEvery) {
    if (*req.rematEvery < 1)
      return fail("--remat-every: expected a positive integer");
    if (train.remat.policy != ds::remat::Policy::layers)
      return fail("--remat-every needs --remat=layers");
    train.remat.every = *req.rematEvery;
  }
  if (req.activationMemory) {
    if (*req.activationMemory < 1)
      return fail("--activation-memory: expected a positive number of bytes");
    if (train.remat.policy != ds::remat::Policy::automatic)
      return fail("--activation-memory is the budget of --remat=auto");
    train.remat.activationMemory = *req.activationMemory;
  }
  if (train.remat.activationMemory &&
      train.remat.policy != ds::remat::Policy::automatic)
    return fail(configName +
                ": activation_checkpointing.activation_memory "
                "is the budget of remat \"auto\", but remat is \"" +
                ds::remat::policyName(train.remat.policy) + "\"");
  train.input.dsrunInputs = req.phase == Phase::Emit && req.forDsrun;
  train.plan.model = req.model.empty()
                         ? llvm::sys::path::stem(sourceName).str()
                         : StringRef(req.model).split(':').first.str();
  return kExitOk;
}

// A built-in model (--model), with its eval copy at another batch as
// @forward_eval when --eval-micro-batch-size asks (ds-eval builds @eval
// from it), and its sampling copies (addSampleForwards).
int Compiler::buildModule(MLIRContext &context) {
  std::string error;
  int64_t microBatch = haveConfig ? config.microBatchSize : kDefaultMicroBatch;
  if (haveConfig && StringRef(req.model).contains("batch_size="))
    return fail("--model sets batch_size and --config sets "
                "train_micro_batch_size_per_gpu; give one of them");
  out.module = models::buildModel(context, req.model, microBatch, error);
  if (!out.module)
    return fail("--model " + error);
  if (int status = addSampleForwards(context))
    return status;
  if (!req.evalMicroBatch || *req.evalMicroBatch == microBatch)
    return kExitOk;
  if (StringRef(req.model).contains("batch_size="))
    return fail("--eval-micro-batch-size: --model sets batch_size; give "
                "the training batch in --config instead");
  return addForwardCopy(context, *req.evalMicroBatch, 0,
                        std::string(plan::kForwardEvalFunction));
}

// `spec` without its batch_size= option, which would override the batch a
// copy of the model is built at.
static std::string specWithoutBatch(StringRef spec) {
  auto [name, list] = spec.split(':');
  SmallVector<StringRef> options;
  list.split(options, ',', -1, /*KeepEmpty=*/false);
  std::string out = name.str();
  char separator = ':';
  for (StringRef option : options)
    if (!option.starts_with("batch_size=")) {
      out += separator;
      out += option.str();
      separator = ',';
    }
  return out;
}

// The model built again at `batch` rows of `seqLen` tokens (0: its block
// size); its @forward joins the module as @`name`.
int Compiler::addForwardCopy(MLIRContext &context, int64_t batch,
                             int64_t seqLen, const std::string &name) {
  std::string error;
  OwningOpRef<ModuleOp> other = models::buildModel(
      context, specWithoutBatch(req.model), batch, error, seqLen);
  if (!other)
    return fail("--model " + error);
  auto forward = other->lookupSymbol<func::FuncOp>(plan::kForwardFunction);
  if (!forward)
    return fail("--model: the model has no @forward");
  forward->remove();
  forward.setSymName(name);
  out.module->push_back(forward);
  return kExitOk;
}

// dsrun --sample runs a forward per token. On one row of a short context
// the whole [eval batch, block size] forward is mostly waste, so the model
// is also built at one row and a few lengths, block size, its half, its
// quarter... down to kMinSampleLength; dsrun takes the shortest that holds
// the context. Plans that split the sequence, the layers or the vocabulary
// across ranks keep sampling with eval: they are not built for them here,
// and ds-pipeline-cut, ds-ulysses and ds-shard drop them from MLIR that
// has them (eraseSamplingFunctions).
int Compiler::addSampleForwards(MLIRContext &context) {
  constexpr int64_t kMinSampleLength = 64;
  if (!req.samplePrograms || train.pipeline.stages > 1 ||
      train.shard.tensorParallel > 1 || train.ulysses.sequenceParallel > 1)
    return kExitOk;
  auto forward = out.module->lookupSymbol<func::FuncOp>(plan::kForwardFunction);
  auto tokens =
      forward
          ? dyn_cast<RankedTensorType>(forward.getFunctionType().getInput(0))
          : RankedTensorType();
  if (!tokens || tokens.getRank() != 2)
    return kExitOk;
  for (int64_t t = tokens.getDimSize(1); t > 0;) {
    if (int status = addForwardCopy(context, 1, t,
                                    std::string(plan::kForwardSamplePrefix) +
                                        std::to_string(t)))
      return status;
    if (t % 2 || t / 2 < kMinSampleLength)
      break;
    t /= 2;
  }
  return kExitOk;
}

// MLIR from a file or text, read as the runtime reads its inputs and
// checked for nesting before MLIR's recursive parser sees it.
int Compiler::parseModule(MLIRContext &context, llvm::SourceMgr &sourceMgr) {
  if (req.evalMicroBatch)
    return fail("--eval-micro-batch-size: " + sourceName +
                " has its batch fixed; only --model builds can change it");
  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> file;
  if (!req.inputPath.empty()) {
    if (!(file = readInput(req.inputPath, kMaxMlirBytes, error)))
      return fail(error);
  } else {
    file = llvm::MemoryBuffer::getMemBufferCopy(req.inputText, sourceName);
  }
  if (!checkNesting(file->getBuffer(), sourceName, error))
    return fail(error);
  sourceMgr.AddNewSourceBuffer(std::move(file), llvm::SMLoc());
  out.module = parseSourceFile<ModuleOp>(sourceMgr, &context);
  return out.module ? kExitOk : kExitBadInput;
}

int Compiler::runPipeline(MLIRContext &context) {
  PassManager pm(&context);
  out.plan = std::make_shared<PlanResult>();
  if (haveConfig)
    out.plan->config = config;
  if (req.configurePasses && failed(req.configurePasses(pm)))
    return kExitBadInput;
  if (!req.passPipeline.empty()) {
    std::string error;
    llvm::raw_string_ostream os(error);
    // `builtin.module(...)` names the module dsc already anchors on; parsed
    // as is it would nest and run on modules inside the module.
    StringRef text = StringRef(req.passPipeline).trim();
    if (text.consume_front("builtin.module(") && text.consume_back(")"))
      text = text.trim();
    // The parser echoes the pipeline under its message with a caret: the
    // message line alone says what is wrong.
    if (failed(parsePassPipeline(text, pm, os)))
      return fail("--pass-pipeline: " + StringRef(error).split('\n').first);
    // The plan phases still come after a replayed IR pipeline.
    if (req.phase >= Phase::Plan)
      addPlanPasses(pm, train.plan);
    if (req.phase == Phase::Emit)
      pm.addPass(createEmitPlanPass(train.emit, out.plan));
  } else {
    buildPipeline(pm, req.phase, train, out.plan);
  }
  if (failed(pm.run(*out.module)))
    return kExitBadInput;
  // ds-emit-plan reads the plan module for the report; at phase `plan`
  // nothing has yet.
  // A pipeline's stages are modules of their own: the first stage's plan.
  ModuleOp planned = *out.module;
  for (auto nested : out.module->getBody()->getOps<ModuleOp>())
    if (nested->hasAttr(dist::kStageAttr)) {
      planned = nested;
      break;
    }
  if (req.phase == Phase::Plan &&
      failed(readPlanModule(planned, out.plan->plan)))
    return kExitBadInput;
  return kExitOk;
}

int Compiler::checkPlan() {
  const PlanModel &plan = out.plan->plan;
  if (req.phase >= Phase::Plan && haveConfig &&
      plan.microBatch != config.microBatchSize)
    return fail(configName + ": train_micro_batch_size_per_gpu is " +
                Twine(config.microBatchSize) + " but the model's batch is " +
                Twine(plan.microBatch));
  // A pipeline's every stage is a plan a rank runs.
  const std::vector<PlanModel> &stages = out.plan->stages;
  for (size_t s = 0; deviceBudget && s < std::max<size_t>(1, stages.size());
       ++s) {
    std::string refused =
        checkDeviceBudget(stages.empty() ? plan : stages[s], deviceBudget);
    if (!refused.empty())
      return fail("--device-memory " + req.deviceMemory + ": " +
                  (stages.empty() ? "" : "stage " + std::to_string(s) + ": ") +
                  refused);
  }
  if (auto remat = out.module.get()->getAttrOfType<StringAttr>(ds::kRematAttr))
    out.remat = remat.getValue().str();
  return kExitOk;
}

int Compiler::run() {
  if (int status = checkRequest())
    return status;
  if (int status = readConfig())
    return status;
  if (int status = passOptions())
    return status;

  DialectRegistry registry;
  registerAll(registry);
  out.context = std::make_unique<MLIRContext>(registry);
  MLIRContext &context = *out.context;
  context.loadAllAvailableDialects();
  // Diagnostics name the op by location; a dump of the op is noise to users.
  context.printOpOnDiagnostic(false);
  DiagnosticPrinter printer(sink);
  ScopedDiagnosticHandler diagnostics(&context, [&](Diagnostic &diag) {
    printer.print(diag);
    return success();
  });
  llvm::SourceMgr sourceMgr; // outlives the module's parse
  int status = req.model.empty() ? parseModule(context, sourceMgr)
                                 : buildModule(context);
  if (status)
    return status;
  if (failed(verify(*out.module)))
    return kExitBadInput;
  if (int status = runPipeline(context))
    return status;
  return checkPlan();
}

} // namespace

int compile(const CompileRequest &req, Compilation &out,
            const CompileSink &sink) {
  return Compiler(req, out, sink).run();
}

} // namespace dsc
