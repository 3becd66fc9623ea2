//===- OptimizerKernelChecks.cpp - ds.adamw's operands --------------------===//
//
// The structure checks of the AdamW kernels (KernelChecks.h); the step
// number is data, checked where the backend reads it.
//
//===----------------------------------------------------------------------===//
#include "runtime/kernels/KernelChecks.h"

#include <cmath>

namespace dsc::rt {

bool checkAdamw(const KernelArgs &args, std::string &err) {
  const TensorRef *in = args.inputs, *out = args.outputs;
  const char *names[] = {"p", "g", "m", "v"};
  for (int i = 0; i < 4; ++i)
    if (i != 1 && in[i].dtype != DType::f32)
      return fail(err, names[i], " is ", dtypeName(in[i].dtype),
                  ", expected f32");
  for (int i = 1; i < 4; ++i)
    if (!sameShape(in[i], in[0]))
      return fail(err, names[i], " has shape ", shapeStr(in[i]),
                  " but p has shape ", shapeStr(in[0]));
  const char *outNames[] = {"p'", "m'", "v'"};
  for (int i = 0; i < 3; ++i) {
    if (out[i].dtype != DType::f32)
      return fail(err, "output ", outNames[i], " is ", dtypeName(out[i].dtype),
                  ", expected f32");
    if (!sameShape(out[i], in[0]))
      return fail(err, "output ", outNames[i], " has shape ", shapeStr(out[i]),
                  " but p has shape ", shapeStr(in[0]));
  }
  const char *scalars[] = {"lr", "step", "scale"};
  for (int i = 0; i < 3; ++i)
    if (!expectDType(err, in[4 + i], scalars[i], DType::f32) ||
        !checkOneValue(err, in[4 + i], scalars[i]))
      return false;
  const double beta1 = args.floatAttrs[0], beta2 = args.floatAttrs[1];
  const double eps = args.floatAttrs[2], wd = args.floatAttrs[3];
  if (!(beta1 >= 0 && beta1 < 1) || !(beta2 >= 0 && beta2 < 1))
    return fail(err, "betas must be in [0, 1), got (", beta1, ", ", beta2, ")");
  if (!(eps >= 0) || !(wd >= 0) || std::isinf(eps) || std::isinf(wd))
    return fail(err, "eps and weight_decay must be finite and >= 0, got ", eps,
                " and ", wd);
  return true;
}

bool checkAdamwRound(const KernelArgs &args, std::string &err) {
  const TensorRef *in = args.inputs, *out = args.outputs;
  const DType gt = in[1].dtype, pt = out[3].dtype;
  if (gt != DType::f32 && gt != DType::f16 && gt != DType::bf16)
    return fail(err, "g is ", dtypeName(gt), ", expected f32, f16 or bf16");
  if (pt != DType::f16 && pt != DType::bf16)
    return fail(err, "output p16 is ", dtypeName(pt), ", expected f16 or bf16");
  if (!sameShape(out[3], in[0]))
    return fail(err, "output p16 has shape ", shapeStr(out[3]),
                " but p has shape ", shapeStr(in[0]));
  return true;
}

} // namespace dsc::rt
