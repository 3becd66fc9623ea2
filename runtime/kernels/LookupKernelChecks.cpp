//===- LookupKernelChecks.cpp - shapes of embedding, cross-entropy, rotary ===//
//
// The shape and attribute checks (KernelChecks.h) of the kernels that
// index by data; the data itself (ids, targets) is each backend's to check:
// the CPU backend before it writes anything, a device backend as its
// kernels meet it (Backend::takeKernelError).
//
//===----------------------------------------------------------------------===//
#include "runtime/kernels/KernelChecks.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace dsc::rt {

bool checkEmbeddingShapes(std::string &err, const TensorRef &table,
                          const TensorRef &idx, const TensorRef &out,
                          int64_t &V, int64_t &C) {
  if (table.rank != 2)
    return fail(err, "table must be [V, C], got ", shapeStr(table));
  V = table.shape[0];
  C = table.shape[1];
  std::vector<int64_t> want = shapeOf(idx);
  want.push_back(C);
  if (out.rank != int(want.size()) ||
      !std::equal(want.begin(), want.end(), out.shape))
    return fail(err, "output has shape ", shapeStr(out), " but needs ",
                listStr(want.data(), want.size()), " (indices + [C])");
  return true;
}

bool checkEmbeddingGradShapes(std::string &err, const TensorRef &idx,
                              const TensorRef &g, const TensorRef &out,
                              int64_t &V, int64_t &C) {
  if (g.rank != idx.rank + 1 ||
      !std::equal(idx.shape, idx.shape + idx.rank, g.shape))
    return fail(err, "g has shape ", shapeStr(g), " but indices have shape ",
                shapeStr(idx), " (need g = indices + [C])");
  C = g.dim(-1);
  if (out.rank != 2 || out.shape[1] != C)
    return fail(err, "output has shape ", shapeStr(out), " but needs [V, ", C,
                "]");
  V = out.shape[0];
  return true;
}

bool checkTargetShapes(std::string &err, const TensorRef &logits,
                       const TensorRef &targets) {
  if (logits.rank < 1 || targets.rank != logits.rank - 1 ||
      !std::equal(targets.shape, targets.shape + targets.rank, logits.shape))
    return fail(err, "targets of shape ", shapeStr(targets),
                " do not match logits of shape ", shapeStr(logits),
                " (need logits [..., V] and targets [...])");
  return true;
}

bool checkLinearCrossEntropy(std::string &err, const KernelArgs &a,
                             int64_t &rows, int64_t &V, int64_t &D) {
  // h's dtype: f32, or a 16-bit head (the loss, grad and dweight f32).
  const DType head = a.inputs[0].dtype;
  if (head != DType::f32 && head != DType::f16 && head != DType::bf16)
    return fail(err, "h has dtype ", dtypeName(head),
                ", expected f32, f16 or bf16");
  const char *roles[] = {"h", "weight", "targets", "grad"};
  const DType ins[] = {head, head, head, DType::f32};
  for (int i : {1, 3})
    if (!expectDType(err, a.inputs[i], roles[i], ins[i]))
      return false;
  const char *outs[] = {"the loss", "dh", "dweight", "the chunk"};
  const DType outTypes[] = {DType::f32, head, DType::f32, head};
  for (int i = 0; i < 4; ++i)
    if (!expectDType(err, a.outputs[i], outs[i], outTypes[i]))
      return false;
  const TensorRef &h = a.inputs[0], &weight = a.inputs[1];
  const TensorRef &targets = a.inputs[2];
  const TensorRef &dh = a.outputs[1], &dweight = a.outputs[2];
  const TensorRef &chunk = a.outputs[3];
  if (weight.rank != 2 || h.rank < 1 || h.shape[h.rank - 1] != weight.shape[1])
    return fail(err, "weight of shape ", shapeStr(weight),
                " does not match h of shape ", shapeStr(h),
                " (need h [..., D] and weight [V, D])");
  if (!checkTargetShapes(err, h, targets) ||
      !checkOneValue(err, a.inputs[3], "grad") ||
      !checkOneValue(err, a.outputs[0], "the loss"))
    return false;
  if (!sameShape(dh, h) || !sameShape(dweight, weight))
    return fail(err, "dh of shape ", shapeStr(dh), " and dweight of shape ",
                shapeStr(dweight), " must be h's ", shapeStr(h),
                " and weight's ", shapeStr(weight));
  rows = targets.numel();
  V = weight.shape[0];
  D = weight.shape[1];
  const int64_t chunkRows = a.intAttrs[1];
  if (chunkRows < 1 || rows % chunkRows != 0)
    return fail(err, "chunk_rows ", chunkRows, " must divide the ", rows,
                " rows");
  if (chunk.rank != 2 || chunk.shape[0] != chunkRows || chunk.shape[1] != V)
    return fail(err, "the chunk has shape ", shapeStr(chunk), ", not [",
                chunkRows, ", ", V, "]");
  return true;
}

bool checkVocabularyParts(std::string &err, int64_t local, int64_t parts) {
  if (parts < 1)
    return fail(err, "parts must be at least 1, got ", parts);
  if (local > 0 && parts > std::numeric_limits<int64_t>::max() / local)
    return fail(err, parts, " vocabulary parts of ", local,
                " rows exceed the index range");
  return true;
}

bool vocabularyPart(std::string &err, const KernelArgs &a, int64_t parts,
                    int64_t local, int64_t &offset) {
  offset = 0;
  if (!checkVocabularyParts(err, local, parts))
    return false;
  if (parts == 1)
    return true;
  if (!a.ctx)
    return fail(err, "one of ", parts,
                " vocabulary parts needs a KernelContext (the tensor rank)");
  if (a.ctx->tensorRank < 0 || a.ctx->tensorRank >= parts)
    return fail(err, "tensor rank ", a.ctx->tensorRank, " is not one of ",
                parts, " vocabulary parts");
  offset = int64_t(a.ctx->tensorRank) * local;
  return true;
}

bool checkRowStats(std::string &err, const TensorRef &targets,
                   const TensorRef *rowMax, const TensorRef &stats) {
  if (rowMax &&
      !(rowMax->rank == targets.rank &&
        std::equal(targets.shape, targets.shape + targets.rank, rowMax->shape)))
    return fail(err, "row_max has shape ", shapeStr(*rowMax),
                " but targets have shape ", shapeStr(targets));
  if (stats.rank != targets.rank + 1 || stats.shape[0] != 2 ||
      !std::equal(targets.shape, targets.shape + targets.rank, stats.shape + 1))
    return fail(err, "stats have shape ", shapeStr(stats),
                " but need [2] + the targets' shape ", shapeStr(targets));
  return true;
}

bool checkOneValue(std::string &err, const TensorRef &t, const char *role) {
  if (t.numel() != 1)
    return fail(err, role, " must hold one value, got shape ", shapeStr(t));
  return true;
}

bool checkRotary(const KernelArgs &a, RotaryDims &d, bool &inverse,
                 double &theta, std::string &err) {
  const TensorRef &x = a.inputs[0], &y = a.outputs[0];
  const int64_t seq = a.intAttrs[1];
  if (seq != 0 && seq != 1)
    return fail(err, "seq_major must be 0 or 1, got ", seq);
  if (seq == 1 && (x.rank != 4 || x.dim(-1) % 2 != 0))
    return fail(err, "x must be [B, T, H, D] with D even (seq_major), got ",
                shapeStr(x));
  if (x.rank < 2 || x.dim(-1) % 2 != 0)
    return fail(err, "x must be [..., T, D] with D even, got ", shapeStr(x));
  d.D = x.dim(-1);
  d.T = seq == 1 ? x.shape[1] : x.dim(-2);
  d.heads = seq == 1 ? x.shape[2] : 1;
  if (!sameShape(x, y))
    return fail(err, "output has shape ", shapeStr(y), " but x has shape ",
                shapeStr(x));
  const int64_t inv = a.intAttrs[0];
  theta = a.floatAttrs[0];
  if (inv != 0 && inv != 1)
    return fail(err, "inverse must be 0 or 1, got ", inv);
  if (!(theta > 0) || std::isinf(theta))
    return fail(err, "theta must be positive and finite, got ", theta);
  inverse = inv == 1;
  return true;
}

} // namespace dsc::rt
