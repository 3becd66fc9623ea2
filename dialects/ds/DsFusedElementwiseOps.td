//===- DsFusedElementwiseOps.td - elementwise chains as one op -*- tablegen -*-===//
//
// Included by DsOps.td. Made by phase `fused` (passes/FuseElementwise.cpp),
// never by autodiff; runtime/kernels/FusedProgram.h is how its body
// travels in a plan.
//
//===----------------------------------------------------------------------===//

#ifndef DS_FUSED_ELEMENTWISE_OPS_TD
#define DS_FUSED_ELEMENTWISE_OPS_TD

def DS_FusedElementwiseOp : DS_Op<"fused_elementwise",
    [DeclareOpInterfaceMethods<DS_KernelOpInterface,
         ["getKernelAttributes", "getFlops"]>, DS_InPlaceSafe, Pure,
     IsolatedFromAbove]> {
  let kernel = DS_F32Kernel<["program..."], [], "f32*->f32*", "any_input">;
  let summary = "a group of elementwise ops run as one pass over memory";
  let description = [{
    The body is the group's ops as they were, on whole tensors: its block
    arguments are the inputs, `ds.yield` names the results, which have the
    group's shape (a sum's: see below). Every body op but the sum is
    elementwise (ds.add, ds.sub, ds.mul, ds.div, ds.minimum, ds.maximum,
    ds.neg, ds.exp, ds.log, ds.tanh, ds.sqrt, ds.rsqrt, ds.relu, ds.silu,
    ds.gelu, ds.relu_grad, ds.silu_grad, ds.gelu_grad, ds.swiglu, ds.cast)
    with results of the group's shape; an input may be smaller, its shape a
    suffix of the group's, and is then broadcast along the leading dims.
    One body op may be a ds.reduce_sum (no keepdim) over the leading dims
    [0, k) of a value of the group's shape: its result has the group's
    trailing dims (a scalar for a whole sum), only `ds.yield` reads it, and
    a backend adds it up in its ds.reduce_sum's order. A backend runs the
    body per element, each value rounded to its type as the unfused
    kernel's result is, so the results are bitwise the unfused ops'. A
    result may overwrite an input of its type (a gradient accumulated in
    place): a backend reads an element of every input before it writes that
    element of any result.
  }];
  let arguments = (ins Variadic<DS_FloatTensor>:$inputs);
  let results = (outs Variadic<DS_FloatTensor>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    $inputs attr-dict `:` functional-type($inputs, $results) $body
  }];
  let hasVerifier = 1;
}

def DS_YieldOp : DS_Op<"yield",
    [NoMemoryEffect, Terminator,
     HasParent<"FusedElementwiseOp">]> {
  let summary = "the results of a ds.fused_elementwise body";
  let arguments = (ins Variadic<DS_FloatTensor>:$values);
  let assemblyFormat = "$values attr-dict `:` type($values)";
}

#endif // DS_FUSED_ELEMENTWISE_OPS_TD
