//===- CommKernelChecks.cpp - the collectives' operands -------------------===//
//
// What comm.* and dist.shard check before they communicate (KernelChecks.h),
// on every backend: the run's communicator, dtypes and element counts.
//
//===----------------------------------------------------------------------===//
#include "runtime/comm/Communicator.h"
#include "runtime/kernels/KernelChecks.h"

#include <cmath>

namespace dsc::rt {

bool checkCommunicator(const KernelArgs &args, std::string &err,
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

bool checkPipelineMessage(const KernelArgs &args, std::string &err,
                          Communicator *&comm, int &peer, int &tag) {
  if (!checkCommunicator(args, err, comm))
    return false;
  const int64_t p = args.intAttrs[0], transfer = args.intAttrs[1],
                micro = args.intAttrs[2];
  if (p < 0 || p >= comm->size() || p == comm->rank())
    return fail(err, "peer stage ", p, " is not another of the ", comm->size(),
                " stages (this is stage ", comm->rank(), ")");
  if (transfer < 0 || transfer >= (int64_t(1) << 14) || micro < 0 ||
      micro >= (int64_t(1) << 16))
    return fail(err, "transfer ", transfer, " or micro-batch ", micro,
                " is outside the message tags (transfer < 16384, "
                "micro-batch < 65536)");
  peer = int(p);
  tag = int(transfer << 16 | micro);
  return true;
}

bool checkCollectiveScale(const KernelArgs &args, std::string &err,
                          float &scale) {
  double s = args.floatAttrs[0];
  if (!std::isfinite(s))
    return fail(err, "scale must be finite, got ", s);
  scale = float(s);
  return true;
}

bool checkCollectiveDTypes(std::string &err, const TensorRef &x,
                           const TensorRef &out, bool sum) {
  if (out.dtype != x.dtype)
    return fail(err, "out has dtype ", dtypeName(out.dtype), " but x has ",
                dtypeName(x.dtype));
  if (sum && !isFloat(x.dtype))
    return fail(err, "unsupported dtype ", dtypeName(x.dtype),
                " for x (expected f32, f64, f16 or bf16)");
  return true;
}

bool checkCollectiveCounts(std::string &err, const TensorRef &x,
                           const TensorRef &out, Counts relation, int ranks) {
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
  case Counts::Blocks:
    if (nx == nout && ranks > 0 && nx % ranks == 0)
      return true;
    return fail(err, "x has shape ", shapeStr(x), " and out has shape ",
                shapeStr(out), "; with ", ranks,
                ranks == 1 ? " rank" : " ranks",
                " both need the same multiple of ", ranks,
                " elements (one block a rank)");
  }
  return false;
}

bool checkShard(const KernelArgs &args, std::string &err) {
  const TensorRef &x = args.inputs[0], &out = args.outputs[0];
  if (!checkCollectiveDTypes(err, x, out, false))
    return false;
  int64_t ranks = args.intAttrs[0];
  int worldSize = args.ctx ? args.ctx->worldSize : 1;
  if (ranks != worldSize)
    return fail(err, "compiled for ", ranks, " ranks, running on ", worldSize);
  if (x.numel() != out.numel() * ranks)
    return fail(err, "x has ", x.numel(), " elements, not ", ranks, " x ",
                out.numel());
  return true;
}

} // namespace dsc::rt
