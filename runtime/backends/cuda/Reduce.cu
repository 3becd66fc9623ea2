//===- Reduce.cu - reduce_sum, reduce_mean, reduce_max --------------------===//
//
// Each output element reduces its `count` elements of x, addressed by the
// kept dims' and the reduced dims' strides (the same checks as the CPU
// backend, runtime/kernels/ShapeKernelPlans.cpp), along the walks of
// ReduceWalk.cuh.
//
//===----------------------------------------------------------------------===//
#include "runtime/backends/cuda/ReduceWalk.cuh"

namespace dsc::rt::cuda {
namespace {

using reduce::Kind;

bool reduceBody(Kind kind, const KernelArgs &a, std::string &err) {
  bool reduced[kMaxRank];
  int64_t count;
  if (!expectFloatStorage(a, err) || !checkReduce(a, reduced, count, err))
    return false;
  const TensorRef &x = a.inputs[0], &y = a.outputs[0];
  const int64_t outN = y.numel();
  if (outN == 0)
    return true;
  return reduce::launchReduce(a, kind, reduce::walkOf(x, reduced), outN, count,
                              reduce::TensorSource{x.data, storage(x)}, y.data,
                              storage(y), err);
}

} // namespace

bool reduceSumBody(const KernelArgs &a, std::string &e) {
  return reduceBody(reduce::kSum, a, e);
}
bool reduceMeanBody(const KernelArgs &a, std::string &e) {
  return reduceBody(reduce::kMean, a, e);
}
bool reduceMaxBody(const KernelArgs &a, std::string &e) {
  return reduceBody(reduce::kMax, a, e);
}

} // namespace dsc::rt::cuda
