"""Dropout on the embeddings and on a residual branch: two ds.dropout sites."""
import torch.nn as nn
import torch.nn.functional as F


class DropoutModel(nn.Module):
    def __init__(self, vocab=16, n=8, p=0.1):
        super().__init__()
        self.wte = nn.Embedding(vocab, n)
        self.drop = nn.Dropout(p)
        self.mlp = nn.Linear(n, n)
        self.head = nn.Linear(n, vocab, bias=False)

    def forward(self, idx, targets):
        x = self.drop(self.wte(idx))
        x = x + self.drop(self.mlp(x))
        logits = self.head(x)
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
