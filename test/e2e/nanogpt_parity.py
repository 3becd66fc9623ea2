#!/usr/bin/python3
"""Loads dsrun's exported weights into a PyTorch model with nanoGPT's
architecture and parameter names (load_state_dict(strict=True)), computes the
loss on the batch dsrun dumped, and compares it with the loss dsrun reported.

usage: nanogpt_parity.py WEIGHTS.safetensors BATCH.bin METRICS.jsonl STEP
       n_layer n_head n_embd block_size vocab_size bias
"""
import json
import math
import struct
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        assert info["dtype"] == "F32", (name, info["dtype"])
        lo, hi = info["data_offsets"]
        t = torch.frombuffer(bytearray(data[base + lo:base + hi]), dtype=torch.float32)
        out[name] = t.reshape(info["shape"]).clone()
    return out


class LayerNorm(nn.Module):
    """LayerNorm with an optional bias, as nanoGPT's."""

    def __init__(self, n, bias):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.bias = nn.Parameter(torch.zeros(n)) if bias else None

    def forward(self, x):
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, 1e-5)


class Attention(nn.Module):
    def __init__(self, c, h, bias):
        super().__init__()
        self.c_attn = nn.Linear(c, 3 * c, bias=bias)
        self.c_proj = nn.Linear(c, c, bias=bias)
        self.h = h

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(x).split(c, dim=2)
        heads = lambda z: z.view(b, t, self.h, c // self.h).transpose(1, 2)
        q, k, v = heads(q), heads(k), heads(v)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(c // self.h)
        mask = torch.ones(t, t, dtype=torch.bool).tril()
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, c, bias):
        super().__init__()
        self.c_fc = nn.Linear(c, 4 * c, bias=bias)
        self.c_proj = nn.Linear(4 * c, c, bias=bias)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, c, h, bias):
        super().__init__()
        self.ln_1 = LayerNorm(c, bias)
        self.attn = Attention(c, h, bias)
        self.ln_2 = LayerNorm(c, bias)
        self.mlp = MLP(c, bias)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, n_layer, n_head, n_embd, block_size, vocab_size, bias):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(vocab_size, n_embd),
            wpe=nn.Embedding(block_size, n_embd),
            h=nn.ModuleList([Block(n_embd, n_head, bias) for _ in range(n_layer)]),
            ln_f=LayerNorm(n_embd, bias),
        ))
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # tied, as nanoGPT

    def forward(self, idx, targets):
        t = idx.shape[1]
        x = self.transformer.wte(idx) + self.transformer.wpe(torch.arange(t))
        for block in self.transformer.h:
            x = block(x)
        logits = self.lm_head(self.transformer.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1),
                               ignore_index=-1)


def main():
    weights, batch, metrics, step = sys.argv[1:5]
    n_layer, n_head, n_embd, block_size, vocab_size, bias = map(int, sys.argv[5:11])
    model = GPT(n_layer, n_head, n_embd, block_size, vocab_size, bool(bias))
    model.load_state_dict(read_safetensors(weights), strict=True)
    model = model.double()
    raw = torch.frombuffer(bytearray(open(batch, "rb").read()), dtype=torch.int32)
    tokens, targets = raw.long().view(2, -1, block_size)
    with torch.no_grad():
        loss = model(tokens, targets).item()
    expected = None
    for line in open(metrics):
        record = json.loads(line)
        if record["step"] == int(step):
            expected = record["loss"]
    rel = abs(loss - expected) / abs(expected)
    print(f"pytorch loss {loss:.8f} dsrun loss {expected:.8f} rel diff {rel:.2e}")
    sys.exit(0 if rel <= 1e-5 else 1)


if __name__ == "__main__":
    main()
