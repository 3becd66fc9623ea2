//===- Comm.cpp - comm.all_reduce, reduce_scatter, all_gather, broadcast --===//
//
// The plan's collectives over host buffers, through the run's Communicator
// (KernelContext::comm) with the element type of the operands and the comm
// stream's queue (KernelContext::stream). The Session runs them on the comm
// stream's worker, so compute on the other streams goes on meanwhile. Sums
// (all_reduce, reduce_scatter) take f32, f64, f16 and bf16, each a variant
// of the kernel table; gathers, broadcasts and dist.shard move any dtype. A
// communicator error (a timeout, a lost rank) is the kernel's error line, which
// names the rank, the collective and its sequence number.
//
//===----------------------------------------------------------------------===//

#include "runtime/backends/cpu/CpuCommon.h"
#include "runtime/comm/Communicator.h"
#include "runtime/core/Half.h"

#include <cstring>

namespace dsc::rt::cpu {
namespace {

/// The run's communicator, checked against the run's world size.
bool communicator(const KernelArgs &args, std::string &err,
                  Communicator *&comm) {
  comm = args.ctx ? args.ctx->comm : nullptr;
  if (!comm)
    return fail(err, "no communicator (collectives run inside a Session)");
  if (comm->size() != args.ctx->worldSize)
    return fail(err, "the communicator has ", comm->size(),
                comm->size() == 1 ? " rank" : " ranks", " but the run has ",
                args.ctx->worldSize);
  return true;
}

bool scaleAttr(const KernelArgs &args, std::string &err, float &scale) {
  double s = args.floatAttrs[0];
  if (!std::isfinite(s))
    return fail(err, "scale must be finite, got ", s);
  scale = float(s);
  return true;
}

template <typename T, typename Load, typename Store>
void scaleAll(void *data, int64_t n, double scale, Load load, Store store) {
  T *p = static_cast<T *>(data);
  parallelFor(n, 1 << 15, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      p[i] = store(load(p[i]) * scale);
  });
}

/// data[i] *= scale in the tensor's own format (16-bit: through float,
/// rounded once).
void scaleInPlace(const TensorRef &t, float scale) {
  if (scale == 1.0f)
    return;
  int64_t n = t.numel();
  switch (t.dtype) {
  case DType::f32:
    return scaleAll<float>(
        t.data, n, scale, [](float v) { return v; },
        [](double v) { return float(v); });
  case DType::f64:
    return scaleAll<double>(
        t.data, n, double(scale), [](double v) { return v; },
        [](double v) { return v; });
  case DType::f16:
    return scaleAll<uint16_t>(t.data, n, scale, f16ToFloat,
                              [](double v) { return floatToF16(float(v)); });
  case DType::bf16:
    return scaleAll<uint16_t>(t.data, n, scale, bf16ToFloat,
                              [](double v) { return floatToBf16(float(v)); });
  default:
    return;
  }
}

/// x and out have the same dtype; sums also need a float one.
bool dtypes(std::string &err, const TensorRef &x, const TensorRef &out,
            bool sum) {
  if (out.dtype != x.dtype)
    return fail(err, "out has dtype ", dtypeName(out.dtype), " but x has ",
                dtypeName(x.dtype));
  if (sum && !isFloat(x.dtype))
    return fail(err, "unsupported dtype ", dtypeName(x.dtype),
                " for x (expected f32, f64, f16 or bf16)");
  return true;
}

void *streamOf(const KernelArgs &args) {
  return args.ctx ? args.ctx->stream : nullptr;
}

/// How x's and out's element counts relate.
enum class Counts { Same, XHoldsAll, OutHoldsAll };

bool counts(std::string &err, const TensorRef &x, const TensorRef &out,
            Counts relation, int ranks) {
  int64_t nx = x.numel(), nout = out.numel();
  switch (relation) {
  case Counts::Same:
    if (nx == nout)
      return true;
    return fail(err, "x has shape ", shapeStr(x), " but out has shape ",
                shapeStr(out), " (the same element count expected)");
  case Counts::XHoldsAll:
    if (nx == ranks * nout)
      return true;
    return fail(err, "x has shape ", shapeStr(x), " and out has shape ",
                shapeStr(out), "; with ", ranks,
                ranks == 1 ? " rank" : " ranks", " x needs ", ranks, " x ",
                nout, " = ", ranks * nout, " elements");
  case Counts::OutHoldsAll:
    if (nout == ranks * nx)
      return true;
    return fail(err, "x has shape ", shapeStr(x), " and out has shape ",
                shapeStr(out), "; with ", ranks,
                ranks == 1 ? " rank" : " ranks", " out needs ", ranks, " x ",
                nx, " = ", ranks * nx, " elements");
  }
  return false;
}

} // namespace

bool commAllReduceBody(const KernelArgs &args, std::string &err) {
  Communicator *comm = nullptr;
  float scale = 1;
  const TensorRef &x = args.inputs[0], &out = args.outputs[0];
  if (!dtypes(err, x, out, true) || !communicator(args, err, comm) ||
      !scaleAttr(args, err, scale))
    return false;
  if (!counts(err, x, out, Counts::Same, comm->size()) ||
      !comm->allReduceSum(x.data, out.data, size_t(x.numel()), x.dtype,
                          streamOf(args), err))
    return false;
  scaleInPlace(out, scale);
  return true;
}

bool commReduceScatterBody(const KernelArgs &args, std::string &err) {
  Communicator *comm = nullptr;
  float scale = 1;
  const TensorRef &x = args.inputs[0], &out = args.outputs[0];
  if (!dtypes(err, x, out, true) || !communicator(args, err, comm) ||
      !scaleAttr(args, err, scale))
    return false;
  if (!counts(err, x, out, Counts::XHoldsAll, comm->size()) ||
      !comm->reduceScatterSum(x.data, out.data, size_t(out.numel()), x.dtype,
                              streamOf(args), err))
    return false;
  scaleInPlace(out, scale);
  return true;
}

bool commAllGatherBody(const KernelArgs &args, std::string &err) {
  Communicator *comm = nullptr;
  const TensorRef &x = args.inputs[0], &out = args.outputs[0];
  if (!dtypes(err, x, out, false) || !communicator(args, err, comm))
    return false;
  return counts(err, x, out, Counts::OutHoldsAll, comm->size()) &&
         comm->allGather(x.data, out.data, size_t(x.numel()), x.dtype,
                         streamOf(args), err);
}

bool commBroadcastBody(const KernelArgs &args, std::string &err) {
  Communicator *comm = nullptr;
  const TensorRef &x = args.inputs[0], &out = args.outputs[0];
  if (!dtypes(err, x, out, false) || !communicator(args, err, comm))
    return false;
  int64_t root = args.intAttrs[0];
  if (root < 0 || root >= comm->size())
    return fail(err, "root ", root, " is outside world size ", comm->size());
  if (!counts(err, x, out, Counts::Same, comm->size()))
    return false;
  if (!sameBuffer(x, out))
    std::memcpy(out.data, x.data, size_t(x.numel()) * dtypeSize(x.dtype));
  return comm->broadcast(out.data, size_t(out.numel()), x.dtype, int(root),
                         streamOf(args), err);
}

bool distShardBody(const KernelArgs &args, std::string &err) {
  const TensorRef &x = args.inputs[0], &out = args.outputs[0];
  if (!dtypes(err, x, out, false))
    return false;
  int64_t ranks = args.intAttrs[0];
  int rank = args.ctx ? args.ctx->rank : 0;
  int worldSize = args.ctx ? args.ctx->worldSize : 1;
  if (ranks != worldSize)
    return fail(err, "compiled for ", ranks, " ranks, running on ", worldSize);
  if (x.numel() != out.numel() * ranks)
    return fail(err, "x has ", x.numel(), " elements, not ", ranks, " x ",
                out.numel());
  const size_t bytes = size_t(out.numel()) * dtypeSize(x.dtype);
  std::memcpy(out.data,
              static_cast<const char *>(x.data) + size_t(rank) * bytes, bytes);
  return true;
}

} // namespace dsc::rt::cpu
