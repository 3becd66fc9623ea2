"""A PyTorch module exported by dsc's frontend trains as PyTorch trains it.

  module_vs_torch.py export MODEL DIR
      Builds MODEL (below) with weights far from the linear regime, exports
      it (dsc.export) to DIR/model.mlir and its initial weights to
      DIR/init.safetensors.
  module_vs_torch.py check MODEL CONFIG.json DIR BATCHES.bin METRICS.jsonl
                     FINAL.safetensors
      Trains the same module from the same weights with torch.optim.AdamW
      (decay on parameters of rank >= 2, as dsc), clip_grad_norm_ and
      DeepSpeed's learning-rate schedule, in float32 (--float64: float64),
      on the batches dsrun dumped, and compares every step's loss (relative 1e-5) and gradient
      norm; then loads dsrun's final weights into a fresh module with
      load_state_dict(strict=True) (through Exported.state_dict_from) and
      compares every tensor. One line per disagreement, exit 1.

MODEL is `nanogpt:key=value,...` (test/torch/nanogpt_model.py's GPTConfig)
or `llama:key=value,...` (Hugging Face LlamaForCausalLM's LlamaConfig).
"""
import argparse
import json
import math
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
from train_vs_torch import deepspeed_lr, read_batches  # noqa: E402

import dsc  # noqa: E402

# float32 both sides. Measured over the runs of module-vs-torch.test: losses
# within 1.4e-7, gradient norms 1.9e-6, weights 2.9e-7 (GPT's key bias left
# out, see check). The loss bound is the issue's; the others leave ~10x.
LOSS_TOL, NORM_TOL, WEIGHT_TOL = 1e-5, 2e-5, 3e-6
# --float64: dsc's float32 against exact arithmetic, issue 33's bounds.
# Measured by engine.test (its batches move the weights further than
# dsrun's): losses 2.8e-7-4.7e-7, weights 4.5e-6-8.8e-6 (Llama's embedding).
LOSS_TOL64, WEIGHT_TOL64 = 1e-6, 1e-5


def parse(model):
    kind, _, rest = model.partition(":")
    opts = {}
    for kv in filter(None, rest.split(",")):
        k, v = kv.split("=")
        opts[k] = float(v) if "." in v else int(v)
    return kind, opts


def build(model, seed=1234):
    kind, opts = parse(model)
    torch.manual_seed(seed)
    if kind == "nanogpt":
        from nanogpt_model import GPT
        m = GPT(**opts)
        loss = "module"
    elif kind == "llama":
        from transformers import LlamaConfig, LlamaForCausalLM
        m = LlamaForCausalLM(LlamaConfig(attn_implementation="sdpa", **opts))
        loss = "cross_entropy"
    elif kind == "gpt2hf":  # Hugging Face's GPT-2, dropout off (dsc's masks are not torch's)
        from transformers import GPT2Config, GPT2LMHeadModel
        m = GPT2LMHeadModel(GPT2Config(attn_implementation="sdpa", resid_pdrop=0.0,
                                       embd_pdrop=0.0, attn_pdrop=0.0, **opts))
        loss = "cross_entropy"
    else:
        raise SystemExit(f"module_vs_torch: unknown model kind {kind!r}")
    return m, loss, opts


def block_size(model):
    kind, opts = parse(model)
    key = {"nanogpt": "block_size", "gpt2hf": "n_positions"}.get(kind, "max_position_embeddings")
    return opts[key]


def draw(module, seed):
    """Weights where the nonlinearities matter: linear maps N(0, 1.6^2 /
    fan_in) (queries and keys 2.2^2 / fan_in: peaked attention), embeddings
    N(0, 0.5^2), norm gains 1 + N(0, 0.2^2), biases N(0, 0.1^2)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            n = torch.randn(p.shape, generator=g)
            if p.dim() == 1:
                p.copy_(1 + 0.2 * n if name.endswith("weight") else 0.1 * n)
            elif "wte" in name or "wpe" in name or "embed" in name or "lm_head" in name:
                p.copy_(0.5 * n)
            else:
                qk = any(s in name for s in ("c_attn", "q_proj", "k_proj"))
                p.copy_((2.2 if qk else 1.6) / math.sqrt(p.shape[1]) * n)


def exported(model, batch):
    m, loss, _ = build(model)
    draw(m, 99)
    return m, dsc.export(m, batch, block_size(model), loss=loss)


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("export")
    e.add_argument("model")
    e.add_argument("dir")
    e.add_argument("--batch", type=int, default=4)
    c = sub.add_parser("check")
    for name in ("model", "config", "dir", "batches", "metrics", "final"):
        c.add_argument(name)
    c.add_argument("--decay-all", action="store_true",
                   help="every parameter decays (dsc.initialize given plain parameters)")
    c.add_argument("--float64", action="store_true",
                   help="PyTorch in float64: dsc's float32 against exact arithmetic")
    args = ap.parse_args()
    if args.cmd == "export":
        _, ex = exported(args.model, args.batch)
        ex.save(os.path.join(args.dir, "model.mlir"), os.path.join(args.dir, "init.safetensors"))
        return 0
    problems = check(args)
    for p in problems:
        print(f"module_vs_torch: {p}")
    return 1 if problems else 0


def check(args):
    from safetensors.torch import load_file
    config = json.load(open(args.config))
    b = config["train_micro_batch_size_per_gpu"]
    accum = config.get("gradient_accumulation_steps", 1)
    module, ex = exported(args.model, b)
    _, loss_kind, _ = build(args.model)
    records = [json.loads(line) for line in open(args.metrics)]
    steps = len(records)
    batches = read_batches(args.batches, steps, accum, b, block_size(args.model))

    def loss_of(tokens, targets):
        if loss_kind == "module":
            return module(tokens, targets)[1]
        logits = module(tokens).logits
        return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)),
                                                 targets.reshape(-1))

    module.train()
    if args.float64:
        module.double()
    params = list(module.parameters())
    opt_params = config["optimizer"]["params"]
    decayed = [p for p in params if args.decay_all or p.dim() >= 2]
    opt = torch.optim.AdamW(
        [{"params": decayed, "weight_decay": opt_params.get("weight_decay", 0.01)},
         {"params": [p for p in params if all(p is not d for d in decayed)],
          "weight_decay": 0.0}],
        lr=opt_params["lr"], betas=tuple(opt_params.get("betas", (0.9, 0.999))),
        eps=opt_params.get("eps", 1e-8))
    clip = config.get("gradient_clipping", 0.0)
    loss_tol = LOSS_TOL64 if args.float64 else LOSS_TOL
    weight_tol = WEIGHT_TOL64 if args.float64 else WEIGHT_TOL
    problems, worst = [], {"loss": 0.0, "grad_norm": 0.0}
    for s in range(1, steps + 1):
        opt.zero_grad(set_to_none=False)
        loss = 0.0
        for m in range(accum):
            tokens, targets = batches[s - 1, m]
            l = loss_of(tokens, targets)
            (l / accum).backward()
            loss += l.item() / accum
        if clip > 0:
            norm = torch.nn.utils.clip_grad_norm_(params, clip).item()
        else:
            norm = torch.sqrt(sum((p.grad.double() ** 2).sum() for p in params)).item()
        for group in opt.param_groups:
            group["lr"] = deepspeed_lr(config, s)
        opt.step()
        r = records[s - 1]
        for key, mine, tol in (("loss", loss, loss_tol), ("grad_norm", norm, NORM_TOL)):
            d = abs(r[key] - mine) / max(abs(mine), 1e-30)
            worst[key] = max(worst[key], d)
            if not d <= tol:  # NaN fails too
                problems.append(f"step {s}: {key} {r[key]:.9g} vs PyTorch {mine:.9g} "
                                f"(rel {d:.1e} > {tol:g})")
    # dsrun's weights go back into a fresh module under its own names.
    fresh, _, _ = build(args.model, seed=7)
    fresh.load_state_dict(ex.state_dict_from(load_file(args.final)), strict=True)
    worst_w = 0.0
    want = module.state_dict()
    for name, got in fresh.state_dict().items():
        ref, got = want[name].double(), got.double()
        if name.endswith("attn.c_attn.bias"):
            # The key bias has no gradient in exact arithmetic (softmax
            # ignores q.b_k); Adam turns rounding noise into O(lr) moves.
            c = ref.shape[0] // 3
            ref, got = torch.cat([ref[:c], ref[2 * c:]]), torch.cat([got[:c], got[2 * c:]])
        d = ((got - ref).norm() / ref.norm().clamp_min(1e-30)).item()
        worst_w = max(worst_w, d)
        if not d <= weight_tol:
            problems.append(f"{name}: final weights differ by {d:.1e} (> {weight_tol:g})")
    print(f"{steps} steps vs PyTorch: max rel diff loss {worst['loss']:.1e}, grad norm "
          f"{worst['grad_norm']:.1e}, weights {worst_w:.1e}; loss "
          f"{records[0]['loss']:.4f} -> {records[-1]['loss']:.4f}")
    if records[-1]["loss"] > records[0]["loss"] - 0.1:
        problems.append("the loss did not fall by 0.1 nat: the run shows nothing")
    return problems


if __name__ == "__main__":
    sys.exit(main())
