"""The embeddings page draws the model's own embedding rows, q, k, v and scores for the typed text,
checked against a reference built from the raw weight matrices (tests/references.py)."""

import math

import numpy as np
import pytest
from apptest import all_text, decode, figure, figures, open_page, picture_figures, predict, table, unescaped
from references import reference_qkv
from streamlit.testing.v1 import AppTest

LABEL = "test bundle (tiny)"
DEFAULT_TEXT = "def add(a, b):"

pytestmark = pytest.mark.usefixtures("fresh_streamlit_caches")  # st.cache_* is shared across AppTests


def open_embeddings(path, query=None) -> AppTest:
    """The embeddings page with the test bundle added to this session and selected in the sidebar."""
    return open_page("embeddings", query, bundle=(LABEL, path))


def heatmap(at, title_start):
    """z (as float rows, None for masked) and y labels of the figure whose title starts with `title_start`."""
    found = figure(at, title_start)
    trace = found["data"][0]
    # heatmaps send float32 cells with masked ones as NaN (ui.charts.cells); earlier pages sent JSON nulls
    z = [[None if v is None or v != v else float(v) for v in row] for row in decode(trace["z"]).tolist()]
    return z, list(decode(trace["y"]).tolist()), found["layout"]["title"]["text"]


def assert_matrix(z, want, atol):
    want = np.asarray(want, dtype=float)
    assert np.asarray(z, dtype=float).shape == want.shape
    np.testing.assert_allclose(np.asarray(z, dtype=float), want, atol=atol, rtol=0)


@pytest.mark.numerics
def test_default_text_shows_embedding_rows_qkv_and_scores_of_the_model(trained_bundle_path, trained_bundle):
    at = predict(open_embeddings(trained_bundle_path), "emb_predict", "1")  # any answer reveals section 2
    ids = trained_bundle.tokenizer.encode(DEFAULT_TEXT)
    T, C, D = len(ids), trained_bundle.config.d_model, trained_bundle.config.head_dim
    # token table
    tokens = table(at, "token id")
    assert list(tokens["token id"]) == ids
    assert list(tokens["piece"]) == [trained_bundle.tokenizer.display_piece(i) for i in ids]
    # embedding rows: the rows of the embedding matrix picked by the ids
    z, y, title = heatmap(at, "token embedding rows")
    assert f"{T} × {C}" in title
    assert_matrix(z, trained_bundle.model.token_embedding.weight.detach()[ids].tolist(), atol=0)
    assert y[3] == "3 ␣"
    # q, k, v of layer 0, head 0 (after RoPE by default) against the raw-matrix reference
    q, k, v, _ = reference_qkv(trained_bundle.model, ids, 0, 0)
    for name, want in (("Q", q), ("K", k), ("V", v)):
        z, _, title = heatmap(at, f"{name} (T × D")
        assert f"{T} × {D}" in title
        assert_matrix(z, want.tolist(), atol=1e-5)
    # scores: q kᵀ / √D below the diagonal, masked (None) above it; the page's picture (issue 25)
    assert [f["layout"]["title"]["text"] for f in picture_figures(at)] == [heatmap(at, "scores")[2]]
    z, _, _ = heatmap(at, "scores")
    for t in range(T):
        for s in range(T):
            if s > t:
                assert z[t][s] is None
            else:
                assert z[t][s] == pytest.approx(float(q[t] @ k[s]) / math.sqrt(D), abs=1e-5)


@pytest.mark.numerics
def test_changing_layer_and_head_changes_the_projections(trained_bundle_path, trained_bundle):
    at = open_embeddings(trained_bundle_path)
    before, _, _ = heatmap(at, "Q (T × D")
    at.selectbox(key="emb_layer").set_value(1).run()
    at.selectbox(key="emb_head").set_value(1).run()
    assert not at.exception
    after, _, _ = heatmap(at, "Q (T × D")
    assert after != before
    ids = trained_bundle.tokenizer.encode(DEFAULT_TEXT)
    q, _, v, _ = reference_qkv(trained_bundle.model, ids, 1, 1)
    assert_matrix(after, q.tolist(), atol=1e-5)
    assert_matrix(heatmap(at, "V (T × D")[0], v.tolist(), atol=1e-5)
    assert "layer 1, head 1" in heatmap(at, "scores")[2]


@pytest.mark.numerics
def test_rope_toggle_shows_q_before_rotation(trained_bundle_path, trained_bundle):
    at = open_embeddings(trained_bundle_path, {"emb_rope": "false"})
    z, _, title = heatmap(at, "Q (T × D")
    assert "before RoPE" in title
    ids = trained_bundle.tokenizer.encode(DEFAULT_TEXT)
    q_rotated, *_ = reference_qkv(trained_bundle.model, ids, 0, 0)
    assert z[0] == pytest.approx(q_rotated[0].tolist(), abs=1e-5)  # position 0 is not rotated
    assert z[5] != pytest.approx(q_rotated[5].tolist(), abs=1e-5)  # later positions are


def test_empty_text_gets_a_clear_message_and_no_charts(trained_bundle_path):
    at = open_embeddings(trained_bundle_path)
    at.text_input(key="emb_text").set_value("").run()
    assert not at.exception
    assert "The text is empty" in all_text(at)
    assert figures(at) == []


def test_unseen_characters_are_listed_and_long_text_is_cut(trained_bundle_path, trained_bundle):
    at = open_embeddings(trained_bundle_path, {"emb_text": "def é(a): return ∑"})
    text = all_text(at)
    assert "not in the training text and became `<unk>`" in text
    assert "é (U+00E9)" in text and "∑ (U+2211)" in text
    tokens = table(at, "token id")
    assert list(tokens.loc[tokens["unseen character"], "piece"]) == ["<unk>", "<unk>"]
    long = "a + b " * 10  # 60 characters, context 32
    at.text_input(key="emb_text").set_value(long).run()
    assert "the first 28 were cut and the last 32 are shown" in all_text(at)
    assert list(table(at, "token id")["token id"]) == trained_bundle.tokenizer.encode(long[-32:])


def shows_the_rows(at) -> bool:
    return any(f["layout"]["title"]["text"].startswith("token embedding rows") for f in figures(at))


@pytest.mark.parametrize("text", [DEFAULT_TEXT, "def é(a): return ∑", "xyz"], ids=["default", "unseen", "no-repeat"])
def test_the_prediction_hides_the_embedding_rows_until_checked_and_counts_them_like_the_table(
    trained_bundle_path, trained_bundle, text
):
    """How many different rows: as many as the text has different token ids (computed here from the tokenizer
    and the raw embedding matrix). Right and wrong both reveal section 2 only, rows equal to the table's."""
    ids = trained_bundle.tokenizer.encode(text)
    table = trained_bundle.model.token_embedding.weight.detach()[ids]  # (T, C) the rows the ids pick
    n = len(set(ids))
    assert len({tuple(r) for r in table.tolist()}) == n  # the reference: one row per id, equal rows for equal ids
    at = open_embeddings(trained_bundle_path, {"emb_text": text})
    assert not shows_the_rows(at) and "the same character gives the same row" not in all_text(at)
    assert figure(at, "scores")  # sections 3 and 4 are not part of this question
    assert "Hint" in [e.label for e in at.expander]

    predict(at, "emb_predict", str(n))
    text_shown = unescaped(all_text(at))
    assert f"Right. You predicted {n}: the lab computes {n}; you were 0 off (tolerance 0)" in text_shown
    assert (
        f"Its {len(ids)} tokens have {n} different ids, and its embedding matrix has {n} different rows" in text_shown
    )
    z, _, _ = heatmap(at, "token embedding rows")
    assert_matrix(z, table.tolist(), atol=0)

    wrong = len(ids) + 1 if n == len(ids) else len(ids)  # one row per position (or one too many)
    at = predict(open_embeddings(trained_bundle_path, {"emb_text": text}), "emb_predict", str(wrong))
    assert f"Not quite. You predicted {wrong}: the lab computes {n}; you were {abs(wrong - n)} off" in unescaped(
        all_text(at)
    )
    assert shows_the_rows(at), "a wrong prediction reveals the rows too"


def test_the_page_points_to_controls_where_they_are():
    """Issue 25: the text, layer and head are in the page, above the scores; the page never sends the reader to the
    sidebar for them."""
    at = open_page("embeddings")
    assert "sidebar" not in all_text(at).replace("in the Attention section of the sidebar", "")
    assert [t.label for t in at.tabs] == [
        "1. Token ids",
        "2. Embedding rows",
        "3. Queries, keys, values",
        "4. How the scores are made",
    ]


@pytest.mark.parametrize("text, least_px", [(DEFAULT_TEXT, 24), ("a + b " * 30, 14)], ids=["default", "long"])
def test_the_scores_map_keeps_its_rows_tall_enough_to_read(text, least_px):
    """Issue 38: the picture's rows were flat strips (a 128-token text got 6 px rows). The lesson's text gets rows
    about half as tall as they are wide; a long text's rows stay readable (14 px) and the page scrolls instead."""
    at = open_page("embeddings", {"emb_text": text})  # the shipped model: a 128-token context
    [fig] = picture_figures(at)
    T = len(decode(fig["data"][0]["y"]))
    margin = fig["layout"]["margin"]
    rows_px = (fig["layout"]["height"] - margin["t"] - margin["b"]) / T
    assert T == min(len(text), 128) and rows_px >= least_px, (T, rows_px)
