#!/usr/bin/python3
"""PyTorch as the oracle for a whole training run.

  train_vs_torch.py init MODEL OUT.safetensors [--seed S]
      Initial weights far from the linear regime (see `draw`), written in
      the model's own parameter names for `dsrun --init-from`.
  train_vs_torch.py check MODEL CONFIG.json INIT.safetensors BATCHES.bin
                    METRICS.jsonl FINAL.safetensors
      Trains the PyTorch model of torch_models.py from INIT on the batches
      dsrun dumped (--dump-batch), with torch.optim.AdamW (nanoGPT's groups:
      decay for parameters of rank >= 2), torch.nn.utils.clip_grad_norm_,
      the gradient averaged over the accumulation steps and DeepSpeed's
      learning-rate schedule, in float64; with dropout, the masks are
      dsc's counter-based ones (philox.py), computed here from the contract. Compares dsrun's per-step loss
      (relative 1e-6), learning rate (1e-9) and gradient norm (2e-5), and
      every final weight (per tensor ||a - b|| / ||b|| <= 2e-5, shapes and
      dtypes equal): the *_TOL constants below say why those bounds. The
      optimizer is the config's: torch.optim.AdamW, SGD or Adagrad, or
      Lion written from its paper (`Lion`), Lamb as DeepSpeed computes
      it (`Lamb`), or DeepSpeed's Muon (`Muon`). Exit 0 when all agree, 1
      otherwise, with one line per disagreement.

Parameters whose gradient is zero in exact arithmetic take Adam steps made of
rounding noise (m / sqrt(v) of noise is O(1)), so two correct
implementations move them differently. In these models that is GPT's key
bias (c_attn.bias[C:2C]: q.b_k is the same for every key, and softmax
ignores it). Those elements are left out of the tensor's norm comparison and
checked instead to have moved no more than Adam can move anything,
5 x the sum of the learning rates.
"""
import argparse
import json
import math
import sys

import torch

import safetensors_io as st
import torch_models

# float32 dsrun against a float64 PyTorch, measured over the four runs of
# train-vs-torch.test: losses within 1.1e-7, gradient norms 2.5e-6, weights
# 2.4e-6. The bounds leave ~8x for other CPUs' rounding and no more: GELU's
# erf form instead of tanh moves the loss by 4.6e-6 and one tensor by 1.5e-4.
LOSS_TOL, LR_TOL, NORM_TOL, WEIGHT_TOL = 1e-6, 1e-9, 2e-5, 2e-5


def draw(model, seed):
    """Weights where every nonlinearity matters: linear layers N(0, 1.6^2 /
    fan_in), so most GELU/SiLU inputs lie beyond |x| = 1, and query/key
    projections N(0, 2.2^2 / fan_in), so attention logits have std ~5; embeddings N(0, 0.3^2) (GPT) or N(0, 1) (Llama); norm
    gains 1 + N(0, 0.2^2); biases N(0, 0.1^2). `regime` checks the result."""
    g = torch.Generator().manual_seed(seed)
    out = {}
    for name, p in model.state_dict(keep_vars=True).items():
        if name in out or (name == "lm_head.weight" and isinstance(model, torch_models.GPT)):
            continue  # the tied head is wte
        n = lambda: torch.randn(p.shape, generator=g, dtype=torch.float64)
        if name.endswith("norm.weight") or ".ln_" in name or name.startswith("transformer.ln_f"):
            v = 1 + 0.2 * n() if name.endswith("weight") else 0.1 * n()
        elif name.endswith("bias"):
            v = 0.1 * n()
        elif "wte" in name or "wpe" in name:
            v = 0.3 * n()
        elif "embed_tokens" in name:
            v = n()
        else:  # queries and keys larger still: peaked attention rows
            qk = "c_attn" in name or "q_proj" in name or "k_proj" in name
            v = (2.2 if qk else 1.6) / math.sqrt(p.shape[1]) * n()
        out[name] = v.float()
    return out


def regime(model, tokens, targets):
    """Measures how far from linear the model is on one batch and fails if
    it is close: attention rows that still look uniform, GELU/SiLU inputs
    near 0 (where GELU's tanh and erf forms agree), flat logits."""
    probe = {}
    with torch.no_grad():
        model(tokens, targets, probe)
    att = torch.cat([a.flatten(0, 1) for a in probe["attention"]])  # [*, T, T]
    rows = att[:, 8:, :]  # rows that see at least 9 keys
    peak = rows.max(dim=-1).values.mean().item()
    act = torch.cat([u.flatten() for u in probe.get("gelu_input", probe.get("silu_input"))])
    beyond = (act.abs() > 1).double().mean().item()
    logit_std = probe["logits"][0].std().item()
    print(f"regime: mean max attention probability {peak:.2f} (uniform <= "
          f"{1 / 9:.2f}), activation inputs beyond |x|=1 {beyond:.0%}, "
          f"logit std {logit_std:.2f}")
    problems = []
    if peak < 0.4:
        problems.append(f"attention is nearly uniform (mean row max {peak:.2f} < 0.4)")
    if beyond < 0.25:
        problems.append(f"activations are nearly linear ({beyond:.0%} beyond |x|=1 < 25%)")
    if logit_std < 1:
        problems.append(f"logits are flat (std {logit_std:.2f} < 1)")
    return problems


def deepspeed_lr(config, step):
    """DeepSpeed's lr_schedules.py at last_batch_iteration = step - 2, as
    its engine steps them (the first step at the constructor's iteration
    -1, the warm-up's start; lr-deepspeed.test checks dsrun against the
    package itself)."""
    opt = config["optimizer"]["params"]
    sched = config.get("scheduler")
    if not sched:  # (Muon: its AdamW half's; the matrices' is scaled)
        return opt.get("adam_lr", opt.get("lr"))
    p, it = sched["params"], step - 2
    kind = sched["type"]
    if kind == "OneCycle":
        lo, hi = p["cycle_min_lr"], p["cycle_max_lr"]
        total, scale = one_cycle(p, it)
        if it < total:
            return lo + (hi - lo) * scale
        rate, size = p.get("decay_lr_rate", 0.0), p.get("decay_step_size", 0)
        return lo if rate == 0 or size == 0 else lo / (1 + rate * (it - total + 1) / size)
    if it < 0 and kind in ("WarmupLR", "WarmupDecayLR"):
        return p.get("warmup_min_lr", 0.0)
    w = max(2, p.get("warmup_num_steps", 1000))
    linear = p.get("warmup_type", "log" if kind == "WarmupLR" else "linear") == "linear"
    warm = it / w if linear else math.log(it + 1) / math.log(w)
    if kind in ("WarmupLR", "WarmupDecayLR"):
        lo, hi = p.get("warmup_min_lr", 0.0), p.get("warmup_max_lr", 0.001)
        if it < w:
            gamma = warm
        elif kind == "WarmupLR":
            gamma = 1.0
        else:
            total = p["total_num_steps"]
            gamma = max(0.0, (total - it) / max(1.0, total - w))
        return lo + (hi - lo) * gamma
    raise SystemExit(f"train_vs_torch: scheduler {kind} has no reference here")


def one_cycle(p, it):
    """DeepSpeed's OneCycle at iteration `it`: its cycle's length and the
    scale factor (no stairs: lr-deepspeed.test checks those)."""
    if p.get("cycle_first_stair_count", 0):
        raise SystemExit("train_vs_torch: OneCycle's stairs have no reference here")
    first = float(p.get("cycle_first_step_size", 2000))
    second = float(p.get("cycle_second_step_size", first))
    total, ratio = first + second, first / (first + second)
    batch = it + 1
    x = 1.0 + batch / total - math.floor(1 + batch / total)
    return total, x / ratio if x <= ratio else (x - 1) / (ratio - 1)


def deepspeed_betas(config, step):
    """The betas DeepSpeed's OneCycle gives the optimizer at `step` when it
    cycles the momentum (its default), else None: (beta1, 0.99), beta1
    against the lr, cycle_min_mom at the first step (the constructor's)."""
    sched = config.get("scheduler") or {}
    p = sched.get("params", {})
    if sched.get("type") != "OneCycle" or not p.get("cycle_momentum", True):
        return None
    lo, hi = p.get("cycle_min_mom", 0.8), p.get("cycle_max_mom", 0.9)
    it = step - 2
    if it < 0:
        return lo, 0.99
    total, scale = one_cycle(p, it)
    if it < total:
        return hi - (hi - lo) * scale, 0.99
    rate, size = p.get("decay_mom_rate", 0.0), p.get("decay_step_size", 0)
    if rate == 0 or size == 0:
        return hi, 0.99
    return hi * (1 + rate * (it - total + 1) / size), 0.99


class Lion(torch.optim.Optimizer):
    """Lion as Chen et al. 2023 (arXiv:2302.06675) write it in Algorithm 2,
    with decoupled weight decay; torch has no Lion of its own."""

    def __init__(self, groups, lr, betas, weight_decay=0.0):
        super().__init__(groups, {"lr": lr, "betas": betas,
                                  "weight_decay": weight_decay})

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            b1, b2 = group["betas"]
            for p in group["params"]:
                m = self.state[p].setdefault("exp_avg", torch.zeros_like(p))
                c = b1 * m + (1 - b1) * p.grad
                p.mul_(1 - group["lr"] * group["weight_decay"])
                p.add_(torch.sign(c), alpha=-group["lr"])
                m.mul_(b2).add_(p.grad, alpha=1 - b2)


class Lamb(torch.optim.Optimizer):
    """Lamb as DeepSpeed's FusedLamb computes it (You et al. 2019,
    arXiv:1904.00962, with the bias correction folded into the step size,
    as DeepSpeed's kernel does): u = m / (sqrt(v) + eps) + wd p, the trust
    ratio |p| / |u| per tensor clamped to [min_coeff, max_coeff] (1 when a
    norm is 0), p -= lr sqrt(1 - b2^t) / (1 - b1^t) ratio u."""

    def __init__(self, groups, lr, betas, eps, min_coeff, max_coeff, bias_correction):
        super().__init__(groups, {"lr": lr, "betas": betas, "eps": eps, "weight_decay": 0.0,
                                  "min_coeff": min_coeff, "max_coeff": max_coeff})
        self.bias_correction = bias_correction

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            b1, b2 = group["betas"]
            for p in group["params"]:
                state = self.state[p]
                t = state["step"] = state.get("step", 0) + 1
                m = state.setdefault("exp_avg", torch.zeros_like(p))
                v = state.setdefault("exp_avg_sq", torch.zeros_like(p))
                m.mul_(b1).add_(p.grad, alpha=1 - b1)
                v.mul_(b2).addcmul_(p.grad, p.grad, value=1 - b2)
                u = m / (v.sqrt() + group["eps"]) + group["weight_decay"] * p
                w_norm, u_norm = p.norm().item(), u.norm().item()
                ratio = 1.0
                if w_norm != 0 and u_norm != 0:
                    ratio = min(max(w_norm / u_norm, group["min_coeff"]), group["max_coeff"])
                size = group["lr"]
                if self.bias_correction:
                    size *= math.sqrt(1 - b2 ** t) / (1 - b1 ** t)
                p.add_(u, alpha=-size * ratio)


def newton_schulz(g, steps=5):
    """DeepSpeed's zeropower_via_newtonschulz5 in the tensor's dtype (here
    float64): the standard quintic iteration on g / (|g|_F + 1e-7), on its
    transpose when g is tall."""
    a, b, c = 3.4445, -4.7750, 2.0315
    x = g.T if g.size(0) > g.size(1) else g
    x = x / (x.norm() + 1e-7)
    for _ in range(steps):
        A = x @ x.T
        x = a * x + (b * A + c * A @ A) @ x
    return x.T if g.size(0) > g.size(1) else x


def takes_muon(name, p):
    """deepspeed.initialize's use_muon: rank >= 2 and neither "embed" nor
    "lm_head" in the name."""
    return p.dim() >= 2 and "embed" not in name.lower() and "lm_head" not in name.lower()


class Muon(torch.optim.Optimizer):
    """DeepSpeed 0.19.8's MuonWithAuxAdam (runtime/zero/muon/original_muon.py)
    with the standard Newton-Schulz iteration, in the parameters' dtype:
    groups with use_muon take muon_update (nesterov momentum, the
    iteration, sqrt(max(1, rows / cols)), decoupled decay), the others
    adam_update (AdamW with bias correction). A group's lr_scale multiplies
    the lr the schedule sets (muon_lr / adam_lr)."""

    def __init__(self, groups, momentum, betas, eps):
        super().__init__(groups, {"lr": 0.0, "momentum": momentum, "betas": betas,
                                  "eps": eps, "lr_scale": 1.0})

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            lr, wd = group["lr"] * group["lr_scale"], group["weight_decay"]
            for p in group["params"]:
                state, g = self.state[p], p.grad
                if group["use_muon"]:
                    beta = group["momentum"]
                    buf = state.setdefault("momentum_buffer", torch.zeros_like(p))
                    buf.lerp_(g, 1 - beta)
                    u = g.lerp(buf, beta).reshape(p.size(0), -1)
                    # per_head_muon: each head's block of rows on its own.
                    heads = getattr(p, "muon_heads", 1)
                    rows, cols = u.size(0) // heads, u.size(1)
                    update = torch.cat([newton_schulz(block) for block in u.split(rows)])
                    update *= math.sqrt(rows / cols) if rows > cols else 1.0
                    p.mul_(1 - lr * wd)
                    p.add_(update.reshape(p.shape), alpha=-lr)
                    continue
                b1, b2 = group["betas"]
                t = state["step"] = state.get("step", 0) + 1
                m = state.setdefault("exp_avg", torch.zeros_like(p))
                v = state.setdefault("exp_avg_sq", torch.zeros_like(p))
                m.lerp_(g, 1 - b1)
                v.lerp_(g.square(), 1 - b2)
                update = (m / (1 - b1 ** t)) / ((v / (1 - b2 ** t)).sqrt() + group["eps"])
                p.mul_(1 - lr * wd)
                p.add_(update, alpha=-lr)


def muon(params, config, model, wd):
    """Muon's halves over dsc's decay rule (rank >= 2 decays): the matrices
    by DeepSpeed's rule, the rest AdamW; muon_lr / adam_lr as lr_scale,
    which DeepSpeed's schedulers but WarmupCosineLR override."""
    adam_lr = params.get("adam_lr", params.get("lr", 3e-4))
    muon_lr = params.get("muon_lr", params.get("lr", 0.02))
    sched = (config.get("scheduler") or {}).get("type")
    scale = muon_lr / adam_lr if sched in (None, "WarmupCosineLR") else 1.0
    named = list(model.named_parameters())
    if params.get("per_head_muon"):
        # DeepSpeed's per-head tagging: query, key and value projections
        # split into their attention module's heads (no GQA here).
        for n, p in named:
            if n.split(".")[-2] in ("q_proj", "k_proj", "v_proj"):
                p.muon_heads = model.get_submodule(n.rsplit(".", 2)[0]).h
    groups = [{"params": [p for n, p in named if takes_muon(n, p)], "use_muon": True,
               "weight_decay": wd, "lr_scale": scale},
              {"params": [p for n, p in named if not takes_muon(n, p) and p.dim() >= 2],
               "use_muon": False, "weight_decay": wd},
              {"params": [p for n, p in named if p.dim() < 2], "use_muon": False,
               "weight_decay": 0.0}]
    return Muon([g for g in groups if g["params"]], momentum=params.get("momentum", 0.95),
                betas=tuple(params.get("betas", (0.9, 0.95))), eps=params.get("eps", 1e-10))


def optimizer(section, model, config):
    """The config's optimizer over nanoGPT's groups (decay for parameters
    of rank >= 2 only): torch.optim.AdamW, SGD or Adagrad, or Lion or Lamb
    above."""
    kind, params = section["type"].lower(), section.get("params", {})
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    wd = params.get("weight_decay", 0.01 if kind in ("adam", "adamw") else 0.0)
    groups = [{"params": decay, "weight_decay": wd},
              {"params": no_decay, "weight_decay": 0.0}]
    betas = tuple(params.get("betas", (0.9, 0.999)))
    if kind == "muon":
        return muon(params, config, model, wd)
    if kind == "sgd":
        return torch.optim.SGD(groups, lr=params["lr"],
                               momentum=params.get("momentum", 0.0),
                               dampening=params.get("dampening", 0.0),
                               nesterov=params.get("nesterov", False))
    if kind == "lion":
        return Lion(groups, lr=params["lr"], betas=betas)
    if kind == "lamb":
        return Lamb(groups, lr=params["lr"], betas=betas, eps=params.get("eps", 1e-8),
                    min_coeff=params.get("min_coeff", 0.01),
                    max_coeff=params.get("max_coeff", 10.0),
                    bias_correction=params.get("bias_correction", True))
    if kind == "adagrad":
        return torch.optim.Adagrad(groups, lr=params.get("lr", 1e-2),
                                   lr_decay=params.get("lr_decay", 0.0),
                                   eps=params.get("eps", 1e-10))
    return torch.optim.AdamW(groups, lr=params["lr"], betas=betas,
                             eps=params.get("eps", 1e-8))


def read_batches(path, steps, accum, b, t):
    raw = torch.frombuffer(bytearray(open(path, "rb").read()), dtype=torch.int32)
    want = steps * accum * 2 * b * t
    if raw.numel() != want:
        raise SystemExit(f"{path}: {raw.numel()} int32 values; {steps} steps x "
                         f"{accum} micro-batches x 2 x {b} x {t} = {want} expected")
    return raw.long().view(steps, accum, 2, b, t)


def rel(a, b):
    return abs(a - b) / max(abs(b), 1e-30)


def finite(x):
    return isinstance(x, (int, float)) and math.isfinite(x)


def check(args):
    config = json.load(open(args.config))
    records = [json.loads(line) for line in open(args.metrics)]
    problems = []
    for r in records:
        for key in ("loss", "lr", "grad_norm"):
            if not finite(r.get(key)):
                problems.append(f"step {r.get('step')}: {key} is {r.get(key)!r}")
    steps = len(records)
    if steps == 0 or [r["step"] for r in records] != list(range(1, steps + 1)):
        problems.append(f"{args.metrics}: steps are not 1..{steps}")
    if problems:
        return problems

    model = torch_models.build(args.model, args.seed)
    init = {k: torch.tensor(v.values, dtype=torch.float32).view(v.shape)
            for k, v in st.read(args.init).items()}
    if isinstance(model, torch_models.GPT):
        init["lm_head.weight"] = init["transformer.wte.weight"]
    model.load_state_dict(init, strict=True)
    model = model.double()
    accum = config.get("gradient_accumulation_steps", 1)
    b = config["train_micro_batch_size_per_gpu"]
    t = int(torch_models.options(args.model)["block_size"])
    batches = read_batches(args.batches, steps, accum, b, t)
    model.rng.step = 1
    problems += regime(model, batches[0, 0, 0], batches[0, 0, 1])

    opt = optimizer(config["optimizer"], model, config)
    clip = config.get("gradient_clipping", 0.0)
    clipped, lr_sum = 0, 0.0
    worst = {"loss": 0.0, "lr": 0.0, "grad_norm": 0.0, "beta1": 0.0}
    for s in range(1, steps + 1):
        opt.zero_grad(set_to_none=False)
        loss = 0.0
        for m in range(accum):
            tokens, targets = batches[s - 1, m]
            model.rng.step, model.rng.first_sample = s, m * b  # one rank
            l = model(tokens, targets)
            (l / accum).backward()
            loss += l.item() / accum
        if clip > 0:
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), clip).item()
        else:
            norm = torch.sqrt(sum((p.grad ** 2).sum() for p in model.parameters())).item()
        clipped += clip > 0 and norm > clip
        lr = deepspeed_lr(config, s)
        lr_sum += lr
        betas = deepspeed_betas(config, s)
        for group in opt.param_groups:
            group["lr"] = lr
            if betas:
                group["betas"] = betas
        opt.step()
        r = records[s - 1]
        compared = [("loss", loss, LOSS_TOL), ("lr", lr, LR_TOL),
                    ("grad_norm", norm, NORM_TOL)]
        if betas:
            compared.append(("beta1", betas[0], LR_TOL))
            if "beta1" not in r:
                problems.append(f"step {s}: dsrun's metrics have no beta1")
                continue
        for key, mine, tol in compared:
            d = rel(r[key], mine)
            worst[key] = max(worst[key], d)
            if d > tol:
                problems.append(f"step {s}: {key} {r[key]:.9g} vs PyTorch "
                                f"{mine:.9g} (rel {d:.1e} > {tol:g})")
    if clip > 0 and clipped == 0:
        problems.append(f"clipping at {clip} never acted: the test would not see it")

    final = st.read(args.final)
    want = dict(model.state_dict())
    worst_w = 0.0
    if sorted(final) != sorted(want):
        problems.append(f"{args.final}: tensors {sorted(set(final) ^ set(want))} "
                        "are in one of dsrun's and PyTorch's weights only")
    for name in sorted(set(final) & set(want)):
        got, ref = final[name], want[name]
        if got.dtype != "F32" or got.shape != list(ref.shape):
            problems.append(f"{name}: dsrun wrote {got.dtype} {got.shape}, "
                            f"PyTorch has F32 {list(ref.shape)}")
            continue
        a = torch.tensor(got.values, dtype=torch.float64).view(ref.shape)
        if not torch.isfinite(a).all():
            problems.append(f"{name}: dsrun's final weights are not finite")
            continue
        compared = torch.ones_like(ref, dtype=torch.bool)
        if name.endswith("attn.c_attn.bias"):
            c = ref.shape[0] // 3
            compared[c:2 * c] = False  # the key bias: no gradient (docstring)
            drift = (a[c:2 * c] - init[name][c:2 * c].double()).abs().max().item()
            if drift > 5 * lr_sum:
                problems.append(f"{name}: the key bias moved by {drift:.2e}, "
                                f"more than Adam can (5 x sum lr = {5 * lr_sum:.2e})")
        d = ((a - ref)[compared].norm() / ref[compared].norm().clamp_min(1e-30)).item()
        worst_w = max(worst_w, d)
        if d > WEIGHT_TOL:
            problems.append(f"{name}: final weights differ by {d:.1e} (> {WEIGHT_TOL:g})")
    print(f"{steps} steps vs PyTorch: max rel diff loss {worst['loss']:.1e}, "
          f"lr {worst['lr']:.1e}, grad norm {worst['grad_norm']:.1e}, "
          f"weights {worst_w:.1e}; clipped in {clipped}/{steps} steps; "
          f"loss {records[0]['loss']:.4f} -> {records[-1]['loss']:.4f}")
    return problems


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    i = sub.add_parser("init")
    i.add_argument("model")
    i.add_argument("out")
    i.add_argument("--seed", type=int, default=1234)
    c = sub.add_parser("check")
    for name in ("model", "config", "init", "batches", "metrics", "final"):
        c.add_argument(name)
    c.add_argument("--seed", type=int, default=1337, help="dsrun's --seed")
    args = ap.parse_args()
    if args.cmd == "init":
        weights = draw(torch_models.build(args.model), args.seed)
        st.write(args.out, {k: st.Tensor("F32", v.shape, v.flatten().tolist())
                            for k, v in weights.items()})
        return 0
    problems = check(args)
    for p in problems:
        print(f"train_vs_torch: {p}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
