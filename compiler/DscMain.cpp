//===- DscMain.cpp - the library behind the dsc tool ----------------------===//
//
// Exit status: 0 compiled, 2 bad input (flags, IR, model spec, a violated
// input contract), 1 anything else. Output files are written only after the
// whole compilation succeeded, so a failed run never leaves a partial file.
//
//===----------------------------------------------------------------------===//

#include "compiler/DscMain.h"

#include "compiler/Compile.h"
#include "compiler/Report.h"
#include "compiler/StepTimeline.h"
#include "runtime/core/OutputPath.h"
#include "runtime/core/PathRules.h"

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

using namespace mlir;
namespace cl = llvm::cl;

namespace dsc {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitBadInput = 2;

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
  cl::opt<bool> samplePrograms{
      "sample-programs",
      cl::desc("also build one-row sampling programs at a few lengths up to "
               "the block size, so that dsrun --sample runs a forward as "
               "short as the context (default true; --model builds only)"),
      cl::init(true)};
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
  cl::opt<bool> fuseLmHead{
      "fuse-lm-head",
      cl::desc("an LM head and its loss as one op that holds the logits a "
               "chunk of rows at a time (default true; docs/performance.md)"),
      cl::init(true)};
  cl::opt<bool> fuseElementwise{
      "fuse-elementwise",
      cl::desc("chains of elementwise ops as one kernel each, grouped by the "
               "bytes they save (default true; docs/performance.md)"),
      cl::init(true)};
  cl::opt<bool> foldAttentionLayout{
      "fold-attention-layout",
      cl::desc("attention reads q, k, v and writes its results as [B, T, H, "
               "D], without the transposes around it (default true; "
               "docs/performance.md)"),
      cl::init(true)};
  cl::opt<int64_t> lmHeadChunkRows{
      "lm-head-chunk-rows", cl::value_desc("ROWS"),
      cl::desc("the fused LM head's rows a chunk (default: the largest "
               "divisor of the rows up to max(256, rows / 16))"),
      cl::init(0)};
  cl::opt<bool> report{"report",
                       cl::desc("print per-rank memory by category and the "
                                "FLOPs of a step")};
  cl::opt<std::string> machine{
      "machine", cl::value_desc("h100|cpu[,key=value...]"),
      cl::desc("--report: the machine model the collectives' hidden time is "
               "predicted on, and the one a \"balanced\" pipeline partition "
               "weighs ops with (tflops, mem_gbps, link_gbps, host_gbps, "
               "latency_us override; default h100)"),
      cl::init("h100")};
  cl::opt<std::string> output{"o", cl::value_desc("FILE"),
                              cl::desc("output file (default: stdout)"),
                              cl::init("-")};
  cl::opt<std::string> passPipeline{
      "pass-pipeline", cl::value_desc("PIPELINE"),
      cl::desc("run this textual pass pipeline instead of the phases"),
      cl::init("")};
};

} // namespace

/// MLIR's parser recurses per nesting level: a file of 50000 '[' (or
/// "tuple<" types) would overflow the stack. One pass over the text
/// (strings and comments skipped) refuses nesting deeper than any model
/// needs, naming the line.
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
    } else if (c == '(' || c == '[' || c == '{' || c == '<') {
      if (++depth > kMaxDepth) {
        error = (name + ":" + Twine(line) + ": nested more than " +
                 Twine(kMaxDepth) + " levels deep")
                    .str();
        return false;
      }
    } else if (c == ')' || c == ']' || c == '}' ||
               (c == '>' && !(i > 0 && text[i - 1] == '-') &&
                !(i + 1 < text.size() && text[i + 1] == '='))) {
      // "->" and ">=" close nothing.
      depth = std::max(0, depth - 1);
    }
  }
  return true;
}

std::string joinToolLines(StringRef text, StringRef prefix) {
  std::string joined;
  SmallVector<StringRef> lines;
  text.split(lines, '\n');
  for (StringRef line : lines) {
    line = line.trim();
    line.consume_front(prefix);
    line = line.trim();
    if (line.empty())
      continue;
    joined += (joined.empty() ? "" : "; ") + line.str();
  }
  return joined;
}

/// `--help` lists dsc's own flags and the few MLIR ones for inspecting
/// passes; LLVM's hundreds of backend flags stay reachable through
/// --help-hidden.
void showOnlyDscFlags() {
  static cl::OptionCategory dscFlags("dsc options");
  static cl::OptionCategory mlirFlags(
      "Inspecting the passes (all of MLIR's and LLVM's: --help-hidden)");
  static const char *const dsc[] = {"model",
                                    "compile-to",
                                    "emit",
                                    "config",
                                    "world-size",
                                    "eval-micro-batch-size",
                                    "sample-programs",
                                    "remat",
                                    "remat-every",
                                    "activation-memory",
                                    "device-memory",
                                    "report",
                                    "o",
                                    "fuse-lm-head",
                                    "fuse-elementwise",
                                    "lm-head-chunk-rows",
                                    "fold-attention-layout",
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

/// The compile request dsc's flags describe; false with `error` naming the
/// flag when one is out of range.
bool requestFromFlags(const Options &opts, const MachineModel &machine,
                      Phase phase, CompileRequest &req, std::string &error) {
  req.inputPath = opts.input;
  req.model = opts.model;
  req.configPath = opts.config;
  req.worldSize = opts.worldSize;
  if (opts.evalMicroBatch.getNumOccurrences())
    req.evalMicroBatch = opts.evalMicroBatch;
  req.samplePrograms = opts.samplePrograms;
  req.remat = opts.remat;
  if (opts.rematEvery.getNumOccurrences())
    req.rematEvery = opts.rematEvery;
  req.fuseLmHead = opts.fuseLmHead;
  req.fuseElementwise = opts.fuseElementwise;
  req.foldAttentionLayout = opts.foldAttentionLayout;
  if (opts.lmHeadChunkRows < 0) {
    error = "--lm-head-chunk-rows: expected a positive number of rows, got " +
            std::to_string(opts.lmHeadChunkRows);
    return false;
  }
  req.lmHeadChunkRows = opts.lmHeadChunkRows;
  if (opts.activationMemory.getNumOccurrences())
    req.activationMemory = opts.activationMemory;
  req.deviceMemory = opts.deviceMemory;
  req.flopsPerByte = machine.flops / machine.memory;
  req.phase = phase;
  req.passPipeline = opts.passPipeline;
  // A --report alone writes no plan, so dsrun's inputs are not required.
  req.forDsrun = !(opts.report && opts.output == "-");
  req.configurePasses = [](PassManager &pm) {
    if (failed(applyPassManagerCLOptions(pm)))
      return failure();
    applyDefaultTimingPassManagerCLOptions(pm); // --mlir-timing
    return success();
  };
  return true;
}

int runDscMain(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  registerAsmPrinterCLOptions();
  registerMLIRContextCLOptions();
  registerPassManagerCLOptions();
  registerDefaultTimingManagerCLOptions();
  Options opts;
  showOnlyDscFlags();
  {
    // LLVM reports a bad flag over two lines ("Unknown command line
    // argument", then "Did you mean"): one line here, as for every error.
    std::string problems;
    llvm::raw_string_ostream os(problems);
    if (!cl::ParseCommandLineOptions(
            argc, argv, "dsc: compiles a model into a training step\n", &os)) {
      llvm::errs() << "dsc: " << joinToolLines(problems, "dsc: ") << "\n";
      return kExitBadInput;
    }
  }

  auto print = [](CompileMessage kind, const std::string &line) {
    switch (kind) {
    case CompileMessage::Error:
      llvm::errs() << "dsc: " << line << "\n";
      break;
    case CompileMessage::Note:
      llvm::errs() << "dsc: note: " << line << "\n";
      break;
    case CompileMessage::Diagnostic:
      llvm::errs() << line << "\n";
      break;
    }
  };
  auto fail = [&](const Twine &message) {
    print(CompileMessage::Error, message.str());
    return kExitBadInput;
  };
  if (opts.input.empty() == opts.model.empty())
    return fail("give exactly one of MODEL.mlir or --model NAME[:options]");
  if (opts.output.empty())
    return fail("-o: expected a file name (or - for standard output)");
  if (opts.config.getNumOccurrences() && opts.config.empty())
    return fail("--config: expected a file name");
  // Before anything is compiled or opened for writing (PathRules.h).
  std::string error;
  if (!checkOutputsDistinct(
          {{"the input", opts.input}, {"--config", opts.config}},
          {{"-o", opts.output}}, error))
    return fail(error);
  OutputPath where; // a FIFO or a directory: refused before compiling
  if (opts.output != "-" && !classifyOutput(opts.output, where, error))
    return fail("-o " + error);
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
  MachineModel machine;
  if (std::string error; !parseMachine(opts.machine, machine, error))
    return fail(error);

  CompileRequest req;
  if (!requestFromFlags(opts, machine, *phase, req, error))
    return fail(error);
  Compilation compiled;
  if (int status = compile(req, compiled, print))
    return status;
  OwningOpRef<ModuleOp> &module = compiled.module;
  PlanResult &planResult = *compiled.plan;

  if (opts.report) {
    printPlanReport(planResult.plan, planResult.stages, compiled.remat, machine,
                    llvm::outs());
    // A failed write (a full disk, /dev/full) is this run's error, not a
    // "LLVM ERROR" when the stream is destroyed.
    llvm::outs().flush();
    if (llvm::outs().has_error()) {
      llvm::outs().clear_error();
      return fail("cannot write the report to standard output");
    }
  }
  if (opts.report && opts.output == "-")
    return kExitOk;
  if (emit == "plan" && opts.output == "-" &&
      llvm::sys::Process::StandardOutIsDisplayed())
    return fail("refusing to write a binary plan to a terminal; use -o "
                "FILE.dsplan");
  if (opts.output == "-") {
    if (emit == "plan")
      llvm::outs().write(
          reinterpret_cast<const char *>(planResult.bytes.data()),
          planResult.bytes.size());
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
                           ? static_cast<const void *>(planResult.bytes.data())
                           : text.data();
    size_t size = emit == "plan" ? planResult.bytes.size() : text.size();
    if (!writeOutput(opts.output, data, size, error))
      return fail("cannot write '" + opts.output + "': " + error);
  }
  // The process ends next: freeing the IR op by op and the context's
  // uniqued storage would cost a tenth of a deep model's compile for
  // nothing, so both are left to the OS (as clang's -disable-free does).
  (void)module.release();
  (void)compiled.context.release();
  return kExitOk;
}

} // namespace dsc
