#!/usr/bin/python3
"""PyTorch baseline for bench/gpt2_cpu.sh: one GPT-2 training step on the CPU
(eager or torch.compile, fp32 or bf16 autocast), timed the way dsrun's
metrics time it.

The model is nanoGPT's architecture written out here: pre-LN blocks, learned
position embeddings, GELU in its tanh form, bias=True everywhere, lm_head tied
to wte, and causal self-attention computed by hand (torch 1.13 has no
scaled_dot_product_attention). AdamW with weight decay on the parameters of
rank >= 2 only (nanoGPT's grouping, which dsc keeps), gradient clipping at
1.0. Batches are random windows of the same byte file dsrun reads.

Run with Debian's interpreter (/usr/bin/python3), which has python3-torch:

    /usr/bin/python3 bench/torch_gpt2.py --data FILE [--steps 30 --warmup 5]

Prints the threading/BLAS configuration on stderr and one JSON object on the
last line of stdout: median/mean/min step seconds, tokens/s, the peak RSS
(getrusage ru_maxrss) and the RSS before the model existed.
"""

import argparse
import json
import math
import os
import resource
import statistics
import sys
import time


def current_rss_kib():
    """Resident set size now, in KiB (from /proc/self/statm)."""
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") // 1024


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", required=True, help="file read as bytes (tokens 0..255)")
    p.add_argument("--steps", type=int, default=30, help="timed steps")
    p.add_argument("--warmup", type=int, default=5, help="untimed steps first")
    p.add_argument("--n-layer", type=int, default=4)
    p.add_argument("--n-head", type=int, default=4)
    p.add_argument("--n-embd", type=int, default=256)
    p.add_argument("--block-size", type=int, default=128)
    p.add_argument("--vocab-size", type=int, default=256)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--beta1", type=float, default=0.9)
    p.add_argument("--beta2", type=float, default=0.95)
    p.add_argument("--eps", type=float, default=1e-8)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--clip", type=float, default=1.0)
    p.add_argument("--threads", type=int, default=os.cpu_count(),
                   help="torch.set_num_threads (default: os.cpu_count())")
    p.add_argument("--foreach", action="store_true",
                   help="AdamW's multi-tensor (foreach) implementation")
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--bf16", action="store_true",
                   help="forward and backward under torch.autocast('cpu', "
                        "bfloat16): fp32 weights and optimizer, bf16 GEMMs")
    p.add_argument("--compile", action="store_true",
                   help="torch.compile(model) (inductor; needs torch 2, e.g. "
                        "build/venv/bin/python)")
    return p.parse_args()


args = parse_args()
rss_before_torch = current_rss_kib()

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, block_size):
        super().__init__()
        assert n_embd % n_head == 0
        self.n_head = n_head
        self.c_attn = nn.Linear(n_embd, 3 * n_embd, bias=True)
        self.c_proj = nn.Linear(n_embd, n_embd, bias=True)
        causal = torch.tril(torch.ones(block_size, block_size, dtype=torch.bool))
        self.register_buffer("causal", causal.view(1, 1, block_size, block_size),
                             persistent=False)

    def forward(self, x):
        B, T, C = x.shape
        hd = C // self.n_head
        q, k, v = self.c_attn(x).split(C, dim=2)
        # [B, T, C] -> [B, n_head, T, hd]
        q = q.view(B, T, self.n_head, hd).transpose(1, 2)
        k = k.view(B, T, self.n_head, hd).transpose(1, 2)
        v = v.view(B, T, self.n_head, hd).transpose(1, 2)
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
        scores = scores.masked_fill(~self.causal[:, :, :T, :T], float("-inf"))
        probs = F.softmax(scores, dim=-1)
        y = probs @ v  # [B, n_head, T, hd]
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, n_embd):
        super().__init__()
        self.c_fc = nn.Linear(n_embd, 4 * n_embd, bias=True)
        self.c_proj = nn.Linear(4 * n_embd, n_embd, bias=True)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, n_embd, n_head, block_size):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head, block_size)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = MLP(n_embd)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, n_layer, n_head, n_embd, block_size, vocab_size):
        super().__init__()
        self.block_size = block_size
        self.wte = nn.Embedding(vocab_size, n_embd)
        self.wpe = nn.Embedding(block_size, n_embd)
        self.blocks = nn.ModuleList(
            Block(n_embd, n_head, block_size) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        self.lm_head.weight = self.wte.weight  # tied
        # nanoGPT's initialization: N(0, 0.02), zero biases, residual
        # projections scaled by 1/sqrt(2 * n_layer).
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, 0.0, 0.02)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Embedding):
                nn.init.normal_(m.weight, 0.0, 0.02)
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * n_layer))

    def forward(self, idx, targets):
        B, T = idx.shape
        pos = torch.arange(T, dtype=torch.long)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def make_optimizer(model):
    # parameters() yields the tied wte/lm_head weight once.
    params = list(model.parameters())
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": args.weight_decay},
              {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=args.lr, betas=(args.beta1, args.beta2),
                             eps=args.eps, foreach=args.foreach)


def main():
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    print("torch %s, torch.get_num_threads() = %d, os.cpu_count() = %d"
          % (torch.__version__, torch.get_num_threads(), os.cpu_count()),
          file=sys.stderr)
    print(torch.__config__.show(), file=sys.stderr)
    print(torch.__config__.parallel_info(), file=sys.stderr)
    print("OPENBLAS_CORETYPE=%s OPENBLAS_NUM_THREADS=%s OMP_NUM_THREADS=%s"
          % (os.environ.get("OPENBLAS_CORETYPE"),
             os.environ.get("OPENBLAS_NUM_THREADS"),
             os.environ.get("OMP_NUM_THREADS")), file=sys.stderr)
    openblas = openblas_info()
    if openblas:
        print("OpenBLAS in this process: %s" % openblas, file=sys.stderr)

    data = np.memmap(args.data, dtype=np.uint8, mode="r")
    T, B = args.block_size, args.batch
    if len(data) < T + 2:
        sys.exit("torch_gpt2.py: %s: too short for one sample" % args.data)
    rng = np.random.default_rng(args.seed)

    def get_batch():
        starts = rng.integers(0, len(data) - T - 1, size=B)
        x = np.stack([data[s:s + T] for s in starts]).astype(np.int64)
        y = np.stack([data[s + 1:s + 1 + T] for s in starts]).astype(np.int64)
        return torch.from_numpy(x), torch.from_numpy(y)

    rss_before_model = current_rss_kib()
    model = GPT(args.n_layer, args.n_head, args.n_embd, T, args.vocab_size)
    model.train()
    opt = make_optimizer(model)
    n_params = sum(p.numel() for p in model.parameters())
    step_model = torch.compile(model) if args.compile else model

    times, losses = [], []
    for step in range(args.warmup + args.steps):
        t0 = time.perf_counter()
        x, y = get_batch()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.bf16):
            loss = step_model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        opt.step()
        loss_value = loss.item()
        dt = time.perf_counter() - t0
        losses.append(loss_value)
        if step >= args.warmup:
            times.append(dt)

    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    med = statistics.median(times)
    result = {
        "impl": "torch-compile" if args.compile else "torch-eager",
        "bf16": args.bf16,
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "openblas": openblas,
        "foreach": args.foreach,
        "params": n_params,
        "tokens_per_step": B * T,
        "warmup": args.warmup,
        "steps": args.steps,
        "median_step_s": med,
        "mean_step_s": statistics.fmean(times),
        "min_step_s": min(times),
        "max_step_s": max(times),
        "tokens_per_s": B * T / med,
        "first_loss": losses[0],
        "last_loss": losses[-1],
        "peak_rss_kib": peak_kib,
        "rss_before_torch_kib": rss_before_torch,
        "rss_before_model_kib": rss_before_model,
    }
    print(json.dumps(result))


def openblas_info():
    """Core and config of the OpenBLAS torch loaded, if any."""
    import ctypes
    try:
        lib = ctypes.CDLL("libopenblas.so.0", mode=os.RTLD_NOLOAD)
    except OSError:
        return None
    lib.openblas_get_corename.restype = ctypes.c_char_p
    lib.openblas_get_config.restype = ctypes.c_char_p
    return "%s, core %s, %d threads" % (
        lib.openblas_get_config().decode(), lib.openblas_get_corename().decode(),
        lib.openblas_get_num_threads())


if __name__ == "__main__":
    main()
