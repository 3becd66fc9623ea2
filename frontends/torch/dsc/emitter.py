"""Builds the body of `func.func @forward` one ds op at a time.

Values are SSA names with a static shape and an element type; constants
stay torch tensors until an op needs them as operands (then they become
`ds.constant`), so that anything computed from constants alone (rotary
tables, causal masks, position ids) is folded at export time."""
import re
from dataclasses import dataclass

import torch

from . import mlir_text as mt
from .ds_ops import OPS


@dataclass(frozen=True)
class Value:
    name: str
    shape: tuple
    elt: str

    @property
    def type(self):
        return mt.tensor_type(self.shape, self.elt)

    @property
    def rank(self):
        return len(self.shape)


class Const:
    """A tensor known at export time."""

    def __init__(self, tensor):
        self.tensor = tensor

    @property
    def shape(self):
        return tuple(self.tensor.shape)


def check_op(text, results):
    """Stops the exporter at an op the ds dialect does not have, or with
    another number of results: a bug here, not in the user's model."""
    mnemonic = text.split(" ", 1)[0]
    info = OPS.get(mnemonic)
    if info is None:
        raise AssertionError(f"exporter bug: {mnemonic} is not a ds op")
    variadic = any(r.endswith("...") for r in info.results)
    if not variadic and len(info.results) != results:
        raise AssertionError(f"exporter bug: {mnemonic} has {len(info.results)} "
                             f"results, not {results}")


class Emitter:
    def __init__(self):
        self.lines = []
        self._next = 0
        self._dropout_ids = 0
        # log_softmax results by name -> their input, so nll_loss of one
        # becomes a fused ds.cross_entropy of the logits.
        self.log_softmax_of = {}

    def fresh(self):
        name = f"%{self._next}"
        self._next += 1
        return name

    def op(self, text, shape, elt, results=1):
        """Appends `%n = text` and returns the result Value (or a list for
        several results, `%n:k`). `text` must start with a ds op that has
        `results` results (ds_ops.py, generated from DsOps.td)."""
        check_op(text, results)
        name = self.fresh()
        if results == 1:
            self.lines.append(f"{name} = {text}")
            return Value(name, tuple(shape), elt)
        self.lines.append(f"{name}:{results} = {text}")
        return [Value(f"{name}#{i}", tuple(s), elt) for i, s in enumerate(shape)]

    def eliminate_dead_code(self, roots):
        """Drops ops whose results nothing reads (a fused pattern leaves its
        pieces behind: Hugging Face's rotary slices). Every ds op the
        emitter writes is pure."""
        name = re.compile(r"%[0-9A-Za-z_]+")
        live = set(roots)
        kept = []
        for line in reversed(self.lines):
            result, _, rest = line.partition(" = ")
            base = result.split(":")[0]
            if base not in live and not any(r.startswith(base + "#") for r in live):
                continue
            kept.append(line)
            live.update(m.group(0) for m in name.finditer(rest))
            live.update(m.group(0).split("#")[0] for m in re.finditer(r"%[0-9A-Za-z_]+#\d+", rest))
        self.lines = kept[::-1]

    def next_dropout_id(self):
        self._dropout_ids += 1
        return self._dropout_ids

    # Operands -----------------------------------------------------------

    def constant(self, tensor, elt):
        tensor = torch.as_tensor(tensor)
        return self.op(f"ds.constant {mt.dense(tensor, elt)}",
                       tuple(tensor.shape), elt)

    def value(self, x, like_elt):
        """`x` as a Value: a Value as is, a Const or a Python number as a
        ds.constant of element type `like_elt`."""
        if isinstance(x, Value):
            return x
        if isinstance(x, Const):
            return self.constant(x.tensor, like_elt)
        if isinstance(x, (int, float, bool)):
            # float64 first: a Python float is a double, and torch.tensor
            # would round it to float32.
            if like_elt in mt.FLOAT_TYPES:
                return self.constant(torch.tensor(float(x), dtype=torch.float64), like_elt)
            return self.constant(torch.tensor(int(x)), like_elt)
        raise TypeError(f"not a tensor operand: {x!r}")

    def cast(self, x, elt):
        if x.elt == elt:
            return x
        return self.op(f"ds.cast {x.name} : {x.type} -> {mt.tensor_type(x.shape, elt)}",
                       x.shape, elt)

    # Ops ----------------------------------------------------------------

    def binary(self, mnemonic, a, b, shape):
        return self.op(f"ds.{mnemonic} {a.name}, {b.name} : {a.type}, {b.type}",
                       shape, a.elt)

    def unary(self, mnemonic, x, attrs=""):
        attrs = f"{attrs} " if attrs else ""
        return self.op(f"ds.{mnemonic} {attrs}{x.name} : {x.type}", x.shape, x.elt)

    def _to_shape(self, mnemonic, x, shape):
        """ds.reshape / ds.broadcast of x to `shape`; x itself when it has it."""
        shape = tuple(shape)
        if shape == x.shape:
            return x
        return self.op(f"ds.{mnemonic} {x.name} : {x.type} -> {mt.tensor_type(shape, x.elt)}",
                       shape, x.elt)

    def reshape(self, x, shape):
        return self._to_shape("reshape", x, shape)

    def transpose(self, x, perm):
        perm = list(perm)
        if perm == list(range(x.rank)):
            return x
        shape = tuple(x.shape[p] for p in perm)
        return self.op(f"ds.transpose {x.name} {perm} : {x.type} -> {mt.tensor_type(shape, x.elt)}",
                       shape, x.elt)

    def broadcast(self, x, shape):
        return self._to_shape("broadcast", x, shape)

    def slice(self, x, offsets, sizes):
        if list(offsets) == [0] * x.rank and tuple(sizes) == x.shape:
            return x
        return self.op(
            f"ds.slice {x.name} offsets {list(offsets)} sizes {list(sizes)} : "
            f"{x.type} -> {mt.tensor_type(sizes, x.elt)}", sizes, x.elt)

    def matmul(self, a, b, shape, transpose_rhs=False):
        attr = " {transpose_rhs}" if transpose_rhs else ""
        return self.op(f"ds.matmul {a.name}, {b.name}{attr} : {a.type}, {b.type} -> "
                       f"{mt.tensor_type(shape, a.elt)}", shape, a.elt)

    def reduce(self, mnemonic, x, axes, keepdim):
        axes = sorted(a % x.rank for a in axes)
        shape = tuple(1 if d in axes else s for d, s in enumerate(x.shape)
                      if keepdim or d not in axes)
        kd = " keepdim" if keepdim else ""
        return self.op(f"ds.{mnemonic} {x.name} axes {axes}{kd} : {x.type} -> "
                       f"{mt.tensor_type(shape, x.elt)}", shape, x.elt)
