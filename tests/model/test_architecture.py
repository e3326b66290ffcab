"""core.model.architecture: shapes read off a real forward pass, parameter counts that add up."""

import dataclasses

import pytest

from core.model.architecture import architecture
from core.model.gpt import GPT, preset


def test_every_part_in_order_with_its_shapes_and_parameters():
    config = dataclasses.replace(preset("tiny", 20), n_layer=2)  # C = 32, context 32, MLP 128
    model = GPT(config)
    parts = architecture(model, T=5)
    assert [p.name for p in parts][:5] == [
        "token embedding", "block 0 · norm 1", "block 0 · attention", "block 0 · norm 2", "block 0 · MLP"
    ]  # fmt: skip
    assert len(parts) == 1 + 4 * 2 + 2
    C, V = 32, 20
    by = {p.name: p for p in parts}
    assert (by["token embedding"].shape_in, by["token embedding"].shape_out) == ((1, 5), (1, 5, C))
    assert by["block 0 · attention"].shape_out == (1, 5, C)
    assert by["LM head"].shape_out == (1, 5, V)
    assert by["token embedding"].parameters == V * C  # the tied matrix, counted once, here
    assert by["LM head"].parameters == 0
    assert by["block 0 · attention"].parameters == 3 * C * C + C * C  # qkv and the output projection
    assert by["block 1 · MLP"].parameters == 2 * 4 * C * C
    assert by["final norm"].parameters == 2 * C
    assert sum(p.parameters for p in parts) == model.num_parameters()


def test_the_model_is_left_as_it_was():
    model = GPT(preset("tiny", 20)).train()
    architecture(model)
    assert model.training and not any(m._forward_hooks for m in model.modules())
    with pytest.raises(ValueError, match="T must be"):
        architecture(model, T=33)
