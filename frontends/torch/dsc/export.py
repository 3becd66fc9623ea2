"""PyTorch module -> `ds` MLIR (the forward graph dsc compiles) + its weights.

torch.export traces the module as a training step's forward: @forward takes
the token ids and the next-token targets, both [B, T], and returns the loss.
Each ATen op of the exported graph becomes ds ops (aten_ops.py); what
depends only on constants (buffers, arange, masks, rotary tables) is
evaluated here with torch and enters the graph as ds.constant. Parameters
become ds.variable symbols under the module's own state-dict names, so the
weights dsrun writes load back with load_state_dict(strict=True)
(`Exported.state_dict_from`).
"""
import inspect
import operator
import re
from dataclasses import dataclass, field

import torch
from torch.export import ExportGraphSignature
from torch.export.graph_signature import InputKind, OutputKind

from . import mlir_text as mt
from .aten_ops import HANDLERS, Unsupported
from .attention_heads import attention_heads
from .emitter import Const, Emitter, Value
from .native import error_lines, one_line
from .patterns import fuse_rms_norm, match_rotary, match_swiglu

WRAPPED = "module"  # the attribute that holds the user's module in _Step


class ExportError(Exception):
    """One line for the user: what is not supported, where and in which
    module. dsc's tools print it and exit 2."""


class _Step(torch.nn.Module):
    def __init__(self, module, loss):
        super().__init__()
        setattr(self, WRAPPED, module)
        self.loss = loss

    def forward(self, tokens, targets):
        m = getattr(self, WRAPPED)
        if self.loss == "module":
            return _loss_of(m(tokens, targets))
        out = m(tokens)
        logits = getattr(out, "logits", out)
        if isinstance(logits, (tuple, list)):
            logits = logits[0]
        if self.loss == "cross_entropy":
            return torch.nn.functional.cross_entropy(
                logits.reshape(-1, logits.size(-1)), targets.reshape(-1))
        return self.loss(logits, targets)


_IF_LOGITS = "; pass loss='cross_entropy' if it returns logits"


def _shape(t):
    return "[" + ", ".join(str(d) for d in t.shape) + "]"


def _loss_of(out):
    """The scalar loss in what module(tokens, targets) returned: the
    tensor, the one scalar of a tuple (nanoGPT's (logits, loss)) or the
    `loss` of an object that has one (a ModelOutput)."""
    if isinstance(out, torch.Tensor):
        if out.dim() != 0:
            raise ExportError(f"the module returned a tensor of shape {_shape(out)}, "
                              f"not a scalar loss{_IF_LOGITS}")
        return out
    loss = out.get("loss") if isinstance(out, dict) else getattr(out, "loss", None)
    if isinstance(loss, torch.Tensor) and loss.dim() == 0:
        return loss
    if isinstance(out, (tuple, list)):
        scalars = [o for o in out if isinstance(o, torch.Tensor) and o.dim() == 0]
        if len(scalars) == 1:
            return scalars[0]
        shapes = ", ".join(_shape(o) if isinstance(o, torch.Tensor) else type(o).__name__
                           for o in out)
        raise ExportError(f"the module returned a {type(out).__name__} of ({shapes}), "
                          f"not one scalar loss{_IF_LOGITS}")
    raise ExportError(f"the module returned a {type(out).__name__} with no scalar loss"
                      f"{_IF_LOGITS}")


def _takes_labels(module):
    """The name of forward's second parameter when the module wants its
    targets as labels= (a Hugging Face model) instead; None otherwise."""
    try:
        params = list(inspect.signature(module.forward).parameters)
    except (TypeError, ValueError):
        return None
    if "labels" in params and len(params) > 1 and params[1] not in ("labels", "targets"):
        return params[1]
    return None


# Tokens of a micro-batch: dsc's plans index them in 32 bits
# (compiler/Compile.cpp's kMaxBatch).
MAX_TOKENS = 1 << 31
# A failed trace is run again eagerly for the user's own exception, on
# the whole batch up to this many tokens, else on one sequence.
_EAGER_TOKENS = 1 << 16


def _example_batch(batch_size, block_size):
    """Token ids and targets for the trace. torch.export traces with fake
    tensors and never reads them, so they are left unwritten: a large
    batch costs address space, not memory."""
    if batch_size <= 0 or block_size <= 0:
        raise ExportError(f"batch size {batch_size} x block size {block_size}: "
                          "both must be positive")
    if batch_size * block_size > MAX_TOKENS:
        raise ExportError(f"batch size {batch_size} x block size {block_size}: "
                          f"{batch_size * block_size} tokens a micro-batch, at most {MAX_TOKENS}")
    try:
        return (torch.empty(batch_size, block_size, dtype=torch.long),
                torch.empty(batch_size, block_size, dtype=torch.long))
    except (RuntimeError, MemoryError) as e:
        raise ExportError(f"batch size {batch_size} x block size {block_size}: cannot "
                          f"allocate the example batch: {one_line(str(e))}") from None


def _why_export_failed(step, error, batch_size, block_size):
    """The ExportError for a failed torch.export: the forward run eagerly
    (without gradients) shows the user's own exception, which the trace
    wraps ("Observed exception"); torch.export's first line otherwise."""
    rows = batch_size if batch_size * block_size <= _EAGER_TOKENS else 1
    zeros = torch.zeros(rows, block_size, dtype=torch.long)
    try:
        with torch.no_grad():
            step(zeros, zeros.clone())
    except ExportError as e:
        return e
    except Exception as e:  # the user's forward: whatever it raises is the cause
        message = f": {one_line(str(e))}" if str(e).strip() else ""
        return ExportError(f"forward raised {type(e).__name__}{message} (tokens of shape "
                           f"[{batch_size}, {block_size}]: batch size x block size)")
    return ExportError(f"torch.export failed: {error_lines(error)[0]}")


@dataclass
class Exported:
    """The result of `export`: `mlir` is the module's text; `weights` maps
    each trained parameter's name to its initial value; `aliases` names the
    state-dict entries that share a parameter (tied weights) and
    `buffers` the persistent buffers and frozen parameters, which the graph
    holds as constants, so a state dict can be rebuilt from trained weights."""
    mlir: str
    weights: dict
    aliases: dict = field(default_factory=dict)
    buffers: dict = field(default_factory=dict)

    def save(self, mlir_path, weights_path=None):
        """Writes the MLIR and, given a path, the initial weights: by
        files.py's rules (regular files or /dev/null, never the same file
        twice, all or nothing); dsc.InputError otherwise."""
        from .files import check_distinct, check_output, write_outputs, write_safetensors
        outputs = [("mlir_path", mlir_path), ("weights_path", weights_path)]
        for what, path in outputs:
            if path is not None:
                check_output(path, what)
        check_distinct([], outputs)

        def write_mlir(path):
            with open(path, "w") as f:
                f.write(self.mlir)
        writers = [(mlir_path, write_mlir)]
        if weights_path is not None:
            writers.append((weights_path, lambda path: write_safetensors(
                {k: v.detach().contiguous() for k, v in self.weights.items()}, path)))
        write_outputs(writers)

    def state_dict_from(self, weights):
        """A state dict for the original module from trained `weights`
        (name -> tensor, as dsrun --export-weights writes them)."""
        sd = dict(self.buffers)
        for name, tensor in weights.items():
            sd[name] = tensor
        for alias, canonical in self.aliases.items():
            if canonical in weights:
                sd[alias] = weights[canonical]
        return sd


def export(module, batch_size, block_size, loss="module", dtype=None):
    """Exports `module` for training on [batch_size, block_size] token ids.

    loss: "module" (module(tokens, targets) returns the loss, or a tuple
    holding one scalar, as nanoGPT's GPT does), "cross_entropy"
    (module(tokens) returns logits [B, T, V] or an object with `.logits`, as
    Hugging Face models do; the loss is their mean cross-entropy against
    the targets), or a function (logits, targets) -> loss."""
    if loss == "module" and _takes_labels(module):
        raise ExportError(
            f"{type(module).__name__}.forward takes labels= (a Hugging Face model), and "
            f"loss='module' would pass the targets as its {_takes_labels(module)}: pass "
            "loss='cross_entropy' (--loss cross_entropy); dsc's targets are the next tokens")
    tokens, targets = _example_batch(batch_size, block_size)
    step = _Step(module, loss)
    try:
        ep = torch.export.export(step, (tokens, targets))
    except ExportError:
        raise
    except Exception as e:  # torch.export's own failures are long; keep the cause
        raise _why_export_failed(step, e, batch_size, block_size) from e
    fuse_rms_norm(ep.graph_module)
    return _Lowering(ep, module).run()


def _strip(name):
    prefix = WRAPPED + "."
    return name[len(prefix):] if name.startswith(prefix) else name


def _init_of(t):
    """The ds initializer that best describes a tensor (dsrun's --init-from
    gives the real values; this is what re-initialization would draw)."""
    t = t.detach().double()
    if bool((t == 0).all()):
        return "zeros"
    if bool((t == 1).all()):
        return "ones"
    std = float(t.std()) if t.numel() > 1 else abs(float(t.reshape(-1)[0]))
    return f"normal std {mt.float_literal(max(std, 1e-12))}"


_MODULE_PATH_CLEANUPS = [
    (re.compile(r"^L\['[^']*'\]\.?"), ""),
    (re.compile(r"\[slice\([^)]*\)\]"), ""),
    (re.compile(r"\._modules\['([^']*)'\]"), r".\1"),
    (re.compile(r"\[(\d+)\]"), r".\1"),
    (re.compile(r"\['([^']*)'\]"), r".\1"),
]


def _where(node):
    """'file.py:57 in transformer.h.3.attn' for an error message."""
    parts = []
    trace = node.meta.get("stack_trace") or ""
    files = re.findall(r'File "([^"]+)", line (\d+)', trace)
    if files:
        parts.append(f"at {files[-1][0]}:{files[-1][1]}")
    stack = node.meta.get("nn_module_stack") or {}
    if stack:
        path = list(stack.values())[-1][0]
        for pattern, repl in _MODULE_PATH_CLEANUPS:
            path = pattern.sub(repl, path)
        path = _strip(path)
        if path and path != WRAPPED:
            parts.append(f"in {path}")
    return " ".join(parts) if parts else "(no source location)"


def _flatten(x):
    if isinstance(x, (tuple, list)):
        for y in x:
            yield from _flatten(y)
    else:
        yield x


def _materialize(x):
    if isinstance(x, Const):
        return x.tensor
    if isinstance(x, (tuple, list)):
        return type(x)(_materialize(y) for y in x)
    return x


def _wrap(result):
    if isinstance(result, torch.Tensor):
        return Const(result)
    if isinstance(result, (tuple, list)):
        return tuple(_wrap(r) for r in result)
    return result


def _named_args(target, args, kwargs):
    schema = target._schema
    named = {}
    for i, arg in enumerate(schema.arguments):
        if not arg.kwarg_only and i < len(args):
            named[arg.name] = args[i]
        elif arg.name in kwargs:
            named[arg.name] = kwargs[arg.name]
        elif arg.has_default_value():
            named[arg.name] = arg.default_value
        else:
            named[arg.name] = None
    return named


_HIGHER_ORDER = ("wrap_with_set_grad_enabled", "wrap_with_autocast")


class _Lowering:
    def __init__(self, ep, module):
        self.ep = ep
        self.module = module
        self.em = Emitter()

    def run(self):
        ep, em = self.ep, self.em
        sig: ExportGraphSignature = ep.graph_signature
        for spec in sig.output_specs:
            if spec.kind != OutputKind.USER_OUTPUT:
                raise ExportError(f"the module mutates {spec.target} during the forward "
                                  f"({spec.kind.name.lower()}); dsc needs a pure forward")
        trainable = {n for n, p in self.module.named_parameters(remove_duplicate=False)
                     if p.requires_grad}
        env, variables, user = {}, [], []
        graph = ep.graph_module.graph
        placeholders = [n for n in graph.nodes if n.op == "placeholder"]
        live = self._live(graph)
        loads, loaded = [], {}
        for node, spec in zip(placeholders, sig.input_specs):
            if spec.kind == InputKind.USER_INPUT:
                v = Value(f"%arg{len(user)}", tuple(node.meta["val"].shape), "i32")
                user.append(v)
                env[node] = v
            elif spec.kind == InputKind.PARAMETER and _strip(spec.target) in trainable:
                name = _strip(spec.target)
                tensor = ep.state_dict[spec.target]
                elt = mt.element_type(tensor.dtype)
                if name not in loaded:  # a tied parameter may be lifted twice
                    variables.append((name, tensor, elt))
                    loaded[name] = Value(em.fresh(), tuple(tensor.shape), elt)
                    loads.append(f"{loaded[name].name} = ds.load {mt.symbol(name)} : "
                                 f"{loaded[name].type}")
                env[node] = loaded[name]
            else:  # buffers, frozen parameters, lifted constants
                source = ep.state_dict if spec.target in ep.state_dict else ep.constants
                env[node] = Const(source[spec.target].detach())
        if len(user) != 2:
            raise ExportError("internal: the step takes tokens and targets")
        result = self._walk(ep.graph_module, env, live)
        out = result[0] if isinstance(result, (tuple, list)) else result
        if not isinstance(out, Value) or out.shape != () or out.elt not in mt.FLOAT_TYPES:
            raise ExportError("the loss is not a scalar computed from the inputs")
        out = em.cast(out, "f32")
        em.eliminate_dead_code([out.name])

        weights = {name: tensor for name, tensor, _ in variables}
        aliases, buffers = self._aliases_and_buffers(weights)
        attrs = ""
        if aliases:
            # Tied names: dsrun writes and reads them with their parameter's
            # values (Plan.aliases), so its weights load with strict=True.
            pairs = ", ".join(f"{_string(a)} = {_string(of)}" for a, of in sorted(aliases.items()))
            attrs = f" attributes {{ds.aliases = {{{pairs}}}}}"
        lines = [f"module @{_module_name(self.module)}{attrs} {{"]
        heads = attention_heads(self.module,
                                [(name, tuple(tensor.shape)) for name, tensor, _ in variables])
        for name, tensor, elt in variables:
            marks = f" {{ds.attention_heads = {heads[name]} : i64}}" if name in heads else ""
            lines.append(f"  ds.variable param {mt.symbol(name)} : "
                         f"{mt.tensor_type(tuple(tensor.shape), elt)} init {_init_of(tensor)}{marks}")
        args = ", ".join(f"{v.name}: {v.type}" for v in user)
        lines.append(f"  func.func @forward({args}) -> tensor<f32> {{")
        for line in loads + em.lines:
            lines.append("    " + line)
        lines.append(f"    return {out.name} : tensor<f32>")
        lines.append("  }")
        lines.append("}")
        return Exported("\n".join(lines) + "\n", weights, aliases, buffers)

    def _aliases_and_buffers(self, weights):
        aliases, buffers = {}, {}
        by_id = {}
        for name, p in self.module.named_parameters(remove_duplicate=False):
            by_id.setdefault(id(p), []).append(name)
        for names in by_id.values():
            canonical = next((n for n in names if n in weights), None)
            for n in names:
                if canonical is not None and n != canonical:
                    aliases[n] = canonical
        for name, t in self.module.state_dict().items():
            if name not in weights and name not in aliases:
                buffers[name] = t.detach().clone()
        return aliases, buffers

    def _live(self, graph):
        out = next(n for n in graph.nodes if n.op == "output")
        live, stack = set(), [out]
        while stack:
            n = stack.pop()
            if n in live:
                continue
            live.add(n)
            stack.extend(n.all_input_nodes)
        return live

    def _walk(self, gm, env, live=None):
        """Lowers the nodes of `gm`'s graph (those in `live`, or all) with
        `env` mapping its placeholders; returns what its output returns."""
        for node in gm.graph.nodes:
            if live is not None and node not in live:
                continue
            if node.op == "placeholder":
                continue
            if node.op == "output":
                return _map_args(node.args[0], env)
            if node.op == "get_attr":
                env[node] = _get_attr(gm, node.target)
                continue
            if node.op != "call_function":
                raise ExportError(f"unsupported graph node {node.op} {_where(node)}")
            args = _map_args(node.args, env)
            kwargs = _map_args(node.kwargs, env)
            target = node.target
            if target is operator.getitem:
                env[node] = args[0][args[1]]
                continue
            if any(h in str(target) for h in _HIGHER_ORDER):
                env[node] = self._higher_order(node, args, kwargs)
                continue
            if not any(isinstance(x, Value) for x in _flatten(list(args) + list(kwargs.values()))):
                env[node] = _wrap(target(*_materialize(args), **_materialize(kwargs)))
                continue
            op = str(target)
            rotary = match_rotary(node, env, Value, Const)
            if rotary is not None:
                x, theta = env[rotary[0]], rotary[1]
                env[node] = self.em.op(
                    f"ds.rotary {x.name} theta {mt.float_literal(theta)} : {x.type}",
                    x.shape, x.elt)
                continue
            swiglu = match_swiglu(node, env, Value)
            if swiglu is not None:
                gate, up = env[swiglu[0]], env[swiglu[1]]
                env[node] = self.em.op(f"ds.swiglu {gate.name}, {up.name} : {gate.type}",
                                       gate.shape, gate.elt)
                continue
            handler = HANDLERS.get(op)
            if handler is None:
                raise ExportError(f"unsupported op {op} {_where(node)}")
            try:
                env[node] = handler(self.em, _named_args(target, args, kwargs), node.meta["val"])
            except Unsupported as e:
                raise ExportError(f"unsupported op {op} {_where(node)}: {e}") from None
            except KeyError as e:  # a dtype with no ds element type
                raise ExportError(f"unsupported op {op} {_where(node)}: dtype {e.args[0]} "
                                  "(ds has f32, f16, bf16, f64 and integer indices)") from None
        raise ExportError("internal: graph without output")

    def _higher_order(self, node, args, kwargs):
        """wrap_with_set_grad_enabled(enabled, submodule, *args) and the like:
        folded when every input is a constant, else its graph is inlined."""
        if not any(isinstance(x, Value) for x in _flatten(list(args))):
            return _wrap(node.target(*_materialize(args), **_materialize(kwargs)))
        sub = next(a for a in args if isinstance(a, torch.fx.GraphModule))
        inputs = args[list(args).index(sub) + 1:]
        placeholders = [n for n in sub.graph.nodes if n.op == "placeholder"]
        return self._walk(sub, dict(zip(placeholders, inputs)))


def _get_attr(gm, target):
    obj = gm
    for part in target.split("."):
        obj = getattr(obj, part)
    return Const(obj) if isinstance(obj, torch.Tensor) else obj


def _map_args(x, env):
    if isinstance(x, torch.fx.Node):
        return env[x]
    if isinstance(x, (tuple, list)):
        return type(x)(_map_args(y, env) for y in x)
    if isinstance(x, dict):
        return {k: _map_args(v, env) for k, v in x.items()}
    return x


def _string(text):
    """An MLIR string literal."""
    return '"' + text.replace("\\", "\\5C").replace('"', "\\22") + '"'


def _module_name(module):
    name = re.sub(r"[^A-Za-z0-9_]", "_", type(module).__name__)
    return name if name and not name[0].isdigit() else "model"
