"""Rewrites of the exported FX graph before lowering: ATen sequences that
dsc has one fused op for.

RMSNorm as models write it (Hugging Face's LlamaRMSNorm, most hand-written
ones) reaches torch.export as elementwise ops:

    v = mean(pow(x, 2), [-1], keepdim=True)     # or mul(x, x)
    y = mul(x, rsqrt(add(v, eps)))              # either operand order
    out = mul(weight, y)                         # optionally through _to_copy

fuse_rms_norm replaces `out` by aten.rms_norm(x, [C], weight, eps), which
lowers to one ds.rms_norm (one kernel forward, one backward) instead of
six elementwise ops and a reduction.

The lowering also matches, node by node, Hugging Face's rotary embedding
(match_rotary: one ds.rotary) and Llama's gated MLP (match_swiglu: one
ds.swiglu)."""
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


# Rotary position embeddings as Hugging Face writes them (apply_rotary_pos_emb):
#
#     out = add(mul(x, cos), mul(cat([neg(x[..., D/2:]), x[..., :D/2]], -1), sin))
#
# with cos and sin tables known at export time. When the tables are
# theta^(-2i/D) frequencies at positions 0..T-1 (plain RoPE, no scaling),
# this is one ds.rotary (the same rotate_half convention): one kernel
# instead of slices, a negation, a concat and three elementwise ops.

def _mul_parts(node, env, value_type, const_type):
    """(value node, constant tensor) of mul(value, constant), either order."""
    if not _is(node, aten.mul.Tensor) or len(node.args) != 2:
        return None
    for v, c in (node.args, reversed(node.args)):
        if isinstance(v, torch.fx.Node) and isinstance(c, torch.fx.Node) and \
                isinstance(env.get(v), value_type) and isinstance(env.get(c), const_type):
            return v, env[c].tensor
    return None


def _half_slice(node, x, first):
    """node is x[..., :D/2] (first) or x[..., D/2:] along the last dim."""
    if not _is(node, aten.slice.Tensor) or node.args[0] is not x:
        return False
    rank = x.meta["val"].dim()
    d = x.meta["val"].shape[-1]
    args = list(node.args) + [None] * (5 - len(node.args))
    dim, start, end, step = args[1], args[2], args[3], args[4]
    if dim % rank != rank - 1 or step not in (None, 1):
        return False
    start = 0 if start is None else start
    end = d if end is None or end > d else end
    return (start, end) == ((0, d // 2) if first else (d // 2, d))


def match_rotary(node, env, value_type, const_type):
    """(x node, theta) when `node` is Hugging Face's rotary embedding of x
    with plain RoPE tables, else None."""
    if not _is(node, aten.add.Tensor) or len(node.args) != 2 or node.kwargs.get("alpha", 1) != 1:
        return None
    for a, b in (node.args, reversed(node.args)):
        cos_part = _mul_parts(a, env, value_type, const_type)
        sin_part = _mul_parts(b, env, value_type, const_type)
        if cos_part is None or sin_part is None:
            continue
        x, cos = cos_part
        rot, sin = sin_part
        if not _is(rot, aten.cat.default) or len(rot.args[0]) != 2:
            continue
        neg, first = rot.args[0]
        dim = rot.args[1] if len(rot.args) > 1 else 0
        rank = x.meta["val"].dim()
        if dim % rank != rank - 1 or not _is(neg, aten.neg.default):
            continue
        if not (_half_slice(neg.args[0], x, first=False) and _half_slice(first, x, first=True)):
            continue
        theta = _rope_theta(cos, sin, tuple(x.meta["val"].shape))
        if theta is not None:
            return x, theta
    return None


def _rope_theta(cos, sin, shape):
    """theta when cos/sin are plain RoPE tables for x of `shape`, else None."""
    if len(shape) < 2:
        return None
    t, d = shape[-2], shape[-1]
    if d % 2 or d < 4 or t < 2:
        return None
    try:
        cos = torch.broadcast_to(cos.double(), shape)
        sin = torch.broadcast_to(sin.double(), shape)
    except RuntimeError:
        return None
    cos, sin = cos.reshape(-1, t, d), sin.reshape(-1, t, d)
    if not (bool((cos == cos[:1]).all()) and bool((sin == sin[:1]).all())):
        return None  # tables that vary along batch or heads
    cos, sin = cos[0], sin[0]
    f1 = float(torch.atan2(sin[1, 1], cos[1, 1]))  # position 1, frequency 1
    if not f1 > 0:
        return None
    raw = f1 ** (-d / 2)
    # The tables were computed in float32 (theta = 10000 reads back as
    # 9999.9986): RoPE bases are round numbers, so six significant digits
    # are tried first, and either must reproduce the tables.
    for theta in (float(f"{raw:.6g}"), raw):
        i = torch.arange(d // 2, dtype=torch.float64)
        angle = torch.arange(t, dtype=torch.float64)[:, None] * theta ** (-2 * i / d)[None, :]
        want_cos = torch.cat([angle.cos(), angle.cos()], -1)
        want_sin = torch.cat([angle.sin(), angle.sin()], -1)
        # float32 angles up to T carry ~T * 1e-7.
        tol = 1e-5 * max(1.0, float(t))
        if float((cos - want_cos).abs().max()) <= tol and \
                float((sin - want_sin).abs().max()) <= tol:
            return theta
    return None


# Llama's gated MLP as Hugging Face writes it (LlamaMLP):
#
#     down_proj(act_fn(gate_proj(x)) * up_proj(x)),   act_fn = SiLU
#
# reaches torch.export as mul(silu(gate), up). When gate and up have one
# shape and dtype (no broadcasting) this is one ds.swiglu: one kernel, and
# no silu(gate) tensor kept for the backward.

def match_swiglu(node, env, value_type):
    """(gate node, up node) when `node` is mul(silu(gate), up), either
    order, over operands of the result's shape and dtype; else None."""
    if not _is(node, aten.mul.Tensor) or len(node.args) != 2:
        return None
    out = node.meta.get("val")
    for act, up in (node.args, reversed(node.args)):
        if not _is(act, aten.silu.default) or not isinstance(up, torch.fx.Node):
            continue
        gate = act.args[0]
        g, u = env.get(gate), env.get(up)
        if not isinstance(g, value_type) or not isinstance(u, value_type):
            continue
        if out is not None and g.shape == u.shape == tuple(out.shape) and \
                g.elt == u.elt and gate.meta["val"].dtype == out.dtype:
            return gate, up
    return None
