//===- AttentionKernelChecks.cpp - ds.attention's operands ----------------===//
#include "runtime/kernels/KernelChecks.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace dsc::rt {
namespace {

bool expectShape(std::string &err, const TensorRef &t, const char *role,
                 std::initializer_list<int64_t> dims) {
  std::vector<int64_t> want(dims);
  if (t.rank != int(want.size()) ||
      !std::equal(want.begin(), want.end(), t.shape))
    return fail(err, role, " has shape ", shapeStr(t), " but needs ",
                listStr(want.data(), want.size()));
  return true;
}

} // namespace

bool checkAttention(const KernelArgs &a, AttentionDims &d, bool &causal,
                    double &scale, std::string &err) {
  const TensorRef &q = a.inputs[0], &k = a.inputs[1], &v = a.inputs[2];
  if (q.rank != 4 || k.rank != 4 || v.rank != 4)
    return fail(err, "q, k, v must be rank 4 [B, H, T, D], got ", shapeStr(q),
                ", ", shapeStr(k), ", ", shapeStr(v));
  d = {q.shape[0], q.shape[1], q.shape[2], k.shape[2], q.shape[3], v.shape[3]};
  if (k.shape[0] != d.B || k.shape[1] != d.H || k.shape[3] != d.D ||
      v.shape[0] != d.B || v.shape[1] != d.H || v.shape[2] != d.Tk)
    return fail(err, "incompatible shapes q ", shapeStr(q), ", k ", shapeStr(k),
                ", v ", shapeStr(v),
                " (need k [B, H, Tk, D] and v [B, H, Tk, Dv])");
  int64_t causalAttr = a.intAttrs[0];
  if (causalAttr != 0 && causalAttr != 1)
    return fail(err, "causal must be 0 or 1, got ", causalAttr);
  causal = causalAttr == 1;
  scale = a.floatAttrs[0];
  if (!std::isfinite(scale))
    return fail(err, "scale must be finite, got ", scale);
  return true;
}

bool checkAttentionOutput(const KernelArgs &a, std::string &err) {
  const TensorRef &q = a.inputs[0], &v = a.inputs[2];
  return expectShape(err, a.outputs[0], "the output",
                     {q.shape[0], q.shape[1], q.shape[2], v.shape[3]});
}

bool checkAttentionGrad(const KernelArgs &a, std::string &err) {
  const TensorRef &q = a.inputs[0], &k = a.inputs[1], &v = a.inputs[2];
  const int64_t B = q.shape[0], H = q.shape[1], Tq = q.shape[2],
                Tk = k.shape[2], D = q.shape[3], Dv = v.shape[3];
  return expectShape(err, a.inputs[3], "g", {B, H, Tq, Dv}) &&
         expectShape(err, a.outputs[0], "dq", {B, H, Tq, D}) &&
         expectShape(err, a.outputs[1], "dk", {B, H, Tk, D}) &&
         expectShape(err, a.outputs[2], "dv", {B, H, Tk, Dv});
}

} // namespace dsc::rt
