"""Modules the frontend must refuse, each with one op it cannot map."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Mix(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.proj = nn.Linear(n, n)

    def forward(self, x):
        return torch.cumsum(self.proj(x), dim=1)


class Block(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.mix = Mix(n)

    def forward(self, x):
        return x + self.mix(x)


class CumsumModel(nn.Module):
    def __init__(self, vocab=256, n=8):
        super().__init__()
        self.wte = nn.Embedding(vocab, n)
        self.blocks = nn.ModuleList([nn.Identity(), Block(n)])
        self.head = nn.Linear(n, vocab)

    def forward(self, idx, targets):
        x = self.wte(idx)
        for b in self.blocks:
            x = b(x)
        logits = self.head(x)
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


class AttnDropout(nn.Module):
    def __init__(self, vocab=256, n=8):
        super().__init__()
        self.wte = nn.Embedding(vocab, n)
        self.head = nn.Linear(n, vocab)

    def forward(self, idx):
        x = self.wte(idx).view(idx.shape[0], 1, idx.shape[1], -1)
        x = F.scaled_dot_product_attention(x, x, x, dropout_p=0.1, is_causal=True)
        return self.head(x.view(idx.shape[0], idx.shape[1], -1))


class BlockSizeAssert(nn.Module):
    """nanoGPT's check of the sequence length, in its words."""

    def __init__(self, vocab=256, n=8, block_size=64):
        super().__init__()
        self.block_size = block_size
        self.wte = nn.Embedding(vocab, n)
        self.head = nn.Linear(n, vocab)

    def forward(self, idx, targets):
        b, t = idx.size()
        assert t <= self.block_size, \
            f"Cannot forward sequence of length {t}, block size is only {self.block_size}"
        logits = self.head(self.wte(idx))
        return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


class Raises(nn.Module):
    """A forward that fails with the user's own exception."""

    def __init__(self, vocab=256, n=8):
        super().__init__()
        self.wte = nn.Embedding(vocab, n)

    def forward(self, idx, targets):
        if idx.shape[1] % 3:
            raise ValueError(f"sequence length {idx.shape[1]} is not a multiple of 3\n"
                             "(this model packs tokens in triples)")
        return self.wte(idx).mean()


class VectorLoss(nn.Module):
    """Returns a value per token instead of a scalar loss."""

    def __init__(self, vocab=256, n=8):
        super().__init__()
        self.wte = nn.Embedding(vocab, n)
        self.head = nn.Linear(n, vocab)

    def forward(self, idx, targets):
        return self.head(self.wte(idx)).mean(-1)


class TinyLlama(nn.Module):
    """A Hugging Face model as its users build it (from a config)."""

    def __new__(cls, **kwargs):
        from transformers import LlamaConfig, LlamaForCausalLM
        config = dict(vocab_size=256, hidden_size=16, intermediate_size=32,
                      num_hidden_layers=1, num_attention_heads=2,
                      max_position_embeddings=64)
        config.update(kwargs)
        return LlamaForCausalLM(LlamaConfig(**config))
