"""LESSON.md's worked example, exactly as a learner types it: causal attention for four tokens.

Run:  python examples/attention_by_hand.py
Its printed weights are pinned by tests/kernel/test_examples.py against the pure-Python hand-check.
"""

import math

import torch

torch.manual_seed(2)
q = torch.randn(1, 4, 3)  # (B, T, D)
k = torch.randn(1, 4, 3)  # (B, S, D)
v = torch.randn(1, 4, 2)  # (B, S, Dv)

scores = q @ k.transpose(-2, -1) / math.sqrt(3)  # (B, T, S)
future = torch.triu(torch.ones(4, 4, dtype=torch.bool), diagonal=1)  # (T, S) True above the diagonal
scores = scores.masked_fill(future, float("-inf"))  # (B, T, S)
weights = torch.softmax(scores, dim=-1)  # (B, T, S)
context = weights @ v  # (B, T, Dv)

assert torch.allclose(weights.sum(dim=-1), torch.ones(1, 4)), "every weight row must sum to one"
assert context.shape == (1, 4, 2), f"context has shape {tuple(context.shape)}, expected (1, 4, 2)"
torch.set_printoptions(precision=4)
print(weights[0])
