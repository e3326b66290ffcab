"""Masks page: the masks, the missing mass, the renormalisation failure and the empty rows it renders,
checked against computations written here with loops and math.exp."""

import math
import re

import pytest
import torch
from apptest import all_text, decode, figure, figures, open_page, picture_figures, predict, table, unescaped

NAN_TEXT = "NaN (undefined)"

pytestmark = pytest.mark.usefixtures("fresh_streamlit_caches")  # st.cache_* is shared across AppTests


def softmax(xs, allowed=None):
    allowed = [True] * len(xs) if allowed is None else allowed
    top = max(x for x, ok in zip(xs, allowed) if ok)
    exps = [math.exp(x - top) if ok else 0.0 for x, ok in zip(xs, allowed)]
    return [e / math.fsum(exps) for e in exps]


def combined_mask(n, T, side, causal=True):
    """allowed[t][s] for one sequence of n tokens padded to T, written out with loops."""
    real = [s < n if side == "right" else s >= T - n for s in range(T)]
    return [[real[s] and (s <= t or not causal) for s in range(T)] for t in range(T)]


def scores_of(seq, T, D, seed):
    """Scaled scores of sequence `seq`, drawn in the page's order: q then k, (B=3, H=1, T, D)."""
    g = torch.Generator().manual_seed(seed)
    q, k = torch.randn(3, 1, T, D, generator=g), torch.randn(3, 1, T, D, generator=g)
    return (q[seq, 0].double() @ k[seq, 0].double().T / math.sqrt(D)).tolist()  # (T, S)


@pytest.mark.numerics
def test_default_page_masks_missing_mass_and_empty_rows():
    at = predict(open_page("masks"), "masks_predict", "0.5")
    # Four-token example: labelled cells, allowed exactly when s <= t.
    words = figure(at, "Causal mask for 4 tokens")["data"][0]
    assert list(words["x"]) == ["0 the", "1 cat", "2 sat", "3 down"]
    assert words["text"] == [["allowed" if s <= t else "forbidden" for s in range(4)] for t in range(4)]

    # Defaults: lengths 6, 4, 2, left padding, both masks on, sequence 1, seed 0.
    mask = combined_mask(4, 6, "left")
    combined = figure(at, "Combined mask, sequence 1")["data"][0]
    assert combined["text"] == [["allowed" if ok else "forbidden" for ok in row] for row in mask]

    scores = scores_of(1, 6, 4, seed=0)
    missing = table(at, "missing mass")
    for t in range(6):
        p = softmax(scores[t])  # over every key, forbidden ones included
        expected = 1.0 - math.fsum(w for w, ok in zip(p, mask[t]) if ok)
        assert missing["missing mass"][t] == pytest.approx(expected, abs=1e-5)
        assert missing["row sum, mask before"][t] == (1.0 if any(mask[t]) else 0.0)
    bars = decode(figure(at, "Missing mass")["data"][0]["y"]).astype(float)
    assert bars.tolist() == pytest.approx(missing["missing mass"].tolist(), abs=1e-6)

    # Rows 0 and 1 of sequence 1 see only padding: zeros, never NaN, and the naive result named in words.
    empty = table(at, "naive softmax weights")
    assert empty["query t"].tolist() == [0, 1]
    for col in ("lab weights", "lab output", "gradient w.r.t. q_t"):
        for cell in empty[col]:
            assert [float(x) for x in cell.split(",")] == [0.0] * len(cell.split(","))
    assert empty["naive softmax weights"].tolist() == [NAN_TEXT, NAN_TEXT]
    text = all_text(at)
    assert "is finite" in text
    assert not re.search(r"\bnan\b(?! \(undefined\))", text, re.I)


def worked_row_2():
    with torch.random.fork_rng():
        torch.manual_seed(2)
        q, k = torch.randn(1, 4, 3), torch.randn(1, 4, 3)
    return (q[0, 2].double() @ k[0].double().T / math.sqrt(3)).tolist()


@pytest.mark.numerics
def test_renormalising_after_a_dominant_forbidden_logit():
    at = open_page("masks")
    correct = softmax(worked_row_2(), [True, True, True, False])
    renorm = table(at, "renormalised, plain division")
    assert renorm["score"].tolist()[3] == "1000.0000"
    assert renorm["renormalised, plain division"].tolist() == [NAN_TEXT] * 4
    assert [float(x) for x in renorm["renormalised, what the lab returns"]] == [0.0] * 4
    assert [float(x) for x in renorm["mask before softmax (correct)"]] == pytest.approx(correct, abs=1e-5)
    sweep = table(at, "forbidden logit")
    undefined = sweep[sweep["plain division"] == NAN_TEXT]["forbidden logit"]
    assert (
        88 < undefined.min() <= 112
    )  # float32: e^-87.3 is the smallest normal number, e^-103.3 the smallest subnormal

    at.number_input(key="mask_spike").set_value(3.0).run()
    renorm = table(at, "renormalised, plain division")
    assert [float(x) for x in renorm["renormalised, plain division"]] == pytest.approx(correct, abs=1e-5)


def test_switching_masks_and_sides_changes_the_figures():
    at = open_page("masks")
    at.radio(key="mask_side").set_value("right").run()
    combined = figure(at, "Combined mask, sequence 1")["data"][0]
    assert combined["text"] == [
        ["allowed" if ok else "forbidden" for ok in row] for row in combined_mask(4, 6, "right")
    ]
    assert "No row of sequence 1 is fully masked" in all_text(at)

    at.toggle(key="mask_pad").set_value(False)
    at.toggle(key="mask_causal").set_value(False).run()
    predict(at, "masks_predict", "1")  # a new question: nothing is forbidden now, row 0 keeps everything
    pad = figure(at, "Padding mask (off")["data"][0]
    assert pad["text"][2] == ["token", "token"] + ["pad<br>allowed"] * 4
    assert table(at, "position s")["mask"].tolist()[-4:] == ["pad (not masked)"] * 4
    combined = figure(at, "Combined mask, sequence 1")["data"][0]
    assert combined["text"] == [["allowed"] * 6] * 6
    assert table(at, "missing mass")["missing mass"].tolist() == [0.0] * 6


def test_bad_inputs_give_a_message_and_the_default():
    at = open_page("masks", {"mask_len0": "99", "mask_text": "one two three four five six seven eight nine"})
    text = all_text(at)
    assert "The link set 'Length of sequence 0' to '99'" in text
    assert "at most 8 words" in text
    assert list(figure(at, "Causal mask for 4 tokens")["data"][0]["x"]) == ["0 the", "1 cat", "2 sat", "3 down"]
    for n in range(3):
        at.slider(key=f"mask_len{n}").set_value(0)
    at.run()
    assert "Those lengths cannot form a batch" in all_text(at)
    assert figure(at, "Combined mask, sequence 1")["layout"]["title"]["text"].endswith("(length 4)")


@pytest.mark.numerics
def test_the_prediction_hides_the_zeroed_rows_until_checked_and_grades_against_math_exp():
    """Defaults: sequence 1 (length 4, left padded to 6, causal): row 2 is the first row with allowed and
    forbidden keys (it sees key 2 only). The answer is what math.exp says row 2 keeps after zeroing."""
    mask = combined_mask(4, 6, "left")
    assert [any(r) and not all(r) for r in mask].index(True) == 2
    scores = scores_of(1, 6, 4, seed=0)
    kept = [math.fsum(w for w, ok in zip(softmax(scores[t]), mask[t]) if ok) for t in range(6)]

    at = open_page("masks")
    assert not any("missing mass" in d.value.columns for d in at.dataframe), "the zeroed rows wait for a prediction"
    assert not [f for f in figures(at) if f["layout"]["title"]["text"].startswith(("Missing mass", "Softmax first"))]
    assert "Zeroed after softmax, row sums" not in all_text(at)
    shown = table(at, "score of row 2")  # the row's scores are given, so the sum can be estimated by hand
    assert shown["allowed"].tolist() == ["yes" if ok else "no (forbidden)" for ok in mask[2]]
    assert shown["score of row 2"].tolist() == pytest.approx(scores[2], abs=1e-4)
    assert "What does row 2 sum to?" in unescaped(all_text(at))

    predict(at, "masks_predict", f"{kept[2] + 0.04:.4f}")  # within the stated 0.05
    assert "Right. You predicted" in unescaped(all_text(at))
    missing = table(at, "missing mass")
    assert missing["row sum, zeroed after"].tolist() == pytest.approx(kept, abs=1e-5)
    assert missing["missing mass"][2] == pytest.approx(1 - kept[2], abs=1e-5)

    at = predict(open_page("masks"), "masks_predict", "1")  # the usual slip: softmax rows sum to one
    assert abs(1 - kept[2]) > 0.05
    text = unescaped(all_text(at))
    assert "Not quite. You predicted 1: the lab computes " + f"{kept[2]:.4g}" in text
    assert f"zeroing them leaves the allowed keys (2) {kept[2]:.4f}" in text
    assert f"Zeroed after softmax, row sums: {', '.join(f'{x:.4f}' for x in kept)}." in text


def test_the_page_opens_on_the_causal_mask_and_keeps_the_other_sections_one_click_away():
    at = open_page("masks", {"mask_text": "a b c"})
    [picture] = picture_figures(at)
    assert picture["layout"]["title"]["text"] == "Causal mask for 3 tokens"
    assert picture["data"][0]["text"] == [["allowed" if s <= t else "forbidden" for s in range(3)] for t in range(3)]
    assert [t.label for t in at.tabs] == [
        "A batch of different lengths",
        "Mask before softmax, or zero after?",
        "Renormalising, and when it breaks",
        "A row with no allowed key",
    ]


def test_the_nan_of_renormalising_is_a_lesson_case_not_an_error_box():
    """Forbidden logit 1000 (the default): every allowed weight underflows, and the page says so in a labelled
    callout; a projected room reads a red box as a crash."""
    at = open_page("masks")
    assert not at.error and not at.warning
    text = unescaped(all_text(at))
    assert f"What goes wrong: renormalising is 0 / 0 = {NAN_TEXT}" in text
    assert "With a forbidden logit of 1000, the allowed keys keep 0 of the weight" in text
