//===- Comm.cpp - comm.all_reduce, reduce_scatter, all_gather, ... --------===//
//
// The plan's collectives on the comm stream through NCCL (Nccl.h), made at
// the first collective from the run's host communicator; the same checks
// and lines as the CPU backend's (runtime/kernels/CommKernelChecks.cpp). A
// sum's scale is a kernel after NCCL's sum, on the same stream, rounding
// once as the CPU does. dist.shard is a device-to-device copy of this
// rank's block.
//
//===----------------------------------------------------------------------===//
#include "runtime/backends/cuda/CudaDevice.h"
#include "runtime/backends/cuda/CudaKernels.h"
#include "runtime/kernels/KernelChecks.h"

#include <vector>

namespace dsc::rt::cuda {
namespace {

// The NCCL communicator for the run (after the host one was checked).
NcclCommunicator *ncclOf(const KernelArgs &args, Communicator *host,
                         std::string &err) {
  auto *h = static_cast<const CudaHandles *>(args.ctx->handles);
  if (!h || !h->owner) {
    fail(err, "needs the CUDA backend's stream handles");
    return nullptr;
  }
  return static_cast<CudaDevice *>(h->owner)->ncclFor(host, err);
}

bool copyAsync(const KernelArgs &args, void *dst, const void *src, size_t bytes,
               std::string &err) {
  if (bytes == 0 || dst == src)
    return true;
  cudaError_t status =
      cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault,
                      static_cast<cudaStream_t>(args.ctx->stream));
  return status == cudaSuccess ||
         fail(err, "cudaMemcpyAsync: ", cudaGetErrorString(status));
}

} // namespace

// all_reduce and reduce_scatter: NCCL's sum, then the scale.
template <typename Sum>
static bool scaledSum(const KernelArgs &args, Counts relation, Sum sum,
                      std::string &err) {
  Communicator *host = nullptr;
  float scale = 1;
  const TensorRef &x = args.inputs[0], &out = args.outputs[0];
  if (!checkCollectiveDTypes(err, x, out, true) ||
      !checkCommunicator(args, err, host) ||
      !checkCollectiveScale(args, err, scale) ||
      !checkCollectiveCounts(err, x, out, relation, host->size()))
    return false;
  NcclCommunicator *nccl = ncclOf(args, host, err);
  return nccl && sum(*nccl, x, out) &&
         scaleOnStream(out.data, out.dtype, out.numel(), scale,
                       args.ctx->stream, err);
}

bool commAllReduceBody(const KernelArgs &args, std::string &err) {
  return scaledSum(
      args, Counts::Same,
      [&](NcclCommunicator &c, const TensorRef &x, const TensorRef &out) {
        return c.allReduceSum(x.data, out.data, size_t(x.numel()), x.dtype,
                              args.ctx->stream, err);
      },
      err);
}

bool commReduceScatterBody(const KernelArgs &args, std::string &err) {
  return scaledSum(
      args, Counts::XHoldsAll,
      [&](NcclCommunicator &c, const TensorRef &x, const TensorRef &out) {
        return c.reduceScatterSum(x.data, out.data, size_t(out.numel()),
                                  x.dtype, args.ctx->stream, err);
      },
      err);
}

bool commAllGatherBody(const KernelArgs &args, std::string &err) {
  Communicator *host = nullptr;
  const TensorRef &x = args.inputs[0], &out = args.outputs[0];
  if (!checkCollectiveDTypes(err, x, out, false) ||
      !checkCommunicator(args, err, host) ||
      !checkCollectiveCounts(err, x, out, Counts::OutHoldsAll, host->size()))
    return false;
  NcclCommunicator *nccl = ncclOf(args, host, err);
  return nccl && nccl->allGather(x.data, out.data, size_t(x.numel()), x.dtype,
                                 args.ctx->stream, err);
}

bool commAllToAllBody(const KernelArgs &args, std::string &err) {
  Communicator *host = nullptr;
  const TensorRef &x = args.inputs[0], &out = args.outputs[0];
  if (!checkCollectiveDTypes(err, x, out, false) ||
      !checkCommunicator(args, err, host) ||
      !checkCollectiveCounts(err, x, out, Counts::Blocks, host->size()))
    return false;
  NcclCommunicator *nccl = ncclOf(args, host, err);
  return nccl &&
         nccl->allToAll(x.data, out.data, size_t(x.numel() / host->size()),
                        x.dtype, args.ctx->stream, err);
}

bool commBroadcastBody(const KernelArgs &args, std::string &err) {
  Communicator *host = nullptr;
  const TensorRef &x = args.inputs[0], &out = args.outputs[0];
  if (!checkCollectiveDTypes(err, x, out, false) ||
      !checkCommunicator(args, err, host))
    return false;
  int64_t root = args.intAttrs[0];
  if (root < 0 || root >= host->size())
    return fail(err, "root ", root, " is outside world size ", host->size());
  if (!checkCollectiveCounts(err, x, out, Counts::Same, host->size()))
    return false;
  NcclCommunicator *nccl = ncclOf(args, host, err);
  return nccl &&
         copyAsync(args, out.data, x.data,
                   size_t(x.numel()) * dtypeSize(x.dtype), err) &&
         nccl->broadcast(out.data, size_t(out.numel()), x.dtype, int(root),
                         args.ctx->stream, err);
}

// A pipeline stage's messages go through host memory over the host
// communicator (MPI): the copy out waits for the comm stream, the message
// is buffered (Communicator::send), and a receive lands in the host copy
// before the stream copies it in. NCCL's send/recv would keep the bytes on
// the device, but a blocking ncclSend on the one comm stream could wait on
// a receive queued behind it on the peer; docs/pipeline.md.
static bool stagedCopy(const KernelArgs &args, void *dst, const void *src,
                       size_t bytes, std::string &err) {
  auto stream = static_cast<cudaStream_t>(args.ctx->stream);
  cudaError_t status =
      cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream);
  if (status == cudaSuccess)
    status = cudaStreamSynchronize(stream);
  return status == cudaSuccess ||
         fail(err, "staging a pipeline message: ", cudaGetErrorString(status));
}

bool commSendBody(const KernelArgs &args, std::string &err) {
  Communicator *host = nullptr;
  int peer = 0, tag = 0;
  const TensorRef &x = args.inputs[0];
  if (!checkPipelineMessage(args, err, host, peer, tag))
    return false;
  std::vector<char> staged(size_t(x.numel()) * dtypeSize(x.dtype));
  return stagedCopy(args, staged.data(), x.data, staged.size(), err) &&
         host->send(staged.data(), size_t(x.numel()), x.dtype, peer, tag, err);
}

bool commRecvBody(const KernelArgs &args, std::string &err) {
  Communicator *host = nullptr;
  int peer = 0, tag = 0;
  const TensorRef &out = args.outputs[0];
  if (!checkPipelineMessage(args, err, host, peer, tag))
    return false;
  std::vector<char> staged(size_t(out.numel()) * dtypeSize(out.dtype));
  return host->recv(staged.data(), size_t(out.numel()), out.dtype, peer, tag,
                    err) &&
         stagedCopy(args, out.data, staged.data(), staged.size(), err);
}

bool distShardBody(const KernelArgs &args, std::string &err) {
  const TensorRef &x = args.inputs[0], &out = args.outputs[0];
  if (!checkShard(args, err))
    return false;
  const size_t bytes = size_t(out.numel()) * dtypeSize(x.dtype);
  return copyAsync(args, out.data,
                   static_cast<const char *>(x.data) +
                       size_t(args.ctx->rank) * bytes,
                   bytes, err);
}

} // namespace dsc::rt::cuda
