//===- Nccl.cpp - the ranks' collectives on the GPU through NCCL ----------===//
#include "runtime/backends/cuda/Nccl.h"
#include "runtime/backends/cuda/CollectiveWatch.h"
#include "runtime/backends/cuda/CudaKernels.h"
#include "runtime/backends/cuda/SharedLibrary.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <vector>

namespace dsc::rt::cuda {
namespace {

struct NcclApi {
  decltype(&ncclGetUniqueId) getUniqueId;
  decltype(&ncclCommInitRank) commInitRank;
  decltype(&ncclCommDestroy) commDestroy;
  decltype(&ncclCommAbort) commAbort;
  decltype(&ncclCommGetAsyncError) commGetAsyncError;
  decltype(&ncclGetErrorString) errorString;
  decltype(&ncclAllReduce) allReduce;
  decltype(&ncclReduceScatter) reduceScatter;
  decltype(&ncclAllGather) allGather;
  decltype(&ncclBroadcast) broadcast;
  decltype(&ncclSend) send;
  decltype(&ncclRecv) recv;
  decltype(&ncclGroupStart) groupStart;
  decltype(&ncclGroupEnd) groupEnd;
  std::string error;
};

NcclApi loadNccl() {
  NcclApi a{};
  void *lib = openLibrary({"libnccl.so.2"}, "NCCL", a.error);
  if (!lib)
    return a;
  std::string &e = a.error;
  (void)(bindSymbol(lib, "ncclGetUniqueId", a.getUniqueId, "NCCL", e) &&
         bindSymbol(lib, "ncclCommInitRank", a.commInitRank, "NCCL", e) &&
         bindSymbol(lib, "ncclCommDestroy", a.commDestroy, "NCCL", e) &&
         bindSymbol(lib, "ncclCommAbort", a.commAbort, "NCCL", e) &&
         bindSymbol(lib, "ncclCommGetAsyncError", a.commGetAsyncError, "NCCL",
                    e) &&
         bindSymbol(lib, "ncclGetErrorString", a.errorString, "NCCL", e) &&
         bindSymbol(lib, "ncclAllReduce", a.allReduce, "NCCL", e) &&
         bindSymbol(lib, "ncclReduceScatter", a.reduceScatter, "NCCL", e) &&
         bindSymbol(lib, "ncclAllGather", a.allGather, "NCCL", e) &&
         bindSymbol(lib, "ncclBroadcast", a.broadcast, "NCCL", e) &&
         bindSymbol(lib, "ncclSend", a.send, "NCCL", e) &&
         bindSymbol(lib, "ncclRecv", a.recv, "NCCL", e) &&
         bindSymbol(lib, "ncclGroupStart", a.groupStart, "NCCL", e) &&
         bindSymbol(lib, "ncclGroupEnd", a.groupEnd, "NCCL", e));
  return a;
}

const NcclApi &nccl() {
  static const NcclApi api = loadNccl();
  return api;
}

bool ncclType(DType t, ncclDataType_t &out) {
  switch (t) {
  case DType::f32:
    out = ncclFloat32;
    return true;
  case DType::f64:
    out = ncclFloat64;
    return true;
  case DType::f16:
    out = ncclFloat16;
    return true;
  case DType::bf16:
    out = ncclBfloat16;
    return true;
  case DType::i32:
    out = ncclInt32;
    return true;
  case DType::i64:
    out = ncclInt64;
    return true;
  }
  return false;
}

class Impl final : public NcclCommunicator {
public:
  Impl(ncclComm_t comm, const Communicator &host, uint32_t *word)
      : comm_(comm), rank_(host.rank()), size_(host.size()), word_(word) {
    setTimeout(host.timeout());
    nameAs(host); // a group's lines name the group
  }
  ~Impl() override {
    if (comm_)
      (aborted_ ? nccl().commAbort : nccl().commDestroy)(comm_);
    cudaFreeHost(word_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char *kind() const override { return "nccl"; }
  bool barrier(std::string &error) override {
    error = "the NCCL communicator has no barrier (use the host's)";
    return false;
  }
  std::unique_ptr<Communicator> doSplit(int, int, std::string &error) override {
    error = "the NCCL communicator is not split: make a group's from the "
            "host's group (NcclCommunicator::create)";
    return nullptr;
  }
  std::string asyncError() override {
    if (!comm_)
      return "the communicator was aborted";
    ncclResult_t async = ncclSuccess;
    if (nccl().commGetAsyncError(comm_, &async) != ncclSuccess)
      return "ncclCommGetAsyncError failed";
    return async == ncclSuccess || async == ncclInProgress
               ? std::string()
               : nccl().errorString(async);
  }
  void abort(const std::string &why) override {
    if (!aborted_) {
      nccl().commAbort(comm_);
      comm_ = nullptr;
      aborted_ = true;
      markFailed(why.c_str());
    }
  }

  void startRun() override {
    completedBefore_ += CollectiveWatch::completed(progress());
    *static_cast<volatile uint32_t *>(word_) = 0; // no run is in flight
    names_.clear();
  }
  uint32_t issued() const override { return uint32_t(names_.size()); }
  const char *issuedName(uint32_t k) const override {
    return k >= 1 && k <= names_.size() ? names_[k - 1] : "collective";
  }
  uint32_t progress() const override {
    return *static_cast<const volatile uint32_t *>(word_);
  }
  uint64_t completedBefore() const override { return completedBefore_; }

protected:
  bool doAllReduceSum(const void *in, void *out, size_t count, DType dtype,
                      void *stream, std::string &error) override {
    return issue("all_reduce", error, in, out, count, 0, dtype, stream,
                 [&](ncclDataType_t t, cudaStream_t s) {
                   return nccl().allReduce(in, out, count, t, ncclSum, comm_,
                                           s);
                 });
  }
  bool doReduceScatterSum(const void *in, void *out, size_t count, DType dtype,
                          void *stream, std::string &error) override {
    return issue("reduce_scatter", error, in, out, count, 0, dtype, stream,
                 [&](ncclDataType_t t, cudaStream_t s) {
                   return nccl().reduceScatter(in, out, count, t, ncclSum,
                                               comm_, s);
                 });
  }
  bool doAllGather(const void *in, void *out, size_t count, DType dtype,
                   void *stream, std::string &error) override {
    return issue("all_gather", error, in, out, count, 0, dtype, stream,
                 [&](ncclDataType_t t, cudaStream_t s) {
                   return nccl().allGather(in, out, count, t, comm_, s);
                 });
  }
  // NCCL has no all-to-all: one grouped send and receive per peer.
  bool doAllToAll(const void *in, void *out, size_t count, DType dtype,
                  void *stream, std::string &error) override {
    const size_t block = count * dtypeSize(dtype);
    return issue(
        "all_to_all", error, in, out, count, 0, dtype, stream,
        [&](ncclDataType_t t, cudaStream_t s) {
          ncclResult_t r = nccl().groupStart();
          for (int peer = 0; r == ncclSuccess && peer < size(); ++peer) {
            r = nccl().send(static_cast<const char *>(in) +
                                size_t(peer) * block,
                            count, t, peer, comm_, s);
            if (r == ncclSuccess)
              r = nccl().recv(static_cast<char *>(out) + size_t(peer) * block,
                              count, t, peer, comm_, s);
          }
          ncclResult_t end = nccl().groupEnd();
          return r != ncclSuccess ? r : end;
        });
  }
  bool doBroadcast(void *data, size_t count, DType dtype, int root,
                   void *stream, std::string &error) override {
    return issue("broadcast", error, data, data, count, root, dtype, stream,
                 [&](ncclDataType_t t, cudaStream_t s) {
                   return nccl().broadcast(data, data, count, t, root, comm_,
                                           s);
                 });
  }

private:
  template <typename Call>
  bool issue(const char *name, std::string &error, const void *in,
             const void *out, size_t count, int root, DType dtype, void *stream,
             Call call) {
    if (!begin(name, error, in, out, count, root, dtype))
      return false;
    ncclDataType_t t;
    if (!stream || !ncclType(dtype, t)) {
      error = prefix(name) + (stream ? ": no NCCL type for this dtype"
                                     : ": NCCL needs a CUDA stream");
      return false;
    }
    // Numbered whether or not it moves anything, as the CPU counts.
    names_.push_back(name);
    const auto k = uint32_t(names_.size());
    std::string why;
    if (count > 0) {
      if (!writeWordOnStream(word_, 2 * k - 1, stream, why)) {
        error = prefix(name) + ": its start marker: " + why;
        return false;
      }
      ncclResult_t r = call(t, static_cast<cudaStream_t>(stream));
      if (r != ncclSuccess) {
        error = prefix(name) + " failed: " + nccl().errorString(r);
        markFailed(name);
        return false;
      }
    }
    if (!writeWordOnStream(word_, 2 * k, stream, why)) {
      error = prefix(name) + ": its end marker: " + why;
      return false;
    }
    return true;
  }

  ncclComm_t comm_;
  int rank_, size_;
  bool aborted_ = false;
  uint32_t *word_;                  ///< the progress word, mapped pinned
  std::vector<const char *> names_; ///< issued this run (literals)
  uint64_t completedBefore_ = 0;
};

} // namespace

std::unique_ptr<NcclCommunicator> NcclCommunicator::create(Communicator &host,
                                                           std::string &error) {
  const NcclApi &api = nccl();
  if (!api.error.empty()) {
    error = api.error;
    return nullptr;
  }
  // Rank 0's id, carried to every rank by the host communicator.
  ncclUniqueId id{};
  if (host.rank() == 0 && api.getUniqueId(&id) != ncclSuccess) {
    error = "ncclGetUniqueId failed";
    return nullptr;
  }
  static_assert(sizeof id % sizeof(int32_t) == 0, "id is whole words");
  if (!host.broadcast(&id, sizeof id / sizeof(int32_t), DType::i32, 0, nullptr,
                      error))
    return nullptr;
  // The progress word: pinned, mapped, so kernels write it and the host
  // reads it while they spin (with unified addressing one pointer serves).
  void *word = nullptr;
  cudaError_t allocated =
      cudaHostAlloc(&word, sizeof(uint32_t), cudaHostAllocMapped);
  if (allocated != cudaSuccess) {
    error = std::string("cannot allocate NCCL's progress word: ") +
            cudaGetErrorString(allocated);
    return nullptr;
  }
  *static_cast<volatile uint32_t *>(word) = 0;
  ncclComm_t comm = nullptr;
  ncclResult_t r = api.commInitRank(&comm, host.size(), id, host.rank());
  if (r != ncclSuccess) {
    cudaFreeHost(word);
    error = std::string("ncclCommInitRank: ") + api.errorString(r);
    return nullptr;
  }
  return std::make_unique<Impl>(comm, host, static_cast<uint32_t *>(word));
}

} // namespace dsc::rt::cuda
