"""ui.cached: each cached computation returns the numbers of the uncached core call, for every key it is asked
with (a cache keyed on too little would hand one input's result to another); and a heatmap sends the cells
it was given, masked ones as gaps."""

import base64
import json

import numpy as np
import pandas as pd
import pytest
import torch

from core.lessons import rope as rope_lab
from core.lessons import scores as lessons
from core.model import introspect
from core.model.tokenizer import CharTokenizer
from core.runs.events import attention_snapshot
from ui import cached, charts

pytestmark = pytest.mark.usefixtures("fresh_streamlit_caches")


def test_score_variance_is_the_core_computation_for_each_seed():
    widths = tuple(lessons.VARIANCE_WIDTHS[:4])
    for seed in (0, 1, 0):  # 0 again: served from the cache, still seed 0's numbers
        assert cached.score_variance(widths, seed) == lessons.score_variance(list(widths), seed=seed)
    assert cached.score_variance(widths, 0) != cached.score_variance(widths, 1)


def test_model_computations_are_the_core_ones_for_each_text_layer_and_head(trained_bundle):
    model, version, tok = trained_bundle.model, trained_bundle.version, trained_bundle.tokenizer
    texts = ("def add(a, b):", "x = 1", "def add(a, b):")
    for text in texts:
        ids = cached.ids_key(tok.encode(text))
        torch.testing.assert_close(
            cached.attention_grid(model, version, ids), introspect.attention_grid(model, list(ids)), rtol=0, atol=0
        )
        for layer in range(model.config.n_layer):
            for head in range(model.config.n_head):
                on_off = cached.rope_on_off_scores(model, version, ids, layer, head)
                ref = rope_lab.rope_on_off_scores(model, list(ids), layer, head)
                torch.testing.assert_close(on_off.scores_on, ref.scores_on, rtol=0, atol=0)
                torch.testing.assert_close(on_off.scores_off, ref.scores_off, rtol=0, atol=0)
    a, b = (cached.attention_grid(model, version, cached.ids_key(tok.encode(t))) for t in texts[:2])
    assert a.shape != b.shape  # two texts: two entries, not one


def test_a_heatmap_sends_its_cells_as_float32_with_masked_cells_as_gaps():
    z = [[0.25, None, None], [0.5, 0.125, None], [1.0, 2.5e-8, -3.0]]
    fig = json.loads(charts.heatmap(z, title="t", x_labels=list("abc"), y_labels=list("abc")).to_json())
    sent = fig["data"][0]["z"]
    cells = np.frombuffer(base64.b64decode(sent["bdata"]), dtype=np.dtype(sent["dtype"])).reshape(3, 3)
    want = np.array([[np.nan if v is None else v for v in row] for row in z], dtype=np.float32)
    np.testing.assert_array_equal(cells, want)  # NaN where masked, every other cell exactly
    assert fig["data"][0]["text"][0] == ["0.25", "masked", "masked"]  # what hover and the cells print


def test_the_masks_sweep_is_the_core_computation_on_the_worked_examples_row():
    from core.lessons import masks as masking

    example = lessons.worked_example()
    logits = masking.RENORMALISE_SWEEP[:6]
    for row in (2, 1, 2):  # rows with a forbidden key (the causal future)
        scores, allowed = example.result.scores[0, row], example.mask[row]
        want = [masking.renormalise_after_softmax(scores, allowed, forbidden_logit=x) for x in logits]
        got = cached.worked_row_sweep(row, logits)
        assert [(r.forbidden_logit, r.kept_mass, r.max_error, r.undefined) for r in got] == [
            (r.forbidden_logit, r.kept_mass, r.max_error, r.undefined) for r in want
        ]


def test_score_geometry_is_the_core_computation_at_each_element_and_head():
    keys = [
        (2, 2, 5, 16, 0, True, 1, 0),
        (2, 2, 5, 16, 0, False, 1, 0),
        (2, 2, 5, 16, 1, True, 1, 0),
        (2, 2, 5, 16, 0, True, 0, 0),  # another element of the same batch
        (2, 2, 5, 16, 0, True, 1, 1),  # another head
        (1, 3, 4, 8, 0, True, 0, 2),
    ]
    for B, H, T, D, seed, scaled, b, h in keys + keys[:1]:  # the first again: served from the cache, still its numbers
        geo = lessons.score_geometry(B, H, T, D, seed=seed, scaled=scaled)
        view = cached.score_geometry(B, H, T, D, seed, scaled, b, h)
        assert view.scores == geo.result.scores[b, h].tolist()
        assert view.weights == geo.result.weights[b, h].tolist()
        assert view.max_abs_score == max(abs(x) for row in view.scores for x in row)  # the picture's own numbers
        assert view.max_abs_score == geo.max_abs_score[b, h].item()
        assert view.max_weight == [max(row) for row in view.weights] == geo.max_weight[b, h].tolist()
        assert (view.scale, view.steps, view.numel) == (geo.scale, geo.steps, B * H * T * T)
        assert (view.score_variance, view.expected_variance) == (geo.score_variance, geo.expected_variance)
    # every key part reaches the numbers: a cache keyed on too little would hand one key's view to another
    views = [cached.score_geometry(*key).scores for key in keys]
    assert all(views[i] != views[j] for i in range(len(views)) for j in range(i))


def test_start_heres_picture_and_example_are_the_plain_computations():
    from core.lessons.example_run import EXAMPLE
    from ui.companion import matrix_table

    example = lessons.worked_example()
    want = [
        [w if ok else None for w, ok in zip(row, allowed)]
        for row, allowed in zip(example.result.weights[0].tolist(), example.mask.tolist())
    ]
    for _ in range(2):  # computed, then served from the cache
        weights, table = cached.worked_example_weights()
        assert weights == want
        assert weights[0][1:] == [None, None, None]  # row 0 sees key 0 only
        labels = [str(i) for i in range(len(want))]
        pd.testing.assert_frame_equal(table, matrix_table(want, labels, labels, value_name="weight"))
        assert cached.example_source() == EXAMPLE.read_text(encoding="utf-8")
    table.loc[0, "weight"] = "changed"  # a caller's copy: the next caller still gets the plain table
    pd.testing.assert_frame_equal(
        cached.worked_example_weights()[1], matrix_table(want, labels, labels, value_name="weight")
    )


def test_the_rope_pages_offsets_and_layouts_are_the_core_computations_for_each_setting():
    settings = [(16, 10000.0, 5, 2), (16, 10000.0, 9, 2), (8, 10000.0, 5, 2), (16, 500.0, 5, 2), (16, 10000.0, 5, 7)]
    for D, base, m, n in settings + settings[:1]:  # the first again: served from the cache, still its numbers
        q, k = rope_lab.seeded_qk(D)
        offsets, anchors = tuple(range(-32, 33)), (0, min(m, n), 100, 1000)
        assert cached.rope_offset_scores(D, offsets, anchors, base) == rope_lab.offset_scores(
            q, k, list(offsets), list(anchors), base
        )
        pair = (min(m, n), min(m, n) + 5)
        assert cached.rope_offset_scores(D, (m - n,), pair, base) == rope_lab.offset_scores(
            q, k, [m - n], list(pair), base
        )
        got = cached.rope_layout_equivalence(D, m, n, base)
        want = rope_lab.layout_equivalence(torch.stack([q, k]), torch.tensor([m, n]), base)
        torch.testing.assert_close(got.adjacent, want.adjacent, rtol=0, atol=0)
        torch.testing.assert_close(got.split_half, want.split_half, rtol=0, atol=0)
        assert (got.permutation, got.destination, got.max_abs_diff, got.tolerance, got.passed) == (
            want.permutation,
            want.destination,
            want.max_abs_diff,
            want.tolerance,
            want.passed,
        )
        assert got.unpermuted_max_abs_diff == want.unpermuted_max_abs_diff
    # each key part reaches the numbers: a cache keyed on too little would hand one setting's result to another
    layouts = [cached.rope_layout_equivalence(D, m, n, base).adjacent.tolist() for D, base, m, n in settings]
    assert all(layouts[i] != layouts[j] for i in range(len(layouts)) for j in range(i))
    curves = [cached.rope_offset_scores(D, (1, 2), (0, 3), base).scores for D, base, _, _ in settings[1:4]]
    assert all(curves[i] != curves[j] for i in range(len(curves)) for j in range(i))


def test_attention_snapshot_is_the_core_one_for_each_text_layer_head_and_step(trained_bundle):
    model, tok, version = trained_bundle.model, trained_bundle.tokenizer, trained_bundle.version
    asked = [("def add(a, b):", 0, 0, 5), ("x = 1", 0, 0, 5), ("def add(a, b):", 1, 1, 5), ("x = 1", 0, 0, 7)]
    for text, layer, head, step in asked + asked[:1]:  # the first again: from the cache, still its own numbers
        got = cached.attention_snapshot(model, tok, version, text, layer, head, step)
        assert got == attention_snapshot(model, tok, text, layer=layer, head=head, step=step)
    first = cached.attention_snapshot(model, tok, version, *asked[0])
    other_head = cached.attention_snapshot(model, tok, version, *asked[2])
    assert first.weights != other_head.weights  # the key tells heads apart, so the check above could fail


@pytest.mark.parametrize("text", ["abc", "hello, world\n", "abc"])
def test_vocabulary_size_is_the_tokenizers_for_the_text(text):
    assert cached.vocabulary_size(text, text) == CharTokenizer.from_text(text).vocab_size


def test_the_cached_suggestion_is_the_served_one_for_each_text_and_policy():
    """ui.suggestion_view.cached_suggestion (a rerun's suggestion) against core's suggest, for several texts and two
    policies: the policy's fields are part of the key, so a re-tuned threshold is never served stale."""
    import dataclasses

    from core.model.bundle import load_bundle
    from core.release.serving.autocomplete import prompt_for, suggest
    from core.release.serving.policy import SuggestionPolicy
    from core.release.serving.transformer_predictor import TransformerPredictor
    from ui.models import SHIPPED_DIR
    from ui.suggestion_view import cached_suggestion

    shipped = load_bundle(SHIPPED_DIR)  # the tests' tiny bundle offers no suggestion: the shipped one does
    predictor = TransformerPredictor(shipped.model, shipped.tokenizer)
    loose, strict = SuggestionPolicy(threshold=0.05), SuggestionPolicy(threshold=0.95)
    served = []
    for text in ("def main(", "import o", "def main("):
        for policy in (loose, strict, loose):
            prompt = prompt_for(predictor, text, policy)
            s = cached_suggestion(predictor, shipped.version, prompt.ids, prompt, policy, dataclasses.astuple(policy))
            assert s == suggest(predictor, prompt, policy, best_guess=True).suggestion_or_raise()
            served.append(s)
    assert len({(s.text, s.shown) for s in served}) > 1  # texts and policies give different suggestions
