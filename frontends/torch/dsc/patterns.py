"""Rewrites of the exported FX graph before lowering: ATen sequences that
dsc has one fused op for.

RMSNorm as models write it (Hugging Face's LlamaRMSNorm, most hand-written
ones) reaches torch.export as elementwise ops:

    v = mean(pow(x, 2), [-1], keepdim=True)     # or mul(x, x)
    y = mul(x, rsqrt(add(v, eps)))              # either operand order
    out = mul(weight, y)                         # optionally through _to_copy

fuse_rms_norm replaces `out` by aten.rms_norm(x, [C], weight, eps), which
lowers to one ds.rms_norm (one kernel forward, one backward) instead of
six elementwise ops and a reduction."""
import torch

aten = torch.ops.aten


def _is(node, *targets):
    return isinstance(node, torch.fx.Node) and node.op == "call_function" and \
        node.target in targets


def _same_dtype_copy(node):
    """_to_copy / to that changes nothing (float32 to float32)."""
    if not _is(node, aten._to_copy.default, aten.to.dtype):
        return False
    src, out = node.args[0].meta.get("val"), node.meta.get("val")
    return src is not None and out is not None and src.dtype == out.dtype


def _strip_copies(node):
    while _same_dtype_copy(node):
        node = node.args[0]
    return node


def _square_of(node):
    """x when node is pow(x, 2) or mul(x, x)."""
    if _is(node, aten.pow.Tensor_Scalar) and node.args[1] == 2:
        return node.args[0]
    if _is(node, aten.mul.Tensor) and node.args[0] is node.args[1]:
        return node.args[0]
    return None


def _match(out):
    """(x, weight, eps) when `out` is a weighted RMSNorm, else None."""
    if not _is(out, aten.mul.Tensor):
        return None
    for weight, normed in (out.args, reversed(out.args)):
        if not isinstance(weight, torch.fx.Node) or weight.op != "placeholder":
            continue
        normed = _strip_copies(normed)
        if not _is(normed, aten.mul.Tensor):
            continue
        for x, r in (normed.args, reversed(normed.args)):
            if not _is(r, aten.rsqrt.default) or not _is(r.args[0], aten.add.Tensor):
                continue
            v, eps = r.args[0].args[:2]
            if not isinstance(eps, float) or len(r.args[0].args) > 2:
                continue
            if not _is(v, aten.mean.dim) or list(v.args[1]) not in ([-1], [x.meta["val"].dim() - 1]):
                continue
            if not (len(v.args) > 2 and v.args[2]):
                continue
            square = _square_of(v.args[0])
            if square is None or _strip_copies(square) is not _strip_copies(x):
                continue
            c = x.meta["val"].shape[-1]
            if tuple(weight.meta["val"].shape) != (c,):
                continue
            if x.meta["val"].dtype != out.meta["val"].dtype:
                continue
            return _strip_copies(x), weight, eps
    return None


def fuse_rms_norm(gm):
    """Rewrites every weighted RMSNorm of gm's graph; returns how many."""
    graph = gm.graph
    count = 0
    for out in list(graph.nodes):
        m = _match(out)
        if m is None:
            continue
        x, weight, eps = m
        with graph.inserting_before(out):
            fused = graph.call_function(aten.rms_norm.default,
                                        (x, [x.meta["val"].shape[-1]], weight, eps))
        fused.meta = dict(out.meta)
        out.replace_all_uses_with(fused)
        count += 1
    if count:
        graph.eliminate_dead_code()
    return count
