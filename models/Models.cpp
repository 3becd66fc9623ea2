//===- Models.cpp - model registry and spec parsing -----------------------===//

#include "models/Models.h"

#include "models/builder/GraphBuilder.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>

using namespace mlir;
using namespace dsc::models;

int64_t ModelOptions::getInt(StringRef name) const {
  auto it = ints.find(name);
  if (it == ints.end())
    llvm::report_fatal_error(Twine("model option '") + name + "' is not set");
  return it->second;
}

double ModelOptions::getFloat(StringRef name) const {
  auto it = floats.find(name);
  if (it == floats.end())
    llvm::report_fatal_error(Twine("model option '") + name + "' is not set");
  return it->second;
}

std::string dsc::models::formatNumber(double value) {
  std::string text;
  llvm::raw_string_ostream(text) << llvm::format("%g", value);
  return text;
}

static ArrayRef<const ModelDef *> registry() {
  static const ModelDef *defs[] = {&gpt2Model(), &llamaModel(), &mlpModel()};
  return defs;
}

// Accepted by every model.
static const OptionSpec batchSizeOption = {
    "batch_size", OptionKind::Int, "",
    "overrides the batch size given to dsc (--batch-size)"};

static std::string knownModels() {
  std::string names;
  for (const ModelDef *def : registry())
    names += (names.empty() ? "" : ", ") + def->name.str();
  return names;
}

static SmallVector<const OptionSpec *> allOptions(const ModelDef &def) {
  SmallVector<const OptionSpec *> all;
  for (const OptionSpec &opt : def.options)
    all.push_back(&opt);
  all.push_back(&batchSizeOption);
  return all;
}

static std::string unknownOption(const ModelDef &def, StringRef key) {
  // Suggest the closest name when it is plausibly a typo.
  const OptionSpec *best = nullptr;
  unsigned bestDistance = std::max<unsigned>(2, key.size() / 3) + 1;
  for (const OptionSpec *opt : allOptions(def)) {
    unsigned d = key.edit_distance(opt->name, /*AllowReplacements=*/true,
                                   /*MaxEditDistance=*/bestDistance);
    if (d < bestDistance) {
      best = opt;
      bestDistance = d;
    }
  }
  std::string msg = (Twine("unknown option '") + key + "'").str();
  if (best)
    return msg + " (did you mean '" + best->name.str() + "'?)";
  std::string known;
  for (const OptionSpec *opt : allOptions(def))
    known += (known.empty() ? "" : ", ") + opt->name.str();
  return msg + " (known: " + known + ")";
}

/// Parses `text` as the value of `opt` into `opts`; returns "" or an error.
static std::string parseValue(const OptionSpec &opt, StringRef text,
                              ModelOptions &opts) {
  auto expects = [&](StringRef what) {
    return (Twine("'") + opt.name + "' expects " + what + ", got '" + text +
            "'")
        .str();
  };
  switch (opt.kind) {
  case OptionKind::Int: {
    int64_t value;
    if (text.getAsInteger(10, value))
      return expects("an integer");
    if (value < opt.minValue) {
      std::string bound = opt.minValue == 1
                              ? std::string("positive")
                              : "at least " + std::to_string(opt.minValue);
      return (Twine(opt.name) + "=" + text + " must be " + bound).str();
    }
    // No model dimension comes near this, and products of a few of them
    // then stay far inside 64 bits (ds-verify-input bounds each tensor).
    constexpr int64_t kMaxDimension = int64_t(1) << 31;
    if (value > kMaxDimension)
      return (Twine(opt.name) + "=" + text + " must be at most " +
              Twine(kMaxDimension))
          .str();
    opts.setInt(opt.name, value);
    return "";
  }
  case OptionKind::Bool:
    if (text == "1" || text == "true")
      opts.setInt(opt.name, 1);
    else if (text == "0" || text == "false")
      opts.setInt(opt.name, 0);
    else
      return expects("0 or 1");
    return "";
  case OptionKind::Float: {
    double value;
    if (text.getAsDouble(value) || !std::isfinite(value))
      return expects("a number");
    opts.setFloat(opt.name, value);
    return "";
  }
  }
  llvm_unreachable("unknown option kind");
}

/// Applies the `key=value,...` list of a spec over the defaults.
static std::string parseOptions(const ModelDef &def, StringRef list,
                                ModelOptions &opts) {
  for (const OptionSpec &opt : def.options) {
    if (opt.defaultValue.empty())
      continue;
    std::string err = parseValue(opt, opt.defaultValue, opts);
    if (!err.empty())
      llvm::report_fatal_error(Twine("bad default of ") + def.name + ": " +
                               err);
  }
  llvm::StringSet<> seen;
  SmallVector<StringRef> items;
  list.split(items, ',', /*MaxSplit=*/-1, /*KeepEmpty=*/false);
  for (StringRef item : items) {
    auto [key, value] = item.split('=');
    if (!item.contains('=') || key.empty())
      return (Twine("expected key=value, got '") + item + "'").str();
    if (!seen.insert(key).second)
      return (Twine("option '") + key + "' given twice").str();
    auto all = allOptions(def);
    const OptionSpec *const *opt =
        llvm::find_if(all, [&](const OptionSpec *o) { return o->name == key; });
    if (opt == all.end())
      return unknownOption(def, key);
    std::string err = parseValue(**opt, value, opts);
    if (!err.empty())
      return err;
  }
  return "";
}

OwningOpRef<ModuleOp> dsc::models::buildModel(MLIRContext &ctx, StringRef spec,
                                              int64_t batchSize,
                                              std::string &error,
                                              int64_t seqLen) {
  error.clear();
  auto [name, list] = spec.split(':');
  const ModelDef *const *found = llvm::find_if(
      registry(), [&](const ModelDef *d) { return d->name == name; });
  if (found == registry().end()) {
    error =
        (Twine("unknown model '") + name + "' (known: " + knownModels() + ")")
            .str();
    return nullptr;
  }
  const ModelDef &def = **found;
  auto fail = [&](StringRef msg) {
    error = (Twine(def.name) + ": " + msg).str();
    return nullptr;
  };

  ModelOptions opts;
  std::string err = parseOptions(def, list, opts);
  if (!err.empty())
    return fail(err);
  if (opts.has(batchSizeOption.name))
    batchSize = opts.getInt(batchSizeOption.name);
  if (batchSize < 1)
    return fail("batch size " + std::to_string(batchSize) +
                " must be positive");
  err = def.finalize(opts);
  if (!err.empty())
    return fail(err);

  const int64_t blockSize = opts.getInt("block_size");
  if (seqLen < 0 || seqLen > blockSize)
    return fail("sequence length " + std::to_string(seqLen) +
                " must be in [1, block_size=" + std::to_string(blockSize) +
                "]");
  builder::GraphBuilder gb(ctx, def.name);
  Value loss = def.build(gb, opts, batchSize, seqLen ? seqLen : blockSize);
  OwningOpRef<ModuleOp> module = gb.finish(loss);

  // Options were checked above, so a failure here is a bug in the model; say
  // where instead of handing on a broken module.
  std::string firstDiag;
  ScopedDiagnosticHandler handler(&ctx, [&](Diagnostic &diag) {
    if (firstDiag.empty()) {
      llvm::raw_string_ostream os(firstDiag);
      os << diag.getLocation() << ": " << diag;
    }
    return success();
  });
  if (failed(verify(*module)))
    return fail("internal error: the built module does not verify: " +
                firstDiag);
  return module;
}

void dsc::models::printModelHelp(llvm::raw_ostream &os) {
  auto printOption = [&](const OptionSpec &opt) {
    std::string key = opt.name.str() + "=" +
                      (opt.defaultValue.empty() ? std::string("auto")
                                                : opt.defaultValue.str());
    os << llvm::formatv("    {0,-22} {1}\n", key, opt.help);
  };
  os << "models (NAME[:key=value,...]):\n";
  for (const ModelDef *def : registry()) {
    os << "  " << def->name << ": " << def->summary << "\n";
    for (const OptionSpec &opt : def->options)
      printOption(opt);
  }
  os << llvm::formatv("  every model:\n    {0,-22} {1}\n", "batch_size=N",
                      batchSizeOption.help);
}
