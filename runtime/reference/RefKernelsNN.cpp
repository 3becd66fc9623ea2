//===- RefKernelsNN.cpp - Reference kernels: NN ops and optimizer ---------===//
//
// Normalizations, softmax, attention, embedding, rotary, cross-entropy,
// dropout, AdamW and initializers, with their gradients.
//
//===----------------------------------------------------------------------===//

#include "runtime/reference/RefFail.h"
#include "runtime/reference/RefKernels.h"
#include "runtime/rng/Philox.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

namespace dsc::ref {
namespace {

using detail::fail;

std::string sameShape(const char *kernel, const Tensor &x, const char *xName,
                      const Tensor &y, const char *yName) {
  if (x.shape == y.shape)
    return "";
  std::ostringstream os;
  os << kernel << ": " << xName << " has shape " << shapeToString(x.shape)
     << " but " << yName << " has shape " << shapeToString(y.shape);
  return os.str();
}

// Rows of the last dim: x viewed as [rows, cols].
struct Rows {
  int64_t rows, cols;
};

Result<Rows> lastDimRows(const char *kernel, const Tensor &x,
                         const char *name = "x") {
  if (auto e = checkTensor(kernel, name, x); !e.empty())
    return Error{e};
  if (x.rank() < 1)
    return fail(kernel, ": ", name, " needs rank >= 1, got a scalar");
  int64_t cols = x.shape.back();
  return Rows{cols ? x.numel() / cols : 0, cols};
}

// A per-channel weight must be absent or of shape [cols].
std::string checkChannelWeight(const char *kernel, const char *name,
                               const Tensor *w, int64_t cols) {
  if (!w)
    return "";
  if (auto e = checkTensor(kernel, name, *w); !e.empty())
    return e;
  if (w->shape != Shape{cols})
    return fail(kernel, ": ", name, " has shape ", shapeToString(w->shape),
                " but the last dim of x is ", cols)
        .message;
  return "";
}

double weightAt(const Tensor *w, int64_t c) { return w ? w->data[c] : 1.0; }

// Reads a stored integer; false when it is not integral or not in [0, limit).
bool indexIn(double v, int64_t limit, int64_t *out) {
  if (!(v >= 0 && v < double(limit) && v == std::floor(v)))
    return false;
  *out = int64_t(v);
  return true;
}

void softmaxRow(const double *x, double *y, int64_t n) {
  double mx = -std::numeric_limits<double>::infinity();
  for (int64_t j = 0; j < n; ++j)
    mx = std::max(mx, x[j]);
  // Subtracting the max keeps exp() from overflowing; the result is equal.
  double sum = 0;
  for (int64_t j = 0; j < n; ++j)
    sum += (y[j] = std::exp(x[j] - mx));
  for (int64_t j = 0; j < n; ++j)
    y[j] /= sum;
}

struct RowStats {
  double mean, rstd;
};

RowStats layerNormStats(const double *x, int64_t n, double eps) {
  double mean = 0, var = 0;
  for (int64_t j = 0; j < n; ++j)
    mean += x[j];
  mean /= double(n);
  for (int64_t j = 0; j < n; ++j)
    var += (x[j] - mean) * (x[j] - mean);
  var /= double(n); // biased, as in PyTorch's layer_norm
  return {mean, 1.0 / std::sqrt(var + eps)};
}

double rmsInverse(const double *x, int64_t n, double eps) {
  double ms = 0;
  for (int64_t j = 0; j < n; ++j)
    ms += x[j] * x[j];
  return 1.0 / std::sqrt(ms / double(n) + eps);
}

struct AttentionDims {
  int64_t B, H, Tq, Tk, D, Dv;
};

Result<AttentionDims> attentionDims(const char *kernel, const Tensor &q,
                                    const Tensor &k, const Tensor &v) {
  if (auto e = checkTensor(kernel, "q", q); !e.empty())
    return Error{e};
  if (auto e = checkTensor(kernel, "k", k); !e.empty())
    return Error{e};
  if (auto e = checkTensor(kernel, "v", v); !e.empty())
    return Error{e};
  if (q.rank() != 4 || k.rank() != 4 || v.rank() != 4)
    return fail(kernel, ": q, k, v must be rank 4 [B,H,T,D], got ",
                shapeToString(q.shape), ", ", shapeToString(k.shape), ", ",
                shapeToString(v.shape));
  AttentionDims d{q.shape[0], q.shape[1], q.shape[2],
                  k.shape[2], q.shape[3], v.shape[3]};
  if (k.shape != Shape{d.B, d.H, d.Tk, d.D} ||
      v.shape != Shape{d.B, d.H, d.Tk, d.Dv})
    return fail(kernel, ": incompatible shapes q ", shapeToString(q.shape),
                ", k ", shapeToString(k.shape), ", v ", shapeToString(v.shape),
                " (need k [B,H,Tk,D] and v [B,H,Tk,Dv])");
  return d;
}

// Attention probabilities of query i of head bh (masked keys get 0; a fully
// masked row is all zeros).
void attentionProbs(const Tensor &q, const Tensor &k, const AttentionDims &d,
                    int64_t bh, int64_t i, bool causal, double scale,
                    std::vector<double> &p) {
  // Aligning the last query with the last key lets Tq < Tk (decoding with a
  // cache) keep the usual lower-triangular mask.
  int64_t visible =
      causal ? std::min(d.Tk, std::max<int64_t>(0, i + (d.Tk - d.Tq) + 1))
             : d.Tk;
  p.assign(size_t(d.Tk), 0.0);
  const double *qi = q.data.data() + (bh * d.Tq + i) * d.D;
  for (int64_t j = 0; j < visible; ++j) {
    const double *kj = k.data.data() + (bh * d.Tk + j) * d.D;
    double s = 0;
    for (int64_t c = 0; c < d.D; ++c)
      s += qi[c] * kj[c];
    p[j] = scale * s;
  }
  if (visible > 0)
    softmaxRow(p.data(), p.data(), visible);
}

// Checks targets against logits [..., V]; ignored rows become -1.
Result<std::vector<int64_t>> resolveTargets(const char *kernel,
                                            const Tensor &logits,
                                            const Tensor &targets,
                                            int64_t ignoreIndex) {
  if (auto e = checkTensor(kernel, "logits", logits); !e.empty())
    return Error{e};
  if (auto e = checkTensor(kernel, "targets", targets); !e.empty())
    return Error{e};
  if (logits.rank() < 1 ||
      targets.shape != Shape(logits.shape.begin(), logits.shape.end() - 1))
    return fail(kernel, ": targets of shape ", shapeToString(targets.shape),
                " do not match logits of shape ", shapeToString(logits.shape),
                " (need logits [..., V] and targets [...])");
  int64_t V = logits.shape.back();
  std::vector<int64_t> resolved(targets.data.size());
  for (size_t r = 0; r < resolved.size(); ++r) {
    double t = targets.data[r];
    if (t == double(ignoreIndex))
      resolved[r] = -1;
    else if (!indexIn(t, V, &resolved[r]))
      return fail(kernel, ": target ", t, " at position ", r,
                  " is outside [0, ", V, ") and is not the ignore index ",
                  ignoreIndex);
  }
  return resolved;
}

} // namespace

//===--- Normalization ----------------------------------------------------===//

Result<Tensor> layer_norm(const Tensor &x, const Tensor *w, const Tensor *b,
                          double eps) {
  Result<Rows> r = lastDimRows("layer_norm", x);
  if (!r)
    return Error{r.error};
  if (auto e = checkChannelWeight("layer_norm", "w", w, r.value.cols);
      !e.empty())
    return Error{e};
  if (auto e = checkChannelWeight("layer_norm", "b", b, r.value.cols);
      !e.empty())
    return Error{e};
  auto [rows, cols] = r.value;
  Tensor y(x.shape);
  for (int64_t row = 0; row < rows; ++row) {
    const double *xr = x.data.data() + row * cols;
    RowStats st = layerNormStats(xr, cols, eps);
    for (int64_t c = 0; c < cols; ++c)
      y.data[row * cols + c] =
          (xr[c] - st.mean) * st.rstd * weightAt(w, c) + (b ? b->data[c] : 0.0);
  }
  return y;
}

Result<LayerNormGrads> layer_norm_grad(const Tensor &x, const Tensor *w,
                                       const Tensor &g, double eps) {
  Result<Rows> r = lastDimRows("layer_norm_grad", x);
  if (!r)
    return Error{r.error};
  if (auto e = checkChannelWeight("layer_norm_grad", "w", w, r.value.cols);
      !e.empty())
    return Error{e};
  if (auto e = checkTensor("layer_norm_grad", "g", g); !e.empty())
    return Error{e};
  if (auto e = sameShape("layer_norm_grad", x, "x", g, "g"); !e.empty())
    return Error{e};
  auto [rows, cols] = r.value;
  LayerNormGrads out{Tensor(x.shape), Tensor(Shape{cols}), Tensor(Shape{cols})};
  std::vector<double> xhat(static_cast<size_t>(cols)),
      gy(static_cast<size_t>(cols));
  for (int64_t row = 0; row < rows; ++row) {
    const double *xr = x.data.data() + row * cols;
    const double *gr = g.data.data() + row * cols;
    RowStats st = layerNormStats(xr, cols, eps);
    double meanGy = 0, meanGyXhat = 0;
    for (int64_t c = 0; c < cols; ++c) {
      xhat[c] = (xr[c] - st.mean) * st.rstd;
      gy[c] = gr[c] * weightAt(w, c);
      meanGy += gy[c] / double(cols);
      meanGyXhat += gy[c] * xhat[c] / double(cols);
      out.dw.data[c] += gr[c] * xhat[c];
      out.db.data[c] += gr[c];
    }
    // Normalizing removes the mean and the scale, so the gradient is gy with
    // its components along 1 and along xhat projected out, times rstd.
    for (int64_t c = 0; c < cols; ++c)
      out.dx.data[row * cols + c] =
          st.rstd * (gy[c] - meanGy - xhat[c] * meanGyXhat);
  }
  return out;
}

Result<Tensor> rms_norm(const Tensor &x, const Tensor *w, double eps) {
  Result<Rows> r = lastDimRows("rms_norm", x);
  if (!r)
    return Error{r.error};
  if (auto e = checkChannelWeight("rms_norm", "w", w, r.value.cols); !e.empty())
    return Error{e};
  auto [rows, cols] = r.value;
  Tensor y(x.shape);
  for (int64_t row = 0; row < rows; ++row) {
    const double *xr = x.data.data() + row * cols;
    double inv = rmsInverse(xr, cols, eps);
    for (int64_t c = 0; c < cols; ++c)
      y.data[row * cols + c] = xr[c] * inv * weightAt(w, c);
  }
  return y;
}

Result<RmsNormGrads> rms_norm_grad(const Tensor &x, const Tensor *w,
                                   const Tensor &g, double eps) {
  Result<Rows> r = lastDimRows("rms_norm_grad", x);
  if (!r)
    return Error{r.error};
  if (auto e = checkChannelWeight("rms_norm_grad", "w", w, r.value.cols);
      !e.empty())
    return Error{e};
  if (auto e = checkTensor("rms_norm_grad", "g", g); !e.empty())
    return Error{e};
  if (auto e = sameShape("rms_norm_grad", x, "x", g, "g"); !e.empty())
    return Error{e};
  auto [rows, cols] = r.value;
  RmsNormGrads out{Tensor(x.shape), Tensor(Shape{cols})};
  for (int64_t row = 0; row < rows; ++row) {
    const double *xr = x.data.data() + row * cols;
    const double *gr = g.data.data() + row * cols;
    double inv = rmsInverse(xr, cols, eps);
    double dot = 0; // sum of (g*w)*x over the row
    for (int64_t c = 0; c < cols; ++c) {
      dot += gr[c] * weightAt(w, c) * xr[c];
      out.dw.data[c] += gr[c] * xr[c] * inv;
    }
    // d inv / d x_c = -inv^3 x_c / cols.
    for (int64_t c = 0; c < cols; ++c)
      out.dx.data[row * cols + c] =
          gr[c] * weightAt(w, c) * inv -
          xr[c] * inv * inv * inv * dot / double(cols);
  }
  return out;
}

//===--- Softmax and attention --------------------------------------------===//

Result<Tensor> softmax(const Tensor &x) {
  Result<Rows> r = lastDimRows("softmax", x);
  if (!r)
    return Error{r.error};
  Tensor y(x.shape);
  for (int64_t row = 0; row < r.value.rows; ++row)
    softmaxRow(x.data.data() + row * r.value.cols,
               y.data.data() + row * r.value.cols, r.value.cols);
  return y;
}

Result<Tensor> softmax_grad(const Tensor &y, const Tensor &g) {
  Result<Rows> r = lastDimRows("softmax_grad", y, "y");
  if (!r)
    return Error{r.error};
  if (auto e = checkTensor("softmax_grad", "g", g); !e.empty())
    return Error{e};
  if (auto e = sameShape("softmax_grad", y, "y", g, "g"); !e.empty())
    return Error{e};
  auto [rows, cols] = r.value;
  Tensor dx(y.shape);
  for (int64_t row = 0; row < rows; ++row) {
    const double *yr = y.data.data() + row * cols;
    const double *gr = g.data.data() + row * cols;
    double dot = 0;
    for (int64_t c = 0; c < cols; ++c)
      dot += gr[c] * yr[c];
    for (int64_t c = 0; c < cols; ++c)
      dx.data[row * cols + c] = yr[c] * (gr[c] - dot);
  }
  return dx;
}

Result<Tensor> attention(const Tensor &q, const Tensor &k, const Tensor &v,
                         bool causal, double scale) {
  Result<AttentionDims> dims = attentionDims("attention", q, k, v);
  if (!dims)
    return Error{dims.error};
  const AttentionDims &d = dims.value;
  Tensor out(Shape{d.B, d.H, d.Tq, d.Dv});
  std::vector<double> p;
  for (int64_t bh = 0; bh < d.B * d.H; ++bh)
    for (int64_t i = 0; i < d.Tq; ++i) {
      attentionProbs(q, k, d, bh, i, causal, scale, p);
      double *oi = out.data.data() + (bh * d.Tq + i) * d.Dv;
      for (int64_t j = 0; j < d.Tk; ++j)
        for (int64_t c = 0; c < d.Dv; ++c)
          oi[c] += p[j] * v.data[(bh * d.Tk + j) * d.Dv + c];
    }
  return out;
}

Result<AttentionGrads> attention_grad(const Tensor &q, const Tensor &k,
                                      const Tensor &v, const Tensor &g,
                                      bool causal, double scale) {
  Result<AttentionDims> dims = attentionDims("attention_grad", q, k, v);
  if (!dims)
    return Error{dims.error};
  const AttentionDims &d = dims.value;
  if (auto e = checkTensor("attention_grad", "g", g); !e.empty())
    return Error{e};
  if (g.shape != Shape{d.B, d.H, d.Tq, d.Dv})
    return fail("attention_grad: g has shape ", shapeToString(g.shape),
                " but the output has shape ",
                shapeToString({d.B, d.H, d.Tq, d.Dv}));
  AttentionGrads out{Tensor(q.shape), Tensor(k.shape), Tensor(v.shape)};
  std::vector<double> p, dp(size_t(d.Tk));
  for (int64_t bh = 0; bh < d.B * d.H; ++bh)
    for (int64_t i = 0; i < d.Tq; ++i) {
      attentionProbs(q, k, d, bh, i, causal, scale, p);
      const double *gi = g.data.data() + (bh * d.Tq + i) * d.Dv;
      double dotPdp = 0;
      for (int64_t j = 0; j < d.Tk; ++j) {
        const double *vj = v.data.data() + (bh * d.Tk + j) * d.Dv;
        double *dvj = out.dv.data.data() + (bh * d.Tk + j) * d.Dv;
        dp[j] = 0;
        for (int64_t c = 0; c < d.Dv; ++c) {
          dp[j] += gi[c] * vj[c];
          dvj[c] += p[j] * gi[c];
        }
        dotPdp += p[j] * dp[j];
      }
      const double *qi = q.data.data() + (bh * d.Tq + i) * d.D;
      double *dqi = out.dq.data.data() + (bh * d.Tq + i) * d.D;
      for (int64_t j = 0; j < d.Tk; ++j) {
        // Softmax backward; masked keys have p = 0 and so get no gradient.
        double ds = scale * p[j] * (dp[j] - dotPdp);
        const double *kj = k.data.data() + (bh * d.Tk + j) * d.D;
        double *dkj = out.dk.data.data() + (bh * d.Tk + j) * d.D;
        for (int64_t c = 0; c < d.D; ++c) {
          dqi[c] += ds * kj[c];
          dkj[c] += ds * qi[c];
        }
      }
    }
  return out;
}

//===--- Embedding and rotary ---------------------------------------------===//

Result<Tensor> embedding(const Tensor &table, const Tensor &idx) {
  if (auto e = checkTensor("embedding", "table", table); !e.empty())
    return Error{e};
  if (auto e = checkTensor("embedding", "idx", idx); !e.empty())
    return Error{e};
  if (table.rank() != 2)
    return fail("embedding: table must be [V, C], got ",
                shapeToString(table.shape));
  int64_t V = table.shape[0], C = table.shape[1];
  Shape outShape = idx.shape;
  outShape.push_back(C);
  Tensor out(outShape);
  for (size_t i = 0; i < idx.data.size(); ++i) {
    int64_t row;
    if (!indexIn(idx.data[i], V, &row))
      return fail("embedding: index ", idx.data[i], " at position ", i,
                  " is outside [0, ", V, "): the table has V = ", V, " rows");
    std::copy_n(table.data.begin() + row * C, C,
                out.data.begin() + int64_t(i) * C);
  }
  return out;
}

Result<Tensor> embedding_grad(const Tensor &idx, const Tensor &g, int64_t V) {
  if (auto e = checkTensor("embedding_grad", "idx", idx); !e.empty())
    return Error{e};
  if (auto e = checkTensor("embedding_grad", "g", g); !e.empty())
    return Error{e};
  if (g.rank() != idx.rank() + 1 ||
      Shape(g.shape.begin(), g.shape.end() - 1) != idx.shape)
    return fail("embedding_grad: g has shape ", shapeToString(g.shape),
                " but idx has shape ", shapeToString(idx.shape),
                " (need g = idx.shape + [C])");
  if (V < 0)
    return fail("embedding_grad: V must be non-negative, got ", V);
  int64_t C = g.shape.back();
  if (C > 0 && V > std::numeric_limits<int64_t>::max() / C)
    return fail("embedding_grad: [", V, ", ", C, "] is too large");
  Tensor out(Shape{V, C});
  for (size_t i = 0; i < idx.data.size(); ++i) {
    int64_t row;
    if (!indexIn(idx.data[i], V, &row))
      return fail("embedding_grad: index ", idx.data[i], " at position ", i,
                  " is outside [0, ", V, "): the table has V = ", V, " rows");
    for (int64_t c = 0; c < C; ++c)
      out.data[row * C + c] += g.data[int64_t(i) * C + c];
  }
  return out;
}

Result<Tensor> rotary(const Tensor &x, double theta, bool inverse) {
  if (auto e = checkTensor("rotary", "x", x); !e.empty())
    return Error{e};
  if (x.rank() < 2 || x.shape.back() % 2 != 0)
    return fail("rotary: x must be [..., T, D] with D even, got ",
                shapeToString(x.shape));
  if (!(theta > 0) || std::isinf(theta))
    return fail("rotary: theta must be positive and finite, got ", theta);
  int64_t T = x.shape[x.rank() - 2], D = x.shape.back(), half = D / 2;
  int64_t blocks = T * D != 0 ? x.numel() / (T * D) : 0;
  Tensor out(x.shape);
  for (int64_t b = 0; b < blocks; ++b)
    for (int64_t t = 0; t < T; ++t) {
      const double *xr = x.data.data() + (b * T + t) * D;
      double *yr = out.data.data() + (b * T + t) * D;
      for (int64_t i = 0; i < half; ++i) {
        double angle = double(t) * std::pow(theta, -2.0 * double(i) / D);
        if (inverse)
          angle = -angle;
        double c = std::cos(angle), s = std::sin(angle);
        // Pair (i, i + D/2) rotates as one complex number ("rotate_half").
        yr[i] = xr[i] * c - xr[i + half] * s;
        yr[i + half] = xr[i + half] * c + xr[i] * s;
      }
    }
  return out;
}

//===--- Loss, dropout, optimizer, init -----------------------------------===//

Result<Tensor> cross_entropy(const Tensor &logits, const Tensor &targets,
                             int64_t ignoreIndex) {
  Result<std::vector<int64_t>> t =
      resolveTargets("cross_entropy", logits, targets, ignoreIndex);
  if (!t)
    return Error{t.error};
  int64_t V = logits.shape.back();
  double total = 0;
  int64_t count = 0;
  for (size_t r = 0; r < t.value.size(); ++r) {
    if (t.value[r] < 0)
      continue;
    const double *row = logits.data.data() + int64_t(r) * V;
    double mx = *std::max_element(row, row + V);
    double sum = 0;
    for (int64_t c = 0; c < V; ++c)
      sum += std::exp(row[c] - mx);
    total += mx + std::log(sum) - row[t.value[r]];
    ++count;
  }
  return Tensor::scalar(count ? total / double(count) : 0.0);
}

Result<Tensor> cross_entropy_grad(const Tensor &logits, const Tensor &targets,
                                  double g, int64_t ignoreIndex) {
  Result<std::vector<int64_t>> t =
      resolveTargets("cross_entropy_grad", logits, targets, ignoreIndex);
  if (!t)
    return Error{t.error};
  int64_t V = logits.shape.back();
  int64_t count = std::count_if(t.value.begin(), t.value.end(),
                                [](int64_t v) { return v >= 0; });
  Tensor dx(logits.shape);
  for (size_t r = 0; r < t.value.size(); ++r) {
    if (t.value[r] < 0)
      continue;
    double *out = dx.data.data() + int64_t(r) * V;
    softmaxRow(logits.data.data() + int64_t(r) * V, out, V);
    out[t.value[r]] -= 1.0;
    for (int64_t c = 0; c < V; ++c)
      out[c] *= g / double(count);
  }
  return dx;
}

Result<Tensor> dropout(const Tensor &x, double rate, uint64_t seed,
                       uint32_t opId, uint32_t step, uint64_t sampleOffset) {
  if (auto e = checkTensor("dropout", "x", x); !e.empty())
    return Error{e};
  if (!(rate >= 0 && rate <= 1))
    return fail("dropout: rate must be in [0, 1], got ", rate);
  Tensor out(x.shape);
  // The leading dimension is the batch, starting at global sample
  // sampleOffset: element e's key is its global index.
  uint64_t rowElems =
      x.shape.empty() || x.shape[0] == 0 ? 0 : x.data.size() / x.shape[0];
  uint64_t offset = sampleOffset * rowElems;
  for (size_t e = 0; e < x.data.size(); ++e)
    if (rng::uniformAt(seed, opId, step, offset + e) >= rate)
      out.data[e] = x.data[e] / (1.0 - rate);
  return out;
}

Result<AdamWState> adamw(const Tensor &p, const Tensor &g, const Tensor &m,
                         const Tensor &v, double lr, int64_t step, double beta1,
                         double beta2, double eps, double weightDecay,
                         double gradScale) {
  const char *names[] = {"p", "g", "m", "v"};
  const Tensor *ts[] = {&p, &g, &m, &v};
  for (int i = 0; i < 4; ++i) {
    if (auto e = checkTensor("adamw", names[i], *ts[i]); !e.empty())
      return Error{e};
    if (auto e = sameShape("adamw", p, "p", *ts[i], names[i]); !e.empty())
      return Error{e};
  }
  if (step < 1)
    return fail("adamw: step counts from 1, got ", step);
  if (!std::isfinite(gradScale)) // an overflowed step: nothing changes
    return AdamWState{p, m, v};
  // Bias corrections undo the zero initialization of m and v.
  double c1 = 1.0 - std::pow(beta1, double(step));
  double c2 = 1.0 - std::pow(beta2, double(step));
  AdamWState out{p, m, v};
  for (size_t i = 0; i < p.data.size(); ++i) {
    double gs = g.data[i] * gradScale;
    double mi = beta1 * m.data[i] + (1 - beta1) * gs;
    double vi = beta2 * v.data[i] + (1 - beta2) * gs * gs;
    // Decoupled weight decay: applied to p directly, not through g.
    out.p.data[i] = p.data[i] - lr * weightDecay * p.data[i] -
                    lr * (mi / c1) / (std::sqrt(vi / c2) + eps);
    out.m.data[i] = mi;
    out.v.data[i] = vi;
  }
  return out;
}

namespace {
/// p, g and one state of one shape, each well formed.
std::string checkUpdate(const char *kernel, const Tensor &p, const Tensor &g,
                        const Tensor &state, const char *stateName) {
  const char *names[] = {"p", "g", stateName};
  const Tensor *ts[] = {&p, &g, &state};
  for (int i = 0; i < 3; ++i) {
    if (auto e = checkTensor(kernel, names[i], *ts[i]); !e.empty())
      return e;
    if (auto e = sameShape(kernel, p, "p", *ts[i], names[i]); !e.empty())
      return e;
  }
  return {};
}
} // namespace

Result<UpdateState> sgd(const Tensor &p, const Tensor &g, const Tensor &buf,
                        double lr, int64_t step, double momentum,
                        double dampening, double weightDecay, bool nesterov,
                        double gradScale) {
  if (auto e = checkUpdate("sgd", p, g, buf, "buf"); !e.empty())
    return Error{e};
  if (step < 1)
    return fail("sgd: step counts from 1, got ", step);
  UpdateState out{p, buf};
  if (!std::isfinite(gradScale)) // an overflowed step: nothing changes
    return out;
  for (size_t i = 0; i < p.data.size(); ++i) {
    double d = g.data[i] * gradScale + weightDecay * p.data[i];
    if (momentum != 0) {
      double b = step == 1 ? d : momentum * buf.data[i] + (1 - dampening) * d;
      out.state.data[i] = b;
      d = nesterov ? d + momentum * b : b;
    }
    out.p.data[i] = p.data[i] - lr * d;
  }
  return out;
}

Result<UpdateState> lion(const Tensor &p, const Tensor &g, const Tensor &m,
                         double lr, double beta1, double beta2,
                         double weightDecay, double gradScale) {
  if (auto e = checkUpdate("lion", p, g, m, "m"); !e.empty())
    return Error{e};
  UpdateState out{p, m};
  if (!std::isfinite(gradScale))
    return out;
  for (size_t i = 0; i < p.data.size(); ++i) {
    double gs = g.data[i] * gradScale;
    double c = beta1 * m.data[i] + (1 - beta1) * gs;
    double sign = c > 0 ? 1.0 : (c < 0 ? -1.0 : 0.0);
    out.p.data[i] = p.data[i] - lr * weightDecay * p.data[i] - lr * sign;
    out.state.data[i] = beta2 * m.data[i] + (1 - beta2) * gs;
  }
  return out;
}

Result<UpdateState> adagrad(const Tensor &p, const Tensor &g, const Tensor &sum,
                            double lr, int64_t step, double lrDecay, double eps,
                            double weightDecay, double gradScale) {
  if (auto e = checkUpdate("adagrad", p, g, sum, "sum"); !e.empty())
    return Error{e};
  if (step < 1)
    return fail("adagrad: step counts from 1, got ", step);
  UpdateState out{p, sum};
  if (!std::isfinite(gradScale))
    return out;
  const double clr = lr / (1 + double(step - 1) * lrDecay);
  for (size_t i = 0; i < p.data.size(); ++i) {
    double d = g.data[i] * gradScale + weightDecay * p.data[i];
    double s = sum.data[i] + d * d;
    out.state.data[i] = s;
    out.p.data[i] = p.data[i] - clr * d / (std::sqrt(s) + eps);
  }
  return out;
}

Result<AdamWState> lamb(const Tensor &p, const Tensor &g, const Tensor &m,
                        const Tensor &v, double lr, int64_t step,
                        const LambParams &k, double gradScale) {
  if (auto e = checkUpdate("lamb", p, g, m, "m"); !e.empty())
    return Error{e};
  if (auto e = checkUpdate("lamb", p, g, v, "v"); !e.empty())
    return Error{e};
  if (step < 1)
    return fail("lamb: step counts from 1, got ", step);
  AdamWState out{p, m, v};
  if (!std::isfinite(gradScale))
    return out;
  std::vector<double> u(p.data.size());
  double pSq = 0, uSq = 0;
  for (size_t i = 0; i < p.data.size(); ++i) {
    double gs = g.data[i] * gradScale;
    double mi = k.beta1 * m.data[i] + (1 - k.beta1) * gs;
    double vi = k.beta2 * v.data[i] + (1 - k.beta2) * gs * gs;
    double denom =
        k.epsInsideSqrt ? std::sqrt(vi + k.eps) : std::sqrt(vi) + k.eps;
    u[i] = mi / denom + k.weightDecay * p.data[i];
    out.m.data[i] = mi;
    out.v.data[i] = vi;
    pSq += p.data[i] * p.data[i];
    uSq += u[i] * u[i];
  }
  double ratio = 1;
  if (pSq != 0 && uSq != 0)
    ratio = std::clamp(std::sqrt(pSq) / std::sqrt(uSq), k.minCoeff, k.maxCoeff);
  double stepSize = lr;
  if (k.biasCorrection)
    stepSize *= std::sqrt(1 - std::pow(k.beta2, double(step))) /
                (1 - std::pow(k.beta1, double(step)));
  for (size_t i = 0; i < p.data.size(); ++i)
    out.p.data[i] = p.data[i] - stepSize * ratio * u[i];
  return out;
}

Result<Tensor> overflow_guard(const Tensor &scale, const Tensor &norm) {
  if (scale.data.size() != 1 || norm.data.size() != 1)
    return fail("overflow_guard: scale and norm must be scalars");
  Tensor out = scale;
  if (!std::isfinite(norm.data[0]))
    out.data[0] = std::numeric_limits<double>::quiet_NaN();
  return out;
}

Result<Tensor> init(InitKind kind, const Shape &shape, uint64_t seed,
                    uint32_t tensorId, double mean, double stddev) {
  if (Tensor(shape, {}).numel() < 0)
    return fail("init: invalid shape ", shapeToString(shape));
  Tensor out(shape);
  for (size_t i = 0; i < out.data.size(); ++i) {
    if (kind == InitKind::Ones)
      out.data[i] = 1.0;
    else if (kind == InitKind::Normal)
      out.data[i] =
          rng::normalAt(seed, tensorId, 0xFFFFFFFFu, i) * stddev + mean;
  }
  return out;
}

} // namespace dsc::ref
