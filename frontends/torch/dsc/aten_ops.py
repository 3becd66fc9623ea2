"""ATen ops -> ds ops. One handler per op family; HANDLERS maps an overload's
name ("aten.linear.default") to its handler. A handler gets the Emitter, the
op's arguments by schema name (defaults filled in, tensors already Values or
Consts) and `out`, the shape and dtype torch.export recorded for the result.
It returns a Value, a Const, or a tuple of them. Limits of a mapping raise
Unsupported with a sentence that says what is missing."""
import math

import torch

from . import mlir_text as mt
from .emitter import Const, Value


class Unsupported(Exception):
    pass


HANDLERS = {}


def handles(*names):
    def register(fn):
        for n in names:
            HANDLERS[n] = fn
        return fn
    return register


def shape_of(out):
    return tuple(int(d) for d in out.shape)


def elt_of(out):
    return mt.element_type(out.dtype)


def float_operands(em, a, b, out):
    """Both operands of an elementwise op as Values of the result's type."""
    elt = elt_of(out)
    return em.cast(em.value(a, elt), elt), em.cast(em.value(b, elt), elt)


# Elementwise ----------------------------------------------------------------

def _binary(mnemonic):
    def handler(em, a, out):
        x, y = float_operands(em, a["self"], a["other"], out)
        return em.binary(mnemonic, x, y, shape_of(out))
    return handler


for _name, _mn in (("mul", "mul"), ("div", "div")):
    handles(f"aten.{_name}.Tensor", f"aten.{_name}.Scalar", f"aten.{_name}.default")(_binary(_mn))


def _additive(mnemonic):
    """add/sub with PyTorch's alpha: self + alpha * other."""
    def handler(em, a, out):
        alpha, other = a.get("alpha", 1), a["other"]
        if alpha != 1:
            if isinstance(other, Value):
                other = em.binary("mul", other, em.value(alpha, other.elt), other.shape)
            elif isinstance(other, Const):
                other = Const(other.tensor * alpha)
            else:
                other = other * alpha
        x, y = float_operands(em, a["self"], other, out)
        return em.binary(mnemonic, x, y, shape_of(out))
    return handler


_add, _sub = _additive("add"), _additive("sub")
handles("aten.add.Tensor", "aten.add.Scalar")(_add)
handles("aten.sub.Tensor", "aten.sub.Scalar")(_sub)


@handles("aten.rsub.Scalar", "aten.rsub.Tensor")
def rsub(em, a, out):
    return _sub(em, {"self": a["other"], "other": a["self"], "alpha": a.get("alpha", 1)}, out)


def _unary(mnemonic, attrs=""):
    def handler(em, a, out):
        x = a["self"]
        return em.unary(mnemonic, em.cast(x, elt_of(out)), attrs)
    return handler


for _name in ("neg", "exp", "log", "tanh", "sqrt", "rsqrt", "relu", "silu"):
    handles(f"aten.{_name}.default")(_unary(_name))


@handles("aten.gelu.default")
def gelu(em, a, out):
    approximate = a["approximate"]
    if approximate not in ("none", "tanh"):
        raise Unsupported(f"gelu approximate={approximate!r}")
    return em.unary("gelu", a["self"], approximate)


@handles("aten.sigmoid.default")
def sigmoid(em, a, out):
    x = a["self"]
    e = em.unary("exp", em.unary("neg", x))
    one = em.value(1.0, x.elt)
    return em.binary("div", one, em.binary("add", one, e, x.shape), x.shape)


@handles("aten.pow.Tensor_Scalar")
def pow_scalar(em, a, out):
    x, p = a["self"], a["exponent"]
    if p == 1:
        return x
    if p == 2:
        return em.binary("mul", x, x, x.shape)
    if p == 3:
        return em.binary("mul", em.binary("mul", x, x, x.shape), x, x.shape)
    if p == 0.5:
        return em.unary("sqrt", x)
    if p == -0.5:
        return em.unary("rsqrt", x)
    if p == -1:
        return em.binary("div", em.value(1.0, x.elt), x, x.shape)
    raise Unsupported(f"pow with exponent {p} (mapped: -1, -0.5, 0.5, 1, 2, 3)")


@handles("aten._to_copy.default", "aten.to.dtype", "aten.to.dtype_layout",
         "aten.type_as.default")
def to_copy(em, a, out):
    x = a["self"]
    if isinstance(x, Const):  # type_as of a constant: stays a constant
        return Const(x.tensor.to(out.dtype))
    elt = elt_of(out)
    if elt not in mt.FLOAT_TYPES or x.elt not in mt.FLOAT_TYPES:
        if elt == x.elt:
            return x
        raise Unsupported(f"conversion from {x.elt} to {elt} of a computed tensor")
    return em.cast(x, elt)


@handles("aten.clone.default", "aten.alias.default", "aten.detach.default",
         "aten.contiguous.default", "aten.lift_fresh_copy.default",
         "aten.dropout.default", "aten.native_dropout.default")
def identity_or_dropout(em, a, out):
    x = a.get("self", a.get("input"))
    p = a.get("p", 0.0)
    train = a.get("train", False)
    if train is None:  # native_dropout's "bool? train": None means training
        train = True
    if p and train:
        y = em.op(f"ds.dropout {x.name} rate {mt.float_literal(p)} id {em.next_dropout_id()} : {x.type}",
                  x.shape, x.elt)
    else:
        y = x
    if isinstance(out, (tuple, list)):  # native_dropout: (result, mask)
        return (y, None)
    return y


@handles("aten.where.self", "aten.where.ScalarOther", "aten.where.ScalarSelf",
         "aten.where.Scalar")
def where(em, a, out):
    return _select(em, a["condition"], a["self"], a["other"], out)


@handles("aten.masked_fill.Scalar", "aten.masked_fill.Tensor")
def masked_fill(em, a, out):
    return _select(em, a["mask"], a["value"], a["self"], out)


def _select(em, cond, yes, no, out):
    """cond ? yes : no with a condition known at export time (a causal mask):
    a Value branch is multiplied by the 0/1 mask, an infinite constant
    branch becomes an additive 0/inf mask (0 * inf would be NaN)."""
    if not isinstance(cond, Const):
        raise Unsupported("where/masked_fill with a condition computed from the "
                          "inputs (only masks known at export time are mapped)")
    elt = elt_of(out)
    shape = shape_of(out)
    keep = cond.tensor.to(torch.bool)

    def constant_of(branch):
        if isinstance(branch, Const):
            return branch.tensor.to(torch.float64)
        return torch.tensor(float(branch), dtype=torch.float64)

    branches = [(yes, keep), (no, ~keep)]
    values = [(b, m) for b, m in branches if isinstance(b, Value)]
    constants = [(constant_of(b), m) for b, m in branches if not isinstance(b, Value)]
    if len(values) == 1 and constants:
        c, m = constants[0]
        fill = torch.where(m, c, torch.zeros((), dtype=torch.float64))
        if bool(torch.isinf(torch.broadcast_to(c, m.shape)[m]).all()):
            # An infinite fill (a causal mask's -inf): added, not
            # multiplied in, so an earlier -inf in the kept value stays
            # -inf instead of turning 0 * inf into NaN.
            return em.binary("add", em.cast(values[0][0], elt), em.constant(fill, elt), shape)
    parts = []
    for branch, mask in branches:
        if isinstance(branch, Value):
            parts.append(em.binary("mul", em.cast(branch, elt),
                                   em.constant(mask.to(torch.float64), elt), shape))
        else:
            parts.append(em.constant(torch.where(mask, constant_of(branch),
                                                 torch.zeros((), dtype=torch.float64)), elt))
    return em.binary("add", parts[0], parts[1], shape)


# Shapes ---------------------------------------------------------------------

@handles("aten.view.default", "aten.reshape.default", "aten._unsafe_view.default",
         "aten.unsqueeze.default", "aten.squeeze.dim", "aten.squeeze.dims",
         "aten.squeeze.default", "aten.flatten.using_ints", "aten.unflatten.int",
         "aten.view_as.default", "aten.reshape_as.default")
def reshape(em, a, out):
    x, shape = a["self"], shape_of(out)
    if isinstance(x, Const):  # a constant viewed as a computed tensor's shape
        return Const(x.tensor.reshape(shape))
    y = em.reshape(x, shape)
    logits = em.log_softmax_of.get(x.name)
    if logits is not None and shape and shape[-1] == x.shape[-1]:
        # log_softmax(...).view(-1, V) still feeds nll_loss as logits would.
        em.log_softmax_of[y.name] = em.reshape(logits, shape)
    return y


@handles("aten.permute.default")
def permute(em, a, out):
    x = a["self"]
    return em.transpose(x, [d % x.rank for d in a["dims"]])


@handles("aten.transpose.int", "aten.swapaxes.default")
def transpose(em, a, out):
    x = a["self"]
    d0, d1 = a.get("dim0", a.get("axis0")) % x.rank, a.get("dim1", a.get("axis1")) % x.rank
    perm = list(range(x.rank))
    perm[d0], perm[d1] = perm[d1], perm[d0]
    return em.transpose(x, perm)


@handles("aten.t.default", "aten.numpy_T.default")
def t(em, a, out):
    x = a["self"]
    return em.transpose(x, list(reversed(range(x.rank))))


@handles("aten.expand.default", "aten.expand_as.default", "aten.broadcast_to.default")
def expand(em, a, out):
    if isinstance(a["self"], Const):
        return Const(a["self"].tensor.expand(shape_of(out)))
    return em.broadcast(a["self"], shape_of(out))


def _norm_range(start, end, size):
    start = 0 if start is None else start
    end = size if end is None else end
    if start < 0:
        start += size
    if end < 0:
        end += size
    return max(0, min(start, size)), max(0, min(end, size))


@handles("aten.slice.Tensor")
def slice_(em, a, out):
    x = a["self"]
    if a["step"] != 1:
        raise Unsupported(f"slice with step {a['step']}")
    dim = a["dim"] % x.rank
    start, end = _norm_range(a["start"], a["end"], x.shape[dim])
    offsets = [0] * x.rank
    sizes = list(x.shape)
    offsets[dim] = start
    sizes[dim] = max(0, end - start)
    return em.slice(x, offsets, sizes)


@handles("aten.select.int")
def select(em, a, out):
    x = a["self"]
    dim = a["dim"] % x.rank
    index = a["index"] % x.shape[dim]
    offsets = [0] * x.rank
    sizes = list(x.shape)
    offsets[dim] = index
    sizes[dim] = 1
    return em.reshape(em.slice(x, offsets, sizes), shape_of(out))


def _split(em, x, dim, sizes):
    dim %= x.rank
    if len(sizes) == 1:
        return (x,)
    shapes = []
    for s in sizes:
        shape = list(x.shape)
        shape[dim] = s
        shapes.append(tuple(shape))
    result_types = ", ".join(mt.tensor_type(s, x.elt) for s in shapes)
    return tuple(em.op(f"ds.split {x.name} axis {dim} sizes {list(sizes)} : {x.type} -> {result_types}",
                       shapes, x.elt, results=len(sizes)))


@handles("aten.split.Tensor", "aten.split_with_sizes.default", "aten.chunk.default",
         "aten.unbind.int", "aten.tensor_split.sections")
def split(em, a, out):
    x = a["self"]
    dim = a.get("dim", 0) % x.rank
    sizes = [int(o.shape[dim]) if o.dim() == x.rank else 1 for o in out]
    parts = _split(em, x, dim, sizes)
    return tuple(em.reshape(p, shape_of(o)) for p, o in zip(parts, out))


@handles("aten.cat.default", "aten.concat.default", "aten.stack.default")
def cat(em, a, out):
    elt = elt_of(out)
    shape = shape_of(out)
    tensors = a["tensors"]
    dim = a["dim"] % len(shape)
    values = []
    for x in tensors:
        v = em.cast(em.value(x, elt), elt)
        if len(v.shape) != len(shape):  # stack: a new axis of size 1
            s = list(v.shape)
            s.insert(dim, 1)
            v = em.reshape(v, s)
        values.append(v)
    if len(values) == 1:
        return values[0]
    types = ", ".join(v.type for v in values)
    names = ", ".join(v.name for v in values)
    return em.op(f"ds.concat {names} axis {dim} : {types} -> {mt.tensor_type(shape, elt)}",
                 shape, elt)


# Reductions -----------------------------------------------------------------

def _reduce(mnemonic):
    def handler(em, a, out):
        x = a["self"]
        dims = a.get("dim")
        if dims is None or dims == []:
            dims = list(range(x.rank))
        elif isinstance(dims, int):
            dims = [dims]
        if a.get("dtype") is not None and elt_of(out) != x.elt:
            x = em.cast(x, elt_of(out))
        return em.reduce(mnemonic, x, dims, bool(a.get("keepdim", False)))
    return handler


handles("aten.sum.dim_IntList", "aten.sum.default")(_reduce("reduce_sum"))
handles("aten.mean.dim", "aten.mean.default")(_reduce("reduce_mean"))
handles("aten.amax.default")(_reduce("reduce_max"))


# Contractions and normalizations --------------------------------------------

@handles("aten.linear.default")
def linear(em, a, out):
    x, w, b = a["input"], a["weight"], a["bias"]
    w = em.value(w, x.elt)
    shape = shape_of(out)
    if w.rank != 2:
        raise Unsupported("linear with a weight of rank other than 2")
    y = em.matmul(x, w, shape, transpose_rhs=True)
    if b is not None:
        y = em.binary("add", y, em.value(b, x.elt), shape)
    return y


@handles("aten.matmul.default", "aten.mm.default", "aten.bmm.default")
def matmul(em, a, out):
    x, w = a["self"], a.get("other", a.get("mat2"))
    elt = elt_of(out)
    x, w = em.value(x, elt), em.value(w, elt)
    if x.rank < 2 or w.rank < 2:
        raise Unsupported("matmul of a vector (both operands need rank >= 2)")
    return em.matmul(x, w, shape_of(out))


@handles("aten.addmm.default")
def addmm(em, a, out):
    elt = elt_of(out)
    if a["beta"] != 1 or a["alpha"] != 1:
        raise Unsupported("addmm with alpha or beta other than 1")
    x, w = em.value(a["mat1"], elt), em.value(a["mat2"], elt)
    y = em.matmul(x, w, shape_of(out))
    return em.binary("add", y, em.value(a["self"], elt), shape_of(out))


@handles("aten.layer_norm.default", "aten.native_layer_norm.default")
def layer_norm(em, a, out):
    x = a["input"]
    if len(a["normalized_shape"]) != 1:
        raise Unsupported("layer_norm over more than the last dimension")
    n = x.shape[-1]
    w = a["weight"] if a["weight"] is not None else Const(torch.ones(n))
    w = em.value(w, x.elt)
    ops = f"{x.name}, {w.name}"
    types = f"{x.type}, {w.type}"
    if a["bias"] is not None:
        b = em.value(a["bias"], x.elt)
        ops += f", {b.name}"
        types += f", {b.type}"
    y = em.op(f"ds.layer_norm {ops} eps {mt.float_literal(a['eps'])} : {types}", x.shape, x.elt)
    if isinstance(out, (tuple, list)):  # native_layer_norm: (out, mean, rstd)
        return (y, None, None)
    return y


@handles("aten.rms_norm.default")
def rms_norm(em, a, out):
    x = a["input"]
    if len(a["normalized_shape"]) != 1:
        raise Unsupported("rms_norm over more than the last dimension")
    eps = a["eps"] if a["eps"] is not None else torch.finfo(out.dtype).eps
    w = a["weight"] if a["weight"] is not None else Const(torch.ones(x.shape[-1]))
    w = em.value(w, x.elt)
    return em.op(f"ds.rms_norm {x.name}, {w.name} eps {mt.float_literal(eps)} : {x.type}, {w.type}",
                 x.shape, x.elt)


def _last_axis(em, x, dim, fn):
    """fn applied over `dim` by moving it last and back."""
    dim %= x.rank
    if dim == x.rank - 1:
        return fn(x)
    perm = list(range(x.rank))
    perm[dim], perm[-1] = perm[-1], perm[dim]
    return em.transpose(fn(em.transpose(x, perm)), perm)


@handles("aten.softmax.int", "aten._softmax.default", "aten._safe_softmax.default")
def softmax(em, a, out):
    x = em.cast(a["self"], elt_of(out))
    return _last_axis(em, x, a["dim"], lambda v: em.unary("softmax", v))


@handles("aten.log_softmax.int", "aten._log_softmax.default")
def log_softmax(em, a, out):
    x = em.cast(a["self"], elt_of(out))

    def lsm(v):
        # v - max - log(sum(exp(v - max))): finite where log(softmax(v))
        # would underflow to -inf (a row's gap beyond ~103 in f32).
        shifted = em.binary("sub", v, em.reduce("reduce_max", v, [-1], True), v.shape)
        total = em.reduce("reduce_sum", em.unary("exp", shifted), [-1], True)
        y = em.binary("sub", shifted, em.unary("log", total), v.shape)
        em.log_softmax_of[y.name] = v
        return y
    return _last_axis(em, x, a["dim"], lsm)


@handles("aten.scaled_dot_product_attention.default")
def sdpa(em, a, out):
    q, k, v = a["query"], a["key"], a["value"]
    if a["dropout_p"]:
        raise Unsupported(f"scaled_dot_product_attention with dropout_p={a['dropout_p']} "
                          "(attention dropout; set it to 0)")
    if a.get("enable_gqa"):
        raise Unsupported("scaled_dot_product_attention with enable_gqa")
    if q.rank != 4:
        raise Unsupported("scaled_dot_product_attention on tensors that are not [B, H, T, D]")
    causal = bool(a["is_causal"])
    mask = a["attn_mask"]
    if mask is not None:
        if not isinstance(mask, Const) or not _is_causal_mask(mask.tensor, q.shape[2], k.shape[2]):
            raise Unsupported("scaled_dot_product_attention with an attn_mask that is "
                              "not a causal mask known at export time")
        causal = True
    if causal and q.shape[2] != k.shape[2]:
        raise Unsupported("causal attention with queries and keys of different lengths")
    scale = a["scale"] if a["scale"] is not None else 1.0 / math.sqrt(q.shape[-1])
    flag = " causal" if causal else ""
    return em.op(f"ds.attention {q.name}, {k.name}, {v.name} scale {mt.float_literal(scale)}{flag} : "
                 f"{q.type}, {k.type}, {v.type} -> {mt.tensor_type(shape_of(out), q.elt)}",
                 shape_of(out), q.elt)


def _is_causal_mask(mask, tq, tk):
    if tq != tk or mask.dim() < 2 or tuple(mask.shape[-2:]) != (tq, tk):
        return False
    lower = torch.ones(tq, tk, dtype=torch.bool).tril()
    m = mask.reshape(-1, tq, tk)
    if mask.dtype == torch.bool:
        return bool((m == lower).all())
    # Additive: 0 where attended, very negative (or -inf) elsewhere.
    finite_min = torch.finfo(mask.dtype).min if mask.is_floating_point() else -1
    ok_keep = (m[:, lower] == 0).all()
    ok_drop = (m[:, ~lower] <= finite_min / 2).all()
    return bool(ok_keep and ok_drop)


# Lookup and loss ------------------------------------------------------------

@handles("aten.embedding.default")
def embedding(em, a, out):
    w, idx = a["weight"], a["indices"]
    if a["padding_idx"] not in (None, -1):
        raise Unsupported(f"embedding with padding_idx={a['padding_idx']} "
                          "(its row would still be trained)")
    if a["scale_grad_by_freq"] or a["sparse"]:
        raise Unsupported("embedding with scale_grad_by_freq or sparse gradients")
    w = em.value(w, elt_of(out))
    idx = em.value(idx, "i32")
    shape = shape_of(out)
    return em.op(f"ds.embedding {w.name}, {idx.name} : {w.type}, {idx.type} -> "
                 f"{mt.tensor_type(shape, w.elt)}", shape, w.elt)


def _cross_entropy(em, logits, target, ignore_index, out):
    # PyTorch's class dimension is 1 ([N, C, d1, ...]); ds's is the last.
    if logits.rank > 2:
        logits = em.transpose(logits, [0] + list(range(2, logits.rank)) + [1])
    target = em.value(target, "i32")
    attr = f" {{ignore_index = {int(ignore_index)}}}" if ignore_index != -1 else ""
    return em.op(f"ds.cross_entropy {logits.name}, {target.name}{attr} : {logits.type}, "
                 f"{target.type} -> tensor<{'f32' if logits.elt in ('f16', 'bf16') else logits.elt}>",
                 (), "f32" if logits.elt in ("f16", "bf16") else logits.elt)


@handles("aten.cross_entropy_loss.default")
def cross_entropy(em, a, out):
    if a["weight"] is not None:
        raise Unsupported("cross_entropy with class weights")
    if a["reduction"] != 1:
        raise Unsupported("cross_entropy with a reduction other than 'mean'")
    if a["label_smoothing"]:
        raise Unsupported("cross_entropy with label_smoothing")
    logits = a["self"]
    if logits.rank != a["target"].rank + 1 if hasattr(a["target"], "rank") else False:
        raise Unsupported("cross_entropy with class probabilities as targets")
    return _cross_entropy(em, logits, a["target"], a["ignore_index"], out)


@handles("aten.nll_loss.default", "aten.nll_loss_forward.default", "aten.nll_loss_nd.default")
def nll_loss(em, a, out):
    x = a["self"]
    if a["weight"] is not None or a["reduction"] != 1:
        raise Unsupported("nll_loss with class weights or a reduction other than 'mean'")
    logits = em.log_softmax_of.get(x.name)
    if logits is None:
        raise Unsupported("nll_loss of anything but log_softmax (use cross_entropy)")
    if x.rank > 2:
        # Classes are dimension 1 there; the fused log_softmax ran over the
        # last one.
        raise Unsupported("nll_loss of [N, C, d...] inputs (reshape to [N, C] or use "
                          "cross_entropy)")
    loss = _cross_entropy(em, logits, a["target"], a["ignore_index"], out)
    if isinstance(out, (tuple, list)):  # nll_loss_forward: (loss, total_weight)
        return (loss, None)
    return loss
