//===- Lookup.cu - embedding and cross-entropy, with their gradients ------===//
//
// Ids and targets are validated on the device as the kernels read them:
// the first bad position (atomicMin over a scratch word) is recorded in the
// run context with its value, and the executor fails the run with the CPU
// backend's line for it; the bad element itself reads as a zero row.
//
// ds.embedding_grad is deterministic without atomics on floats: the ids are
// sorted stably with their positions (CUB's radix sort), and one thread per
// (id, column) sums its tokens' gradients in token order, in f32, which is
// exactly the CPU backend's order and precision. Cross-entropy and its
// gradient are fused with the softmax: one block per row, no probabilities
// stored; the gradient is written straight from the logits.
//
//===----------------------------------------------------------------------===//
#include "runtime/backends/cuda/CudaKernels.h"
#include "runtime/backends/cuda/DeviceSupport.cuh"

#include <cub/device/device_radix_sort.cuh>

namespace dsc::rt::cuda {
namespace {

struct Index {
  const void *p;
  bool wide; ///< i64, else i32
  __device__ int64_t at(int64_t i) const {
    return wide ? static_cast<const int64_t *>(p)[i]
                : int64_t(static_cast<const int32_t *>(p)[i]);
  }
};

Index indexOf(const TensorRef &t) { return {t.data, t.dtype == DType::i64}; }

/// The scratch layout of a validated call: the first bad position, then
/// whatever the kernel needs.
constexpr size_t kFlagBytes = 256; // keeps what follows aligned

__device__ bool badId(int64_t v, int64_t limit, int64_t ignore, bool ignores) {
  return !(ignores && v == ignore) && (v < 0 || v >= limit);
}

__global__ void findFirstBad(Index idx, int64_t n, int64_t limit,
                             int64_t ignore, bool ignores,
                             unsigned long long *first) {
  DSC_GRID_STRIDE(i, n) {
    if (badId(idx.at(i), limit, ignore, ignores))
      atomicMin(first, static_cast<unsigned long long>(i));
  }
}

__global__ void reportFirstBad(Index idx, const unsigned long long *first,
                               RunContext *run, RunError what, int64_t limit,
                               int64_t ignore) {
  if (*first != ~0ull) {
    int64_t at = int64_t(*first);
    flagBad(run, what, idx.at(at), at, limit, ignore);
  }
}

// Records the first bad id of `idx` (none are bad when limit > every id).
bool validate(const KernelArgs &a, const TensorRef &idx, int64_t limit,
              int64_t ignore, bool ignores, RunError what, void *scratch,
              std::string &err) {
  const CudaHandles *h = handlesOf(a);
  if (!h || !h->run)
    return fail(err, "needs the CUDA backend's run context");
  auto *first = static_cast<unsigned long long *>(scratch);
  cudaStream_t s = streamOf(a);
  const int64_t n = idx.numel();
  cudaMemsetAsync(first, 0xff, sizeof *first, s);
  if (n > 0)
    findFirstBad<<<gridFor(n), kBlock, 0, s>>>(indexOf(idx), n, limit, ignore,
                                               ignores, first);
  reportFirstBad<<<1, 1, 0, s>>>(indexOf(idx), first, h->run, what, limit,
                                 ignore);
  return launched(err);
}

bool floatOperands(std::string &err, const TensorRef &t, const char *role) {
  Storage s;
  if (storageOf(t.dtype, s))
    return true;
  return fail(err, "unsupported dtype ", dtypeName(t.dtype), " for ", role,
              " (expected f32, f16 or bf16)");
}

//===--- Embedding
//---------------------------------------------------------===//

// Rows [first, first + V) of the whole table; any other id reads zeros.
__global__ void embeddingKernel(const void *table, Storage st, Index idx,
                                void *out, Storage so, int64_t V, int64_t C,
                                int64_t n, int64_t first) {
  DSC_GRID_STRIDE(e, n * C) {
    int64_t i = e / C, c = e % C, v = idx.at(i) - first;
    store(out, so, e, v >= 0 && v < V ? load(table, st, v * C + c) : 0.0f);
  }
}

__global__ void sortKeys(Index idx, int64_t n, int64_t V, int64_t first,
                         uint32_t *keys, uint32_t *positions) {
  DSC_GRID_STRIDE(i, n) {
    int64_t v = idx.at(i) - first;
    // Bad ids and other parts' rows sort last, unused.
    keys[i] = uint32_t(v >= 0 && v < V ? v : V);
    positions[i] = uint32_t(i);
  }
}

// A block per position i of the sorted order; the block of the first
// position of an id's run sums the run, each thread a channel, in token
// order (the CPU's order, so the same f32 bits). The run's token positions
// are staged through shared memory a chunk at a time, so a thread's loads
// of one chunk are independent and many are in flight: with byte-level
// data one id (the space) can own a sixth of a batch's tokens, and a loop
// that found each next token through global memory ran serially.
constexpr int kRunChunk = 256; // = the block size
__global__ void __launch_bounds__(kRunChunk)
    sumRuns(const uint32_t *keys, const uint32_t *positions, const void *g,
            Storage sg, void *out, Storage so, int64_t V, int64_t C,
            int64_t n) {
  __shared__ uint32_t chunk[kRunChunk];
  for (int64_t i = blockIdx.x; i < n; i += gridDim.x) {
    const uint32_t key = keys[i];
    if (key >= V || (i > 0 && keys[i - 1] == key))
      continue; // the same for the whole block
    for (int64_t c0 = 0; c0 < C; c0 += blockDim.x) {
      const int64_t c = c0 + threadIdx.x;
      float acc = 0.0f;
      for (int64_t j0 = i;; j0 += kRunChunk) {
        // The run is contiguous: its members in this chunk are a prefix.
        const int64_t j = j0 + threadIdx.x;
        const bool member = j < n && keys[j] == key;
        __syncthreads(); // the previous chunk has been read
        if (member)
          chunk[threadIdx.x] = positions[j];
        const int len = __syncthreads_count(member);
        if (c < C) {
#pragma unroll 8
          for (int k = 0; k < len; ++k)
            acc += load(g, sg, int64_t(chunk[k]) * C + c);
        }
        if (len < kRunChunk)
          break;
      }
      if (c < C)
        store(out, so, int64_t(key) * C + c, acc);
    }
  }
}

int bitsFor(int64_t v) {
  int bits = 1;
  while (bits < 32 && (int64_t(1) << bits) <= v)
    ++bits;
  return bits;
}

//===--- Cross-entropy
//-----------------------------------------------------===//

// A row's max (NaN skipped, as the CPU's maxOf) and sum of e^(x - max), in
// double, the same in every thread of the block.
__device__ void rowMaxSum(const void *x, Storage sx, int64_t base, int64_t V,
                          float *redMax, double *red, float &mx, double &sum) {
  float m = -INFINITY;
  for (int64_t j = threadIdx.x; j < V; j += blockDim.x) {
    float v = load(x, sx, base + j);
    m = v > m ? v : m;
  }
  mx = blockMax(m, redMax);
  double s = 0;
  for (int64_t j = threadIdx.x; j < V; j += blockDim.x)
    s += expf(load(x, sx, base + j) - mx);
  sum = blockSum(s, red);
}

// Per row: the loss term, or nothing for an ignored target; the partials
// then sum in row order (one block), divided by the count.
__global__ void crossEntropyRows(const void *x, Storage sx, Index targets,
                                 int64_t rows, int64_t V, int64_t ignore,
                                 double *rowLoss, int *counted) {
  __shared__ double red[33];
  __shared__ float redMax[33];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t t = targets.at(r), base = r * V;
    if (t == ignore || t < 0 || t >= V) { // bad ones are reported apart
      if (threadIdx.x == 0) {
        rowLoss[r] = 0;
        counted[r] = 0;
      }
      continue;
    }
    float mx;
    double s;
    rowMaxSum(x, sx, base, V, redMax, red, mx, s);
    if (threadIdx.x == 0) {
      rowLoss[r] = double(mx) + log(s) - double(load(x, sx, base + t));
      counted[r] = 1;
    }
  }
}

__global__ void crossEntropyTotal(const double *rowLoss, const int *counted,
                                  int64_t rows, void *loss, Storage sl) {
  __shared__ double red[33];
  double total = 0, count = 0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
    total += rowLoss[r];
    count += counted[r];
  }
  total = blockSum(total, red);
  count = blockSum(count, red);
  if (threadIdx.x == 0)
    store(loss, sl, 0, count > 0 ? float(total / count) : 0.0f);
}

__global__ void countTargets(Index targets, int64_t rows, int64_t V,
                             int64_t ignore, double *count) {
  __shared__ double red[33];
  double c = 0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
    int64_t t = targets.at(r);
    c += t != ignore && t >= 0 && t < V;
  }
  c = blockSum(c, red);
  if (threadIdx.x == 0)
    *count = c;
}

// One row of dx = coef (softmax - onehot) from the row's max and sum of
// e^(x - max); t outside [0, V) (a target another rank holds) has no
// one-hot here. dx may be x: the row is read whole before it is written.
__device__ void softmaxGradRow(const void *x, Storage sx, void *dx, Storage sd,
                               int64_t base, int64_t V, int64_t t, float mx,
                               double sum, double coef) {
  const bool held = t >= 0 && t < V;
  const double et = held ? expf(load(x, sx, base + t) - mx) : 0.0;
  const float scale = float(coef / sum);
  __syncthreads();
  for (int64_t j = threadIdx.x; j < V; j += blockDim.x) {
    // p_t - 1 = -(sum - e_t) / sum, without cancellation.
    float v = j == t ? float(-coef * ((sum - et) / sum))
                     : expf(load(x, sx, base + j) - mx) * scale;
    store(dx, sd, base + j, v);
  }
}

// dx = coef (softmax - onehot), coef = g / count, from the logits alone
// (dx may be the logits: each row is read whole before it is written).
__global__ void crossEntropyGradRows(const void *x, Storage sx, Index targets,
                                     const void *g, Storage sg,
                                     const double *count, void *dx, Storage sd,
                                     int64_t rows, int64_t V, int64_t ignore) {
  __shared__ double red[33];
  __shared__ float redMax[33];
  const double n = *count;
  const double coef = n > 0 ? double(load(g, sg, 0)) / n : 0.0;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t t = targets.at(r), base = r * V;
    if (t == ignore || t < 0 || t >= V) {
      for (int64_t j = threadIdx.x; j < V; j += blockDim.x)
        store(dx, sd, base + j, 0.0f);
      continue;
    }
    float mx;
    double sum;
    rowMaxSum(x, sx, base, V, redMax, red, mx, sum);
    softmaxGradRow(x, sx, dx, sd, base, V, t, mx, sum, coef);
  }
}

//===--- Vocabulary-parallel cross-entropy --------------------------------===//
// The rank's logits are columns [first, first + V) of the whole vocabulary;
// row maxima and the stats' sums are over the whole (phase shard).

// stats[0][r] = sum_j e^(x - max), stats[1][r] = x[t] - max where the rank
// holds target t (0 elsewhere).
__global__ void crossEntropyPartRows(const void *x, Storage sx, Index targets,
                                     const void *rowMax, Storage sm,
                                     void *stats, Storage ss, int64_t rows,
                                     int64_t V, int64_t first, int64_t ignore) {
  __shared__ double red[33];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float mx = load(rowMax, sm, r);
    const int64_t base = r * V;
    double s = 0;
    for (int64_t j = threadIdx.x; j < V; j += blockDim.x)
      s += expf(load(x, sx, base + j) - mx);
    s = blockSum(s, red);
    if (threadIdx.x == 0) {
      const int64_t target = targets.at(r), t = target - first;
      const bool held = target != ignore && t >= 0 && t < V;
      store(stats, ss, r, float(s));
      store(stats, ss, rows + r, held ? load(x, sx, base + t) - mx : 0.0f);
    }
  }
}

__global__ void crossEntropyPartTotal(const void *stats, Storage ss,
                                      Index targets, int64_t rows,
                                      int64_t ignore, void *loss, Storage sl) {
  __shared__ double red[33];
  double total = 0, count = 0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
    if (targets.at(r) == ignore)
      continue;
    total +=
        log(double(load(stats, ss, r))) - double(load(stats, ss, rows + r));
    count += 1;
  }
  total = blockSum(total, red);
  count = blockSum(count, red);
  if (threadIdx.x == 0)
    store(loss, sl, 0, count > 0 ? float(total / count) : 0.0f);
}

// dx = coef (softmax - onehot) on the rank's columns, the softmax from the
// whole rows' max and sum.
__global__ void crossEntropyPartGradRows(const void *x, Storage sx,
                                         Index targets, const void *rowMax,
                                         Storage sm, const void *stats,
                                         Storage ss, const void *g, Storage sg,
                                         const double *count, void *dx,
                                         Storage sd, int64_t rows, int64_t V,
                                         int64_t first, int64_t ignore) {
  const double n = *count;
  const double coef = n > 0 ? double(load(g, sg, 0)) / n : 0.0;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t target = targets.at(r), t = target - first, base = r * V;
    if (target == ignore) {
      for (int64_t j = threadIdx.x; j < V; j += blockDim.x)
        store(dx, sd, base + j, 0.0f);
      continue;
    }
    const float mx = load(rowMax, sm, r);
    const double sum = load(stats, ss, r);
    softmaxGradRow(x, sx, dx, sd, base, V, t, mx, sum, coef);
  }
}

// One block a row, up to 2^20 blocks (the kernels stride over the rest).
unsigned rowBlocks(int64_t rows) {
  return unsigned(rows < (1 << 20) ? rows : (1 << 20));
}

} // namespace

bool embeddingBody(const KernelArgs &a, std::string &err) {
  const TensorRef &table = a.inputs[0], &idx = a.inputs[1];
  const TensorRef &out = a.outputs[0];
  int64_t V, C, first;
  const int64_t parts = a.intAttrs[0];
  void *scratch = nullptr;
  if (!floatOperands(err, table, "table") ||
      !expectIndexDType(err, idx, "indices") ||
      !floatOperands(err, out, "the output") ||
      !checkEmbeddingShapes(err, table, idx, out, V, C) ||
      !vocabularyPart(err, a, parts, V, first) ||
      !scratchOf(a, kFlagBytes, scratch, err) ||
      !validate(a, idx, V * parts, 0, false, kEmbeddingIndex, scratch, err))
    return false;
  const int64_t n = idx.numel();
  if (n * C == 0)
    return true;
  embeddingKernel<<<gridFor(n * C), kBlock, 0, streamOf(a)>>>(
      table.data, storage(table), indexOf(idx), out.data, storage(out), V, C, n,
      first);
  return launched(err);
}

bool embeddingGradBody(const KernelArgs &a, std::string &err) {
  const TensorRef &idx = a.inputs[0], &g = a.inputs[1];
  const TensorRef &out = a.outputs[0];
  int64_t V, C, first;
  const int64_t parts = a.intAttrs[0];
  if (!expectIndexDType(err, idx, "indices") || !floatOperands(err, g, "g") ||
      !floatOperands(err, out, "the output") ||
      !checkEmbeddingGradShapes(err, idx, g, out, V, C) ||
      !vocabularyPart(err, a, parts, V, first))
    return false;
  const int64_t n = idx.numel();
  // CUB's item count is an int.
  if (n > int64_t(INT32_MAX) || V >= int64_t(UINT32_MAX))
    return fail(err, n, " ids into a table of ", V,
                " rows is more than this kernel sorts (2^31 ids)");
  cudaStream_t s = streamOf(a);
  // Scratch: the flag, keys and positions in and out, then CUB's temp.
  const size_t words = size_t(n) * sizeof(uint32_t);
  const int bits = bitsFor(V);
  size_t sortBytes = 0;
  cub::DeviceRadixSort::SortPairs(
      nullptr, sortBytes, static_cast<uint32_t *>(nullptr),
      static_cast<uint32_t *>(nullptr), static_cast<uint32_t *>(nullptr),
      static_cast<uint32_t *>(nullptr), int(n), 0, bits, s);
  auto align = [](size_t b) { return (b + 255) / 256 * 256; };
  void *scratch = nullptr;
  if (!scratchOf(a, kFlagBytes + 4 * align(words) + sortBytes, scratch, err) ||
      !validate(a, idx, V * parts, 0, false, kEmbeddingGradIndex, scratch, err))
    return false;
  if (!zeroOnStream(out.data, size_t(V * C) * dtypeSize(out.dtype), s, err))
    return false;
  if (n == 0 || C == 0)
    return true;
  char *base = static_cast<char *>(scratch) + kFlagBytes;
  auto *keysIn = reinterpret_cast<uint32_t *>(base);
  auto *keysOut = reinterpret_cast<uint32_t *>(base + align(words));
  auto *posIn = reinterpret_cast<uint32_t *>(base + 2 * align(words));
  auto *posOut = reinterpret_cast<uint32_t *>(base + 3 * align(words));
  void *temp = base + 4 * align(words);
  sortKeys<<<gridFor(n), kBlock, 0, s>>>(indexOf(idx), n, V, first, keysIn,
                                         posIn);
  cudaError_t status = cub::DeviceRadixSort::SortPairs(
      temp, sortBytes, keysIn, keysOut, posIn, posOut, int(n), 0, bits, s);
  if (status != cudaSuccess)
    return fail(err, "cub::DeviceRadixSort: ", cudaGetErrorString(status));
  sumRuns<<<unsigned(n < (1 << 20) ? n : (1 << 20)), kRunChunk, 0, s>>>(
      keysOut, posOut, g.data, storage(g), out.data, storage(out), V, C, n);
  return launched(err);
}

bool crossEntropyBody(const KernelArgs &a, std::string &err) {
  const TensorRef &logits = a.inputs[0], &targets = a.inputs[1];
  const TensorRef &loss = a.outputs[0];
  const int64_t ignore = a.intAttrs[0];
  void *scratch = nullptr;
  if (!floatOperands(err, logits, "logits") ||
      !expectIndexDType(err, targets, "targets") ||
      !checkTargetShapes(err, logits, targets) ||
      !floatOperands(err, loss, "the loss") ||
      !checkOneValue(err, loss, "the loss"))
    return false;
  const int64_t V = logits.dim(-1), rows = targets.numel();
  const size_t lossBytes = (size_t(rows) * sizeof(double) + 255) / 256 * 256;
  if (!scratchOf(a, kFlagBytes + lossBytes + size_t(rows) * sizeof(int),
                 scratch, err) ||
      !validate(a, targets, V, ignore, true, kCrossEntropyTarget, scratch, err))
    return false;
  auto *rowLoss =
      reinterpret_cast<double *>(static_cast<char *>(scratch) + kFlagBytes);
  auto *counted = reinterpret_cast<int *>(static_cast<char *>(scratch) +
                                          kFlagBytes + lossBytes);
  cudaStream_t s = streamOf(a);
  if (rows > 0 && V > 0)
    crossEntropyRows<<<rowBlocks(rows), rowThreads(V), 0, s>>>(
        logits.data, storage(logits), indexOf(targets), rows, V, ignore,
        rowLoss, counted);
  crossEntropyTotal<<<1, 1024, 0, s>>>(rowLoss, counted, V > 0 ? rows : 0,
                                       loss.data, storage(loss));
  return launched(err);
}

bool crossEntropyGradBody(const KernelArgs &a, std::string &err) {
  const TensorRef &logits = a.inputs[0], &targets = a.inputs[1];
  const TensorRef &g = a.inputs[2], &out = a.outputs[0];
  const int64_t ignore = a.intAttrs[0];
  void *scratch = nullptr;
  if (!floatOperands(err, logits, "logits") ||
      !expectIndexDType(err, targets, "targets") ||
      !checkTargetShapes(err, logits, targets) || !floatOperands(err, g, "g") ||
      !checkOneValue(err, g, "g") || !floatOperands(err, out, "the output"))
    return false;
  if (!sameShape(out, logits))
    return fail(err, "output has shape ", shapeStr(out),
                " but logits have shape ", shapeStr(logits));
  const int64_t V = logits.dim(-1), rows = targets.numel();
  if (!scratchOf(a, kFlagBytes + sizeof(double), scratch, err) ||
      !validate(a, targets, V, ignore, true, kCrossEntropyGradTarget, scratch,
                err))
    return false;
  auto *count =
      reinterpret_cast<double *>(static_cast<char *>(scratch) + kFlagBytes);
  cudaStream_t s = streamOf(a);
  countTargets<<<1, 1024, 0, s>>>(indexOf(targets), rows, V, ignore, count);
  if (rows > 0 && V > 0)
    crossEntropyGradRows<<<rowBlocks(rows), rowThreads(V), 0, s>>>(
        logits.data, storage(logits), indexOf(targets), g.data, storage(g),
        count, out.data, storage(out), rows, V, ignore);
  return launched(err);
}

//===--- ds.linear_cross_entropy's chunks (LinearCrossEntropy.cpp) -------===//

namespace {

// Adds the chunk's loss terms / the count to *loss (one block).
__global__ void addChunkLoss(const double *rowLoss, int64_t rows,
                             const double *count, float *loss) {
  __shared__ double red[33];
  double total = 0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x)
    total += rowLoss[r];
  total = blockSum(total, red);
  if (threadIdx.x == 0 && *count > 0)
    *loss = float(double(*loss) + total / *count);
}

size_t rounded(size_t bytes) { return (bytes + 255) / 256 * 256; }

} // namespace

bool validateLinearCrossEntropyTargets(const KernelArgs &a, int64_t V,
                                       int64_t ignore, std::string &err) {
  void *scratch = nullptr;
  return scratchOf(a, kFlagBytes, scratch, err) &&
         validate(a, a.inputs[2], V, ignore, true, kLinearCrossEntropyTarget,
                  scratch, err);
}

// The scratch holds the count and the chunk's row terms only while the
// chunk's kernels run: the products between chunks use it as cuBLASLt's
// workspace.
bool lossAndGradChunk(const KernelArgs &a, void *chunk, int64_t first,
                      int64_t rows, int64_t V, float *loss, std::string &err) {
  const TensorRef &targets = a.inputs[2], &g = a.inputs[3];
  const Storage head = storage(a.outputs[3]); // the chunk's, h's dtype
  const int64_t ignore = a.intAttrs[0];
  const size_t lossBytes = rounded(size_t(rows) * sizeof(double));
  void *scratch = nullptr;
  if (!scratchOf(a, 256 + lossBytes + size_t(rows) * sizeof(int), scratch, err))
    return false;
  auto *base = static_cast<char *>(scratch);
  auto *count = reinterpret_cast<double *>(base);
  auto *rowLoss = reinterpret_cast<double *>(base + 256);
  auto *counted = reinterpret_cast<int *>(base + 256 + lossBytes);
  const Index all = indexOf(targets);
  const Index part{static_cast<const char *>(targets.data) +
                       first * int64_t(dtypeSize(targets.dtype)),
                   all.wide};
  cudaStream_t s = streamOf(a);
  countTargets<<<1, 1024, 0, s>>>(all, targets.numel(), V, ignore, count);
  if (rows > 0 && V > 0) {
    crossEntropyRows<<<rowBlocks(rows), rowThreads(V), 0, s>>>(
        chunk, head, part, rows, V, ignore, rowLoss, counted);
    crossEntropyGradRows<<<rowBlocks(rows), rowThreads(V), 0, s>>>(
        chunk, head, part, g.data, storage(g), count, chunk, head, rows, V,
        ignore);
    addChunkLoss<<<1, 1024, 0, s>>>(rowLoss, rows, count, loss);
  }
  return launched(err);
}

namespace {

// The part kernels' operands, checked on the host in the CPU kernels'
// order: logits [rows, V] of the rank's V columns, targets, row maxima and
// stats ([2, rows]).
bool checkPartOperands(const KernelArgs &a, const TensorRef &stats,
                       int64_t &rows, int64_t &V, int64_t &first,
                       std::string &err) {
  const TensorRef &logits = a.inputs[0], &targets = a.inputs[1];
  const TensorRef &rowMax = a.inputs[2];
  if (!floatOperands(err, logits, "logits") ||
      !expectIndexDType(err, targets, "targets") ||
      !checkTargetShapes(err, logits, targets) ||
      !floatOperands(err, rowMax, "row_max") ||
      !floatOperands(err, stats, "stats") ||
      !checkRowStats(err, targets, &rowMax, stats))
    return false;
  rows = targets.numel();
  V = logits.dim(-1);
  return vocabularyPart(err, a, a.intAttrs[1], V, first);
}

// The targets checked against the whole vocabulary on the device, in the
// scratch's flag; `extra` scratch bytes follow it.
bool validateTargets(const KernelArgs &a, int64_t whole, RunError what,
                     size_t extra, void *&scratch, std::string &err) {
  return scratchOf(a, kFlagBytes + extra, scratch, err) &&
         validate(a, a.inputs[1], whole, a.intAttrs[0], true, what, scratch,
                  err);
}

} // namespace

bool crossEntropyPartBody(const KernelArgs &a, std::string &err) {
  const TensorRef &logits = a.inputs[0], &targets = a.inputs[1];
  const TensorRef &rowMax = a.inputs[2], &stats = a.outputs[0];
  int64_t rows, V, first;
  void *scratch = nullptr;
  if (!checkPartOperands(a, stats, rows, V, first, err) ||
      !validateTargets(a, V * a.intAttrs[1], kCrossEntropyPartTarget, 0,
                       scratch, err))
    return false;
  if (rows > 0)
    crossEntropyPartRows<<<rowBlocks(rows), rowThreads(V), 0, streamOf(a)>>>(
        logits.data, storage(logits), indexOf(targets), rowMax.data,
        storage(rowMax), stats.data, storage(stats), rows, V, first,
        a.intAttrs[0]);
  return launched(err);
}

bool crossEntropyPartLossBody(const KernelArgs &a, std::string &err) {
  const TensorRef &stats = a.inputs[0], &targets = a.inputs[1];
  const TensorRef &loss = a.outputs[0];
  if (!floatOperands(err, stats, "stats") ||
      !expectIndexDType(err, targets, "targets") ||
      !checkRowStats(err, targets, nullptr, stats) ||
      !floatOperands(err, loss, "the loss") ||
      !checkOneValue(err, loss, "the loss"))
    return false;
  crossEntropyPartTotal<<<1, 1024, 0, streamOf(a)>>>(
      stats.data, storage(stats), indexOf(targets), targets.numel(),
      a.intAttrs[0], loss.data, storage(loss));
  return launched(err);
}

bool crossEntropyPartGradBody(const KernelArgs &a, std::string &err) {
  const TensorRef &logits = a.inputs[0], &targets = a.inputs[1];
  const TensorRef &rowMax = a.inputs[2], &stats = a.inputs[3];
  const TensorRef &g = a.inputs[4], &out = a.outputs[0];
  int64_t rows, V, first;
  void *scratch = nullptr;
  if (!checkPartOperands(a, stats, rows, V, first, err) ||
      !floatOperands(err, g, "g") || !checkOneValue(err, g, "g") ||
      !floatOperands(err, out, "the output"))
    return false;
  if (!sameShape(out, logits))
    return fail(err, "output has shape ", shapeStr(out),
                " but logits have shape ", shapeStr(logits));
  if (!validateTargets(a, V * a.intAttrs[1], kCrossEntropyPartGradTarget,
                       sizeof(double), scratch, err))
    return false;
  auto *count =
      reinterpret_cast<double *>(static_cast<char *>(scratch) + kFlagBytes);
  cudaStream_t s = streamOf(a);
  const int64_t ignore = a.intAttrs[0], parts = a.intAttrs[1];
  countTargets<<<1, 1024, 0, s>>>(indexOf(targets), rows, V * parts, ignore,
                                  count);
  if (rows > 0 && V > 0)
    crossEntropyPartGradRows<<<rowBlocks(rows), rowThreads(V), 0, s>>>(
        logits.data, storage(logits), indexOf(targets), rowMax.data,
        storage(rowMax), stats.data, storage(stats), g.data, storage(g), count,
        out.data, storage(out), rows, V, first, ignore);
  return launched(err);
}

} // namespace dsc::rt::cuda
