//===- RowKernelChecks.cpp - shapes of the row-wise kernels ---------------===//
//
// The norms' and softmax's argument checks (KernelChecks.h), after the
// dtype check each backend makes for itself.
//
//===----------------------------------------------------------------------===//
#include "runtime/kernels/KernelChecks.h"

#include <cmath>

namespace dsc::rt {
namespace {

bool checkEps(std::string &err, double eps) {
  if (!(eps >= 0) || std::isinf(eps))
    return fail(err, "eps must be finite and >= 0, got ", eps);
  return true;
}

// A per-channel operand: [C] for x's last dim C.
bool checkChannel(std::string &err, const TensorRef &w, const char *role,
                  int64_t cols) {
  if (w.rank != 1 || w.shape[0] != cols)
    return fail(err, role, " has shape ", shapeStr(w), " but needs [", cols,
                "] (the last dim of x)");
  return true;
}

bool checkLike(std::string &err, const TensorRef &t, const char *role,
               const TensorRef &x) {
  if (!sameShape(t, x))
    return fail(err, role, " has shape ", shapeStr(t), " but x has shape ",
                shapeStr(x));
  return true;
}

} // namespace

bool checkLayerNorm(const KernelArgs &a, int64_t &rows, int64_t &cols,
                    std::string &err) {
  if (a.numInputs != 2 && a.numInputs != 3)
    return fail(err, "expects 2 or 3 inputs (x, w[, b]), got ", a.numInputs);
  return lastDimRows(err, a.inputs[0], "x", rows, cols) &&
         checkChannel(err, a.inputs[1], "w", cols) &&
         (a.numInputs != 3 || checkChannel(err, a.inputs[2], "b", cols)) &&
         checkLike(err, a.outputs[0], "the output", a.inputs[0]) &&
         checkEps(err, a.floatAttrs[0]);
}

bool checkAddLayerNorm(const KernelArgs &a, int64_t &rows, int64_t &cols,
                       std::string &err) {
  if (a.numInputs != 3 && a.numInputs != 4)
    return fail(err, "expects 3 or 4 inputs (x, residual, w[, b]), got ",
                a.numInputs);
  return lastDimRows(err, a.inputs[0], "x", rows, cols) &&
         checkLike(err, a.inputs[1], "residual", a.inputs[0]) &&
         checkChannel(err, a.inputs[2], "w", cols) &&
         (a.numInputs != 4 || checkChannel(err, a.inputs[3], "b", cols)) &&
         checkLike(err, a.outputs[0], "sum", a.inputs[0]) &&
         checkLike(err, a.outputs[1], "the output", a.inputs[0]) &&
         checkEps(err, a.floatAttrs[0]);
}

bool checkLayerNormGrad(const KernelArgs &a, int64_t &rows, int64_t &cols,
                        std::string &err) {
  return lastDimRows(err, a.inputs[0], "x", rows, cols) &&
         checkChannel(err, a.inputs[1], "w", cols) &&
         checkLike(err, a.inputs[2], "g", a.inputs[0]) &&
         checkLike(err, a.outputs[0], "dx", a.inputs[0]) &&
         checkChannel(err, a.outputs[1], "dw", cols) &&
         checkChannel(err, a.outputs[2], "db", cols) &&
         checkEps(err, a.floatAttrs[0]);
}

bool checkRmsNorm(const KernelArgs &a, int64_t &rows, int64_t &cols,
                  std::string &err) {
  return lastDimRows(err, a.inputs[0], "x", rows, cols) &&
         checkChannel(err, a.inputs[1], "w", cols) &&
         checkLike(err, a.outputs[0], "the output", a.inputs[0]) &&
         checkEps(err, a.floatAttrs[0]);
}

bool checkRmsNormGrad(const KernelArgs &a, int64_t &rows, int64_t &cols,
                      std::string &err) {
  return lastDimRows(err, a.inputs[0], "x", rows, cols) &&
         checkChannel(err, a.inputs[1], "w", cols) &&
         checkLike(err, a.inputs[2], "g", a.inputs[0]) &&
         checkLike(err, a.outputs[0], "dx", a.inputs[0]) &&
         checkChannel(err, a.outputs[1], "dw", cols) &&
         checkEps(err, a.floatAttrs[0]);
}

bool checkSoftmax(const KernelArgs &a, int64_t &rows, int64_t &cols,
                  std::string &err) {
  return lastDimRows(err, a.inputs[0], "x", rows, cols) &&
         checkLike(err, a.outputs[0], "the output", a.inputs[0]);
}

bool checkSoftmaxGrad(const KernelArgs &a, int64_t &rows, int64_t &cols,
                      std::string &err) {
  return lastDimRows(err, a.inputs[0], "y", rows, cols) &&
         checkLike(err, a.inputs[1], "g", a.inputs[0]) &&
         checkLike(err, a.outputs[0], "the output", a.inputs[0]);
}

} // namespace dsc::rt
