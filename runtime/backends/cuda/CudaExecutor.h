//===- CudaExecutor.h - a program's streams on a GPU ------------*- C++ -*-===//
//
// The CUDA backend's StreamExecutor. One host thread enqueues a program's
// instructions in program order, each on its plan stream's cudaStream_t:
// waits become cudaStreamWaitEvent, records cudaEventRecord (a plan event
// is recorded by an earlier instruction than any that waits on it, so
// program order is a valid enqueue order). A program's first run is
// enqueued kernel by kernel, which checks every instruction's arguments on
// the host and names the one that fails; from its second run on, the
// program is captured once as a CUDA graph (the other streams forked from
// and joined back to the compute stream) and replayed, so a step costs one
// launch instead of one per kernel. `--backend cuda:graphs=off` turns capture
// off; tracing (--trace) also runs kernel by kernel, with timing events.
//
// A host-placed instruction (the CPU backend's kernel over pinned host
// arenas) becomes a host function on its plan stream (cudaLaunchHostFunc,
// a host node in the graph): it runs on a CUDA-owned thread once what the
// stream did before it is done, and the stream goes on when it returns, so
// the plan's events order it like any kernel. Its error is kept and
// reported after the run.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_BACKENDS_CUDA_CUDAEXECUTOR_H
#define DSC_RUNTIME_BACKENDS_CUDA_CUDAEXECUTOR_H

#include "runtime/backends/StreamExecutor.h"

#include <memory>

namespace dsc::rt::cuda {

struct CudaDevice;

std::unique_ptr<StreamExecutor> createCudaExecutor(CudaDevice &device,
                                                   const ExecutorSpec &spec);

} // namespace dsc::rt::cuda

#endif // DSC_RUNTIME_BACKENDS_CUDA_CUDAEXECUTOR_H
