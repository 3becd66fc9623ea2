//===- DsFusedLossOps.td - an LM head and its loss as one op -*- tablegen -*-===//
//
// Included by DsOps.td. Made by phase `fused` (passes/FuseLmHead.cpp),
// never by autodiff; docs/performance.md says why it is shaped so.
//
//===----------------------------------------------------------------------===//

#ifndef DS_FUSED_LOSS_OPS_TD
#define DS_FUSED_LOSS_OPS_TD

def DS_LinearCrossEntropyOp : DS_Op<"linear_cross_entropy",
    [DeclareOpInterfaceMethods<DS_KernelOpInterface,
         ["getKernelAttributes", "getFlops"]>, Pure, InferTypeOpAdaptor]> {
  let kernel = DS_Kernel<["ignore_index", "chunk_rows"], [],
      ["f32,f32,idx,f32->f32,f32,f32,f32"],
      ["bf16,bf16,idx,f32->f32,bf16,f32,bf16",
       "f16,f16,idx,f32->f32,f16,f32,f16"], "none">;
  let summary = "an LM head's loss and both its gradients, logits in chunks";
  let description = [{
    h [..., D], weight [V, D], targets [...] (h's shape without D) and
    grad, the loss's cotangent (a scalar). The results mean exactly
      logits  = matmul(h, weight) {transpose_rhs}
      loss    = cross_entropy(logits, targets)
      g       = cross_entropy_grad(logits, targets, grad)
      dh      = matmul(g, weight)
      dweight = matmul(g as [N, V], h as [N, D]) {transpose_lhs}
    but the N = numel(targets) rows of h are taken `chunk_rows` at a time
    (it divides N) against the whole vocabulary, so the logits exist only
    as `chunk` [chunk_rows, V], the op's workspace: afterwards it holds g's
    last chunk_rows rows. dweight sums the chunks' products in order, so it
    is not bitwise the one product's.

    h and weight may be f16 or bf16 (a mixed-precision head): then the
    chunk holds the logits and g rounded to that type, as the unfused
    ops' results are, the GEMMs take them in 16 bits with f32 sums, dh is
    rounded to h's type, and dweight stays f32 (the chunks' sum is rounded
    once, by the ds.cast phase fused puts after it, not once a chunk). The
    loss is f32, as ds.cross_entropy's is.
  }];
  let arguments = (ins DS_FloatTensor:$h, DS_FloatTensor:$weight,
                       DS_IndexTensor:$targets, DS_FloatTensor:$grad,
                       DefaultValuedAttr<I64Attr, "-1">:$ignore_index,
                       I64Attr:$chunk_rows);
  let results = (outs DS_FloatTensor:$loss, DS_FloatTensor:$dh,
                      DS_FloatTensor:$dweight, DS_FloatTensor:$chunk);
  let assemblyFormat = [{
    $h `,` $weight `,` $targets `,` $grad `chunk_rows` $chunk_rows attr-dict
    `:` type($h) `,` type($weight) `,` type($targets) `,` type($grad)
  }];
}

#endif // DS_FUSED_LOSS_OPS_TD
