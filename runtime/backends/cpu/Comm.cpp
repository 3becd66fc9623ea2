//===- Comm.cpp - comm.all_reduce, reduce_scatter, all_gather, ... --------===//
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

void *streamOf(const KernelArgs &args) {
  return args.ctx ? args.ctx->stream : nullptr;
}

} // namespace

bool commAllReduceBody(const KernelArgs &args, std::string &err) {
  Communicator *comm = nullptr;
  float scale = 1;
  const TensorRef &x = args.inputs[0], &out = args.outputs[0];
  if (!checkCollectiveDTypes(err, x, out, true) ||
      !checkCommunicator(args, err, comm) ||
      !checkCollectiveScale(args, err, scale))
    return false;
  if (!checkCollectiveCounts(err, x, out, Counts::Same, comm->size()) ||
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
  if (!checkCollectiveDTypes(err, x, out, true) ||
      !checkCommunicator(args, err, comm) ||
      !checkCollectiveScale(args, err, scale))
    return false;
  if (!checkCollectiveCounts(err, x, out, Counts::XHoldsAll, comm->size()) ||
      !comm->reduceScatterSum(x.data, out.data, size_t(out.numel()), x.dtype,
                              streamOf(args), err))
    return false;
  scaleInPlace(out, scale);
  return true;
}

bool commAllGatherBody(const KernelArgs &args, std::string &err) {
  Communicator *comm = nullptr;
  const TensorRef &x = args.inputs[0], &out = args.outputs[0];
  if (!checkCollectiveDTypes(err, x, out, false) ||
      !checkCommunicator(args, err, comm))
    return false;
  return checkCollectiveCounts(err, x, out, Counts::OutHoldsAll,
                               comm->size()) &&
         comm->allGather(x.data, out.data, size_t(x.numel()), x.dtype,
                         streamOf(args), err);
}

bool commAllToAllBody(const KernelArgs &args, std::string &err) {
  Communicator *comm = nullptr;
  const TensorRef &x = args.inputs[0], &out = args.outputs[0];
  if (!checkCollectiveDTypes(err, x, out, false) ||
      !checkCommunicator(args, err, comm))
    return false;
  return checkCollectiveCounts(err, x, out, Counts::Blocks, comm->size()) &&
         comm->allToAll(x.data, out.data, size_t(x.numel() / comm->size()),
                        x.dtype, streamOf(args), err);
}

bool commBroadcastBody(const KernelArgs &args, std::string &err) {
  Communicator *comm = nullptr;
  const TensorRef &x = args.inputs[0], &out = args.outputs[0];
  if (!checkCollectiveDTypes(err, x, out, false) ||
      !checkCommunicator(args, err, comm))
    return false;
  int64_t root = args.intAttrs[0];
  if (root < 0 || root >= comm->size())
    return fail(err, "root ", root, " is outside world size ", comm->size());
  if (!checkCollectiveCounts(err, x, out, Counts::Same, comm->size()))
    return false;
  if (!sameBuffer(x, out))
    std::memcpy(out.data, x.data, size_t(x.numel()) * dtypeSize(x.dtype));
  return comm->broadcast(out.data, size_t(out.numel()), x.dtype, int(root),
                         streamOf(args), err);
}

bool commSendBody(const KernelArgs &args, std::string &err) {
  Communicator *comm = nullptr;
  int peer = 0, tag = 0;
  const TensorRef &x = args.inputs[0];
  return checkPipelineMessage(args, err, comm, peer, tag) &&
         comm->send(x.data, size_t(x.numel()), x.dtype, peer, tag, err);
}

bool commRecvBody(const KernelArgs &args, std::string &err) {
  Communicator *comm = nullptr;
  int peer = 0, tag = 0;
  const TensorRef &out = args.outputs[0];
  return checkPipelineMessage(args, err, comm, peer, tag) &&
         comm->recv(out.data, size_t(out.numel()), out.dtype, peer, tag, err);
}

bool distShardBody(const KernelArgs &args, std::string &err) {
  const TensorRef &x = args.inputs[0], &out = args.outputs[0];
  if (!checkShard(args, err))
    return false;
  const int rank = args.ctx ? args.ctx->rank : 0;
  const size_t bytes = size_t(out.numel()) * dtypeSize(x.dtype);
  std::memcpy(out.data,
              static_cast<const char *>(x.data) + size_t(rank) * bytes, bytes);
  return true;
}

} // namespace dsc::rt::cpu
