//===- Lookup.cpp - embedding and cross-entropy, with their gradients -----===//
//
// Index tensors are i32 or i64 and are checked in full before anything is
// written: an index outside [0, V), or a target outside [0, V) that is not
// the ignore index, fails the call with its value and position.
//
// The 16-bit columns of embedding, its gradient and the losses (whole and
// vocabulary-parallel) run here too, on the 16-bit operands a row at a time (a
// GPT-2 table or logits widened whole took 29-177 ms a call): exactly the f32
// kernel on widened copies, rounded once (WideningTest checks the bits).
//
//===----------------------------------------------------------------------===//

#include "runtime/backends/cpu/Convert.h"
#include "runtime/backends/cpu/CpuCommon.h"
#include "runtime/backends/cpu/FastMath.h"
#include "runtime/backends/cpu/Widening.h"

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

// logits [..., V] (any float dtype: the callers check theirs) and targets
// [...]; every target in [0, V) or ignored.
// Returns the number of positions that count.
// With `parts` P the logits are one rank's V columns of P V, and the
// targets index the whole.
bool checkTargets(std::string &err, const TensorRef &logits,
                  const TensorRef &targets, int64_t ignoreIndex, int64_t &count,
                  int64_t parts = 1) {
  if (!expectIndexDType(err, targets, "targets"))
    return false;
  if (!checkTargetShapes(err, logits, targets) ||
      !checkVocabularyParts(err, logits.dim(-1), parts))
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

namespace {

/// This thread's f32 scratch of at least n floats, kept between calls: a
/// 16-bit row of logits (V floats) widened per call would be fresh pages.
float *threadScratch(int64_t n) {
  thread_local std::vector<float> scratch;
  if (scratch.size() < size_t(n))
    scratch.resize(size_t(n));
  return scratch.data();
}

/// ds.embedding with its table and output f32, f16 or bf16. Rows are copied
/// as they are where both share a dtype (a 16-bit row widened and rounded
/// back is itself), converted through f32 where they do not.
bool gatherRows(const KernelArgs &a, std::string &err) {
  const TensorRef &table = a.inputs[0], &idx = a.inputs[1];
  const TensorRef &out = a.outputs[0];
  int64_t V, C, first;
  const int64_t parts = a.intAttrs[0];
  if (!expectIndexDType(err, idx, "indices") ||
      !checkEmbeddingShapes(err, table, idx, out, V, C) ||
      !vocabularyPart(err, a, parts, V, first) ||
      !checkIndices(err, idx, V * parts))
    return false;
  const size_t rowBytes = size_t(C) * dtypeSize(out.dtype);
  const bool sameDType = table.dtype == out.dtype;
  const auto *tp = static_cast<const char *>(table.data);
  auto *op = static_cast<char *>(out.data);
  // One part of the table (parts > 1) gives zeros for the others' rows.
  parallelFor(
      idx.numel(), std::max<int64_t>(1, 16384 / std::max<int64_t>(C, 1)),
      [&](int64_t i0, int64_t i1) {
        float *scratch = sameDType ? nullptr : threadScratch(2 * C);
        for (int64_t i = i0; i < i1; ++i) {
          const int64_t row = indexAt(idx, i) - first;
          if (row < 0 || row >= V) {
            std::memset(op + i * rowBytes, 0, rowBytes);
          } else if (sameDType) {
            std::memcpy(op + i * rowBytes, tp + row * rowBytes, rowBytes);
          } else {
            const float *src = floatRow(table, row, C, scratch);
            float *dst = outRow(out, i, C, scratch + C);
            std::copy(src, src + C, dst);
            storeRow(dst, out, i, C);
          }
        }
      });
  return true;
}

/// ds.embedding_grad with g and the output f32, f16 or bf16: each element
/// sums its tokens' g in f32, in token order, from zero. A 16-bit output
/// sums in an f32 row per distinct index and is rounded once at the end.
bool scatterAddRows(const KernelArgs &a, std::string &err) {
  const TensorRef &idx = a.inputs[0], &g = a.inputs[1];
  const TensorRef &out = a.outputs[0];
  int64_t V, C, first;
  const int64_t parts = a.intAttrs[0];
  if (!expectIndexDType(err, idx, "indices") ||
      !checkEmbeddingGradShapes(err, idx, g, out, V, C) ||
      !vocabularyPart(err, a, parts, V, first) ||
      !checkIndices(err, idx, V * parts))
    return false;
  const int64_t n = idx.numel();
  std::memset(out.data, 0, size_t(V * C) * dtypeSize(out.dtype));
  // Each token's f32 destination row (null: another part's row).
  std::vector<float *> dst(size_t(n), nullptr);
  std::vector<float> sums;
  std::vector<int64_t> heldRows; // the output row of each row of `sums`
  if (out.dtype == DType::f32) {
    for (int64_t i = 0; i < n; ++i) {
      const int64_t row = indexAt(idx, i) - first;
      if (row >= 0 && row < V)
        dst[size_t(i)] = out.f32() + row * C;
    }
  } else {
    std::vector<int64_t> slot(size_t(V), -1);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t row = indexAt(idx, i) - first;
      if (row >= 0 && row < V && slot[size_t(row)] < 0) {
        slot[size_t(row)] = int64_t(heldRows.size());
        heldRows.push_back(row);
      }
    }
    sums.assign(heldRows.size() * size_t(C), 0.0f);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t row = indexAt(idx, i) - first;
      if (row >= 0 && row < V)
        dst[size_t(i)] = sums.data() + slot[size_t(row)] * C;
    }
  }
  // Threads own column ranges, so rows never race and each element sums its
  // tokens in order.
  parallelFor(C, 64, [&](int64_t c0, int64_t c1) {
    float *wide = g.dtype == DType::f32 ? nullptr : threadScratch(c1 - c0);
    for (int64_t i = 0; i < n; ++i) {
      float *d = dst[size_t(i)];
      if (!d)
        continue;
      const float *src = chunkAsF32(g.dtype, g.data, i * C + c0, c1 - c0, wide);
      for (int64_t c = c0; c < c1; ++c)
        d[c] += src[c - c0];
    }
  });
  parallelFor(int64_t(heldRows.size()), 16, [&](int64_t k0, int64_t k1) {
    for (int64_t k = k0; k < k1; ++k)
      storeRow(sums.data() + k * C, out, heldRows[size_t(k)], C);
  });
  return true;
}

/// The value of a one-element tensor of any float type.
bool scalarValue(std::string &err, const TensorRef &t, const char *role,
                 float &value) {
  if (t.numel() != 1)
    return fail(err, role, " must hold one value, got shape ", shapeStr(t));
  float wide;
  value = *floatRow(t, 0, 1, &wide);
  return true;
}

/// `value` into a one-element float tensor, rounded to its dtype.
void storeValue(float value, const TensorRef &t) {
  float *o = outRow(t, 0, 1, &value);
  *o = value;
  storeRow(o, t, 0, 1);
}

/// ds.cross_entropy with logits and the loss f32, f16 or bf16; a 16-bit row
/// of logits is widened into the thread's scratch.
bool meanRowLoss(const KernelArgs &a, std::string &err) {
  const TensorRef &logits = a.inputs[0], &targets = a.inputs[1];
  const TensorRef &loss = a.outputs[0];
  const int64_t ignoreIndex = a.intAttrs[0];
  int64_t count;
  if (!checkTargets(err, logits, targets, ignoreIndex, count) ||
      !checkOneValue(err, loss, "the loss"))
    return false;
  const int64_t V = logits.dim(-1), rows = targets.numel();
  const double total = sumInRowBlocks(rows, [&](int64_t r) {
    const int64_t t = indexAt(targets, r);
    if (t == ignoreIndex)
      return 0.0;
    const float *row = floatRow(
        logits, r, V, logits.dtype == DType::f32 ? nullptr : threadScratch(V));
    RowExp e = rowLogSumExp(row, V);
    return double(e.max) + std::log(e.sum) - double(row[t]);
  });
  storeValue(count ? float(total / double(count)) : 0.0f, loss);
  return true;
}

/// ds.cross_entropy_grad with logits, g and the output f32, f16 or bf16.
bool crossEntropyGradRows(const KernelArgs &a, std::string &err) {
  const TensorRef &logits = a.inputs[0], &targets = a.inputs[1];
  const TensorRef &out = a.outputs[0];
  const int64_t ignoreIndex = a.intAttrs[0];
  int64_t count;
  if (!checkTargets(err, logits, targets, ignoreIndex, count))
    return false;
  float g;
  if (!scalarValue(err, a.inputs[2], "g", g))
    return false;
  if (!sameShape(out, logits))
    return fail(err, "output has shape ", shapeStr(out),
                " but logits have shape ", shapeStr(logits));
  const int64_t V = logits.dim(-1), rows = targets.numel();
  const double coef = count ? double(g) / double(count) : 0.0;
  const bool wide = logits.dtype != DType::f32 || out.dtype != DType::f32;
  parallelFor(rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(V, 1)),
              [&](int64_t r0, int64_t r1) {
                float *inRow = wide ? threadScratch(2 * V) : nullptr;
                float *resultRow = wide ? inRow + V : nullptr;
                for (int64_t r = r0; r < r1; ++r) {
                  float *dr = outRow(out, r, V, resultRow);
                  const int64_t t = indexAt(targets, r);
                  if (t == ignoreIndex)
                    std::fill(dr, dr + V, 0.0f);
                  else
                    crossEntropyGradRow(floatRow(logits, r, V, inRow), dr, V, t,
                                        coef);
                  storeRow(dr, out, r, V);
                }
              });
  return true;
}

} // namespace

double crossEntropyGradRow(const float *x, float *dr, int64_t V, int64_t t,
                           double coef) {
  const float mx = maxOf(x, V);
  for (int64_t j = 0; j < V; ++j)
    dr[j] = fm::exp(x[j] - mx);
  const double sum = sumOf(V, [&](int64_t j) { return double(dr[j]); });
  const double et = dr[t];
  const float scale = float(coef / sum);
  for (int64_t j = 0; j < V; ++j)
    dr[j] *= scale;
  // p_t - 1 = -(sum - e_t) / sum, without cancellation.
  dr[t] = float(-coef * ((sum - et) / sum));
  return double(mx) + std::log(sum);
}

bool embeddingBody(const KernelArgs &a, std::string &err) {
  return expectDType(err, a.inputs[0], "table", DType::f32) &&
         expectIndexDType(err, a.inputs[1], "indices") &&
         expectDType(err, a.outputs[0], "the output", DType::f32) &&
         gatherRows(a, err);
}

bool halfEmbeddingBody(const KernelArgs &a, std::string &err) {
  return gatherRows(a, err);
}

bool embeddingGradBody(const KernelArgs &a, std::string &err) {
  return expectIndexDType(err, a.inputs[0], "indices") &&
         expectDType(err, a.inputs[1], "g", DType::f32) &&
         expectDType(err, a.outputs[0], "the output", DType::f32) &&
         scatterAddRows(a, err);
}

bool halfEmbeddingGradBody(const KernelArgs &a, std::string &err) {
  return scatterAddRows(a, err);
}

bool crossEntropyBody(const KernelArgs &a, std::string &err) {
  return expectDType(err, a.inputs[0], "logits", DType::f32) &&
         expectIndexDType(err, a.inputs[1], "targets") &&
         expectDType(err, a.outputs[0], "the loss", DType::f32) &&
         meanRowLoss(a, err);
}

bool halfCrossEntropyBody(const KernelArgs &a, std::string &err) {
  return meanRowLoss(a, err);
}

bool crossEntropyGradBody(const KernelArgs &a, std::string &err) {
  float g;
  return expectDType(err, a.inputs[0], "logits", DType::f32) &&
         expectIndexDType(err, a.inputs[1], "targets") &&
         scalarOperand(err, a.inputs[2], "g", g) &&
         expectDType(err, a.outputs[0], "the output", DType::f32) &&
         crossEntropyGradRows(a, err);
}

bool halfCrossEntropyGradBody(const KernelArgs &a, std::string &err) {
  return crossEntropyGradRows(a, err);
}

//===--- Vocabulary-parallel cross-entropy
//---------------------------------===//

namespace {

// The part kernels' common operands: logits [rows, V] (one rank's V of
// parts x V columns), targets [rows], row maxima [rows] (null: none).
struct LogitsPart {
  int64_t rows = 0, V = 0, first = 0, count = 0;
};

/// With `f32Only` (the full column) logits, row_max and stats must be f32;
/// the 16-bit column takes any float type for each.
bool checkLogitsPart(std::string &err, const KernelArgs &a,
                     const TensorRef *rowMax, const TensorRef &stats,
                     LogitsPart &p, bool f32Only) {
  const TensorRef &logits = a.inputs[0], &targets = a.inputs[1];
  const int64_t ignoreIndex = a.intAttrs[0], parts = a.intAttrs[1];
  if ((f32Only && !expectDType(err, logits, "logits", DType::f32)) ||
      !checkTargets(err, logits, targets, ignoreIndex, p.count, parts) ||
      (f32Only && rowMax &&
       !expectDType(err, *rowMax, "row_max", DType::f32)) ||
      (f32Only && !expectDType(err, stats, "stats", DType::f32)) ||
      !checkRowStats(err, targets, rowMax, stats))
    return false;
  p.rows = targets.numel();
  p.V = logits.dim(-1);
  return vocabularyPart(err, a, parts, p.V, p.first);
}

/// A small float operand (row maxima, statistics) as f32: its own values,
/// or (16-bit) a widened copy in `wide`.
const float *valuesOf(const TensorRef &t, std::vector<float> &wide) {
  if (t.dtype == DType::f32)
    return t.f32();
  wide.resize(size_t(t.numel()));
  return floatRow(t, 0, t.numel(), wide.data());
}

/// ds.cross_entropy_part, its logits read a row at a time (16-bit rows
/// widened in the thread's scratch).
bool partStats(const KernelArgs &a, std::string &err, bool f32Only) {
  const TensorRef &logits = a.inputs[0], &stats = a.outputs[0];
  LogitsPart p;
  if (!checkLogitsPart(err, a, &a.inputs[2], stats, p, f32Only))
    return false;
  const TensorRef &targets = a.inputs[1];
  const int64_t ignoreIndex = a.intAttrs[0];
  std::vector<float> wideMax, values(size_t(2 * p.rows));
  const float *mx = valuesOf(a.inputs[2], wideMax);
  float *sums = outRow(stats, 0, 2 * p.rows, values.data()),
        *picked = sums + p.rows;
  parallelFor(p.rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(p.V, 1)),
              [&](int64_t r0, int64_t r1) {
                float *wide =
                    logits.dtype == DType::f32 ? nullptr : threadScratch(p.V);
                for (int64_t r = r0; r < r1; ++r) {
                  const float *row = floatRow(logits, r, p.V, wide);
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
  storeRow(sums, stats, 0, 2 * p.rows);
  return true;
}

} // namespace

bool crossEntropyPartBody(const KernelArgs &a, std::string &err) {
  return partStats(a, err, /*f32Only=*/true);
}

bool halfCrossEntropyPartBody(const KernelArgs &a, std::string &err) {
  return partStats(a, err, /*f32Only=*/false);
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

namespace {

/// ds.cross_entropy_part_grad, a row at a time (16-bit rows widened, and
/// the output's rounded, in the thread's scratch).
bool partGrad(const KernelArgs &a, std::string &err, bool f32Only) {
  const TensorRef &logits = a.inputs[0], &out = a.outputs[0];
  LogitsPart p;
  float g;
  if (!checkLogitsPart(err, a, &a.inputs[2], a.inputs[3], p, f32Only) ||
      (f32Only && !scalarOperand(err, a.inputs[4], "g", g)) ||
      (!f32Only && !scalarValue(err, a.inputs[4], "g", g)) ||
      (f32Only && !expectDType(err, out, "the output", DType::f32)))
    return false;
  if (!sameShape(out, logits))
    return fail(err, "output has shape ", shapeStr(out),
                " but logits have shape ", shapeStr(logits));
  const TensorRef &targets = a.inputs[1];
  const int64_t ignoreIndex = a.intAttrs[0];
  const double coef = p.count ? double(g) / double(p.count) : 0.0;
  std::vector<float> wideMax, wideStats;
  const float *mx = valuesOf(a.inputs[2], wideMax);
  const float *sums = valuesOf(a.inputs[3], wideStats);
  const bool wide = logits.dtype != DType::f32 || out.dtype != DType::f32;
  parallelFor(p.rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(p.V, 1)),
              [&](int64_t r0, int64_t r1) {
                float *in = wide ? threadScratch(2 * p.V) : nullptr;
                float *result = wide ? in + p.V : nullptr;
                for (int64_t r = r0; r < r1; ++r) {
                  const float *row = floatRow(logits, r, p.V, in);
                  float *dr = outRow(out, r, p.V, result);
                  const int64_t target = indexAt(targets, r);
                  if (target == ignoreIndex) {
                    std::fill(dr, dr + p.V, 0.0f);
                    storeRow(dr, out, r, p.V);
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
                  storeRow(dr, out, r, p.V);
                }
              });
  return true;
}

} // namespace

bool crossEntropyPartGradBody(const KernelArgs &a, std::string &err) {
  return partGrad(a, err, /*f32Only=*/true);
}

bool halfCrossEntropyPartGradBody(const KernelArgs &a, std::string &err) {
  return partGrad(a, err, /*f32Only=*/false);
}

} // namespace dsc::rt::cpu
