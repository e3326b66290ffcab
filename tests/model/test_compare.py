"""core.model.compare: two maps of one head side by side. The difference is checked against torch's own
subtraction of two real attention grids, the largest change against an argmax written cell by cell."""

import dataclasses

import pytest
import torch
from bundles import TEXT, tiny_model

from core.attention import causal_mask
from core.model.compare import align, attention_mask, describe, difference, lacks, small_edit, table
from core.model.gpt import PRESETS
from core.model.introspect import attention_grid, weight_allowance
from core.model.prompt import encode_for_model


@pytest.fixture(scope="module")
def tiny():
    return tiny_model(seed=0, spread=20.0)


def test_lacks_names_the_missing_layer_or_head():
    config = PRESETS["tiny"]  # 2 layers, 2 heads
    assert lacks(config, 1, 1) is None
    assert lacks(config, 3, 0) == "it has 2 layers (0 to 1), so no layer 3"
    assert lacks(config, 0, 2) == "it has 2 heads per layer (0 to 1), so no head 2"
    both = lacks(config, 2, 3)
    assert "no layer 2" in both and "no head 3" in both


def test_attention_mask_is_the_models_mask():
    config = PRESETS["tiny"]
    assert attention_mask(config, 5) == causal_mask(5).tolist()
    assert attention_mask(dataclasses.replace(config, causal=False), 3) == [[True] * 3] * 3
    with pytest.raises(ValueError, match="T must be an integer >= 1"):
        attention_mask(config, 0)


def test_small_edit_changes_one_known_character_and_keeps_the_length(tiny):
    _, tok = tiny
    text = "def add(a, b): return a + b"
    edited = small_edit(text, tok.chars)
    assert len(edited) == len(text)
    changed = [i for i, (x, y) in enumerate(zip(text, edited)) if x != y]
    assert changed == [len(text) - 1]  # the last character that is not whitespace
    assert edited[-1] in tok.chars and not tok.unknown_chars(edited)
    assert small_edit("a  ", "ab") == "b  "  # trailing whitespace is skipped
    assert small_edit("b", "ab") == "a"  # the vocabulary wraps around
    assert small_edit("   ", "ab ") == "   "  # nothing to change
    assert small_edit("", "ab") == ""
    assert small_edit("zz", "ab") == "zz"  # no character of the vocabulary
    assert small_edit("a", "a ") == "a"  # one usable character: no other to put in its place


def test_align_pairs_positions_and_marks_the_pieces_that_differ():
    same = align(["d", "e", "f"], ["d", "e", "f"])
    assert same.labels == ("0 d", "1 e", "2 f") and same.changed == () and same.same_length
    edited = align(["a", "+", "b"], ["a", "-", "b"])
    assert edited.labels == ("0 a", "1 +→-", "2 b") and edited.changed == (1,)
    longer = align(["a", "b"], ["a", "c", "d", "e"])
    assert not longer.same_length and (longer.T_a, longer.T_b, longer.T) == (2, 4, 4)
    assert longer.labels == ("0 a", "1 b→c", "2 –→d", "3 –→e") and longer.changed == (1,)
    assert longer.extent == (-0.5, 3.5)  # both maps span the longer side: position t faces position t
    with pytest.raises(ValueError, match="at least one token"):
        align([], ["a"])


@pytest.mark.numerics
def test_difference_of_two_texts_equals_torchs_subtraction_and_names_the_largest_change(tiny):
    model, tok = tiny
    config = model.config
    text_a = TEXT[:20]
    text_b = small_edit(text_a, tok.chars)
    ids_a = encode_for_model(tok, text_a, config.context_length).ids
    ids_b = encode_for_model(tok, text_b, config.context_length).ids
    T = len(ids_a)
    mask = attention_mask(config, T)
    for layer, head in [(0, 0), (1, 1)]:
        a = attention_grid(model, ids_a)[layer, head]  # (T, T) float32
        b = attention_grid(model, ids_b)[layer, head]
        diff = difference(a, b, mask, mask, margin=2 * weight_allowance(config))
        want = b.double() - a.double()  # (T, T)
        for t in range(T):
            for s in range(T):
                if s > t:
                    assert diff.delta[t][s] is None  # the future is masked on both sides
                else:
                    assert diff.delta[t][s] == pytest.approx(want[t, s].item(), abs=1e-15)
        # the largest change, found cell by cell over the causal cells
        best = (0, 0)
        for t in range(T):
            for s in range(t + 1):
                if abs(want[t, s]) > abs(want[best]):
                    best = (t, s)
        assert (diff.largest.query, diff.largest.key) == best
        assert diff.largest.a == a[best].item() and diff.largest.b == b[best].item()
        assert len(diff.cells) == T * (T + 1) // 2
    # the edit is at the last position, and causality keeps every earlier row unchanged
    assert all(diff.delta[t][s] == 0.0 for t in range(T - 1) for s in range(t + 1))
    assert diff.largest.query == T - 1 and diff.max_abs > 0.01


def test_difference_masks_a_cell_either_side_forbids_and_reports_ties():
    a = [[1.0, 0.0], [0.5, 0.5]]
    b = [[0.6, 0.4], [0.3, 0.7]]
    causal = [[True, False], [True, True]]
    full = [[True, True], [True, True]]
    diff = difference(a, b, causal, full)
    assert diff.delta[0][1] is None
    assert diff.delta[0][0] == pytest.approx(-0.4) and diff.delta[1][1] == pytest.approx(0.2)
    assert (diff.largest.query, diff.largest.key) == (0, 0) and diff.tied == ()
    near = difference([[0.5, 0.5], [0.5, 0.5]], [[0.75, 0.25], [0.25, 0.75]], full, full, margin=1e-9)
    assert (near.largest.query, near.largest.key) == (0, 0)  # four equal changes: the first, row-major
    assert len(near.tied) == 3
    same = difference(a, a, causal, causal, margin=1e-6)
    assert same.max_abs == 0.0
    assert describe(same, ["0 x", "1 y"], 1e-6).startswith("no cell changes by more than float32 rounding")


def test_difference_checks_its_inputs():
    square = [[1.0]]
    with pytest.raises(ValueError, match=r"weights_b must be a \(1, 1\) matrix"):
        difference(square, [[1.0, 0.0], [0.5, 0.5]], [[True]], [[True]])
    with pytest.raises(ValueError, match="square"):
        difference([[1.0, 0.0]], square, [[True]], [[True]])
    with pytest.raises(ValueError, match="share no cell"):
        difference(square, square, [[False]], [[True]])
    with pytest.raises(ValueError, match="margin"):
        difference(square, square, [[True]], [[True]], margin=-1.0)
    with pytest.raises(ValueError, match="finite"):
        difference([[float("nan")]], square, [[True]], [[True]])


def test_describe_and_table_name_query_key_and_the_two_weights():
    a = [[1.0, 0.0], [0.75, 0.25]]
    b = [[1.0, 0.0], [0.25, 0.75]]
    mask = [[True, False], [True, True]]
    diff = difference(a, b, mask, mask)
    labels = ["0 x", "1 +→-"]
    said = describe(diff, labels)
    assert said.startswith("the largest change is query 1 ('+→-'), key 0 ('x'): weight 0.750 on side A, 0.250")
    assert "a change of -0.500." in said and "more cells change by as much" in said  # (1, 1) changes by +0.5
    columns = table(diff, labels)
    assert columns["query"] == ["0 x", "1 +→-", "1 +→-"] and columns["key"] == ["0 x", "0 x", "1 +→-"]
    assert columns["B − A"] == [0.0, -0.5, 0.5]
    with pytest.raises(ValueError, match="labels must name"):
        describe(diff, labels[:1])


def test_difference_accepts_tensors_and_lists_alike():
    a = torch.tensor([[1.0, 0.0], [0.4, 0.6]])
    b = torch.tensor([[1.0, 0.0], [0.1, 0.9]])
    mask = causal_mask(2)
    from_tensors = difference(a, b, mask, mask)
    from_lists = difference(a.tolist(), b.tolist(), mask.tolist(), mask.tolist())
    assert from_tensors == from_lists
