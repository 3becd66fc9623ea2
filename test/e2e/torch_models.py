"""The models dsc builds, written independently in PyTorch with the same
parameter names, as references for dsrun's training:

- GPT: nanoGPT's `model.py` architecture and state-dict names (pre-LN
  blocks, learned positions, lm_head tied to wte), with GELU in GPT-2's tanh
  form as dsc's gpt2 (docs/models.md), and dropout on the embeddings and
  residual branches (none inside attention) drawing dsc's counter-based
  masks (philox.py), so that a run with dropout can be replayed exactly.
- Llama: Hugging Face LlamaForCausalLM's names and maths (RMSNorm, rotary
  embeddings in the rotate-half form, SwiGLU, untied lm_head, no biases).

Each forward returns the mean cross-entropy over every position, and can
record the pre-activation tensors the regime check reads (`probe`)."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

import philox


class RngContext:
    """What a dropout mask is keyed by besides its site: the run's seed, the
    optimizer step (from 1) and the micro-batch's first global sample."""

    def __init__(self, seed):
        self.seed, self.step, self.first_sample = seed, 0, 0


class Dropout(nn.Module):
    """dsc's ds.dropout: site `stream` (the model's dropout sites numbered in
    build order), element e of sample n kept by philox.keep_mask at global
    index n * (numel / batch) + e, kept values scaled by 1 / (1 - rate)."""

    def __init__(self, rate, stream, ctx):
        super().__init__()
        self.rate, self.stream, self.ctx = rate, stream, ctx

    def forward(self, x):
        if self.rate == 0:
            return x
        per_sample = x[0].numel()
        keep = philox.keep_mask(self.ctx.seed, self.stream, self.ctx.step,
                                self.ctx.first_sample * per_sample, x.numel(),
                                self.rate)
        mask = torch.from_numpy(keep).view(x.shape).to(x.dtype)
        return x * mask / (1 - self.rate)


def causal_attention(q, k, v, probe):
    """q, k, v: [B, H, T, D]; softmax(q k^T / sqrt(D)) v under a causal mask."""
    t = q.shape[-2]
    att = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    mask = torch.ones(t, t, dtype=torch.bool).tril()
    att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
    if probe is not None:
        probe.setdefault("attention", []).append(att.detach())
    return att @ v


class LayerNorm(nn.Module):
    """nanoGPT's LayerNorm: an optional bias, eps 1e-5."""

    def __init__(self, n, bias):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.bias = nn.Parameter(torch.zeros(n)) if bias else None

    def forward(self, x):
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, 1e-5)


class GptAttention(nn.Module):
    def __init__(self, c, h, bias):
        super().__init__()
        self.c_attn = nn.Linear(c, 3 * c, bias=bias)
        self.c_proj = nn.Linear(c, c, bias=bias)
        self.h = h

    def forward(self, x, probe):
        b, t, c = x.shape
        q, k, v = self.c_attn(x).split(c, dim=2)
        heads = lambda z: z.view(b, t, self.h, c // self.h).transpose(1, 2)
        y = causal_attention(heads(q), heads(k), heads(v), probe)
        return self.c_proj(y.transpose(1, 2).contiguous().view(b, t, c))


class GptMlp(nn.Module):
    def __init__(self, c, bias):
        super().__init__()
        self.c_fc = nn.Linear(c, 4 * c, bias=bias)
        self.c_proj = nn.Linear(4 * c, c, bias=bias)

    def forward(self, x, probe):
        u = self.c_fc(x)
        if probe is not None:
            probe.setdefault("gelu_input", []).append(u.detach())
        return self.c_proj(F.gelu(u, approximate="tanh"))


class GptBlock(nn.Module):
    def __init__(self, c, h, bias, dropouts):
        super().__init__()
        self.ln_1 = LayerNorm(c, bias)
        self.attn = GptAttention(c, h, bias)
        self.ln_2 = LayerNorm(c, bias)
        self.mlp = GptMlp(c, bias)
        self.drops = dropouts  # a plain list: no parameters, no state

    def forward(self, x, probe):
        x = x + self.drops[0](self.attn(self.ln_1(x), probe))
        return x + self.drops[1](self.mlp(self.ln_2(x), probe))


class GPT(nn.Module):
    def __init__(self, n_layer, n_head, n_embd, block_size, vocab_size, bias,
                 dropout=0.0, seed=1337):
        super().__init__()
        self.rng = RngContext(seed)
        # Site 0 is the embeddings', then each block's attention and MLP
        # residuals: dsc's GraphBuilder numbers them in that order.
        site = lambda i: Dropout(dropout, i, self.rng)
        self.drop = [site(0)]
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(vocab_size, n_embd),
            wpe=nn.Embedding(block_size, n_embd),
            h=nn.ModuleList([GptBlock(n_embd, n_head, bias,
                                      [site(2 * i + 1), site(2 * i + 2)])
                             for i in range(n_layer)]),
            ln_f=LayerNorm(n_embd, bias),
        ))
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # tied, as nanoGPT

    def forward(self, idx, targets, probe=None):
        t = idx.shape[1]
        x = self.drop[0](self.transformer.wte(idx) + self.transformer.wpe(torch.arange(t)))
        for block in self.transformer.h:
            x = block(x, probe)
        logits = self.lm_head(self.transformer.ln_f(x))
        if probe is not None:
            probe.setdefault("logits", []).append(logits.detach())
        return F.cross_entropy(logits.view(-1, logits.size(-1)),
                               targets.reshape(-1))


class RMSNorm(nn.Module):
    def __init__(self, n, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.eps = eps

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True)
                                              + self.eps))


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def rotary(x, theta):
    """x: [B, H, T, D]; position p rotates pair (i, i + D/2) by p / theta^(2i/D)."""
    t, d = x.shape[-2], x.shape[-1]
    inv_freq = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    angles = torch.outer(torch.arange(t, dtype=torch.float64), inv_freq)
    angles = torch.cat((angles, angles), dim=-1).to(x.dtype)
    return x * angles.cos() + rotate_half(x) * angles.sin()


class LlamaAttention(nn.Module):
    def __init__(self, dim, h, theta):
        super().__init__()
        self.q_proj = nn.Linear(dim, dim, bias=False)
        self.k_proj = nn.Linear(dim, dim, bias=False)
        self.v_proj = nn.Linear(dim, dim, bias=False)
        self.o_proj = nn.Linear(dim, dim, bias=False)
        self.h, self.theta = h, theta

    def forward(self, x, probe):
        b, t, c = x.shape
        heads = lambda z: z.view(b, t, self.h, c // self.h).transpose(1, 2)
        q = rotary(heads(self.q_proj(x)), self.theta)
        k = rotary(heads(self.k_proj(x)), self.theta)
        y = causal_attention(q, k, heads(self.v_proj(x)), probe)
        return self.o_proj(y.transpose(1, 2).contiguous().view(b, t, c))


class LlamaMlp(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.gate_proj = nn.Linear(dim, hidden, bias=False)
        self.up_proj = nn.Linear(dim, hidden, bias=False)
        self.down_proj = nn.Linear(hidden, dim, bias=False)

    def forward(self, x, probe):
        g = self.gate_proj(x)
        if probe is not None:
            probe.setdefault("silu_input", []).append(g.detach())
        return self.down_proj(F.silu(g) * self.up_proj(x))


class LlamaLayer(nn.Module):
    def __init__(self, dim, h, hidden, eps, theta):
        super().__init__()
        self.input_layernorm = RMSNorm(dim, eps)
        self.self_attn = LlamaAttention(dim, h, theta)
        self.post_attention_layernorm = RMSNorm(dim, eps)
        self.mlp = LlamaMlp(dim, hidden)

    def forward(self, x, probe):
        x = x + self.self_attn(self.input_layernorm(x), probe)
        return x + self.mlp(self.post_attention_layernorm(x), probe)


class Llama(nn.Module):
    def __init__(self, dim, n_layer, n_head, hidden_dim, vocab_size,
                 norm_eps=1e-5, rope_theta=10000.0):
        super().__init__()
        self.model = nn.Module()
        self.model.embed_tokens = nn.Embedding(vocab_size, dim)
        self.model.layers = nn.ModuleList([
            LlamaLayer(dim, n_head, hidden_dim, norm_eps, rope_theta)
            for _ in range(n_layer)])
        self.model.norm = RMSNorm(dim, norm_eps)
        self.lm_head = nn.Linear(dim, vocab_size, bias=False)
        self.rng = RngContext(0)  # no dropout sites

    def forward(self, idx, targets, probe=None):
        x = self.model.embed_tokens(idx)
        for layer in self.model.layers:
            x = layer(x, probe)
        logits = self.lm_head(self.model.norm(x))
        if probe is not None:
            probe.setdefault("logits", []).append(logits.detach())
        return F.cross_entropy(logits.view(-1, logits.size(-1)),
                               targets.reshape(-1))


def options(spec):
    """{key: value} of dsc's --model string 'name:key=value,...'."""
    return dict(item.split("=") for item in spec.partition(":")[2].split(",") if item)


def build(spec, seed=1337):
    """spec: dsc's --model string, e.g. 'gpt2:n_layer=2,n_head=2,...';
    seed: dsrun's --seed (dropout masks)."""
    name = spec.partition(":")[0]
    kv = options(spec)
    if name == "gpt2":
        return GPT(int(kv["n_layer"]), int(kv["n_head"]), int(kv["n_embd"]),
                   int(kv["block_size"]), int(kv["vocab_size"]),
                   bool(int(kv.get("bias", 1))), float(kv.get("dropout", 0)),
                   seed)
    if name == "llama":
        dim = int(kv["dim"])
        hidden = int(kv.get("hidden_dim", 32 * ((8 * dim + 95) // 96)))
        return Llama(dim, int(kv["n_layer"]), int(kv["n_head"]), hidden,
                     int(kv["vocab_size"]), float(kv.get("norm_eps", 1e-5)),
                     float(kv.get("rope_theta", 10000)))
    raise SystemExit(f"torch_models: no reference for model '{name}'")
