#!/usr/bin/env python3
"""PyTorch's activation_memory_budget beside dsc's remat (bench/remat.sh).

The benchmark model of bench/remat.sh in PyTorch 2.x: nanoGPT's GPT (pre-LN,
learned positions, tanh GELU, tied lm_head), with dropout where dsc's gpt2
has it (embeddings and residual branches) and attention through
F.scaled_dot_product_attention, so neither side keeps a T x T matrix.
torch.compile (inductor, CPU) partitions forward and backward with its
min-cut partitioner under torch._functorch.config.activation_memory_budget;
for each budget this prints what the backward keeps (the bytes of the
distinct storages saved for backward in one step, counted by
torch.autograd.graph.saved_tensors_hooks) and the median time of a training
step (forward, backward, AdamW), one JSON object per line. Parameters
saved for backward are not counted: they are not activations.

PyTorch has no allocator statistics on the CPU, so its activation *peak* is
not measured; the saved bytes are the quantity the budget is a fraction of.

    PY=/path/to/python-with-torch-2.x bench/torch_remat.py --budgets 1,0.75,0.5,0.25
"""
import argparse
import json
import math
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--budgets", default="1,0.75,0.5,0.25")
    p.add_argument("--n-layer", type=int, default=8)
    p.add_argument("--n-head", type=int, default=8)
    p.add_argument("--n-embd", type=int, default=256)
    p.add_argument("--block-size", type=int, default=256)
    p.add_argument("--vocab-size", type=int, default=256)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--warmup", type=int, default=2)
    return p.parse_args()


class Block(nn.Module):
    def __init__(self, c, n_head, dropout):
        super().__init__()
        self.n_head, self.dropout = n_head, dropout
        self.ln_1, self.ln_2 = nn.LayerNorm(c), nn.LayerNorm(c)
        self.c_attn, self.attn_proj = nn.Linear(c, 3 * c), nn.Linear(c, c)
        self.c_fc, self.mlp_proj = nn.Linear(c, 4 * c), nn.Linear(4 * c, c)

    def attn(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.n_head, c // self.n_head).transpose(1, 2)
                   for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.attn_proj(y.transpose(1, 2).reshape(b, t, c))

    def forward(self, x):
        x = x + F.dropout(self.attn(self.ln_1(x)), self.dropout, self.training)
        h = F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh")
        return x + F.dropout(self.mlp_proj(h), self.dropout, self.training)


class GPT(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.wte = nn.Embedding(a.vocab_size, a.n_embd)
        self.wpe = nn.Embedding(a.block_size, a.n_embd)
        self.blocks = nn.ModuleList(Block(a.n_embd, a.n_head, a.dropout)
                                    for _ in range(a.n_layer))
        self.ln_f = nn.LayerNorm(a.n_embd)
        self.dropout = a.dropout
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, 0.0, 0.02)

    def forward(self, idx, targets):
        pos = torch.arange(idx.shape[1])
        x = F.dropout(self.wte(idx) + self.wpe(pos), self.dropout, self.training)
        for block in self.blocks:
            x = block(x)
        logits = self.ln_f(x) @ self.wte.weight.t()
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def saved_bytes(step, params):
    """Bytes of the distinct storages saved for backward while `step` runs
    its forward, parameters not counted (they are kept anyway)."""
    seen = {}
    skip = {p.untyped_storage().data_ptr() for p in params}

    def pack(t):
        s = t.untyped_storage()
        if s.data_ptr() not in skip:
            seen[s.data_ptr()] = s.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = step()
    loss.backward()
    return sum(seen.values())


def main():
    a = parse_args()
    torch.manual_seed(1337)
    idx = torch.randint(0, a.vocab_size, (a.batch, a.block_size))
    tgt = torch.randint(0, a.vocab_size, (a.batch, a.block_size))
    for budget in [float(b) for b in a.budgets.split(",")]:
        torch._dynamo.reset()
        torch._functorch.config.activation_memory_budget = budget
        model = GPT(a)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        compiled = torch.compile(model)
        t0 = time.perf_counter()
        compiled(idx, tgt).backward()  # compiles forward and backward
        compile_s = time.perf_counter() - t0
        kept = saved_bytes(lambda: compiled(idx, tgt), model.parameters())
        times = []
        for i in range(a.warmup + a.steps):
            t0 = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            compiled(idx, tgt).backward()
            opt.step()
            if i >= a.warmup:
                times.append(time.perf_counter() - t0)
        print(json.dumps({"budget": budget, "saved_bytes": kept,
                          "step_s": statistics.median(times),
                          "compile_s": round(compile_s, 1),
                          "torch": torch.__version__}), flush=True)


if __name__ == "__main__":
    main()
