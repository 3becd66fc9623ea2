//===- DscMain.cpp - the library behind the dsc tool ----------------------===//
//
// Exit status: 0 compiled, 2 bad input (flags, IR, model spec, a violated
// input contract), 1 anything else. Output files are written only after the
// whole compilation succeeded, so a failed run never leaves a partial file.
//
//===----------------------------------------------------------------------===//

#include "compiler/DscMain.h"

#include "compiler/PassOptions.h"
#include "compiler/Pipelines.h"
#include "compiler/config/Config.h"
#include "compiler/plan/PlanModel.h"
#include "models/Models.h"
#include "runtime/core/ByteCount.h"
#include "runtime/core/OutputPath.h"
#include "llvm/Support/FormatVariadic.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Support/Timing.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/SourceMgr.h"

#include <map>
#include <set>
#include <tuple>

using namespace mlir;
namespace cl = llvm::cl;

namespace dsc {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitBadInput = 2;
constexpr int64_t kDefaultMicroBatch = 4;

/// --compile-to's help, from the phase table.
llvm::StringRef compileToHelp() {
  static const std::string help =
      ("stop after this phase (" + phaseList() + ") and print its IR").str();
  return help;
}

struct Options {
  cl::opt<std::string> input{cl::Positional, cl::desc("[MODEL.mlir]"),
                             cl::init("")};
  cl::opt<std::string> model{
      "model", cl::value_desc("NAME[:key=value,...]"),
      cl::desc("build a model instead of reading MLIR, e.g. "
               "gpt2:n_layer=2,n_head=2,n_embd=64,block_size=64,"
               "vocab_size=256 (batch_size=N sets the micro-batch, default "
               "4)"),
      cl::init("")};
  cl::opt<std::string> compileTo{"compile-to", cl::value_desc("PHASE"),
                                 cl::desc(compileToHelp()), cl::init("emit")};
  cl::opt<std::string> emit{
      "emit", cl::value_desc("mlir|plan"),
      cl::desc("write the plan file (default) or the IR of the last phase"),
      cl::init("")};
  cl::opt<std::string> config{
      "config", cl::value_desc("ds_config.json"),
      cl::desc("DeepSpeed configuration: batch sizes, optimizer, scheduler, "
               "clipping, precision, ZeRO"),
      cl::init("")};
  cl::opt<int64_t> worldSize{"world-size", cl::value_desc("N"),
                             cl::desc("ranks the plan runs on"), cl::init(1)};
  cl::opt<int64_t> evalMicroBatch{
      "eval-micro-batch-size", cl::value_desc("N"),
      cl::desc("rows of the eval program's batch (default: the training "
               "micro-batch; --model builds only)"),
      cl::init(0)};
  cl::opt<std::string> remat{
      "remat", cl::value_desc("none|layers|selective|auto"),
      cl::desc("rematerialization: what the backward recomputes instead of "
               "keeping (activation_checkpointing.remat; docs/remat.md)"),
      cl::init("")};
  cl::opt<int64_t> rematEvery{
      "remat-every", cl::value_desc("K"),
      cl::desc("--remat=layers: keep the input of every K-th transformer "
               "block (default 1)"),
      cl::init(0)};
  cl::opt<int64_t> activationMemory{
      "activation-memory", cl::value_desc("BYTES"),
      cl::desc("--remat=auto: the activation peak's budget (default: as "
               "small as possible)"),
      cl::init(-1)};
  cl::opt<std::string> deviceMemory{
      "device-memory", cl::value_desc("BYTES"),
      cl::desc("refuse a plan that needs more device memory per rank, e.g. "
               "80GiB (default: no limit)"),
      cl::init("")};
  cl::opt<bool> report{"report",
                       cl::desc("print per-rank memory by category and the "
                                "FLOPs of a step")};
  cl::opt<std::string> output{"o", cl::value_desc("FILE"),
                              cl::desc("output file (default: stdout)"),
                              cl::init("-")};
  cl::opt<std::string> passPipeline{
      "pass-pipeline", cl::value_desc("PIPELINE"),
      cl::desc("run this textual pass pipeline instead of the phases"),
      cl::init("")};
};

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
LogicalResult printDiagnostic(Diagnostic &diag) {
  static std::optional<Location> lastError;
  if (diag.getSeverity() == DiagnosticSeverity::Error) {
    bool repeat =
        lastError && *lastError == diag.getLocation() &&
        StringRef(diag.str()).ends_with("op failed to infer returned types");
    lastError = diag.getLocation();
    if (repeat)
      return success();
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
  llvm::errs() << describe(diag.getLocation()) << ": " << severity << ": "
               << diag.str() << "\n";
  for (Diagnostic &note : diag.getNotes())
    (void)printDiagnostic(note);
  return success();
}

/// `--report`: what one rank holds, by category, and the work of a step.
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

void printReport(const PlanModel &plan, StringRef remat,
                 llvm::raw_ostream &os) {
  uint64_t params = 0;
  for (const PlanVariable &v : plan.variables)
    if (v.kind == 0) {
      uint64_t n = 1;
      for (int64_t d : v.shape)
        n *= d;
      params += n;
    }
  auto mib = [](uint64_t b) { return static_cast<double>(b) / (1 << 20); };
  os << "model " << plan.options.model << ": " << params << " parameters, "
     << "micro-batch " << plan.microBatch << " x " << plan.seqLen
     << " tokens, world size " << plan.options.worldSize << "\n";
  // The host's arenas exist with offload only.
  for (Space space : {Space::Device, Space::Host}) {
    const auto &arenas =
        space == Space::Host ? plan.hostArenaBytes : plan.arenaBytes;
    if (space == Space::Host && !plan.hasHostArenas())
      continue;
    os << "per-rank memory (" << (space == Space::Host ? "host" : "device")
       << "):\n";
    uint64_t total = 0;
    for (int c = 0; c < kNumCategories; ++c) {
      uint64_t bytes = arenas[c];
      total += bytes;
      os << llvm::format("  %-16s %14llu bytes %10.2f MiB\n",
                         categoryName(static_cast<Category>(c)).str().c_str(),
                         static_cast<unsigned long long>(bytes), mib(bytes));
    }
    os << llvm::format("  %-16s %14llu bytes %10.2f MiB\n",
                       (const char *)"total",
                       static_cast<unsigned long long>(total), mib(total));
  }
  // Each program's own activation peak: the arena holds the largest (eval
  // runs with a smaller one than the step whose backward keeps them).
  for (const PlanProgram &p : plan.programs)
    os << llvm::format("%-15s %6zu kernels %12.3f GFLOP %12.3f MB to "
                       "collectives %10.2f MiB activations\n",
                       p.name.c_str(), p.instrs.size(), p.flops / 1e9,
                       p.commBytes / 1e6, mib(p.activationBytes));
  // What the remat policy costs: the backward's recomputation.
  for (const PlanProgram &p : plan.programs)
    if (p.name == "micro_step") {
      os << llvm::format("remat: %s, %.6g GFLOP recomputed per micro-step "
                         "(%.1f%% of its FLOPs)",
                         remat.empty() ? "none" : remat.str().c_str(),
                         p.recomputedFlops / 1e9,
                         p.flops > 0 ? 100 * p.recomputedFlops / p.flops : 0.0);
      if (plan.options.accumulationSteps > 1)
        os << llvm::format(
            ", %.6g GFLOP per step of %lld micro-steps",
            p.recomputedFlops * 1e-9 * plan.options.accumulationSteps,
            static_cast<long long>(plan.options.accumulationSteps));
      os << "\n";
    }
  // Model state by dtype: the distinct buffers of the variables (members of
  // a ZeRO-3 group share their group's shard), so mixed precision shows
  // its 16-bit parameters beside fp32 master weights and moments.
  // (space, category, dtype)
  std::map<std::tuple<int, int, int>, uint64_t> state;
  std::set<uint32_t> seen;
  for (const PlanVariable &v : plan.variables)
    if (seen.insert(v.buffer).second) {
      const PlanBuffer &b = plan.buffers[v.buffer];
      state[{static_cast<int>(b.space), static_cast<int>(b.arena),
             static_cast<int>(b.dtype)}] += b.bytes();
    }
  os << "model state by dtype:\n";
  uint64_t stateBytes = 0;
  auto labelOf = [](const std::tuple<int, int, int> &key) {
    auto [space, category, dtype] = key;
    std::string name = categoryName(static_cast<Category>(category)).str();
    return space == static_cast<int>(Space::Host) ? name + "@host" : name;
  };
  int width = 16;
  for (const auto &entry : state)
    width = std::max(width, int(labelOf(entry.first).size()));
  for (const auto &[key, bytes] : state) {
    auto dtype = std::get<2>(key);
    os << llvm::format("  %-*s %-5s %14llu bytes %10.2f MiB\n", width,
                       labelOf(key).c_str(),
                       dtypeName(static_cast<DType>(dtype)),
                       static_cast<unsigned long long>(bytes), mib(bytes));
    stateBytes += bytes;
  }
  // ZeRO's accounting: K bytes per parameter over N ranks (fp32 Adam: K =
  // 16; mixed precision: 2 + 2 + 12 = 16 too, stage 0 holds all of it).
  if (params)
    os << llvm::format("  %-*s %14llu bytes = %.2f bytes x %llu parameters "
                       "/ %lld ranks\n",
                       width + 6, (const char *)"total",
                       static_cast<unsigned long long>(stateBytes),
                       double(stateBytes) * double(plan.options.worldSize) /
                           double(params),
                       static_cast<unsigned long long>(params),
                       static_cast<long long>(plan.options.worldSize));
}

} // namespace

/// MLIR's parser recurses per nesting level: a file of 50000 '[' would
/// overflow the stack. One pass over the text (strings and comments
/// skipped) refuses nesting deeper than any model needs, naming the line.
bool checkNesting(StringRef text, StringRef name, std::string &error) {
  constexpr int kMaxDepth = 1000;
  int depth = 0, line = 1;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '\n') {
      ++line;
    } else if (c == '"') { // a string: to its closing quote
      for (++i; i < text.size() && text[i] != '"'; ++i)
        if (text[i] == '\\')
          ++i;
        else if (text[i] == '\n')
          ++line;
    } else if (c == '/' && i + 1 < text.size() && text[i + 1] == '/') {
      while (i + 1 < text.size() && text[i + 1] != '\n')
        ++i; // a comment: to the end of the line
    } else if (c == '(' || c == '[' || c == '{') {
      if (++depth > kMaxDepth) {
        error = (name + ":" + Twine(line) + ": nested more than " +
                 Twine(kMaxDepth) + " levels deep")
                    .str();
        return false;
      }
    } else if (c == ')' || c == ']' || c == '}') {
      depth = std::max(0, depth - 1);
    }
  }
  return true;
}

/// `--help` lists dsc's own flags and the few MLIR ones for inspecting
/// passes; LLVM's hundreds of backend flags stay reachable through
/// --help-hidden.
void showOnlyDscFlags() {
  static cl::OptionCategory dscFlags("dsc options");
  static cl::OptionCategory mlirFlags(
      "Inspecting the passes (all of MLIR's and LLVM's: --help-hidden)");
  static const char *const dsc[] = {
      "model",         "compile-to",  "emit",
      "config",        "world-size",  "eval-micro-batch-size",
      "remat",         "remat-every", "activation-memory",
      "device-memory", "report",      "o",
      "pass-pipeline"};
  static const char *const mlir[] = {"mlir-print-ir-after-all",
                                     "mlir-print-ir-before-all",
                                     "mlir-print-ir-after",
                                     "mlir-print-ir-before",
                                     "mlir-timing",
                                     "mlir-disable-threading",
                                     "mlir-print-debuginfo"};
  llvm::StringMap<cl::Option *> &all = cl::getRegisteredOptions();
  // Each in its category only (else it is listed under "General" too).
  for (const char *name : dsc)
    if (cl::Option *o = all.lookup(name))
      o->Categories.assign(1, &dscFlags);
  for (const char *name : mlir)
    if (cl::Option *o = all.lookup(name))
      o->Categories.assign(1, &mlirFlags);
  cl::HideUnrelatedOptions({&dscFlags, &mlirFlags});
}

int runDscMain(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  registerAsmPrinterCLOptions();
  registerMLIRContextCLOptions();
  registerPassManagerCLOptions();
  registerDefaultTimingManagerCLOptions();
  Options opts;
  showOnlyDscFlags();
  if (!cl::ParseCommandLineOptions(
          argc, argv, "dsc: compiles a model into a training step\n",
          &llvm::errs()))
    return kExitBadInput;

  // One line per problem: a config file reports all of its problems.
  auto fail = [](const Twine &message) {
    std::string text = message.str();
    llvm::SmallVector<StringRef> lines;
    StringRef(text).split(lines, '\n');
    for (StringRef line : lines)
      llvm::errs() << "dsc: " << line << "\n";
    return kExitBadInput;
  };
  if (opts.input.empty() == opts.model.empty())
    return fail("give exactly one of MODEL.mlir or --model NAME[:options]");
  std::optional<Phase> phase = parsePhase(opts.compileTo);
  if (!phase)
    return fail("--compile-to: unknown phase '" + opts.compileTo +
                "' (this build has " + phaseList() + ")");
  std::string emit = opts.emit;
  if (emit.empty())
    emit = *phase == Phase::Emit ? "plan" : "mlir";
  if (emit != "mlir" && emit != "plan")
    return fail("--emit: expected 'mlir' or 'plan', got '" + emit + "'");
  if (emit == "plan" && *phase != Phase::Emit)
    return fail("--emit=plan needs --compile-to=emit (the default)");
  if (opts.worldSize < 1)
    return fail("--world-size: expected a positive integer");
  uint64_t deviceBudget = 0;
  if (!opts.deviceMemory.empty()) {
    if (!parseByteCount(opts.deviceMemory, deviceBudget) || deviceBudget == 0)
      return fail("--device-memory: expected a byte count such as "
                  "85899345920 or 80GiB, got '" +
                  opts.deviceMemory + "'");
    if (*phase < Phase::Plan)
      return fail("--device-memory is checked against the plan: give "
                  "--compile-to=plan or emit");
  }

  DsConfig config;
  bool haveConfig = !opts.config.empty();
  if (haveConfig) {
    std::string error;
    auto file = openInputFile(opts.config, &error);
    if (!file)
      return fail("cannot read '" + opts.config + "': " + error);
    if (!parseDsConfig(file->getBuffer(), opts.config, opts.worldSize,
                       kDefaultMicroBatch, config, error))
      return fail(error);
    for (const std::string &note : config.notes)
      llvm::errs() << "dsc: note: " << note << "\n";
  }
  TrainOptions train;
  train.setWorldSize(opts.worldSize);
  if (haveConfig) {
    const DsConfig::ActivationCheckpointing &ac =
        config.activationCheckpointing;
    if (ac.partitionActivations)
      return fail(opts.config +
                  ": activation_checkpointing.partition_activations splits "
                  "activations over tensor-parallel ranks, and dsc has no "
                  "tensor parallelism");
    train = passOptionsFromConfig(config, opts.worldSize);
  }
  // --remat, --remat-every and --activation-memory override the config.
  if (!opts.remat.empty()) {
    if (!llvm::is_contained({"none", "layers", "selective", "auto"},
                            StringRef(opts.remat)))
      return fail("--remat: expected none, layers, selective or auto, got '" +
                  opts.remat + "'");
    train.remat.policy = opts.remat;
  }
  if (opts.rematEvery.getNumOccurrences()) {
    if (opts.rematEvery < 1)
      return fail("--remat-every: expected a positive integer");
    if (train.remat.policy != "layers")
      return fail("--remat-every needs --remat=layers");
    train.remat.every = opts.rematEvery;
  }
  if (opts.activationMemory.getNumOccurrences()) {
    if (opts.activationMemory < 1)
      return fail("--activation-memory: expected a positive number of bytes");
    if (train.remat.policy != "auto")
      return fail("--activation-memory is the budget of --remat=auto");
    train.remat.activationMemory = opts.activationMemory;
  }
  if (train.remat.activationMemory && train.remat.policy != "auto")
    return fail(opts.config +
                ": activation_checkpointing.activation_memory "
                "is the budget of remat \"auto\", but remat is \"" +
                train.remat.policy + "\"");
  // A plan file is for dsrun: its inputs must be what dsrun feeds (a
  // --report alone writes no plan).
  train.input.dsrunInputs =
      *phase == Phase::Emit && !(opts.report && opts.output == "-");
  train.plan.model = opts.model.empty()
                         ? llvm::sys::path::stem(opts.input).str()
                         : StringRef(opts.model).split(':').first.str();

  DialectRegistry registry;
  registerAll(registry);
  auto contextHolder = std::make_unique<MLIRContext>(registry);
  MLIRContext &context = *contextHolder;
  context.loadAllAvailableDialects();
  // Diagnostics name the op by location; a dump of the op is noise to users.
  context.printOpOnDiagnostic(false);
  ScopedDiagnosticHandler diagnostics(&context, printDiagnostic);

  OwningOpRef<ModuleOp> module;
  llvm::SourceMgr sourceMgr;
  if (!opts.model.empty()) {
    std::string error;
    int64_t microBatch =
        haveConfig ? config.microBatchSize : kDefaultMicroBatch;
    if (haveConfig && StringRef(opts.model).contains("batch_size="))
      return fail("--model sets batch_size and --config sets "
                  "train_micro_batch_size_per_gpu; give one of them");
    module = models::buildModel(context, opts.model, microBatch, error);
    if (!module)
      return fail("--model " + error);
    if (opts.evalMicroBatch < 0)
      return fail("--eval-micro-batch-size: expected a positive number");
    if (opts.evalMicroBatch && opts.evalMicroBatch != microBatch) {
      if (StringRef(opts.model).contains("batch_size="))
        return fail("--eval-micro-batch-size: --model sets batch_size; give "
                    "the training batch in --config instead");
      // The eval program's graph: the same model at the eval batch, as
      // @forward_eval (ds-eval builds @eval from it).
      OwningOpRef<ModuleOp> other =
          models::buildModel(context, opts.model, opts.evalMicroBatch, error);
      if (!other)
        return fail("--model " + error);
      auto forward = other->lookupSymbol<func::FuncOp>("forward");
      if (!forward)
        return fail("--eval-micro-batch-size: the model has no @forward");
      forward->remove();
      forward.setSymName("forward_eval");
      module->push_back(forward);
    }
  } else {
    if (opts.evalMicroBatch)
      return fail("--eval-micro-batch-size: " + opts.input +
                  " has its batch fixed; only --model builds can change it");
    std::string error;
    auto file = openInputFile(opts.input, &error);
    if (!file)
      return fail("cannot read '" + opts.input + "': " + error);
    if (!checkNesting(file->getBuffer(), opts.input, error))
      return fail(error);
    sourceMgr.AddNewSourceBuffer(std::move(file), llvm::SMLoc());
    module = parseSourceFile<ModuleOp>(sourceMgr, &context);
    if (!module)
      return kExitBadInput;
  }
  if (failed(verify(*module)))
    return kExitBadInput;

  PassManager pm(&context);
  auto planResult = std::make_shared<PlanResult>();
  if (failed(applyPassManagerCLOptions(pm)))
    return kExitBadInput;
  applyDefaultTimingPassManagerCLOptions(pm); // --mlir-timing
  if (!opts.passPipeline.empty()) {
    std::string error;
    llvm::raw_string_ostream os(error);
    // `builtin.module(...)` names the module dsc already anchors on; parsed
    // as is it would nest and run on modules inside the module.
    StringRef text = StringRef(opts.passPipeline).trim();
    if (text.consume_front("builtin.module(") && text.consume_back(")"))
      text = text.trim();
    if (failed(parsePassPipeline(text, pm, os)))
      return fail("--pass-pipeline: " + error);
    // The plan phases still come after a replayed IR pipeline.
    if (*phase >= Phase::Plan)
      pm.addPass(createLowerToPlanPass(train.plan, planResult));
    if (*phase == Phase::Emit)
      pm.addPass(createEmitPlanPass(train.emit, planResult));
  } else {
    buildPipeline(pm, *phase, train, planResult);
  }
  if (failed(pm.run(*module)))
    return kExitBadInput;

  const PlanModel &plan = planResult->plan;
  if (*phase >= Phase::Plan && haveConfig &&
      plan.microBatch != config.microBatchSize)
    return fail(opts.config + ": train_micro_batch_size_per_gpu is " +
                Twine(config.microBatchSize) + " but the model's batch is " +
                Twine(plan.microBatch));
  if (deviceBudget) {
    std::string refused = checkDeviceBudget(plan, deviceBudget);
    if (!refused.empty())
      return fail("--device-memory " + opts.deviceMemory + ": " + refused);
  }
  if (opts.report)
    printReport(
        plan,
        module.get()->hasAttr("ds.remat")
            ? cast<StringAttr>(module.get()->getAttr("ds.remat")).getValue()
            : StringRef(),
        llvm::outs());
  if (opts.report && opts.output == "-")
    return kExitOk;

  std::string error;
  if (emit == "plan" && opts.output == "-" &&
      llvm::sys::Process::StandardOutIsDisplayed())
    return fail("refusing to write a binary plan to a terminal; use -o "
                "FILE.dsplan");
  if (opts.output == "-") {
    if (emit == "plan")
      llvm::outs().write(
          reinterpret_cast<const char *>(planResult->bytes.data()),
          planResult->bytes.size());
    else
      module->print(llvm::outs());
    llvm::outs().flush();
    if (llvm::outs().has_error()) {
      llvm::outs().clear_error();
      return fail("cannot write to standard output");
    }
  } else {
    // All or nothing, and only over a regular file (runtime/core/
    // OutputPath.h): a failed write leaves what was there.
    std::string text;
    if (emit != "plan") {
      llvm::raw_string_ostream os(text);
      module->print(os);
    }
    const void *data = emit == "plan"
                           ? static_cast<const void *>(planResult->bytes.data())
                           : text.data();
    size_t size = emit == "plan" ? planResult->bytes.size() : text.size();
    if (!writeOutput(opts.output, data, size, error))
      return fail("cannot write '" + opts.output + "': " + error);
  }
  // The process ends next: freeing the IR op by op and the context's
  // uniqued storage would cost a tenth of a deep model's compile for
  // nothing, so both are left to the OS (as clang's -disable-free does).
  (void)module.release();
  (void)contextHolder.release();
  return kExitOk;
}

} // namespace dsc
