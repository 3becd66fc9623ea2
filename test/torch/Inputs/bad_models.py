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
