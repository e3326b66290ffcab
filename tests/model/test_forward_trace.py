"""core.model.forward_trace: the stages it keeps are the ones the forward pass computed, and what each layer would
predict is its residual stream through the final norm and the output head, the last one the model's real output.
References: the model's own forward pass, and a layer norm and output head written out in float64 from the raw
weights."""

import pytest
import torch
from bundles import TEXT, tiny_model

from core.agreement import allowance, float64_copy, model_terms
from core.model.forward_trace import top_choices, trace_forward


@pytest.fixture(scope="module")
def tiny():
    return tiny_model(seed=0, spread=3.0)


@pytest.mark.numerics
def test_the_last_layers_prediction_is_the_models_real_output(tiny):
    model, tok = tiny
    ids = tok.encode(TEXT)[:24]
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0, -1].double()  # (V,) the plain forward pass, no weights asked
    real = torch.softmax(logits, dim=-1)
    trace = trace_forward(model, ids)
    # two float32 passes that differ only in how the kernels batch the sums: rounding of the longest chain
    tol = allowance(torch.float32, model_terms(model.config), scale=float(logits.abs().max()))
    assert (trace.layer_probs[-1] - real).abs().max() <= tol
    assert (trace.probs - real).abs().max() <= tol
    assert trace.layer_probs.shape == (model.config.n_layer + 1, tok.vocab_size)
    assert trace.layer_probs.sum(dim=-1).tolist() == pytest.approx([1.0] * (model.config.n_layer + 1), abs=1e-12)


@pytest.mark.numerics
def test_each_layers_prediction_is_its_stream_through_the_final_norm_and_head_by_hand(tiny):
    model, tok = tiny
    model64 = float64_copy(model)
    trace = trace_forward(model64, tok.encode(TEXT)[:24])
    norm, head = model64.norm_final, model64.lm_head.weight.detach()  # (C,), (V, C)
    for row, stream in enumerate(trace.streams):
        x = stream[-1].double()  # (C,) the last position (kept as float32 by the trace)
        normed = (x - x.mean()) / torch.sqrt(
            x.var(unbiased=False) + norm.eps
        ) * norm.weight.detach() + norm.bias.detach()
        want = torch.softmax(head @ normed, dim=-1)  # (V,)
        tol = allowance(torch.float32, model.config.d_model, scale=float((head @ normed).abs().max()))
        assert (trace.layer_probs[row] - want).abs().max() <= tol, row


@pytest.mark.numerics
def test_each_block_adds_its_attention_and_mlp_to_the_stream(tiny):
    model, tok = tiny
    trace = trace_forward(model, tok.encode(TEXT)[:24])
    before = trace.embeddings  # (T, C)
    for b in trace.blocks:
        want = before.double() + b.attention_out.double() + b.mlp_out.double()  # (T, C)
        tol = allowance(torch.float32, 2, scale=float(want.abs().max()))  # two float32 additions
        assert (b.stream.double() - want).abs().max() <= tol, b.layer
        assert b.mlp_hidden.shape == (len(trace.ids), model.config.mlp_ratio * model.config.d_model)
        before = b.stream
    with torch.no_grad():
        want = model.norm_final(trace.blocks[-1].stream)  # (T, C)
    assert torch.equal(trace.final_normed, want)


def test_top_choices_orders_by_probability_breaks_ties_by_id_and_skips():
    probs = torch.tensor([0.1, 0.3, 0.3, 0.2, 0.1], dtype=torch.float64)
    assert top_choices(probs, 3) == [(1, 0.3), (2, 0.3), (3, 0.2)]
    assert top_choices(probs, 2, skip=[1]) == [(2, 0.3), (3, 0.2)]
