//===- Lookup.cpp - embedding and cross-entropy, with their gradients -----===//
//
// Index tensors are i32 or i64 and are checked in full before anything is
// written: an index outside [0, V), or a target outside [0, V) that is not
// the ignore index, fails the call with its value and position.
//
//===----------------------------------------------------------------------===//

#include "runtime/backends/cpu/CpuCommon.h"
#include "runtime/backends/cpu/FastMath.h"

#include <cmath>
#include <cstring>
#include <vector>

namespace dsc::rt::cpu {
namespace {

// Checks that every index lies in [0, V).
bool checkIndices(std::string &err, const TensorRef &idx, int64_t V) {
  const int64_t n = idx.numel();
  for (int64_t i = 0; i < n; ++i) {
    int64_t row = indexAt(idx, i);
    if (row < 0 || row >= V)
      return fail(err, "index ", row, " at position ", i, " is outside [0, ", V,
                  "): the table has V = ", V, " rows");
  }
  return true;
}

// logits [..., V] and targets [...]; every target in [0, V) or ignored.
// Returns the number of positions that count.
// With `parts` P the logits are one rank's V columns of P V, and the
// targets index the whole.
bool checkTargets(std::string &err, const TensorRef &logits,
                  const TensorRef &targets, int64_t ignoreIndex, int64_t &count,
                  int64_t parts = 1) {
  if (!expectDType(err, logits, "logits", DType::f32) ||
      !expectIndexDType(err, targets, "targets"))
    return false;
  if (!checkTargetShapes(err, logits, targets))
    return false;
  return countTargets(err, targets, logits.dim(-1) * parts, ignoreIndex, count);
}

// Row max and sum of e^(x - max) (float exps, double sum).
struct RowExp {
  float max;
  double sum;
};

RowExp rowLogSumExp(const float *x, int64_t n) {
  const float mx = maxOf(x, n);
  double sum = sumOf(n, [&](int64_t j) { return double(fm::exp(x[j] - mx)); });
  return {mx, sum};
}

} // namespace

bool embeddingBody(const KernelArgs &a, std::string &err) {
  const TensorRef &table = a.inputs[0], &idx = a.inputs[1];
  const TensorRef &out = a.outputs[0];
  if (!expectDType(err, table, "table", DType::f32) ||
      !expectIndexDType(err, idx, "indices") ||
      !expectDType(err, out, "the output", DType::f32))
    return false;
  int64_t V, C, first;
  const int64_t parts = a.intAttrs[0];
  if (!checkEmbeddingShapes(err, table, idx, out, V, C) ||
      !vocabularyPart(err, a, parts, V, first) ||
      !checkIndices(err, idx, V * parts))
    return false;
  const float *tp = table.f32();
  float *op = out.f32();
  // One part of the table (parts > 1) gives zeros for the others' rows.
  parallelFor(
      idx.numel(), std::max<int64_t>(1, 16384 / std::max<int64_t>(C, 1)),
      [&](int64_t i0, int64_t i1) {
        for (int64_t i = i0; i < i1; ++i) {
          const int64_t row = indexAt(idx, i) - first;
          if (row >= 0 && row < V)
            std::memcpy(op + i * C, tp + row * C, size_t(C) * sizeof(float));
          else
            std::memset(op + i * C, 0, size_t(C) * sizeof(float));
        }
      });
  return true;
}

bool embeddingGradBody(const KernelArgs &a, std::string &err) {
  const TensorRef &idx = a.inputs[0], &g = a.inputs[1];
  const TensorRef &out = a.outputs[0];
  if (!expectIndexDType(err, idx, "indices") ||
      !expectDType(err, g, "g", DType::f32) ||
      !expectDType(err, out, "the output", DType::f32))
    return false;
  int64_t V, C, first;
  const int64_t parts = a.intAttrs[0];
  if (!checkEmbeddingGradShapes(err, idx, g, out, V, C) ||
      !vocabularyPart(err, a, parts, V, first) ||
      !checkIndices(err, idx, V * parts))
    return false;
  float *op = out.f32();
  const float *gp = g.f32();
  const int64_t n = idx.numel();
  std::memset(op, 0, size_t(V * C) * sizeof(float));
  // Threads own column ranges, so rows never race and each element sums its
  // tokens in order.
  parallelFor(C, 64, [&](int64_t c0, int64_t c1) {
    for (int64_t i = 0; i < n; ++i) {
      const int64_t row = indexAt(idx, i) - first;
      if (row < 0 || row >= V)
        continue; // another part's row
      float *dst = op + row * C;
      const float *src = gp + i * C;
      for (int64_t c = c0; c < c1; ++c)
        dst[c] += src[c];
    }
  });
  return true;
}

bool crossEntropyBody(const KernelArgs &a, std::string &err) {
  const TensorRef &logits = a.inputs[0], &targets = a.inputs[1];
  const TensorRef &loss = a.outputs[0];
  const int64_t ignoreIndex = a.intAttrs[0];
  int64_t count;
  if (!checkTargets(err, logits, targets, ignoreIndex, count) ||
      !expectDType(err, loss, "the loss", DType::f32) ||
      !checkOneValue(err, loss, "the loss"))
    return false;
  const int64_t V = logits.dim(-1), rows = targets.numel();
  const float *x = logits.f32();
  const double total = sumInRowBlocks(rows, [&](int64_t r) {
    const int64_t t = indexAt(targets, r);
    if (t == ignoreIndex)
      return 0.0;
    const float *row = x + r * V;
    RowExp e = rowLogSumExp(row, V);
    return double(e.max) + std::log(e.sum) - double(row[t]);
  });
  *loss.f32() = count ? float(total / double(count)) : 0.0f;
  return true;
}

bool crossEntropyGradBody(const KernelArgs &a, std::string &err) {
  const TensorRef &logits = a.inputs[0], &targets = a.inputs[1];
  const TensorRef &out = a.outputs[0];
  const int64_t ignoreIndex = a.intAttrs[0];
  int64_t count;
  float g;
  if (!checkTargets(err, logits, targets, ignoreIndex, count) ||
      !scalarOperand(err, a.inputs[2], "g", g) ||
      !expectDType(err, out, "the output", DType::f32))
    return false;
  if (!sameShape(out, logits))
    return fail(err, "output has shape ", shapeStr(out),
                " but logits have shape ", shapeStr(logits));
  const int64_t V = logits.dim(-1), rows = targets.numel();
  const double coef = count ? double(g) / double(count) : 0.0;
  const float *x = logits.f32();
  float *dx = out.f32();
  parallelFor(rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(V, 1)),
              [&](int64_t r0, int64_t r1) {
                for (int64_t r = r0; r < r1; ++r) {
                  const float *row = x + r * V;
                  float *dr = dx + r * V;
                  int64_t t = indexAt(targets, r);
                  if (t == ignoreIndex) {
                    std::memset(dr, 0, size_t(V) * sizeof(float));
                    continue;
                  }
                  const float mx = maxOf(row, V);
                  for (int64_t j = 0; j < V; ++j)
                    dr[j] = fm::exp(row[j] - mx);
                  const double sum =
                      sumOf(V, [&](int64_t j) { return double(dr[j]); });
                  const double et = dr[t];
                  const float scale = float(coef / sum);
                  for (int64_t j = 0; j < V; ++j)
                    dr[j] *= scale;
                  // p_t - 1 = -(sum - e_t) / sum, without cancellation.
                  dr[t] = float(-coef * ((sum - et) / sum));
                }
              });
  return true;
}

//===--- Vocabulary-parallel cross-entropy
//---------------------------------===//

namespace {

// The part kernels' common operands: logits [rows, V] (one rank's V of
// parts x V columns), targets [rows], row maxima [rows] (null: none).
struct LogitsPart {
  int64_t rows = 0, V = 0, first = 0, count = 0;
};

bool checkLogitsPart(std::string &err, const KernelArgs &a,
                     const TensorRef *rowMax, const TensorRef &stats,
                     LogitsPart &p) {
  const TensorRef &logits = a.inputs[0], &targets = a.inputs[1];
  const int64_t ignoreIndex = a.intAttrs[0], parts = a.intAttrs[1];
  if (!checkTargets(err, logits, targets, ignoreIndex, p.count, parts) ||
      (rowMax && !expectDType(err, *rowMax, "row_max", DType::f32)) ||
      !expectDType(err, stats, "stats", DType::f32) ||
      !checkRowStats(err, targets, rowMax, stats))
    return false;
  p.rows = targets.numel();
  p.V = logits.dim(-1);
  return vocabularyPart(err, a, parts, p.V, p.first);
}

} // namespace

bool crossEntropyPartBody(const KernelArgs &a, std::string &err) {
  const TensorRef &stats = a.outputs[0];
  LogitsPart p;
  if (!checkLogitsPart(err, a, &a.inputs[2], stats, p))
    return false;
  const TensorRef &targets = a.inputs[1];
  const int64_t ignoreIndex = a.intAttrs[0];
  const float *x = a.inputs[0].f32(), *mx = a.inputs[2].f32();
  float *sums = stats.f32(), *picked = sums + p.rows;
  parallelFor(p.rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(p.V, 1)),
              [&](int64_t r0, int64_t r1) {
                for (int64_t r = r0; r < r1; ++r) {
                  const float *row = x + r * p.V;
                  const float m = mx[r];
                  sums[r] = float(sumOf(p.V, [&](int64_t j) {
                    return double(fm::exp(row[j] - m));
                  }));
                  const int64_t t = indexAt(targets, r) - p.first;
                  const bool held =
                      indexAt(targets, r) != ignoreIndex && t >= 0 && t < p.V;
                  picked[r] = held ? row[t] - m : 0.0f;
                }
              });
  return true;
}

bool crossEntropyPartLossBody(const KernelArgs &a, std::string &err) {
  const TensorRef &stats = a.inputs[0], &targets = a.inputs[1];
  const TensorRef &loss = a.outputs[0];
  const int64_t ignoreIndex = a.intAttrs[0];
  if (!expectDType(err, stats, "stats", DType::f32) ||
      !expectIndexDType(err, targets, "targets") ||
      !checkRowStats(err, targets, nullptr, stats) ||
      !expectDType(err, loss, "the loss", DType::f32) ||
      !checkOneValue(err, loss, "the loss"))
    return false;
  const int64_t rows = targets.numel();
  const float *sums = stats.f32(), *picked = sums + rows;
  double total = 0;
  int64_t count = 0;
  for (int64_t r = 0; r < rows; ++r) {
    if (indexAt(targets, r) == ignoreIndex)
      continue;
    total += std::log(double(sums[r])) - double(picked[r]);
    ++count;
  }
  *loss.f32() = count ? float(total / double(count)) : 0.0f;
  return true;
}

bool crossEntropyPartGradBody(const KernelArgs &a, std::string &err) {
  const TensorRef &out = a.outputs[0];
  LogitsPart p;
  float g;
  if (!checkLogitsPart(err, a, &a.inputs[2], a.inputs[3], p) ||
      !scalarOperand(err, a.inputs[4], "g", g) ||
      !expectDType(err, out, "the output", DType::f32))
    return false;
  if (!sameShape(out, a.inputs[0]))
    return fail(err, "output has shape ", shapeStr(out),
                " but logits have shape ", shapeStr(a.inputs[0]));
  const TensorRef &targets = a.inputs[1];
  const int64_t ignoreIndex = a.intAttrs[0];
  const double coef = p.count ? double(g) / double(p.count) : 0.0;
  const float *x = a.inputs[0].f32(), *mx = a.inputs[2].f32();
  const float *sums = a.inputs[3].f32();
  float *dx = out.f32();
  parallelFor(p.rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(p.V, 1)),
              [&](int64_t r0, int64_t r1) {
                for (int64_t r = r0; r < r1; ++r) {
                  const float *row = x + r * p.V;
                  float *dr = dx + r * p.V;
                  const int64_t target = indexAt(targets, r);
                  if (target == ignoreIndex) {
                    std::memset(dr, 0, size_t(p.V) * sizeof(float));
                    continue;
                  }
                  const float m = mx[r];
                  const double sum = sums[r];
                  const float scale = float(coef / sum);
                  const int64_t t = target - p.first;
                  const float et = t >= 0 && t < p.V ? fm::exp(row[t] - m) : 0;
                  for (int64_t j = 0; j < p.V; ++j)
                    dr[j] = fm::exp(row[j] - m) * scale;
                  // p_t - 1 = -(sum - e_t) / sum, without cancellation.
                  if (t >= 0 && t < p.V)
                    dr[t] = float(-coef * ((sum - double(et)) / sum));
                }
              });
  return true;
}

} // namespace dsc::rt::cpu
