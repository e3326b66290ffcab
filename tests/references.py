"""Independent references shared by the test files, written without the code they check: softmax in plain
math.exp, RoPE scores in closed form, and a model head's q, k, v from its raw weight matrices."""

import math

import torch
from hypothesis import strategies as st

from core.model.rope import rope_trace

ATOL32 = 1e-5  # fp32 attention against a float64 reference (STYLE.md)


def exact_softmax(xs, allowed=None):
    """Softmax in plain math.exp, float64, forbidden entries 0: a reference written without torch."""
    allowed = [True] * len(xs) if allowed is None else list(allowed)
    top = max(x for x, ok in zip(xs, allowed) if ok)
    exps = [math.exp(x - top) if ok else 0.0 for x, ok in zip(xs, allowed)]
    total = math.fsum(exps)
    return [e / total for e in exps]


rows_with_mask = st.integers(2, 6).flatmap(
    lambda S: st.tuples(
        st.lists(st.floats(-8, 8, allow_nan=False), min_size=S, max_size=S),
        st.lists(st.booleans(), min_size=S, max_size=S).filter(any),
    )
)


def closed_form_score(q, k, offset, base):
    """Σ_i |q_i||k_i| cos(φ_q,i - φ_k,i + offset·θ_i) over the pairs, with math only."""
    D = len(q)
    total = []
    for i in range(D // 2):
        theta = base ** (-2.0 * i / D)
        qx, qy, kx, ky = q[2 * i], q[2 * i + 1], k[2 * i], k[2 * i + 1]
        total.append(
            math.hypot(qx, qy) * math.hypot(kx, ky) * math.cos(math.atan2(qy, qx) - math.atan2(ky, kx) + offset * theta)
        )
    return math.fsum(total)


def reference_scores(q, k):
    """q kᵀ / √D by loops (T, T) with the future as None."""
    T, D = q.shape
    return [[float(q[t] @ k[s]) / math.sqrt(D) if s <= t else None for s in range(T)] for t in range(T)]


def head_inputs(model, ids, layer, head):
    """q, k BEFORE RoPE, v (T, D) and the normed block input (T, C) of one head, float64, written from the raw
    weight matrices: the residual stream from a forward hook, an explicit layer norm, the head's rows of the
    qkv weight."""
    captured = {}
    block = model.blocks[layer]

    def keep_input(module, args):
        captured["x"] = args[0].detach()  # returns None: the forward pass is left unchanged

    handle = block.register_forward_pre_hook(keep_input)
    with torch.no_grad():
        model(torch.tensor([list(ids)]))
    handle.remove()
    x = captured["x"][0].double()  # (T, C) the residual stream entering the block
    norm = block.norm_attn
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    gamma, beta = norm.weight.detach().double(), norm.bias.detach().double()  # (C,) each
    normed = (x - mean) / torch.sqrt(var + norm.eps) * gamma + beta  # (T, C)
    C, D = model.config.d_model, model.config.head_dim
    W = block.attn.qkv.weight.detach().double()  # (3C, C): rows 0..C-1 make q, C..2C-1 k, 2C..3C-1 v
    rows = lambda part: W[part * C + head * D : part * C + (head + 1) * D]  # (D, C)
    q_raw, k_raw, v = normed @ rows(0).T, normed @ rows(1).T, normed @ rows(2).T  # (T, D) each
    return q_raw, k_raw, v, normed


def reference_qkv(model, ids, layer, head):
    """q (after RoPE), k (after RoPE), v (T, D) and the normed input, float64: head_inputs, then RoPE by
    core.model.rope.rope_trace (pure Python)."""
    q_raw, k_raw, v, normed = head_inputs(model, ids, layer, head)
    base = model.config.rope_base
    rotate = lambda m: torch.tensor(
        [rope_trace(m[t].tolist(), t, base).rotated for t in range(len(m))], dtype=torch.float64
    )  # (T, D)
    return rotate(q_raw), rotate(k_raw), v, normed


def reference_weights(model, ids, layer, head):
    """softmax over the causal prefix of q kᵀ / √D, row by row with math (float64)."""
    q, k, _, _ = reference_qkv(model, ids, layer, head)
    T, D = q.shape
    out = torch.zeros(T, T, dtype=torch.float64)
    for t in range(T):
        scores = [float(q[t] @ k[s]) / math.sqrt(D) for s in range(t + 1)]
        top = max(scores)
        exps = [math.exp(x - top) for x in scores]
        for s in range(t + 1):
            out[t, s] = exps[s] / math.fsum(exps)
    return out
