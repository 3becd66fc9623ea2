//===- AttentionKernelChecks.cpp - ds.attention's operands ----------------===//
#include "runtime/kernels/KernelChecks.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace dsc::rt {
namespace {

bool expectShape(std::string &err, const TensorRef &t, const char *role,
                 const std::vector<int64_t> &want) {
  if (t.rank != int(want.size()) ||
      !std::equal(want.begin(), want.end(), t.shape))
    return fail(err, role, " has shape ", shapeStr(t), " but needs ",
                listStr(want.data(), want.size()));
  return true;
}

/// [B, H, T, width], or [B, T, H, width] with seq_major.
std::vector<int64_t> layoutShape(const AttentionDims &d, int64_t T,
                                 int64_t width) {
  if (d.seqMajor)
    return {d.B, T, d.H, width};
  return {d.B, d.H, T, width};
}

bool flag(std::string &err, const char *name, int64_t value, bool &out) {
  if (value != 0 && value != 1)
    return fail(err, name, " must be 0 or 1, got ", value);
  out = value == 1;
  return true;
}

/// The dims of a [B, H, T, D] operand, or a seq_major [B, T, H, D] one.
void dimsOf(const TensorRef &t, bool seqMajor, int64_t &H, int64_t &T) {
  H = t.shape[seqMajor ? 2 : 1];
  T = t.shape[seqMajor ? 1 : 2];
}

} // namespace

bool checkAttention(const KernelArgs &a, AttentionDims &d, bool &causal,
                    double &scale, std::string &err) {
  const TensorRef &q = a.inputs[0], &k = a.inputs[1], &v = a.inputs[2];
  if (!flag(err, "causal", a.intAttrs[0], causal) ||
      !flag(err, "seq_major", a.intAttrs[1], d.seqMajor))
    return false;
  const char *form = d.seqMajor ? "[B, T, H, D]" : "[B, H, T, D]";
  if (q.rank != 4 || k.rank != 4 || v.rank != 4)
    return fail(err, "q, k, v must be rank 4 ", form, ", got ", shapeStr(q),
                ", ", shapeStr(k), ", ", shapeStr(v));
  int64_t kH, vH, vT;
  dimsOf(q, d.seqMajor, d.H, d.Tq);
  dimsOf(k, d.seqMajor, kH, d.Tk);
  dimsOf(v, d.seqMajor, vH, vT);
  d.B = q.shape[0];
  d.D = q.shape[3];
  d.Dv = v.shape[3];
  if (k.shape[0] != d.B || kH != d.H || k.shape[3] != d.D ||
      v.shape[0] != d.B || vH != d.H || vT != d.Tk)
    return fail(err, "incompatible shapes q ", shapeStr(q), ", k ", shapeStr(k),
                ", v ", shapeStr(v), " (need k ",
                d.seqMajor ? "[B, Tk, H, D] and v [B, Tk, H, Dv])"
                           : "[B, H, Tk, D] and v [B, H, Tk, Dv])");
  scale = a.floatAttrs[0];
  if (!std::isfinite(scale))
    return fail(err, "scale must be finite, got ", scale);
  return true;
}

bool checkAttentionOutput(const KernelArgs &a, std::string &err) {
  AttentionDims d;
  bool causal;
  double scale;
  if (!checkAttention(a, d, causal, scale, err))
    return false;
  return expectShape(err, a.outputs[0], "the output",
                     layoutShape(d, d.Tq, d.Dv));
}

bool checkAttentionGrad(const KernelArgs &a, std::string &err) {
  AttentionDims d;
  bool causal;
  double scale;
  if (!checkAttention(a, d, causal, scale, err))
    return false;
  return expectShape(err, a.inputs[3], "g", layoutShape(d, d.Tq, d.Dv)) &&
         expectShape(err, a.outputs[0], "dq", layoutShape(d, d.Tq, d.D)) &&
         expectShape(err, a.outputs[1], "dk", layoutShape(d, d.Tk, d.D)) &&
         expectShape(err, a.outputs[2], "dv", layoutShape(d, d.Tk, d.Dv));
}

} // namespace dsc::rt
