//===- Comm.cpp - comm.all_reduce, reduce_scatter, all_gather, broadcast --===//
//
// The plan's collectives over host buffers, through the run's Communicator
// (KernelContext::comm). The Session runs them on the comm stream's worker,
// so compute on the other streams goes on meanwhile. A communicator error
// (a timeout, a lost rank) is the kernel's error line, which names the rank,
// the collective and its sequence number.
//
//===----------------------------------------------------------------------===//

#include "runtime/backends/cpu/CpuCommon.h"
#include "runtime/comm/Communicator.h"

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

void scaleInPlace(float *data, int64_t n, float scale) {
  if (scale == 1.0f)
    return;
  parallelFor(n, 1 << 15, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      data[i] *= scale;
  });
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
  if (!expectAllF32(args, err) || !communicator(args, err, comm) ||
      !scaleAttr(args, err, scale))
    return false;
  const TensorRef &x = args.inputs[0], &out = args.outputs[0];
  if (!counts(err, x, out, Counts::Same, comm->size()) ||
      !comm->allReduceSum(x.f32(), out.f32(), size_t(x.numel()), err))
    return false;
  scaleInPlace(out.f32(), out.numel(), scale);
  return true;
}

bool commReduceScatterBody(const KernelArgs &args, std::string &err) {
  Communicator *comm = nullptr;
  float scale = 1;
  if (!expectAllF32(args, err) || !communicator(args, err, comm) ||
      !scaleAttr(args, err, scale))
    return false;
  const TensorRef &x = args.inputs[0], &out = args.outputs[0];
  if (!counts(err, x, out, Counts::XHoldsAll, comm->size()) ||
      !comm->reduceScatterSum(x.f32(), out.f32(), size_t(out.numel()), err))
    return false;
  scaleInPlace(out.f32(), out.numel(), scale);
  return true;
}

bool commAllGatherBody(const KernelArgs &args, std::string &err) {
  Communicator *comm = nullptr;
  if (!expectAllF32(args, err) || !communicator(args, err, comm))
    return false;
  const TensorRef &x = args.inputs[0], &out = args.outputs[0];
  return counts(err, x, out, Counts::OutHoldsAll, comm->size()) &&
         comm->allGather(x.f32(), out.f32(), size_t(x.numel()), err);
}

bool commBroadcastBody(const KernelArgs &args, std::string &err) {
  Communicator *comm = nullptr;
  if (!expectAllF32(args, err) || !communicator(args, err, comm))
    return false;
  const TensorRef &x = args.inputs[0], &out = args.outputs[0];
  int64_t root = args.intAttrs[0];
  if (root < 0 || root >= comm->size())
    return fail(err, "root ", root, " is outside world size ", comm->size());
  if (!counts(err, x, out, Counts::Same, comm->size()))
    return false;
  if (!sameBuffer(x, out))
    std::copy(x.f32(), x.f32() + x.numel(), out.f32());
  return comm->broadcast(out.f32(), size_t(out.numel()), int(root), err);
}

bool distShardBody(const KernelArgs &args, std::string &err) {
  if (!expectAllF32(args, err))
    return false;
  const TensorRef &x = args.inputs[0], &out = args.outputs[0];
  int64_t ranks = args.intAttrs[0];
  int rank = args.ctx ? args.ctx->rank : 0;
  int worldSize = args.ctx ? args.ctx->worldSize : 1;
  if (ranks != worldSize)
    return fail(err, "compiled for ", ranks, " ranks, running on ", worldSize);
  if (x.numel() != out.numel() * ranks)
    return fail(err, "x has ", x.numel(), " elements, not ", ranks, " x ",
                out.numel());
  const float *from = x.f32() + int64_t(rank) * out.numel();
  std::copy(from, from + out.numel(), out.f32());
  return true;
}

} // namespace dsc::rt::cpu
