//===- OptimizerKernelChecks.cpp - the optimizer updates' operands -------===//
//
// The structure checks of the optimizer kernels (KernelChecks.h): AdamW,
// SGD, Lion, Adagrad and Lamb; the step number is data, checked where the
// backend reads it.
//
//===----------------------------------------------------------------------===//
#include "runtime/kernels/KernelChecks.h"

#include <cmath>
#include <initializer_list>
#include <string>

namespace dsc::rt {

namespace {

/// An update's operands: p, g, the states (names[2..]) and their outputs
/// f32 of one shape (g may be 16-bit where the round kernel allows), then
/// the scalars lr, step and scale, and beta1_value where `takesBeta1`
/// (optional).
bool checkUpdateOperands(const KernelArgs &args,
                         std::initializer_list<const char *> names,
                         bool takesBeta1, std::string &err) {
  const TensorRef *in = args.inputs, *out = args.outputs;
  const int flat = int(names.size()); // p, g, states
  const char *const *name = names.begin();
  const size_t fixed = size_t(flat) + 3;
  if (args.numInputs != fixed && !(takesBeta1 && args.numInputs == fixed + 1))
    return fail(err, "takes ", fixed, takesBeta1 ? " or one more (beta1)" : "",
                " inputs, got ", args.numInputs);
  for (int i = 0; i < flat; ++i)
    if (i != 1 && in[i].dtype != DType::f32)
      return fail(err, name[i], " is ", dtypeName(in[i].dtype),
                  ", expected f32");
  for (int i = 1; i < flat; ++i)
    if (!sameShape(in[i], in[0]))
      return fail(err, name[i], " has shape ", shapeStr(in[i]),
                  " but p has shape ", shapeStr(in[0]));
  for (int o = 0; o + 1 < flat; ++o) {
    const std::string outName = std::string(name[o == 0 ? 0 : o + 1]) + "'";
    if (out[o].dtype != DType::f32)
      return fail(err, "output ", outName, " is ", dtypeName(out[o].dtype),
                  ", expected f32");
    if (!sameShape(out[o], in[0]))
      return fail(err, "output ", outName, " has shape ", shapeStr(out[o]),
                  " but p has shape ", shapeStr(in[0]));
  }
  const char *scalars[] = {"lr", "step", "scale", "beta1_value"};
  for (size_t i = 0; i + flat < args.numInputs; ++i)
    if (!expectDType(err, in[flat + i], scalars[i], DType::f32) ||
        !checkOneValue(err, in[flat + i], scalars[i]))
      return false;
  return true;
}

bool checkBetas(double beta1, double beta2, std::string &err) {
  if (!(beta1 >= 0 && beta1 < 1) || !(beta2 >= 0 && beta2 < 1))
    return fail(err, "betas must be in [0, 1), got (", beta1, ", ", beta2, ")");
  return true;
}

bool finiteNonNegative(double x) { return x >= 0 && !std::isinf(x); }

} // namespace

bool checkAdamw(const KernelArgs &args, std::string &err) {
  if (!checkUpdateOperands(args, {"p", "g", "m", "v"}, true, err))
    return false;
  const double eps = args.floatAttrs[2], wd = args.floatAttrs[3];
  if (!checkBetas(args.floatAttrs[0], args.floatAttrs[1], err))
    return false;
  if (!finiteNonNegative(eps) || !finiteNonNegative(wd))
    return fail(err, "eps and weight_decay must be finite and >= 0, got ", eps,
                " and ", wd);
  return true;
}

bool checkSgd(const KernelArgs &args, std::string &err) {
  if (!checkUpdateOperands(args, {"p", "g", "buf"}, false, err))
    return false;
  const int64_t nesterov = args.intAttrs[0];
  const double momentum = args.floatAttrs[0], dampening = args.floatAttrs[1];
  const double wd = args.floatAttrs[2];
  if (nesterov != 0 && nesterov != 1)
    return fail(err, "nesterov must be 0 or 1, got ", nesterov);
  if (!finiteNonNegative(momentum) || !finiteNonNegative(wd) ||
      !std::isfinite(dampening))
    return fail(err,
                "momentum and weight_decay must be finite and >= 0 and "
                "dampening finite, got ",
                momentum, ", ", wd, " and ", dampening);
  if (nesterov && (momentum == 0 || dampening != 0))
    return fail(err, "nesterov needs momentum > 0 and dampening 0");
  return true;
}

bool checkLion(const KernelArgs &args, std::string &err) {
  if (!checkUpdateOperands(args, {"p", "g", "m"}, true, err) ||
      !checkBetas(args.floatAttrs[0], args.floatAttrs[1], err))
    return false;
  if (!finiteNonNegative(args.floatAttrs[2]))
    return fail(err, "weight_decay must be finite and >= 0, got ",
                args.floatAttrs[2]);
  return true;
}

bool checkRoundedUpdate(const KernelArgs &args, std::string &err) {
  const TensorRef *in = args.inputs;
  const TensorRef &p16 = args.outputs[args.numOutputs - 1];
  const DType gt = in[1].dtype, pt = p16.dtype;
  if (gt != DType::f32 && gt != DType::f16 && gt != DType::bf16)
    return fail(err, "g is ", dtypeName(gt), ", expected f32, f16 or bf16");
  if (pt != DType::f16 && pt != DType::bf16)
    return fail(err, "output p16 is ", dtypeName(pt), ", expected f16 or bf16");
  if (!sameShape(p16, in[0]))
    return fail(err, "output p16 has shape ", shapeStr(p16),
                " but p has shape ", shapeStr(in[0]));
  return true;
}

namespace {

bool checkFlag(int64_t value, const char *name, std::string &err) {
  if (value != 0 && value != 1)
    return fail(err, name, " must be 0 or 1, got ", value);
  return true;
}

/// Lamb's betas, eps and weight_decay (the first four float attributes).
bool checkLambMoments(const KernelArgs &args, std::string &err) {
  if (!checkBetas(args.floatAttrs[0], args.floatAttrs[1], err))
    return false;
  const double eps = args.floatAttrs[2], wd = args.floatAttrs[3];
  if (!(eps > 0) || std::isinf(eps) || !finiteNonNegative(wd))
    return fail(err, "eps must be finite and > 0 and weight_decay finite and ",
                ">= 0, got ", eps, " and ", wd);
  return true;
}

/// A sharded Lamb's member counts (the int attributes from `first`) and
/// its norms tensor, two sums per member.
bool checkLambMembers(const KernelArgs &args, size_t first,
                      const TensorRef &norms, const char *normsName,
                      std::string &err) {
  const size_t members = args.numIntAttrs - first;
  if (members == 0)
    return fail(err, "needs one or more member counts");
  for (size_t i = first; i < args.numIntAttrs; ++i)
    if (args.intAttrs[i] < 1)
      return fail(err, "member ", i - first, " has ", args.intAttrs[i],
                  " elements, expected >= 1");
  if (norms.dtype != DType::f32 || norms.rank != 1 ||
      norms.shape[0] != int64_t(2 * members))
    return fail(err, normsName, " is ", dtypeName(norms.dtype), " ",
                shapeStr(norms), ", expected f32 [", 2 * members, "]");
  return true;
}

} // namespace

bool checkLamb(const KernelArgs &args, std::string &err) {
  // The sharded form's norms follow the scalars: checked on their own.
  const bool sharded = args.numInputs == 8;
  KernelArgs update = args;
  if (sharded)
    update.numInputs = 7;
  if (!checkUpdateOperands(update, {"p", "g", "m", "v"}, false, err) ||
      !checkLambMoments(args, err) ||
      !checkFlag(args.intAttrs[0], "bias_correction", err) ||
      !checkFlag(args.intAttrs[1], "eps_inside_sqrt", err))
    return false;
  if (sharded) {
    if (!checkLambMembers(args, 2, args.inputs[7], "norms", err))
      return false;
  } else if (args.numIntAttrs != 2) {
    return fail(err, "takes member counts only with norms");
  }
  const double lo = args.floatAttrs[4], hi = args.floatAttrs[5];
  if (!(lo > 0) || !(hi >= lo) || std::isinf(hi))
    return fail(err, "coeff needs 0 < min_coeff <= max_coeff, finite, got (",
                lo, ", ", hi, ")");
  return true;
}

bool checkLambNorms(const KernelArgs &args, std::string &err) {
  const TensorRef *in = args.inputs;
  if (args.numInputs != 5 || args.numOutputs != 1)
    return fail(err, "takes p, g, m, v, scale -> norms, got ", args.numInputs,
                " inputs and ", args.numOutputs, " outputs");
  const char *names[] = {"p", "g", "m", "v"};
  for (int i = 0; i < 4; ++i) {
    if (i != 1 && in[i].dtype != DType::f32)
      return fail(err, names[i], " is ", dtypeName(in[i].dtype),
                  ", expected f32");
    if (!sameShape(in[i], in[0]))
      return fail(err, names[i], " has shape ", shapeStr(in[i]),
                  " but p has shape ", shapeStr(in[0]));
  }
  return expectDType(err, in[4], "scale", DType::f32) &&
         checkOneValue(err, in[4], "scale") && checkLambMoments(args, err) &&
         checkFlag(args.intAttrs[0], "eps_inside_sqrt", err) &&
         checkLambMembers(args, 1, args.outputs[0], "output norms", err);
}

bool checkMuonMomentum(const KernelArgs &args, std::string &err) {
  const TensorRef *in = args.inputs, *out = args.outputs;
  const DType gt = in[0].dtype;
  if (gt != DType::f32 && gt != DType::f16 && gt != DType::bf16)
    return fail(err, "g is ", dtypeName(gt), ", expected f32, f16 or bf16");
  const TensorRef *f32s[] = {&in[1], &out[0], &out[1]};
  const char *names[] = {"buf", "output buf'", "output direction"};
  for (int i = 0; i < 3; ++i) {
    if (!expectDType(err, *f32s[i], names[i], DType::f32))
      return false;
    if (!sameShape(*f32s[i], in[0]))
      return fail(err, names[i], " has shape ", shapeStr(*f32s[i]),
                  " but g has shape ", shapeStr(in[0]));
  }
  const double momentum = args.floatAttrs[0];
  if (!(momentum >= 0 && momentum < 1))
    return fail(err, "momentum must be in [0, 1), got ", momentum);
  return expectDType(err, in[2], "scale", DType::f32) &&
         checkOneValue(err, in[2], "scale") &&
         checkFlag(args.intAttrs[0], "nesterov", err);
}

bool checkMuonApply(const KernelArgs &args, std::string &err) {
  const TensorRef *in = args.inputs;
  const DType xt = in[1].dtype;
  if (xt != DType::f32 && xt != DType::f16 && xt != DType::bf16)
    return fail(err, "ortho is ", dtypeName(xt), ", expected f32, f16 or bf16");
  const TensorRef *f32s[] = {&in[0], &in[1], &args.outputs[0]};
  const char *names[] = {"p", "ortho", "output p'"};
  for (int i = 0; i < 3; ++i) {
    if (i == 1 && !sameShape(in[1], in[0]))
      return fail(err, "ortho has shape ", shapeStr(in[1]), " but p has shape ",
                  shapeStr(in[0]));
    if (i == 1)
      continue;
    if (!expectDType(err, *f32s[i], names[i], DType::f32))
      return false;
    if (!sameShape(*f32s[i], in[0]))
      return fail(err, names[i], " has shape ", shapeStr(*f32s[i]),
                  " but p has shape ", shapeStr(in[0]));
  }
  const double wd = args.floatAttrs[0], factor = args.floatAttrs[1];
  if (!finiteNonNegative(wd) || !(factor >= 1) || std::isinf(factor))
    return fail(err,
                "weight_decay must be finite and >= 0 and factor finite and "
                ">= 1, got ",
                wd, " and ", factor);
  return expectDType(err, in[2], "lr", DType::f32) &&
         checkOneValue(err, in[2], "lr") &&
         expectDType(err, in[3], "scale", DType::f32) &&
         checkOneValue(err, in[3], "scale");
}

bool checkAdagrad(const KernelArgs &args, std::string &err) {
  if (!checkUpdateOperands(args, {"p", "g", "sum"}, false, err))
    return false;
  const double lrDecay = args.floatAttrs[0], eps = args.floatAttrs[1];
  const double wd = args.floatAttrs[2];
  if (!finiteNonNegative(lrDecay) || !finiteNonNegative(wd) || !(eps > 0) ||
      std::isinf(eps))
    return fail(err,
                "lr_decay and weight_decay must be finite and >= 0 and eps "
                "finite and > 0, got ",
                lrDecay, ", ", wd, " and ", eps);
  return true;
}

} // namespace dsc::rt
