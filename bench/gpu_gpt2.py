#!/usr/bin/env python3
"""PyTorch's side of the GPU benchmark (scripts/device-check.sh): GPT-2 124M
training steps on one GPU, eager and torch.compile, in bf16 autocast with
fp32 master weights and fused AdamW, timed as dsrun times a step.

The model is nanoGPT's GPT-2 written out here (pre-LN blocks, learned
positions, tanh GELU, tied lm_head, flash attention through
scaled_dot_product_attention), at the shape of dsc's benchmark plan:
n_layer 12, n_head 12, n_embd 768, block 1024, vocab 50304.

    python3 bench/gpu_gpt2.py --batch 16 [--steps 20 --warmup 5 --compile]

A micro-batch that runs out of GPU memory is halved until one fits (the
JSON says which ran: "batch", and "requested_batch").

Prints one JSON object: tokens/s, median step seconds and MFU, counted as
in the PaLM paper's appendix B (6 N + 12 L T C FLOPs per token, N the
parameters without the position table) against a dense bf16 peak of
989 TFLOP/s (H100/H200 SXM; pass --peak for another GPU).
"""

import argparse
import json
import math
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, c, h):
        super().__init__()
        self.h = h
        self.ln_1 = nn.LayerNorm(c)
        self.c_attn = nn.Linear(c, 3 * c)
        self.c_proj = nn.Linear(c, c)
        self.ln_2 = nn.LayerNorm(c)
        self.c_fc = nn.Linear(c, 4 * c)
        self.c_proj2 = nn.Linear(4 * c, c)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.h, c // self.h).transpose(1, 2)
                   for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.c_proj(y.transpose(1, 2).reshape(b, t, c))
        return x + self.c_proj2(F.gelu(self.c_fc(self.ln_2(x)),
                                       approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, layers, heads, c, block, vocab):
        super().__init__()
        self.wte = nn.Embedding(vocab, c)
        self.wpe = nn.Embedding(block, c)
        self.blocks = nn.ModuleList(Block(c, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(c)
        self.lm_head = nn.Linear(c, vocab, bias=False)
        self.lm_head.weight = self.wte.weight

    def forward(self, idx, targets):
        t = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(t, device=idx.device))
        for blk in self.blocks:
            x = blk(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.shape[-1]).float(),
                               targets.view(-1))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--block", type=int, default=1024)
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--embd", type=int, default=768)
    p.add_argument("--vocab", type=int, default=50304)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--compile", action="store_true")
    p.add_argument("--peak", type=float, default=989e12)
    a = p.parse_args()
    requested = a.batch
    while True:
        try:
            result = measure(a)
            break
        except torch.cuda.OutOfMemoryError:
            if a.batch == 1:
                raise
            a.batch //= 2
            torch.cuda.empty_cache()
    result["requested_batch"] = requested
    print(json.dumps(result))


def measure(a):
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = True
    model = GPT(a.layers, a.heads, a.embd, a.block, a.vocab).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=6e-4, betas=(0.9, 0.95),
                            weight_decay=0.1, fused=True)
    step_fn = torch.compile(model) if a.compile else model
    idx = torch.randint(0, 256, (a.batch, a.block), device="cuda")
    tgt = torch.randint(0, 256, (a.batch, a.block), device="cuda")

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = step_fn(idx, tgt)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    for _ in range(a.warmup):
        step()
    torch.cuda.synchronize()
    times = []
    for _ in range(a.steps):
        t0 = time.perf_counter()
        step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    n = sum(q.numel() for q in model.parameters()) - model.wpe.weight.numel()
    tokens = a.batch * a.block
    flops_per_token = 6 * n + 12 * a.layers * a.block * a.embd
    median = statistics.median(times)
    return {
        "impl": "torch.compile" if a.compile else "torch eager",
        "torch": torch.__version__, "gpu": torch.cuda.get_device_name(),
        "batch": a.batch, "block": a.block, "params": n,
        "median_step_s": median, "tokens_per_s": tokens / median,
        "mfu": tokens / median * flops_per_token / a.peak,
        "peak_flops": a.peak,
        "max_memory_gib": torch.cuda.max_memory_allocated() / 2**30,
    }


if __name__ == "__main__":
    main()
