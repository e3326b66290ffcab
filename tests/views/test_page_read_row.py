"""Read one row page: its hand computation against PyTorch's own F.scaled_dot_product_attention."""

import json
import re

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from apptest import APP, all_text, decode, figure, figures, open_page, picture_figures, predict, table, unescaped
from streamlit.testing.v1 import AppTest

pytestmark = pytest.mark.usefixtures("fresh_streamlit_caches")  # st.cache_* is shared across AppTests


def vector(cell: str) -> list[float]:
    return [float(x) for x in cell.strip("()").split(",")]


def worked_qkv():
    """LESSON.md's draws: torch.manual_seed(2), q, k (1, 4, 3), v (1, 4, 2), in that order."""
    with torch.random.fork_rng():
        torch.manual_seed(2)
        return torch.randn(1, 4, 3), torch.randn(1, 4, 3), torch.randn(1, 4, 2)


def weights_shown(at) -> bool:
    return any(f["layout"]["title"]["text"].startswith("Weights of query row") for f in figures(at))


def weights_bars(at) -> dict:
    """The bars of the row's weights (shown once the prediction is checked)."""
    return figure(at, "Weights of query row")["data"][0]


def sdpa_row(q, k, v, t):
    """Causal attention row t by PyTorch, in float64."""
    return F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=True)[0, t].tolist()


@pytest.mark.numerics
def test_default_row_hand_sum_equals_pytorch():
    at = predict(open_page("read_row"), "row_predict")
    q, k, v = worked_qkv()
    expected = sdpa_row(q, k, v, 3)  # default: worked example, last row
    hand = table(at, "weight × v_s")
    assert hand["key s"].tolist()[-1] == "sum"
    assert vector(hand["weight × v_s"].tolist()[-1]) == pytest.approx(expected, abs=1e-9)
    compare = table(at, "by hand (float64)")
    assert [float(x) for x in compare["tensor (float64)"]] == pytest.approx(expected, abs=1e-12)
    within = next(c for c in compare.columns if c.startswith("within "))
    assert float(within.removeprefix("within ")) < 1e-12 and compare[within].tolist() == ["yes", "yes"]
    assert [float(x) for x in compare["tensor (float32, shown)"]] == pytest.approx(expected, abs=1e-6)
    weights = torch.softmax(q[0, 3].double() @ k[0].double().T / 3**0.5, -1).tolist()
    bars = decode(weights_bars(at)["y"]).astype(float)
    assert bars.tolist() == pytest.approx(weights, abs=1e-6)
    text = all_text(at)
    assert "PASS: row 3" in text
    assert not re.search(r"\bnan\b", text, re.I)


def test_row_zero_has_a_single_weight_of_exactly_one():
    at = predict(open_page("read_row", {"row_t": "0"}), "row_predict")
    bar = weights_bars(at)
    assert decode(bar["y"]).astype(float).tolist() == [1.0, 0.0, 0.0, 0.0]
    assert list(bar["text"]) == ["1.0000"] + ["masked (0)"] * 3
    assert table(at, "weight")["weight"].tolist()[0] == "1.00000000"
    assert {m.label: m.value for m in at.metric}["|sum − 1|"] == "0.0e+00"
    assert "its single allowed weight is exactly one: weight 1.0" in all_text(at)
    q, k, v = worked_qkv()
    assert vector(table(at, "weight × v_s")["weight × v_s"].tolist()[-1]) == pytest.approx(v[0, 0].tolist(), abs=1e-9)


@pytest.mark.numerics
def test_a_link_to_a_random_row_and_the_slider():
    link = {"row_src": "random", "row_seed": "5", "row_T": "8", "row_D": "8", "row_t": "6"}
    at = predict(open_page("read_row", link), "row_predict")
    g = torch.Generator().manual_seed(5)
    q, k, v = (
        torch.randn(1, 1, 8, 8, generator=g),
        torch.randn(1, 1, 8, 8, generator=g),
        torch.randn(1, 1, 8, 2, generator=g),
    )
    q, k, v = q[0], k[0], v[0]  # (1, T, D): one sequence
    assert vector(table(at, "weight × v_s")["weight × v_s"].tolist()[-1]) == pytest.approx(
        sdpa_row(q, k, v, 6), abs=1e-9
    )
    before = decode(weights_bars(at)["y"]).astype(float)
    assert before[7] == 0.0 and before[:7].sum() == pytest.approx(1.0, abs=1e-6)

    at.slider(key="row_t").set_value(2).run()
    assert not weights_shown(at), "a new row is a new question: its weights wait for the new prediction"
    predict(at, "row_predict")
    after = decode(weights_bars(at)["y"]).astype(float)
    assert not np.allclose(before, after) and (after[3:] == 0).all()
    assert vector(table(at, "weight × v_s")["weight × v_s"].tolist()[-1]) == pytest.approx(
        sdpa_row(q, k, v, 2), abs=1e-9
    )


def test_a_bad_link_value_falls_back_to_the_default_with_a_note():
    at = predict(open_page("read_row", {"row_t": "9"}), "row_predict")
    assert "The link set 'Query row t' to '9', which is not usable" in all_text(at)
    assert (
        weights_bars(at) and figure(at, "Weights of query row")["layout"]["title"]["text"] == "Weights of query row 3"
    )


@pytest.mark.numerics
def test_a_row_sent_by_the_attention_inspector_is_read_by_hand():
    """The inspector hands over one head's q, k, v for queries 0..t; the page checks row t of them."""

    torch.manual_seed(7)
    t, D = 4, 6
    q, k, v = (torch.randn(t + 1, D) for _ in range(3))
    at = AppTest.from_file(APP, default_timeout=60)
    at.session_state["inspector_row"] = {
        "text": "abcde",
        "layer": 1,
        "head": 2,
        "t": t,
        "pieces": list("abcde"),
        "q": q.tolist(),
        "k": k.tolist(),
        "v": v.tolist(),
    }
    at.run()
    at.switch_page("views/read_row.py").run()
    assert not at.exception
    predict(at, "row_predict")
    assert at.radio(key="row_src").value == "attention inspector"
    assert at.slider(key="row_t").value == t
    reference = F.scaled_dot_product_attention(q[None].double(), k[None].double(), v[None].double(), is_causal=True)[
        0, t
    ]
    compare = next(df.value for df in at.dataframe if "by hand (float64)" in df.value.columns)
    by_hand = [float(x) for x in compare["by hand (float64)"]]
    assert by_hand == pytest.approx(reference.tolist(), abs=1e-6)
    assert "PASS" in all_text(at)


def share(weight: float) -> str:
    """The option holding `weight`, written out independently of the page's SHARES."""
    if weight < 0.4:
        return "less than 0.4"
    if weight < 0.6:
        return "0.4 to 0.6"
    return "0.6 to 0.8" if weight < 0.8 else "0.8 or more"


@pytest.mark.numerics
def test_the_prediction_hides_the_weights_until_checked_and_grades_against_pytorch():
    """Row 3 of the worked example: the share PyTorch gives the top key is right, any other is wrong, both reveal."""
    q, k, v = worked_qkv()
    scores = q[0, 3].double() @ k[0].double().T / 3**0.5  # (4,) row 3's scores; row 3 may see every key
    row = torch.softmax(scores, -1)
    top = int(row.argmax())
    at = open_page("read_row")
    assert not weights_shown(at) and not any("by hand (float64)" in d.value.columns for d in at.dataframe)
    assert "Hint" in [e.label for e in at.expander]

    at.button(key="row_predict_check").click().run()  # nothing chosen: nothing checked, nothing revealed
    assert "Choose or type your prediction first" in all_text(at) and not weights_shown(at)

    right = share(float(row[top]))
    predict(at, "row_predict", right)
    assert f"Right. You predicted '{right}'" in unescaped(all_text(at))
    assert f"Key {top} gets {float(row[top]):.4f}" in unescaped(all_text(at))
    assert decode(weights_bars(at)["y"]).astype(float).tolist() == pytest.approx(row.tolist(), abs=1e-6)

    wrong = next(o for o in ("less than 0.4", "0.4 to 0.6", "0.6 to 0.8", "0.8 or more") if o != right)
    at = predict(open_page("read_row"), "row_predict", wrong)
    text = unescaped(all_text(at))
    assert f"Not quite. You predicted '{wrong}'; the lab's answer is '{right}'" in text
    assert weights_shown(at), "a wrong prediction reveals the answer too"


@pytest.mark.numerics
@pytest.mark.parametrize("t", [3, 1])
def test_before_the_check_nothing_on_the_page_gives_the_answer_away(t):
    """Issue 38: the question asks what the scores chart does not show (the top key's share of the weight), and
    that share is printed nowhere (no text, no chart, no table) until the learner checks."""
    q, k, v = worked_qkv()
    row = torch.softmax(q[0, t].double() @ k[0, : t + 1].double().T / 3**0.5, -1)  # (t + 1,) the allowed weights
    top = int(row.argmax())
    at = open_page("read_row", {"row_t": str(t)})
    options = [unescaped(o) for o in at.radio(key="row_predict_answer").options]
    for fig in figures(at):  # the tallest bar of a chart on the page is not one of the answers to pick from
        for bars in fig["data"]:
            heights = [-np.inf if y is None else float(y) for y in decode(bars["y"]).tolist()]
            assert list(bars["x"])[int(np.argmax(heights))] not in options, "the tallest bar answers the question"
    assert f"How much of it goes to key {top}" in unescaped(all_text(at))
    answer = f"{float(row[top]):.4f}"
    shown = [all_text(at)] + [json.dumps(f) for f in figures(at)] + [d.value.to_csv() for d in at.dataframe]
    assert not any(answer in text for text in shown), f"the share {answer} is on the page before the check"
    predict(at, "row_predict")
    assert answer in unescaped(all_text(at))


@pytest.mark.numerics
@pytest.mark.parametrize("t", [3, 1])
def test_the_question_sits_beside_the_row_scores_which_are_its_inputs_not_its_answer(t):
    """Before the check, the picture holds row t's scores q·k/√D (PyTorch's, float64) for the keys it may see and
    nothing for the future ones; no weight is drawn."""
    q, k, v = worked_qkv()
    scores = (q[0, t].double() @ k[0].double().T / 3**0.5).tolist()  # (S,)
    at = open_page("read_row", {"row_t": str(t)})
    [picture] = picture_figures(at)
    assert picture["layout"]["title"]["text"] == f"Scores of query row {t}: q·k / √3"
    bars = picture["data"][0]
    shown = [None if y is None else float(y) for y in decode(bars["y"]).tolist()]
    assert shown[: t + 1] == pytest.approx(scores[: t + 1], abs=1e-6) and shown[t + 1 :] == [None] * (3 - t)
    assert list(bars["text"])[t + 1 :] == ["future (masked)"] * (3 - t)
    assert not weights_shown(at) and f"Row {t}'s weights add up to one." in unescaped(all_text(at))
