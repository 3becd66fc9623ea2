//===- KernelChecks.cpp - argument checks every backend shares ------------===//

#include "runtime/kernels/KernelChecks.h"

#include <algorithm>
#include <limits>

namespace dsc::rt {
namespace {

const char *plural(int64_t n, const char *one, const char *many) {
  return n == 1 ? one : many;
}

bool checkCount(std::string &err, const char *what, int declared, size_t given,
                const void *array) {
  if (declared >= 0 && given != size_t(declared))
    return fail(err, "expects ", declared, " ", what, ", got ", given);
  if (given > 0 && !array)
    return fail(err, given, " ", what, " declared but the array is null");
  return true;
}

// Byte size of a checked tensor.
int64_t byteSize(const TensorRef &t) {
  return t.numel() * int64_t(dtypeSize(t.dtype));
}

bool checkTensor(std::string &err, const TensorRef &t, const char *role,
                 size_t index) {
  if (dtypeSize(t.dtype) == 0)
    return fail(err, role, " ", index, " has an unknown dtype ", int(t.dtype));
  if (t.rank < 0 || t.rank > kMaxRank)
    return fail(err, role, " ", index, " has rank ", t.rank, " (0 to ",
                kMaxRank, " supported)");
  if (t.rank > 0 && !t.shape)
    return fail(err, role, " ", index, " has rank ", t.rank, " but no shape");
  int64_t n = int64_t(dtypeSize(t.dtype));
  for (int d = 0; d < t.rank; ++d) {
    if (t.shape[d] < 0)
      return fail(err, role, " ", index, " has a negative dim in ",
                  shapeStr(t));
    if (t.shape[d] > 0 && n > std::numeric_limits<int64_t>::max() / t.shape[d])
      return fail(err, role, " ", index, " of shape ", shapeStr(t),
                  " is too large");
    n *= t.shape[d];
  }
  if (n > 0 && !t.data)
    return fail(err, role, " ", index, " of shape ", shapeStr(t),
                " has no data");
  return true;
}

bool overlap(const TensorRef &a, const TensorRef &b) {
  int64_t na = byteSize(a), nb = byteSize(b);
  if (na == 0 || nb == 0)
    return false;
  auto pa = reinterpret_cast<uintptr_t>(a.data);
  auto pb = reinterpret_cast<uintptr_t>(b.data);
  return pa < pb + uintptr_t(nb) && pb < pa + uintptr_t(na);
}

bool exactAlias(const TensorRef &a, const TensorRef &b) {
  return a.data == b.data && byteSize(a) == byteSize(b) && a.dtype == b.dtype;
}

bool checkAliasing(std::string &err, const KernelContract &spec,
                   const KernelArgs &a) {
  for (size_t o = 0; o < a.numOutputs; ++o) {
    for (size_t p = 0; p < o; ++p)
      if (overlap(a.outputs[o], a.outputs[p]))
        return fail(err, "outputs ", p, " and ", o, " overlap");
    for (size_t i = 0; i < a.numInputs; ++i) {
      if (!overlap(a.outputs[o], a.inputs[i]))
        continue;
      bool allowed = exactAlias(a.outputs[o], a.inputs[i]) &&
                     (spec.alias == KernelAlias::AnyInput ||
                      ((spec.alias == KernelAlias::Update ||
                        spec.alias == KernelAlias::TensorUpdate) &&
                       i == (o == 0 ? 0 : o + 1)));
      if (!allowed)
        return fail(err, "output ", o, " overlaps input ", i,
                    spec.alias == KernelAlias::None
                        ? " (this kernel cannot run in place)"
                        : " (only an exact in-place update is allowed)");
    }
  }
  return true;
}

} // namespace

bool checkKernelArgs(const KernelContract &spec, const KernelArgs &a,
                     std::string &err) {
  if (!checkCount(err, plural(spec.numInputs, "input", "inputs"),
                  spec.numInputs, a.numInputs, a.inputs) ||
      !checkCount(err, plural(spec.numOutputs, "output", "outputs"),
                  spec.numOutputs, a.numOutputs, a.outputs) ||
      !checkCount(err, "int attributes", spec.numIntAttrs, a.numIntAttrs,
                  a.intAttrs) ||
      !checkCount(err, "float attributes", spec.numFloatAttrs, a.numFloatAttrs,
                  a.floatAttrs))
    return false;
  for (size_t i = 0; i < a.numInputs; ++i)
    if (!checkTensor(err, a.inputs[i], "input", i))
      return false;
  for (size_t i = 0; i < a.numOutputs; ++i)
    if (!checkTensor(err, a.outputs[i], "output", i))
      return false;
  return checkAliasing(err, spec, a);
}

bool callChecked(const KernelContract &contract, KernelFn body,
                 const KernelArgs &args, std::string &error) {
  std::string err;
  if (checkKernelArgs(contract, args, err) && body(args, err))
    return true;
  error = std::string(contract.name) + ": " + err;
  return false;
}

std::string listStr(const int64_t *values, size_t count) {
  std::string s = "[";
  for (size_t i = 0; i < count; ++i) {
    if (i)
      s += ", ";
    s += std::to_string(values[i]);
  }
  return s + "]";
}

bool sameShape(const TensorRef &a, const TensorRef &b) {
  return a.rank == b.rank && std::equal(a.shape, a.shape + a.rank, b.shape);
}

int64_t dimProduct(const TensorRef &t, int begin, int end) {
  int64_t n = 1;
  for (int d = begin; d < end; ++d)
    n *= t.shape[d];
  return n;
}

bool broadcastsTo(const TensorRef &in, const TensorRef &out) {
  if (in.rank > out.rank)
    return false;
  int lead = out.rank - in.rank;
  for (int d = 0; d < in.rank; ++d)
    if (in.shape[d] != 1 && in.shape[d] != out.shape[lead + d])
      return false;
  return true;
}

BroadcastLayout broadcastLayout(const TensorRef &out, const TensorRef *in0,
                                const TensorRef *in1) {
  const TensorRef *ins[2] = {in0, in1};
  BroadcastLayout l;
  l.rank = 0;
  int64_t inStride[2] = {1, 1}; // row-major stride of the current input dim
  int64_t tmpShape[kMaxRank], tmpStrides[2][kMaxRank];
  // Per output dim, innermost first: the input strides (0 where expanded).
  for (int d = out.rank - 1; d >= 0; --d) {
    for (int k = 0; k < 2; ++k) {
      const TensorRef *in = ins[k];
      int id = in ? d - (out.rank - in->rank) : -1;
      int64_t size = id >= 0 ? in->shape[id] : 1;
      tmpStrides[k][d] = size == 1 ? 0 : inStride[k];
      inStride[k] *= size;
    }
    tmpShape[d] = out.shape[d];
  }
  for (int d = 0; d < out.rank; ++d) {
    if (tmpShape[d] == 1)
      continue;
    bool merge = l.rank > 0;
    for (int k = 0; k < 2 && merge; ++k)
      merge = l.strides[k][l.rank - 1] == tmpStrides[k][d] * tmpShape[d];
    if (merge) {
      l.shape[l.rank - 1] *= tmpShape[d];
      for (int k = 0; k < 2; ++k)
        l.strides[k][l.rank - 1] = tmpStrides[k][d];
    } else {
      l.shape[l.rank] = tmpShape[d];
      for (int k = 0; k < 2; ++k)
        l.strides[k][l.rank] = tmpStrides[k][d];
      ++l.rank;
    }
  }
  if (l.rank == 0) {
    l.rank = 1;
    l.shape[0] = 1;
    l.strides[0][0] = l.strides[1][0] = 0;
  }
  return l;
}

bool lastDimRows(std::string &err, const TensorRef &x, const char *role,
                 int64_t &rows, int64_t &cols) {
  if (x.rank < 1)
    return fail(err, role, " needs rank >= 1, got a scalar");
  cols = x.shape[x.rank - 1];
  rows = dimProduct(x, 0, x.rank - 1);
  return true;
}

bool expectDType(std::string &err, const TensorRef &t, const char *role,
                 DType want) {
  if (t.dtype == want)
    return true;
  return fail(err, "unsupported dtype ", dtypeName(t.dtype), " for ", role,
              " (expected ", dtypeName(want), ")");
}

bool expectAllF32(const KernelArgs &args, std::string &err) {
  for (size_t i = 0; i < args.numInputs; ++i)
    if (args.inputs[i].dtype != DType::f32)
      return fail(err, "unsupported dtype ", dtypeName(args.inputs[i].dtype),
                  " for input ", i, " (expected f32)");
  for (size_t i = 0; i < args.numOutputs; ++i)
    if (args.outputs[i].dtype != DType::f32)
      return fail(err, "unsupported dtype ", dtypeName(args.outputs[i].dtype),
                  " for output ", i, " (expected f32)");
  return true;
}

bool expectIndexDType(std::string &err, const TensorRef &t, const char *role) {
  if (isIndexDType(t.dtype))
    return true;
  return fail(err, "unsupported dtype ", dtypeName(t.dtype), " for ", role,
              " (expected i32 or i64)");
}

bool checkBroadcastBinary(std::string &err, const TensorRef &a,
                          const TensorRef &b, const TensorRef &out) {
  int rank = std::max(a.rank, b.rank);
  bool ok = out.rank == rank;
  for (int d = 0; d < rank; ++d) {
    int ia = d - (rank - a.rank), ib = d - (rank - b.rank);
    int64_t da = ia >= 0 ? a.shape[ia] : 1, db = ib >= 0 ? b.shape[ib] : 1;
    if (da != db && da != 1 && db != 1)
      return fail(err, "cannot broadcast shapes ", shapeStr(a), " and ",
                  shapeStr(b));
    ok = ok && out.shape[d] == (da == 1 ? db : da);
  }
  if (!ok)
    return fail(err, "output has shape ", shapeStr(out), " but ", shapeStr(a),
                " and ", shapeStr(b), " broadcast to a different shape");
  return true;
}

bool checkSameShapes(const KernelArgs &args, std::string &err) {
  const TensorRef &out = args.outputs[0];
  for (size_t i = 0; i < args.numInputs; ++i)
    if (!sameShape(args.inputs[i], out))
      return fail(err, "input ", i, " has shape ", shapeStr(args.inputs[i]),
                  " but the output has shape ", shapeStr(out));
  return true;
}

bool checkGeluApprox(std::string &err, int64_t approx, bool &tanhForm) {
  if (approx != 0 && approx != 1)
    return fail(err, "approximate must be 0 (erf) or 1 (tanh), got ", approx);
  tanhForm = approx == 1;
  return true;
}

bool checkBiasRows(std::string &err, const TensorRef &x, const TensorRef &bias,
                   const TensorRef &sum, const TensorRef &out, int64_t &rows,
                   int64_t &cols) {
  if (x.rank < 1)
    return fail(err, "x needs rank >= 1, got a scalar");
  cols = x.dim(-1);
  rows = dimProduct(x, 0, x.rank - 1);
  if (bias.rank != 1 || bias.shape[0] != cols)
    return fail(err, "bias has shape ", shapeStr(bias), " but needs [", cols,
                "] (the last dim of x)");
  for (const TensorRef *t : {&sum, &out})
    if (!sameShape(*t, x))
      return fail(err, t == &sum ? "sum" : "the output", " has shape ",
                  shapeStr(*t), " but x has shape ", shapeStr(x));
  return true;
}

KernelArgs matmulProductArgs(const KernelArgs &args, const TensorRef *out) {
  KernelArgs product = args;
  product.numInputs = 2;
  product.outputs = out;
  product.numOutputs = 1;
  product.numIntAttrs = 2;
  return product;
}

bool checkMatmulBias(const KernelArgs &args, MatmulShape &m, std::string &err) {
  const TensorRef &product = args.outputs[0], &bias = args.inputs[2];
  if (!checkMatmul(matmulProductArgs(args, args.outputs), m, err))
    return false;
  if (bias.rank != 1 || bias.shape[0] != m.N)
    return fail(err, "bias has shape ", shapeStr(bias), " but needs [", m.N,
                "] (the last dim of the product)");
  if (args.numOutputs < 2)
    return true;
  if (!sameShape(args.outputs[1], product))
    return fail(err, "the output has shape ", shapeStr(args.outputs[1]),
                " but the product has shape ", shapeStr(product));
  bool tanhForm = false;
  return checkGeluApprox(err, args.intAttrs[2], tanhForm);
}

bool checkMatmulGeluGrad(const KernelArgs &args, MatmulShape &m,
                         std::string &err) {
  const TensorRef &grad = args.outputs[0], &dbias = args.outputs[1];
  const TensorRef &x = args.inputs[2];
  if (!checkMatmul(matmulProductArgs(args, args.outputs), m, err))
    return false;
  if (!sameShape(x, grad))
    return fail(err, "x has shape ", shapeStr(x), " but the product has shape ",
                shapeStr(grad));
  if (dbias.rank != 1 || dbias.shape[0] != m.N)
    return fail(err, "dbias has shape ", shapeStr(dbias), " but needs [", m.N,
                "] (the last dim of the product)");
  bool tanhForm = false;
  return checkGeluApprox(err, args.intAttrs[2], tanhForm);
}

KernelArgs geluGradStepArgs(const KernelArgs &args, TensorRef (&ins)[2]) {
  ins[0] = args.inputs[2];
  ins[1] = args.outputs[0];
  KernelArgs step = args;
  step.inputs = ins;
  step.numInputs = 2;
  step.numOutputs = 1;
  step.intAttrs = args.intAttrs + 2;
  step.numIntAttrs = 1;
  return step;
}

KernelArgs biasGradStepArgs(const KernelArgs &args, int64_t (&axes)[kMaxRank]) {
  const TensorRef &grad = args.outputs[0];
  for (int d = 0; d + 1 < grad.rank; ++d)
    axes[d] = d;
  KernelArgs step = args;
  step.inputs = args.outputs;
  step.numInputs = 1;
  step.outputs = args.outputs + 1;
  step.numOutputs = 1;
  step.intAttrs = axes;
  step.numIntAttrs = size_t(grad.rank > 0 ? grad.rank - 1 : 0);
  return step;
}

KernelArgs matmulEpilogueArgs(const KernelArgs &args, TensorRef (&ins)[2]) {
  ins[0] = args.outputs[0];
  ins[1] = args.inputs[2];
  KernelArgs rest = args;
  rest.inputs = ins;
  rest.numInputs = 2;
  rest.intAttrs = args.intAttrs + 2;
  rest.numIntAttrs = args.numIntAttrs - 2;
  return rest;
}

bool checkMatmul(const KernelArgs &args, MatmulShape &m, std::string &err) {
  const TensorRef &a = args.inputs[0], &b = args.inputs[1];
  const TensorRef &out = args.outputs[0];
  const int64_t ta = args.intAttrs[0], tb = args.intAttrs[1];
  if ((ta != 0 && ta != 1) || (tb != 0 && tb != 1))
    return fail(err, "transpose flags must be 0 or 1, got ", ta, " and ", tb);
  if (a.rank < 2 || b.rank < 2)
    return fail(err, "operands need rank >= 2, got ", shapeStr(a), " and ",
                shapeStr(b));
  int64_t M = a.dim(-2), K = a.dim(-1), Kb = b.dim(-2), N = b.dim(-1);
  if (ta)
    std::swap(M, K);
  if (tb)
    std::swap(Kb, N);
  if (K != Kb)
    return fail(err, "contraction dims differ: a ", shapeStr(a),
                ta ? " (transposed)" : "", " vs b ", shapeStr(b),
                tb ? " (transposed)" : "");
  // Broadcast batch dims; the output must be batch + [M, N].
  const int batchRank = std::max(a.rank, b.rank) - 2;
  int64_t *batch = m.batch, *strideA = m.strideA, *strideB = m.strideB;
  int64_t numBatches = 1, accA = M * K, accB = K * N;
  for (int d = batchRank - 1; d >= 0; --d) {
    int ia = d - (batchRank - (a.rank - 2)),
        ib = d - (batchRank - (b.rank - 2));
    int64_t da = ia >= 0 ? a.shape[ia] : 1, db = ib >= 0 ? b.shape[ib] : 1;
    if (da != db && da != 1 && db != 1)
      return fail(err, "batch dims of ", shapeStr(a), " and ", shapeStr(b),
                  " do not broadcast");
    batch[d] = da == 1 ? db : da;
    strideA[d] = da == 1 ? 0 : accA;
    strideB[d] = db == 1 ? 0 : accB;
    accA *= da;
    accB *= db;
    numBatches *= batch[d];
  }
  bool shapeOk = out.rank == batchRank + 2 && out.dim(-2) == M &&
                 out.dim(-1) == N &&
                 std::equal(batch, batch + batchRank, out.shape);
  if (!shapeOk) {
    std::vector<int64_t> want(batch, batch + batchRank);
    want.push_back(M);
    want.push_back(N);
    return fail(err, "output has shape ", shapeStr(out), " but ", shapeStr(a),
                " x ", shapeStr(b), " gives ",
                listStr(want.data(), want.size()));
  }
  m.transA = ta;
  m.transB = tb;
  m.M = M;
  m.N = N;
  m.K = K;
  m.batchRank = batchRank;
  m.numBatches = numBatches;
  return true;
}

bool checkCopyBytes(std::string &err, const TensorRef &x, const TensorRef &y) {
  int64_t bytes = x.numel() * int64_t(dtypeSize(x.dtype));
  int64_t outBytes = y.numel() * int64_t(dtypeSize(y.dtype));
  if (bytes != outBytes)
    return fail(err, "x holds ", bytes, " bytes (", dtypeName(x.dtype), " ",
                shapeStr(x), ") but the output holds ", outBytes, " (",
                dtypeName(y.dtype), " ", shapeStr(y), ")");
  return true;
}

bool checkDropout(const KernelArgs &a, std::string &err) {
  const TensorRef &x = a.inputs[0], &y = a.outputs[0];
  if (!sameShape(x, y))
    return fail(err, "output has shape ", shapeStr(y), " but x has shape ",
                shapeStr(x));
  int64_t id = a.intAttrs[0];
  double rate = a.floatAttrs[0];
  if (id < 0 || id > int64_t(UINT32_MAX))
    return fail(err, "id must be in [0, 2^32), got ", id);
  if (!(rate >= 0 && rate <= 1))
    return fail(err, "rate must be in [0, 1], got ", rate);
  const int64_t parts = a.intAttrs[1], dim = a.intAttrs[2];
  if (parts < 1)
    return fail(err, "parts must be at least 1, got ", parts);
  if (parts > 1 && (dim < 0 || dim >= x.rank))
    return fail(err, "part_dim must be a dimension of x, got ", dim);
  if (a.intAttrs[3] < 0)
    return fail(err, "sample_offset must be at least 0, got ", a.intAttrs[3]);
  return true;
}

bool isTrailingShapeOf(const TensorRef &in, const TensorRef &out) {
  const int lead = out.rank - in.rank;
  return lead >= 0 &&
         std::equal(in.shape, in.shape + in.rank, out.shape + lead);
}

const TensorRef &fusedGroupOf(const KernelArgs &a,
                              const fused::Program &program) {
  const int reduction = fused::reductionOf(program);
  for (size_t o = 0; o < a.numOutputs; ++o)
    if (program.outputs[o] != reduction)
      return a.outputs[o];
  // Only the sum is stored: the group is its largest input (the first op
  // of a group reads only inputs, and its result has its largest one's
  // shape).
  size_t largest = 0;
  for (size_t i = 1; i < a.numInputs; ++i)
    if (a.inputs[i].rank > a.inputs[largest].rank)
      largest = i;
  return a.inputs[largest];
}

bool checkFusedElementwise(const KernelArgs &a, fused::Program &program,
                           std::string &err) {
  if (!fused::decode(a.intAttrs, a.numIntAttrs, int(a.numInputs),
                     int(a.numOutputs), program, err))
    return false;
  auto isStorage = [](DType t) {
    return t == DType::f32 || t == DType::bf16 || t == DType::f16;
  };
  const TensorRef &group = fusedGroupOf(a, program);
  const int reduction = fused::reductionOf(program);
  for (size_t o = 0; o < a.numOutputs; ++o) {
    const TensorRef &out = a.outputs[o];
    const bool reduced = program.outputs[o] == reduction;
    if (!isStorage(out.dtype) ||
        (reduced ? !isTrailingShapeOf(out, group) : !sameShape(out, group)))
      return fail(err,
                  "outputs must be f32, f16 or bf16 tensors of one "
                  "shape (a sum's: its trailing dims), got ",
                  shapeStr(group), " and ", shapeStr(out));
  }
  for (size_t i = 0; i < a.numInputs; ++i) {
    const TensorRef &in = a.inputs[i];
    if (!isStorage(in.dtype) || !isTrailingShapeOf(in, group))
      return fail(err, "input ", i, " of shape ", shapeStr(in),
                  " must be an f32, f16 or bf16 tensor of the outputs' "
                  "shape ",
                  shapeStr(group), " or its trailing dims");
  }
  return true;
}

} // namespace dsc::rt
