"""The named plan mutations. Each stands for a real compiler or runtime bug
and must be caught ("killed") by the checks the real tests run.

A mutation is a function plan -> [change, ...] registered with @mutant. It
edits the plan (the dict of plan_json.load) in place and returns one line
per change it made. It finds its target by kernel, loc, attribute pattern
or the variables the instruction touches, never by a fixed index, and
raises MutationError when the target is not there: a mutation that changes
nothing is an error, not a kill. Mutations keep the plan valid for dsrun's
verifier (in-bounds, aligned buffers; attributes in range; events intact),
so that what kills them is a numerical check.

`base` names the compiled plan a mutation applies to (run_mutants.py's
BASES: how it is compiled and which check runs against it).
"""
import json
import struct

import plan_json as pj
from plan_json import vec


class MutationError(Exception):
    pass


class Mutant:
    def __init__(self, name, base, func, pending=None):
        self.name, self.base, self.func, self.pending = name, base, func, pending
        self.doc = " ".join((func.__doc__ or "").split())

    def apply(self, plan):
        changes = self.func(plan)
        if not changes:
            raise MutationError("the mutation changed nothing")
        return changes


MUTANTS = []


def mutant(name, base, pending=None):
    """Registers a mutation. `pending` (a reason) makes the runner skip its
    check unless --run-pending is given."""
    def register(func):
        MUTANTS.append(Mutant(name, base, func, pending))
        return func
    return register


def by_name(name):
    for m in MUTANTS:
        if m.name == name:
            return m
    raise KeyError(name)


# --- helpers -------------------------------------------------------------

def need(cond, message):
    if not cond:
        raise MutationError(message)


def select(plan, kernels, programs=None):
    """(program, index, instr) for every instruction running one of
    `kernels`, in the programs given (default: all)."""
    kernels = {kernels} if isinstance(kernels, str) else set(kernels)
    progs = plan["programs"] if programs is None else programs
    return [(p, i, ins) for p in progs for i, ins in enumerate(vec(p, "instrs"))
            if ins["kernel"] in kernels]


def forward_end(prog):
    """Index of the loss (ds.cross_entropy, or the fused head's
    ds.linear_cross_entropy): instructions before it are the forward pass,
    those after it the backward pass."""
    for i, ins in enumerate(vec(prog, "instrs")):
        if ins["kernel"] in ("ds.cross_entropy", "ds.linear_cross_entropy"):
            return i
    raise MutationError(f"@{prog['name']} has no ds.cross_entropy (the loss)")


def set_attr(changes, prog, index, ins, key, pos, new):
    attrs = vec(ins, key)
    need(len(attrs) > pos, f"{pj.describe(prog, index, ins)} has no {key}[{pos}]")
    old = attrs[pos]
    need(old != new, f"{pj.describe(prog, index, ins)}: {key}[{pos}] is already {new!r}")
    attrs[pos] = new
    ins[key] = attrs
    changes.append(f"{pj.describe(prog, index, ins)}: {key}[{pos}] {old!r} -> {new!r}")


def last_writer(prog, before, rng, plan):
    """The last instruction before index `before` whose output overlaps the
    byte range rng, as (index, instr), or (None, None)."""
    for i in range(before - 1, -1, -1):
        ins = prog["instrs"][i]
        if any(pj.overlaps(pj.buffer_range(plan, o), rng) for o in vec(ins, "outputs")):
            return i, ins
    return None, None


def adamw_groups(plan):
    """(program, index, instr, decayed) for every ds.adamw. Its p operand
    is a flat view over one parameter group; the group is the decayed one
    when every parameter inside it has weight_decay (nanoGPT's groups)."""
    out = []
    for prog, i, ins in select(plan, "ds.adamw"):
        members = pj.params_within(plan, vec(ins, "inputs")[0])
        need(members, f"{pj.describe(prog, i, ins)}: no parameter lies in its p operand")
        flags = {v["weight_decay"] for v in members}
        need(len(flags) == 1, f"{pj.describe(prog, i, ins)} updates decayed and "
             "non-decayed parameters together")
        decayed = flags.pop()
        wd = vec(ins, "float_attrs")[3]
        need((wd > 0) == decayed, f"{pj.describe(prog, i, ins)}: weight_decay {wd} "
             f"but its parameters have weight_decay={decayed}")
        out.append((prog, i, ins, decayed))
    need(out, "the plan has no ds.adamw")
    return out


def add_buffer(plan, like, **fields):
    """Appends a copy of buffer `like` with `fields` changed; its id."""
    b = dict(plan["buffers"][like])
    b.update(fields)
    plan["buffers"].append(b)
    return len(plan["buffers"]) - 1


# --- GPT-2 against PyTorch -----------------------------------------------

@mutant("attention-scale-zero", "gpt2")
def attention_scale_zero(plan):
    """The softmax scale of the forward attention is 0 instead of
    1/sqrt(head_dim): a lost or mis-read scale attribute, which makes
    every attention row uniform over the visible keys."""
    changes = []
    for prog, i, ins in select(plan, "ds.attention"):
        set_attr(changes, prog, i, ins, "float_attrs", 0, 0.0)
    return changes


@mutant("gelu-erf", "gpt2")
def gelu_erf(plan):
    """GELU in its erf form where the model (nanoGPT: tanh approximation)
    asks for tanh: the approximate flag dropped in lowering, forward and
    backward alike. The CPU kernels read approximate 1 as tanh, 0 as erf."""
    changes = []
    fwd = select(plan, ("ds.gelu", "ds.bias_gelu", "ds.matmul_bias_gelu"))
    bwd = select(plan, ("ds.gelu_grad", "ds.matmul_gelu_grad"))
    need(fwd and bwd, "need a forward GELU (ds.gelu/ds.bias_gelu/"
         "ds.matmul_bias_gelu) and its gradient (ds.gelu_grad/"
         "ds.matmul_gelu_grad)")
    for prog, i, ins in fwd + bwd:
        # A fused matmul's flag follows the two transpose flags.
        k = 2 if ins["kernel"].startswith("ds.matmul_") else 0
        need(vec(ins, "int_attrs")[k:k + 1] == [1],
             f"{pj.describe(prog, i, ins)}: approximate is not 1 (tanh)")
        set_attr(changes, prog, i, ins, "int_attrs", k, 0)
    return changes


@mutant("adamw-betas", "gpt2")
def adamw_betas(plan):
    """AdamW with betas (0, 0.5) instead of the configured (0.9, 0.95): the
    optimizer's betas not taken from the config."""
    changes = []
    for prog, i, ins in select(plan, "ds.adamw"):
        set_attr(changes, prog, i, ins, "float_attrs", 0, 0.0)
        set_attr(changes, prog, i, ins, "float_attrs", 1, 0.5)
    return changes


@mutant("weight-decay-zero", "gpt2")
def weight_decay_zero(plan):
    """No weight decay in the decayed group (matrices and embeddings): the
    configured weight_decay lost, or both groups treated as no-decay."""
    changes = []
    for prog, i, ins, decayed in adamw_groups(plan):
        if decayed:
            set_attr(changes, prog, i, ins, "float_attrs", 3, 0.0)
    return changes


@mutant("attention-backward-scale", "gpt2")
def attention_backward_scale(plan):
    """ds.attention_grad uses 1/head_dim where the forward uses
    1/sqrt(head_dim): a backward kernel recomputing the probabilities with
    another scale than the forward's. Forward untouched."""
    changes = []
    for prog, i, ins in select(plan, "ds.attention_grad"):
        s = vec(ins, "float_attrs")[0]
        need(0 < s < 1, f"{pj.describe(prog, i, ins)}: scale {s} is not 1/sqrt(d)")
        set_attr(changes, prog, i, ins, "float_attrs", 0, s * s)
    return changes


@mutant("no-decay-update-deleted", "gpt2")
def no_decay_update_deleted(plan):
    """The no-decay group (biases, norm gains) never updated: its ds.adamw
    dropped, e.g. by dead-code elimination that thinks in-place updates
    unused. Here it becomes ds.copy p -> p (a no-op the verifier accepts;
    the instruction keeps its stream and events)."""
    changes = []
    for prog, i, ins, decayed in adamw_groups(plan):
        if decayed:
            continue
        p = vec(ins, "inputs")[0]
        old = pj.describe(prog, i, ins)
        ins.update(kernel="ds.copy", inputs=[p], outputs=[p], int_attrs=[],
                   float_attrs=[])
        changes.append(f"{old} -> ds.copy {p} -> {p} "
                       f"({plan['buffers'][p].get('name')})")
    return changes


@mutant("stale-activation-view", "gpt2")
def stale_activation_view(plan):
    """A stale view of a saved activation: the reshape view through which
    the backward reads h.1's MLP activation (GELU output) for
    c_proj.weight's gradient points one tensor-size lower in the
    activations arena, where other data lives (the memory planner moved
    the buffer and not its alias). Only that weight gradient is wrong."""
    param = "transformer.h.1.mlp.c_proj.weight"
    g = pj.grad_of(plan, param)
    need(g, f"no gradient variable for {param}")
    gbuf = g["buffer"]
    pbuf = pj.variable(plan, param)["buffer"]
    changes, moved = [], set()
    for prog in pj.micro_programs(plan):
        instrs = vec(prog, "instrs")
        # The forward matmul x @ W (+ b): x is the activation the backward
        # saves.
        fwd = [ins for _, _, ins in
               select(plan, ("ds.matmul", "ds.matmul_bias"), [prog])
               if vec(ins, "inputs")[1:2] == [pbuf]
               and vec(ins, "int_attrs") == [0, 1]]
        need(len(fwd) == 1, f"@{prog['name']}: {len(fwd)} forward matmuls with {param}")
        act = pj.buffer_range(plan, fwd[0]["inputs"][0])
        # grad += dW, dW = dy^T-ish matmul (transposed lhs) of dy and x.
        acc = [(i, ins) for i, ins in enumerate(instrs) if ins["kernel"] == "ds.add"
               and vec(ins, "outputs") == [gbuf] and gbuf in vec(ins, "inputs")]
        need(len(acc) == 1, f"@{prog['name']}: {len(acc)} accumulations into {g['name']}")
        ai, add = acc[0]
        dw = [b for b in add["inputs"] if b != gbuf]
        need(len(dw) == 1, f"@{prog['name']}: odd accumulation into {g['name']}")
        mi, mm = last_writer(prog, ai, pj.buffer_range(plan, dw[0]), plan)
        need(mm is not None and mm["kernel"] == "ds.matmul"
             and vec(mm, "int_attrs") == [1, 0],
             f"@{prog['name']}: {g['name']}'s update is not a transposed-lhs ds.matmul")
        views = [k for k, b in enumerate(mm["inputs"])
                 if pj.buffer_range(plan, b) == act
                 and pj.arena_category(plan, b) == "activations"]
        need(len(views) == 1, f"{pj.describe(prog, mi, mm)}: no single input views "
             f"the saved activation {act}")
        k = views[0]
        view = mm["inputs"][k]
        if view in moved:
            continue
        others = [u for u in pj.users(plan, view) if u[:2] != (prog["name"], mi)]
        if others:  # shared view: move a private copy
            view = add_buffer(plan, view)
            mm["inputs"][k] = view
        b = plan["buffers"][view]
        size = pj.buffer_bytes(plan, view)
        arena_bytes = plan["arenas"][b["arena"]]["bytes"]
        off = b["offset"]
        new = off - size if off >= size else off + size
        need(0 <= new and new + size <= arena_bytes,
             f"{b.get('name')}: no room to move {size} bytes inside arena {b['arena']}")
        need(new % 64 == off % 64, "the move would change the alignment")
        b["offset"] = new
        moved.add(view)
        _, there = last_writer(prog, mi, pj.buffer_range(plan, view), plan)
        what = there["kernel"] + " (" + (there.get("loc") or "-") + ")" if there else "nothing"
        changes.append(f"{pj.describe(prog, mi, mm)}: input {k} (buffer {view}, "
                       f"{b.get('name')}) offset {off} -> {new}; last written "
                       f"there by {what}")
    return changes


@mutant("causal-mask-off", "gpt2")
def causal_mask_off(plan):
    """Attention without the causal mask, forward and backward: the causal
    flag dropped, so every position sees the future."""
    changes = []
    for prog, i, ins in select(plan, ("ds.attention", "ds.attention_grad")):
        need(vec(ins, "int_attrs")[:1] == [1], f"{pj.describe(prog, i, ins)} is not causal")
        set_attr(changes, prog, i, ins, "int_attrs", 0, 0)
    return changes


@mutant("layernorm-eps", "gpt2")
def layernorm_eps(plan):
    """Layer norm with eps 1e-3 instead of 1e-5 (forward, fused add+norm
    and backward alike): a default eps used instead of the model's."""
    changes = []
    found = select(plan, ("ds.layer_norm", "ds.add_layer_norm", "ds.layer_norm_grad"))
    need(found, "no layer norm in the plan")
    for prog, i, ins in found:
        set_attr(changes, prog, i, ins, "float_attrs", 0, 1e-3)
    return changes


def fused_divided_input(ins):
    """The input buffer a ds.fused_elementwise's program divides by
    something (runtime/kernels/FusedProgram.h: opcode 3, ds.div; 4 is
    ds.minimum), when it has one such division and a minimum; else None."""
    ints = vec(ins, "int_attrs")
    if not ints:
        return None
    code = [ints[1 + 4 * j:5 + 4 * j] for j in range(ints[0])]
    divs = [op for op in code if op[0] == 3 and op[1] < len(ins["inputs"])]
    if len(divs) != 1 or not any(op[0] == 4 for op in code):
        return None
    return ins["inputs"][divs[0][1]]


@mutant("clip-ignored", "gpt2")
def clip_ignored(plan):
    """Gradient clipping ignored: @apply's clip ratio min(clip / (norm +
    1e-6), 1) computed from a huge threshold, so it is always 1 (a clip
    value lost between the config and the plan)."""
    clip = json.loads(plan["config_json"]).get("gradient_clipping", 0)
    need(clip > 0, "the config does not clip")
    prog = pj.program(plan, "apply")
    need(prog, "no @apply")
    changes, done = [], set()
    for _, i, ins in select(plan, "ds.adamw", [prog]):
        scale = ins["inputs"][6]
        mi, mn = last_writer(prog, i, pj.buffer_range(plan, scale), plan)
        if mn is not None and mn["kernel"] == "ds.fused_elementwise":
            # add, div and minimum in one group: the clip is the input the
            # program's ds.div divides.
            di, dv = mi, mn
            numerator = fused_divided_input(mn)
            need(numerator is not None,
                 f"{pj.describe(prog, mi, mn)}: no ds.div of an input and a ds.minimum in it")
        else:
            need(mn is not None and mn["kernel"] == "ds.minimum",
                 f"{pj.describe(prog, i, ins)}: its scale is not a ds.minimum")
            di, dv = last_writer(prog, mi, pj.buffer_range(plan, mn["inputs"][0]), plan)
            need(dv is not None and dv["kernel"] == "ds.div",
                 f"{pj.describe(prog, mi, mn)}: its ratio is not a ds.div")
            numerator = dv["inputs"][0]
        c = pj.constant_of(plan, numerator)
        need(c is not None and plan["buffers"][c["buffer"]]["dtype"] == "f32"
             and len(vec(c, "data")) == 4,
             f"{pj.describe(prog, di, dv)}: its numerator is not an f32 scalar constant")
        if c["buffer"] in done:
            continue
        shared = [u for u in pj.users(plan, c["buffer"]) if u[:2] != (prog["name"], di)]
        need(not shared, f"constant {c['buffer']} (the clip) is also read by "
             f"{shared}: changing it would change more than the threshold")
        (old,) = struct.unpack("<f", bytes(c["data"]))
        need(old == clip, f"constant {c['buffer']} is {old}, not the clip {clip}")
        c["data"] = list(struct.pack("<f", 1e30))
        done.add(c["buffer"])
        changes.append(f"constant buffer {c['buffer']} (the numerator of "
                       f"{pj.describe(prog, di, dv)}) {old} -> 1e30")
    return changes


@mutant("lr-off-by-one", "gpt2")
def lr_off_by_one(plan):
    """The learning rate one step early during warmup (step counted from 0
    where DeepSpeed's last_batch_iteration starts at step - 1). dsrun's
    linear warmup is lr = min + (max - min) * it / W with it = step - 1;
    raising both ends by d = (max - min) / W gives min + (max - min) *
    (it + 1) / W, the next step's lr. (After warmup the decay is then
    shifted up by d as well.)"""
    s = plan.get("schedule")
    need(s and s["kind"] in ("WarmupLR", "WarmupDecayLR"),
         f"schedule {s and s['kind']} has no linear warmup to shift")
    need(s["warmup_type"] == "linear", f"warmup_type is {s['warmup_type']}, not linear")
    w = max(2, s["warmup_num_steps"])
    lo, hi = s["warmup_min_lr"], s["warmup_max_lr"]
    d = (hi - lo) / w
    need(d != 0, "warmup from and to the same lr")
    s["warmup_min_lr"], s["warmup_max_lr"] = lo + d, hi + d
    return [f"schedule warmup_min_lr {lo!r} -> {lo + d!r}, "
            f"warmup_max_lr {hi!r} -> {hi + d!r} (W = {w})"]


# --- Llama against PyTorch -----------------------------------------------

@mutant("rmsnorm-eps", "llama")
def rmsnorm_eps(plan):
    """RMSNorm with eps 1e-3 instead of the model's 1e-5, forward and
    backward: a default eps used instead of the model's."""
    changes = []
    fwd, bwd = select(plan, "ds.rms_norm"), select(plan, "ds.rms_norm_grad")
    need(fwd and bwd, "need ds.rms_norm and ds.rms_norm_grad")
    for prog, i, ins in fwd + bwd:
        set_attr(changes, prog, i, ins, "float_attrs", 0, 1e-3)
    return changes


@mutant("rotary-theta", "llama")
def rotary_theta(plan):
    """Rotary embeddings with base theta / 10 (10000 -> 1000), forward and
    inverse (backward) rotations alike: a wrong rope_theta default."""
    changes = []
    found = select(plan, "ds.rotary")
    need({vec(ins, "int_attrs")[0] for _, _, ins in found} == {0, 1},
         "need forward (inverse 0) and backward (inverse 1) ds.rotary")
    for prog, i, ins in found:
        set_attr(changes, prog, i, ins, "float_attrs", 0, vec(ins, "float_attrs")[0] / 10)
    return changes


# --- GPT-2 with dropout against PyTorch ----------------------------------

@mutant("dropout-key", "gpt2-dropout")
def dropout_key(plan):
    """The forward dropout's mask drawn from another RNG stream than the
    mask the backward recomputes: forward and backward masks disagree (a
    stream id assigned per op instead of per dropout site). The target is
    the first forward ds.dropout whose id the backward uses again (GPT-2:
    the embeddings', transformer.drop); only that forward instruction
    changes, to an id no other dropout uses."""
    drops = select(plan, "ds.dropout")
    need(drops, "no ds.dropout in the plan (a model with dropout is needed)")
    fresh = max(vec(ins, "int_attrs")[0] for _, _, ins in drops) + 1
    changes, target = [], None
    for prog in pj.micro_programs(plan):
        end = forward_end(prog)
        fwd = [(i, ins) for p, i, ins in drops if p is prog and i < end]
        bwd_ids = {ins["int_attrs"][0] for p, i, ins in drops if p is prog and i > end}
        if target is None:
            shared = [(i, ins) for i, ins in fwd if ins["int_attrs"][0] in bwd_ids]
            need(shared, f"@{prog['name']}: no forward dropout's mask is recomputed "
                 "in the backward")
            target = (shared[0][1].get("loc"), shared[0][1]["int_attrs"][0])
        hits = [(i, ins) for i, ins in fwd
                if (ins.get("loc"), ins["int_attrs"][0]) == target]
        need(len(hits) == 1, f"@{prog['name']}: {len(hits)} forward dropouts at {target}")
        need(target[1] in bwd_ids, f"@{prog['name']}: the backward has no dropout {target[1]}")
        i, ins = hits[0]
        set_attr(changes, prog, i, ins, "int_attrs", 0, fresh)
    return changes


# --- two ranks (ZeRO stage 0) against one ---------------------------------

@mutant("grad-not-reduced-one-rank", "zero2")
def grad_not_reduced_one_rank(plan):
    """On one rank (this plan runs as rank 1 only), one bucket's reduced
    gradient is not used: the copy from the all-reduce's result into
    h.0.attn.c_attn.weight's gradient reads the all-reduce's input (the
    rank's local sum) instead. The collective itself still runs, so the
    ranks do not hang; they silently train on different gradients."""
    prog = pj.program(plan, "micro_step_sync")
    need(prog, "no @micro_step_sync (the program that reduces gradients)")
    param = "transformer.h.0.attn.c_attn.weight"
    g = pj.grad_of(plan, param)
    need(g, f"no gradient variable for {param}")
    instrs = vec(prog, "instrs")
    copies = [(i, ins) for i, ins in enumerate(instrs) if ins["kernel"] == "ds.copy"
              and vec(ins, "outputs") == [g["buffer"]]]
    need(len(copies) == 1, f"@micro_step_sync: {len(copies)} copies into {g['name']}")
    ci, cp = copies[0]
    src = cp["inputs"][0]
    src_rng = pj.buffer_range(plan, src)
    ri, ar = last_writer(prog, ci, src_rng, plan)
    need(ar is not None and ar["kernel"] == "comm.all_reduce"
         and pj.contains(pj.buffer_range(plan, ar["outputs"][0]), src_rng),
         f"{pj.describe(prog, ci, cp)} does not read an all-reduce's result")
    need(set(vec(ar, "record")) & set(vec(cp, "wait")),
         f"{pj.describe(prog, ci, cp)} does not wait on {pj.describe(prog, ri, ar)}")
    a_in, a_out = ar["inputs"][0], ar["outputs"][0]
    need(plan["buffers"][a_in]["dtype"] == plan["buffers"][src]["dtype"],
         "the all-reduce's input has another dtype")
    off = plan["buffers"][a_in]["offset"] + (
        plan["buffers"][src]["offset"] - plan["buffers"][a_out]["offset"])
    local = add_buffer(plan, src, arena=plan["buffers"][a_in]["arena"], offset=off,
                       name=plan["buffers"][src].get("name", "") + "+unreduced")
    need(pj.contains(pj.buffer_range(plan, a_in), pj.buffer_range(plan, local)),
         "the unreduced view falls outside the all-reduce's input")
    cp["inputs"][0] = local
    return [f"{pj.describe(prog, ci, cp)}: input {src} (the result of "
            f"{pj.describe(prog, ri, ar)}) -> new view {local} of its input {a_in}"]
