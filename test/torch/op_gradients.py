"""Every mapped ATen op against PyTorch, forward and backward, in float64.

Each case is a small module: token embeddings, the op under test, a linear
head and a loss. dsc.export lowers it (in float64), the reference
interpreter runs the ds graph and ds-autodiff's backward
(_dsc_native.gradients), and PyTorch computes the same loss and gradients
with autograd. Loss and every gradient must agree to 1e-9 (relative to the
tensor's norm). Prints one line per case and exits 1 on any mismatch.
    op_gradients.py [CASE...]
"""
import math
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

import dsc
from dsc.native import native

B, T, V, C = 2, 6, 11, 8
TOL = 1e-9


class Case(nn.Module):
    """emb -> body(x) [B, T, C] -> head -> cross-entropy; or body returns the
    loss itself when it takes the targets."""

    def __init__(self, body, width=C, loss=None, params=None):
        super().__init__()
        self.emb = nn.Embedding(V, C)
        self.body_fn = body
        self.extra = nn.ParameterDict(params or {})
        self.head = nn.Linear(width, V)
        self.loss_fn = loss
        self.register_buffer("causal", torch.ones(T, T, dtype=torch.bool).tril(),
                             persistent=False)
        # RoPE tables for heads of D = C / 2 = 4: plain (theta 10000, which
        # the frontend turns into ds.rotary) and position-scaled by 1/2 (not
        # plain RoPE: stays elementwise).
        for name, scale in (("rope", 1.0), ("rope_scaled", 0.5)):
            d = C // 2
            f = 10000.0 ** (-2 * torch.arange(d // 2, dtype=torch.float64) / d)
            angle = scale * torch.arange(T, dtype=torch.float64)[:, None] * f[None, :]
            angle = torch.cat([angle, angle], -1)
            self.register_buffer(name + "_cos", angle.cos(), persistent=False)
            self.register_buffer(name + "_sin", angle.sin(), persistent=False)

    def forward(self, idx, targets):
        x = self.body_fn(self, self.emb(idx))
        logits = self.head(x)
        if self.loss_fn is not None:
            return self.loss_fn(logits, targets)
        return F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1))


def p(*shape, scale=0.5):
    return nn.Parameter(scale * torch.randn(*shape))


def heads(x, h=2):
    return x.view(B, T, h, C // h).transpose(1, 2)


def merge(y):
    return y.transpose(1, 2).reshape(B, T, C)


def rotate(q, cos, sin):
    """Hugging Face's apply_rotary_pos_emb on one tensor."""
    half = q.shape[-1] // 2
    return q * cos + torch.cat((-q[..., half:], q[..., :half]), dim=-1) * sin


CASES = {
    # contractions
    "linear": (lambda m, x: F.linear(x, m.extra["w"], m.extra["b"]),
               dict(w=p(C, C), b=p(C))),
    "matmul": (lambda m, x: x @ m.extra["w"], dict(w=p(C, C))),
    "bmm": (lambda m, x: torch.bmm(x, m.extra["w"].expand(B, C, C)), dict(w=p(C, C))),
    "addmm": (lambda m, x: torch.addmm(m.extra["b"], x.reshape(B * T, C),
                                       m.extra["w"]).view(B, T, C), dict(w=p(C, C), b=p(C))),
    # normalizations
    "layer_norm": (lambda m, x: F.layer_norm(x, (C,), m.extra["g"], m.extra["b"], 1e-5),
                   dict(g=p(C), b=p(C))),
    "layer_norm_no_affine": (lambda m, x: F.layer_norm(x, (C,)), {}),
    "rms_norm": (lambda m, x: F.rms_norm(x, (C,), m.extra["g"], 1e-6), dict(g=p(C))),
    "rms_norm_by_hand": (lambda m, x: m.extra["g"] * (x * torch.rsqrt(
        x.pow(2).mean(-1, keepdim=True) + 1e-6)), dict(g=p(C))),
    # activations
    "gelu": (lambda m, x: F.gelu(4 * x), {}),
    "gelu_tanh": (lambda m, x: F.gelu(4 * x, approximate="tanh"), {}),
    "silu": (lambda m, x: F.silu(4 * x), {}),
    # Llama's gated MLP: one ds.swiglu; against a broadcast vector it stays
    # ds.silu and ds.mul.
    "swiglu": (lambda m, x: F.silu(x @ m.extra["wg"]) * (x @ m.extra["wu"]),
               dict(wg=p(C, C, scale=1.5), wu=p(C, C))),
    "silu_times_vector": (lambda m, x: F.silu(2 * x) * m.extra["v"], dict(v=p(C))),
    "relu": (lambda m, x: F.relu(x + 0.1), {}),
    "tanh": (lambda m, x: torch.tanh(3 * x), {}),
    "sigmoid": (lambda m, x: torch.sigmoid(3 * x), {}),
    "exp_log": (lambda m, x: torch.log(torch.exp(x) + 1), {}),
    "sqrt_rsqrt": (lambda m, x: torch.sqrt(x * x + 1) + torch.rsqrt(x * x + 0.5), {}),
    "pow": (lambda m, x: x.pow(3) - x.pow(2) + (x * x + 1).pow(0.5) + (x * x + 1).pow(-0.5)
            + (x * x + 1).pow(-1), {}),
    # elementwise arithmetic, scalars and broadcasting
    "arith": (lambda m, x: (x * 2.5 - 1) / (x * x + 3) + (1 - x) - x.neg(), {}),
    "broadcast": (lambda m, x: x * m.extra["s"] + m.extra["r"] / (m.extra["r"] ** 2 + 1),
                  dict(s=p(1, T, 1), r=p(C))),
    # softmax family
    "softmax_last": (lambda m, x: F.softmax(3 * x, dim=-1), {}),
    "softmax_mid": (lambda m, x: F.softmax(3 * x, dim=1), {}),
    "log_softmax": (lambda m, x: F.log_softmax(3 * x, dim=-1), {}),
    # attention
    "sdpa_causal": (lambda m, x: merge(F.scaled_dot_product_attention(
        heads(3 * x), heads(x @ m.extra["k"]), heads(x), is_causal=True)), dict(k=p(C, C, scale=1.0))),
    "sdpa_mask_scale": (lambda m, x: merge(F.scaled_dot_product_attention(
        heads(3 * x), heads(x), heads(x @ m.extra["v"]), attn_mask=m.causal, scale=0.7)),
        dict(v=p(C, C))),
    "rotary_hf": (lambda m, x: merge(rotate(heads(x @ m.extra["w"]), m.rope_cos, m.rope_sin)),
                  dict(w=p(C, C))),
    "rotary_scaled": (lambda m, x: merge(rotate(heads(x), m.rope_scaled_cos,
                                                m.rope_scaled_sin)), {}),
    "sdpa_full": (lambda m, x: merge(F.scaled_dot_product_attention(
        heads(3 * x), heads(x), heads(x))), {}),
    "masked_fill_attention": (lambda m, x: merge(F.softmax(
        (heads(3 * x) @ heads(x).transpose(-2, -1)).masked_fill(~m.causal, float("-inf")), dim=-1)
        @ heads(x)), {}),
    "where_mask": (lambda m, x: torch.where(m.causal[:, :C // 2].repeat(1, 2)[:T], x, -x), {}),
    # Two -inf fills in a row (a causal mask over a padded one): the second
    # must not turn the first's -inf into NaN.
    "masked_fill_twice": (lambda m, x: merge(F.softmax(
        (heads(3 * x) @ heads(x).transpose(-2, -1)).masked_fill(~m.causal, float("-inf"))
        .masked_fill(~m.causal.roll(1, 0) & ~m.causal, float("-inf")), dim=-1) @ heads(x)), {}),
    "log_softmax_wide": (lambda m, x: F.log_softmax(300 * x, dim=-1) / 300, {}),
    "constant_as": (lambda m, x: x * m.causal[:, :1].float().type_as(x).expand_as(x)
                    + m.causal[0, :1].double().view_as(x[0, 0, :1]), {}),
    # shapes
    "shapes": (lambda m, x: torch.cat(x.split([3, 5], dim=-1)[::-1], dim=-1).permute(0, 2, 1)
               .reshape(B, C, T).transpose(1, 2).contiguous(), {}),
    "slice_expand": (lambda m, x: torch.cat([x[:, :, 2:5], x[:, 1:2, :].expand(B, T, C)[:, :, :5]],
                                            -1), {}),
    "stack": (lambda m, x: torch.stack([x[..., :4], 2 * x[..., 4:]], dim=2).reshape(B, T, C), {}),
    "unsqueeze_squeeze": (lambda m, x: (x.unsqueeze(2) * m.extra["w"].unsqueeze(0)).squeeze(2)
                          .flatten(1).view(B, T, C), dict(w=p(T, 1, C))),
    "chunk": (lambda m, x: torch.cat([c * (i + 1) for i, c in enumerate(x.chunk(4, dim=-1))], -1), {}),
    "select_row": (lambda m, x: x + x.select(1, 2).unsqueeze(1), {}),
    "unbind_swapaxes": (lambda m, x: torch.stack([r * (i + 1) for i, r in enumerate(
        x.swapaxes(1, 2).unbind(1))], dim=2), {}),
    "view_as_type_as": (lambda m, x: (x.reshape(B, T * C) * 2).view_as(x).type_as(x), {}),
    # reductions
    "reductions": (lambda m, x: x - x.mean(-1, keepdim=True) + x.sum(1, keepdim=True) / T
                   - x.amax(-1, keepdim=True), {}),
}

LOSS_CASES = {
    "cross_entropy_ignore": lambda logits, t: F.cross_entropy(
        logits.reshape(-1, V), t.reshape(-1)),
    "cross_entropy_ignore_minus_one": lambda logits, t: F.cross_entropy(
        logits.reshape(-1, V), t.reshape(-1), ignore_index=-1),
    "nll_log_softmax": lambda logits, t: F.nll_loss(F.log_softmax(logits, -1).reshape(-1, V),
                                                    t.reshape(-1)),
    "cross_entropy_3d": lambda logits, t: F.cross_entropy(logits.transpose(1, 2), t),
}


def build(name):
    torch.manual_seed(abs(hash(name)) % 2**31)
    if name in CASES:
        body, params = CASES[name]
        m = Case(body, params=params)
    else:
        m = Case(lambda m, x: x, loss=LOSS_CASES[name])
    with torch.no_grad():  # weights large enough that every path matters
        m.emb.weight.normal_(0, 1)
        m.head.weight.normal_(0, 0.7)
    return m.double()


def rel(a, b):
    return float((a - b).norm() / b.norm().clamp_min(1e-300))


def check(name):
    m = build(name)
    g = torch.Generator().manual_seed(5)
    tokens = torch.randint(0, V, (B, T), generator=g)
    targets = torch.randint(0, V, (B, T), generator=g)
    if name == "cross_entropy_ignore":
        targets[0, 1] = targets[1, 4] = -100  # PyTorch's default ignore_index
    if name == "cross_entropy_ignore_minus_one":
        targets[0, 1] = -1
    ex = dsc.export(m, B, T)
    loss = m(tokens, targets)
    loss.backward()
    want = {n: q.grad for n, q in m.named_parameters()}
    weights = {n: w.detach().numpy() for n, w in ex.weights.items()}
    got_loss, grads = native().gradients(ex.mlir, weights, tokens.int().numpy(),
                                         targets.int().numpy())
    problems = []
    d = abs(got_loss - loss.item()) / abs(loss.item())
    if not d <= TOL:  # NaN fails too
        problems.append(f"loss {got_loss!r} vs PyTorch {loss.item()!r}")
    worst = d
    for n, g_ in grads.items():
        r = rel(torch.from_numpy(g_), want[n])
        worst = r if r != r else max(worst, r)
        if not r <= TOL:
            problems.append(f"d loss / d {n} differs by {r:.1e}")
    return worst, problems


def main():
    names = sys.argv[1:] or list(CASES) + list(LOSS_CASES)
    failed = 0
    for name in names:
        try:
            worst, problems = check(name)
        except dsc.ExportError as e:
            worst, problems = math.nan, [f"export: {e}"]
        status = "ok" if not problems else "FAILED"
        print(f"{name}: {status} (max rel diff {worst:.1e})")
        for pr in problems:
            print(f"  {pr}")
        failed += bool(problems)
    print(f"{len(names) - failed}/{len(names)} cases match PyTorch in float64")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
