//===- CudaHostChecksTest.cpp - CUDA kernels refuse what the CPU's refuse -===//
//
// A CUDA kernel checks its arguments on the host before it enqueues
// anything, so these checks run without a GPU (in CI): for every CUDA
// kernel, junk arguments that the CPU kernel of the same name refuses are
// refused by the CUDA kernel with the very same line. The CUDA kernel is
// only called when the CPU's refuses (host buffers never reach a launch).
//
//===----------------------------------------------------------------------===//
#include "test/unit/conformance/KernelTestSupport.h"

#if DSC_HAVE_CUDA
#include "runtime/backends/cuda/CudaBackend.h"

using namespace dsc;
using namespace dsc::conformance;

namespace {

std::string call(const rt::KernelInfo &k, std::vector<Buf> &ins,
                 std::vector<Buf> &outs, const std::vector<int64_t> &ints,
                 const std::vector<double> &floats) {
  std::vector<rt::TensorRef> ti, to;
  for (Buf &b : ins)
    ti.push_back(b.ref());
  for (Buf &b : outs)
    to.push_back(b.ref());
  rt::KernelContext ctx = defaultContext();
  rt::KernelArgs a = rt::makeKernelArgs(ti, to, ints, floats, &ctx);
  std::string err;
  return k.fn(a, err) ? "" : err;
}

TEST(CudaHostChecks, RefuseWhatTheCpuKernelsRefuseWithTheSameLine) {
  const std::vector<Shape> shapes = {{},     {0},          {3},
                                     {2, 3}, {4, 1, 5},    {2, 3, 4, 5},
                                     {3, 2}, {1, 3, 2, 2}, {5, 4}};
  int compared = 0;
  for (const rt::KernelInfo &k : rt::cuda::cudaKernels()) {
    const rt::KernelInfo *cpu = rt::findCpuKernel(k.name);
    ASSERT_NE(cpu, nullptr) << k.name;
    const int nIn = k.numInputs < 0 ? 2 : k.numInputs;
    const int nOut = k.numOutputs < 0 ? 2 : k.numOutputs;
    const int nInts = k.numIntAttrs < 0 ? 1 : k.numIntAttrs;
    for (int64_t attr : {0, 1, 2, -1})
      for (size_t s = 0; s < shapes.size(); ++s)
        for (size_t skew = 0; skew < 3; ++skew) {
          std::vector<Buf> ins, outs;
          for (int i = 0; i < nIn; ++i)
            ins.push_back(
                filled(shapes[(s + size_t(i) * skew) % shapes.size()], 1.0));
          for (int i = 0; i < nOut; ++i)
            outs.push_back(poisoned(
                shapes[(s + size_t(nIn + i) * skew + 1) % shapes.size()]));
          std::vector<int64_t> ints(size_t(nInts), attr);
          std::vector<double> floats(size_t(k.numFloatAttrs), 0.5);
          std::string cpuError = call(*cpu, ins, outs, ints, floats);
          if (cpuError.empty())
            continue;
          SCOPED_TRACE(std::string(k.name) + " shapes from " +
                       std::to_string(s) + " skew " + std::to_string(skew) +
                       " attr " + std::to_string(attr));
          EXPECT_EQ(call(k, ins, outs, ints, floats), cpuError);
          ++compared;
        }
  }
  EXPECT_GT(compared, 200); // the junk above does reach the checks
}

} // namespace
#endif // DSC_HAVE_CUDA
