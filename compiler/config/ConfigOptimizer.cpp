//===- ConfigOptimizer.cpp - the optimizer section ------------------------===//
//
// DeepSpeed's optimizer section: "type" (any case, as DeepSpeed lower-cases
// its own optimizers' names) and "params", the optimizer's constructor
// arguments with PyTorch's and DeepSpeed's defaults. dsc compiles Adam and
// AdamW (decoupled decay), SGD (torch.optim.SGD, which DeepSpeed builds for
// a name it does not know), Lion (DeepSpeed's FusedLion) and Adagrad
// (torch.optim.Adagrad's rule), Lamb (DeepSpeed's FusedLamb) and Muon
// (DeepSpeed's MuonWithAuxAdam: Muon for matrices, AdamW for the rest); each
// optimizer's parameters are refused under another (a momentum under
// AdamW, betas under SGD), so a config that says more than the optimizer
// reads fails.
//
//===----------------------------------------------------------------------===//
#include "compiler/config/ConfigReader.h"

#include "llvm/ADT/StringExtras.h"

namespace dsc::config {

namespace {

constexpr const char *kSupported =
    "Adam, AdamW, SGD, Lion, Adagrad, Lamb, Muon";

/// Why optimizer `name` is refused: DeepSpeed's 1-bit family by what it
/// does, DeepSpeed's other optimizers as not supported yet, anything else
/// as unknown.
std::string unsupportedOptimizer(StringRef name) {
  std::string lower = name.lower();
  for (StringRef oneBit : {"onebitadam", "zerooneadam", "onebitlamb"})
    if (lower == oneBit)
      return quote(name) + " is not supported: it compresses gradient "
                           "communication to one bit per value with error "
                           "feedback, and dsc's collectives send full values "
                           "(use Adam or AdamW)";
  for (StringRef other : {"muadam", "muadamw", "musgd"})
    if (lower == other)
      return quote(name) + " is not supported yet (dsc implements " +
             kSupported + ")";
  return "unsupported optimizer " + quote(name) + " (supported: " + kSupported +
         ")";
}

/// The type's canonical name and its defaults (torch.optim's and
/// DeepSpeed's FusedLion's); false for a type dsc does not compile.
bool setType(StringRef name, DsConfig::Optimizer &o) {
  if (name.equals_insensitive("adam")) {
    o.type = "Adam";
    o.weightDecay = 0;
  } else if (name.equals_insensitive("adamw")) {
    o.type = "AdamW";
    o.weightDecay = 0.01;
  } else if (name.equals_insensitive("sgd")) {
    o.type = "SGD";
    o.weightDecay = 0;
  } else if (name.equals_insensitive("lion")) {
    o.type = "Lion";
    o.weightDecay = 0;
  } else if (name.equals_insensitive("lamb")) {
    o.type = "Lamb"; // DeepSpeed's FusedLamb's defaults
    o.weightDecay = 0;
  } else if (name.equals_insensitive("muon")) {
    // MuonWithAuxAdam's defaults: its matrices' and its AdamW half's.
    o.type = "Muon";
    o.lr = 3e-4;
    o.muonLr = 0.02;
    o.beta2 = 0.95;
    o.eps = 1e-10;
    o.weightDecay = 0;
    o.momentum = 0.95;
    o.nesterov = true;
  } else if (name.equals_insensitive("adagrad")) {
    o.type = "Adagrad"; // torch.optim.Adagrad's defaults
    o.lr = 1e-2;
    o.eps = 1e-10;
    o.weightDecay = 0;
  } else {
    return false;
  }
  return true;
}

/// The parameters that belong to some optimizers only, and which.
struct OwnedKey {
  StringRef key;
  std::initializer_list<StringRef> owners;
};
const OwnedKey kOwnedKeys[] = {
    {"betas", {"Adam", "AdamW", "Lion", "Lamb", "Muon"}},
    {"eps", {"Adam", "AdamW", "Adagrad", "Lamb", "Muon"}},
    {"lr_decay", {"Adagrad"}},
    {"initial_accumulator_value", {"Adagrad"}},
    {"adam_w_mode", {"Adam", "AdamW", "Muon"}},
    {"bias_correction", {"Adam", "AdamW", "Lamb"}},
    {"torch_adam", {"Adam", "AdamW"}},
    {"amsgrad", {"Adam", "AdamW", "Lamb"}},
    {"eps_inside_sqrt", {"Lamb"}},
    {"min_coeff", {"Lamb"}},
    {"max_coeff", {"Lamb"}},
    {"momentum", {"SGD", "Muon"}},
    {"muon_lr", {"Muon"}},
    {"adam_lr", {"Muon"}},
    {"ns_method", {"Muon"}},
    {"per_head_muon", {"Muon"}},
    {"dampening", {"SGD"}},
    {"nesterov", {"SGD"}},
};

/// Each present parameter that `type` does not take, one line each.
bool keysOfType(Reader &r, Section &params, StringRef type) {
  bool ok = true;
  for (const OwnedKey &k : kOwnedKeys) {
    if (!params.get(k.key) || llvm::is_contained(k.owners, type))
      continue;
    std::string owners = llvm::join(k.owners.begin(), k.owners.end(), ", ");
    ok &= r.fail(params.at(k.key), "not a parameter of " + type.str() +
                                       " (it is " + owners + "'s)");
  }
  return ok;
}

bool readBetas(Reader &r, Section &params, DsConfig::Optimizer &o) {
  const json::Value *betas = params.get("betas");
  if (!betas)
    return true;
  std::string path = params.at("betas");
  if (isAuto(*betas)) {
    r.note(path, "\"auto\" resolved to [" + formatNumber(o.beta1) + ", " +
                     formatNumber(o.beta2) + "] (default)");
    return true;
  }
  const json::Array *array = betas->getAsArray();
  if (!array)
    return r.fail(path, Twine("expected an array of 2 numbers, got ") +
                            kindName(*betas));
  if (array->size() != 2)
    return r.fail(path, "expected 2 numbers, got " + Twine(array->size()));
  double *outs[2] = {&o.beta1, &o.beta2};
  bool ok = true;
  for (size_t i = 0; i < 2; ++i) {
    std::string element = elementPath(path, i);
    ok &= r.toNumber(element, (*array)[i], *outs[i]) &&
          ((*outs[i] >= 0 && *outs[i] < 1) ||
           r.fail(element, "must be in [0, 1), got " + formatNumber(*outs[i])));
  }
  return ok;
}

/// AdamW divides by sqrt(v) + eps: 0 would divide by zero where a
/// gradient is zero (the ds.adamw verifier refuses it too, but not in
/// terms of the file).
bool readEps(Reader &r, Section &params, DsConfig::Optimizer &o) {
  return params.number("eps", o.eps) &&
         (o.eps > 0 ||
          r.fail(params.at("eps"), "must be > 0, got " + formatNumber(o.eps)));
}

/// Adam's and AdamW's own flags.
bool readAdamFlags(Section &params, DsConfig::Optimizer &o) {
  return Reader::all(
      {// Adam with adam_w_mode false is Adam with L2 regularization: not
       // supported. AdamW ignores adam_w_mode, as DeepSpeed does.
       o.type == "Adam"
           ? params.onlyBoolean("adam_w_mode", true,
                                "dsc applies decoupled weight decay (AdamW); "
                                "use \"AdamW\" or leave adam_w_mode out")
           : params.ignoredBoolean("adam_w_mode"),
       params.onlyBoolean("bias_correction", true,
                          "dsc's Adam always corrects bias"),
       params.ignoredBoolean("torch_adam")});
}

/// SGD's: torch.optim.SGD's checks, in terms of the file.
bool readSgdParams(Reader &r, Section &params, DsConfig::Optimizer &o) {
  bool ok = Reader::all({params.number("momentum", o.momentum) &&
                             r.atLeast(params.at("momentum"), o.momentum, 0.0),
                         params.number("dampening", o.dampening),
                         params.boolean("nesterov", o.nesterov)});
  if (ok && o.nesterov && (o.momentum <= 0 || o.dampening != 0))
    return r.fail(params.at("nesterov"),
                  "Nesterov momentum needs momentum > 0 and dampening 0, got "
                  "momentum " +
                      formatNumber(o.momentum) + " and dampening " +
                      formatNumber(o.dampening));
  return ok;
}

/// Adagrad's: torch.optim.Adagrad's checks; its accumulator starts at 0.
bool readAdagradParams(Reader &r, Section &params, DsConfig::Optimizer &o) {
  double initial = 0;
  return Reader::all(
      {params.number("lr_decay", o.lrDecay) &&
           r.atLeast(params.at("lr_decay"), o.lrDecay, 0.0),
       params.number("initial_accumulator_value", initial) &&
           (initial == 0 ||
            r.fail(params.at("initial_accumulator_value"),
                   formatNumber(initial) +
                       " is not supported yet: dsc's Adagrad starts its sum "
                       "of squares at 0"))});
}

/// Lamb's: FusedLamb's arguments; the trust ratio is clamped to
/// [min_coeff, max_coeff].
bool readLambParams(Reader &r, Section &params, DsConfig::Optimizer &o) {
  bool ok = Reader::all({params.boolean("bias_correction", o.biasCorrection),
                         params.boolean("eps_inside_sqrt", o.epsInsideSqrt),
                         params.number("min_coeff", o.minCoeff),
                         params.number("max_coeff", o.maxCoeff)});
  if (ok && !(o.minCoeff > 0))
    return r.fail(params.at("min_coeff"),
                  "must be > 0, got " + formatNumber(o.minCoeff));
  if (ok && !(o.maxCoeff >= o.minCoeff))
    return r.fail(params.at("max_coeff"),
                  "must be >= min_coeff (" + formatNumber(o.minCoeff) +
                      "), got " + formatNumber(o.maxCoeff));
  return ok;
}

/// Muon's: each half's lr (lr for both, then muon_lr / adam_lr), the
/// momentum, the Newton-Schulz method, per_head_muon; its AdamW half decays
/// decoupled.
bool readMuonParams(Reader &r, Section &params, DsConfig::Optimizer &o) {
  if (params.get("lr"))
    o.muonLr = o.lr;
  bool ok = Reader::all(
      {params.number("muon_lr", o.muonLr) &&
           r.atLeast(params.at("muon_lr"), o.muonLr, 0.0),
       params.number("adam_lr", o.lr) &&
           r.atLeast(params.at("adam_lr"), o.lr, 0.0),
       params.number("momentum", o.momentum),
       params.boolean("per_head_muon", o.perHeadMuon),
       params.onlyBoolean("adam_w_mode", true,
                          "dsc's Muon decays its AdamW half decoupled; leave "
                          "adam_w_mode out")});
  if (ok && !(o.momentum >= 0 && o.momentum < 1))
    ok = r.fail(params.at("momentum"),
                "must be in [0, 1), got " + formatNumber(o.momentum));
  if (const json::Value *method = params.get("ns_method")) {
    std::optional<StringRef> name = method->getAsString();
    if (!name || (*name != "gram" && *name != "standard"))
      return r.fail(params.at("ns_method"),
                    "expected \"gram\" or \"standard\"");
    o.nsMethod = name->str();
  }
  return ok;
}

} // namespace

bool readOptimizer(Reader &r, Section &root, DsConfig::Optimizer &o) {
  std::optional<Section> opt;
  if (!root.section("optimizer", opt))
    return false;
  if (!opt->present())
    return true;
  bool keysOk = opt->checkKeys();

  // A bad type leaves AdamW's defaults, so params are still checked.
  auto readType = [&]() {
    const json::Value *type = opt->get("type");
    if (!type)
      return r.fail(opt->at("type"), std::string("required key is missing "
                                                 "(supported: ") +
                                         kSupported + ")");
    std::optional<StringRef> name = type->getAsString();
    if (!name)
      return r.fail(opt->at("type"),
                    Twine("expected a string, got ") + kindName(*type));
    if (!setType(*name, o))
      return r.fail(opt->at("type"), unsupportedOptimizer(*name));
    return true;
  };
  bool typeOk = readType();

  std::optional<Section> params;
  if (!opt->section("params", params))
    return false;
  bool gradNormOk = !params->get("max_grad_norm") ||
                    r.fail(params->at("max_grad_norm"),
                           "not an optimizer parameter; use gradient_clipping");
  bool adam = o.type == "Adam" || o.type == "AdamW";
  bool hasEps =
      adam || o.type == "Adagrad" || o.type == "Lamb" || o.type == "Muon";
  return Reader::all(
      {keysOk, typeOk, gradNormOk, params->checkKeys(),
       keysOfType(r, *params, o.type), params->ignoredBoolean("fused"),
       params->number("lr", o.lr) && r.atLeast(params->at("lr"), o.lr, 0.0),
       !hasEps || readEps(r, *params, o),
       params->number("weight_decay", o.weightDecay) &&
           r.atLeast(params->at("weight_decay"), o.weightDecay, 0.0),
       readBetas(r, *params, o), !adam || readAdamFlags(*params, o),
       o.type != "SGD" || readSgdParams(r, *params, o),
       o.type != "Adagrad" || readAdagradParams(r, *params, o),
       o.type != "Lamb" || readLambParams(r, *params, o),
       o.type != "Muon" || readMuonParams(r, *params, o),
       params->onlyBoolean("fp32_optimizer_states", true,
                           "dsc keeps the optimizer's state in fp32")});
}

} // namespace dsc::config
