"""Read one row: one query's attention weights, checked to sum to one, and its output computed by hand.

Every control is in the address bar (row_src, row_seed, row_T, row_D, row_t), so another page can link
to a given row with its own numbers.
"""

import pandas as pd
import streamlit as st

from core.classroom.checkpoint import Question
from core.lessons import one_row as row_reading
from ui import charts, fragment, layout, params, predict, projector
from ui.companion import chart
from ui.text import verdict

WORKED, RANDOM, MODEL = "worked example", "random", "attention inspector"
# The question's options: how much of the row's one unit of weight its largest-scoring key takes. The scores chart
# shows which key that is, never how much it gets: that takes softmax (issue 38: the tallest bar gave it away).
SHARES = ((0.0, "less than 0.4"), (0.4, "0.4 to 0.6"), (0.6, "0.6 to 0.8"), (0.8, "0.8 or more"))


def share_option(weight: float) -> str:
    """The option of SHARES that holds `weight` (each from its bound up to the next one's)."""
    return [label for bound, label in SHARES if weight >= bound][-1]


def num(x: float, digits: int = 6) -> str:
    return f"{x + 0.0:.{digits}f}"  # + 0.0 turns -0.0 (a masked weight times a negative value) into 0.0


def vec(xs, digits: int = 4) -> str:
    return "(" + ", ".join(num(x, digits) for x in xs) + ")"


st.title("Read one row")
st.caption(
    "One row of the attention matrix belongs to one query. Under the causal mask, row t may look at keys 0 … t "
    "only; softmax spreads exactly one unit of weight over them, and the output of the row is the weighted sum "
    "of their value rows. Predict the row from its scores, then check it by hand against the tensor code."
)


@fragment.section
def page_section() -> None:
    """The source, the row and its question drive the picture and every tab: a change reruns this page body only,
    not app.py's sidebar."""
    inspected = st.session_state.get("inspector_row")  # set by the Attention inspector page
    cols = st.columns([3, 1, 1, 1, 2])
    with cols[0]:
        sources = [WORKED, RANDOM] + ([MODEL] if inspected else [])
        source = params.radio("Numbers from", "row_src", sources, MODEL if inspected else WORKED, horizontal=True)
    if source == WORKED:
        q, k, v = row_reading.row_inputs(worked=True)
        about = (
            f"The lesson's worked example (torch.manual_seed(2), causal mask): q {tuple(q.shape)}, "
            f"k {tuple(k.shape)}, v {tuple(v.shape)} for its one sequence."
        )
    elif source == MODEL and inspected:
        q, k, v = row_reading.row_inputs_from_lists(inspected["q"], inspected["k"], inspected["v"])
        about = (
            f"The loaded model's layer {inspected['layer']}, head {inspected['head']} on the text the "
            f"Attention inspector read, queries and keys 0 to {inspected['t']} (after RoPE): "
            f"q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}. The last row is the one you picked there."
        )
    else:
        with cols[1]:
            seed = params.number_input("Random seed", "row_seed", 0, 9999, 0, 1)
        with cols[2]:
            T_random = params.slider("Sequence length T", "row_T", 2, 8, 5)
        with cols[3]:
            D_random = params.slider("Head width D", "row_D", 1, 8, 3)
        q, k, v = row_reading.row_inputs(worked=False, seed=seed, T=T_random, D=D_random)
        about = f"Random q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)} drawn with seed {seed}."
    T, D = q.shape  # (T, D)
    with cols[4]:
        t = params.slider("Query row t", "row_t", 0, T - 1, T - 1)

    reading = row_reading.read_row(q, k, v, t)
    trace = reading.trace
    keys = list(range(len(reading.weights)))

    top = max(keys, key=lambda s: reading.weights[s])  # masked keys weigh exactly 0, so top is allowed
    question = Question(
        id="row_predict",
        topic="reading one row",
        page="views/read_row.py",
        prompt=f"Row {t}'s weights add up to one. How much of it goes to key {top}, the key with the largest score?",
        answer=share_option(reading.weights[top]),
        options=tuple(label for _, label in SHARES),
        why=(
            "Row 0 may see key 0 only, so softmax gives it the whole unit: weight 1."
            if t == 0
            else f"Key {top} gets {reading.weights[top]:.4f}: each key's weight is exp(score) over the sum of "
            f"exp(score) for keys 0 to {t}, so the other keys keep {1 - reading.weights[top]:.4f} between them."
        ),
    )
    hint = (
        f"Softmax gives each key 0 to {t} the weight exp(score) / (sum of exp(score) over those keys): a score 1 "
        "higher weighs e ≈ 2.7 times as much, 2 higher about 7.4 times. The picture shows row "
        f"{t}'s score for each key; keys to the right of {t} are in the future and get 0."
    )
    picture_col, ask_col = st.columns([3, 2])
    with picture_col, layout.picture():  # the question's inputs: the scores, never the weights that answer it
        chart(
            charts.bars(
                [f"key {s}" for s in keys],
                [x if ok else None for x, ok in zip(trace.scores, reading.allowed)],
                title=f"Scores of query row {t}: q·k / √{D}",
                y_title="score",
                text=[f"{x:.4f}" if ok else "future (masked)" for x, ok in zip(trace.scores, reading.allowed)],
            ),
            pd.DataFrame(
                {
                    "key s": keys,
                    "allowed": ["yes" if ok else "no (future)" for ok in reading.allowed],
                    "score = q·k / √D": [num(x) if ok else "masked" for x, ok in zip(trace.scores, reading.allowed)],
                }
            ),
            f"Row {t} scores: "
            + ", ".join(
                f"key {s} {x:.4f}" if ok else f"key {s} masked (future)"
                for s, (x, ok) in enumerate(zip(trace.scores, reading.allowed))
            )
            + ".",
            key="row_scores",
        )
    with ask_col:
        graded = predict.ask(question, hint=hint)
        st.caption(about)  # where the numbers come from
    if graded is None:
        return  # everything below shows the weights
    weights_tab, hand_tab, compare_tab = layout.more(
        [f"1. The weights of row {t}", "2. The same row by hand", "3. Hand against tensor"]
    )

    with weights_tab:
        st.markdown(
            (f"Row {t} may attend to keys 0 to {t}." if t else "Row 0 may attend to key 0 only.")
            + " Keys to its right are in the future: the mask sets their scores to −∞ before softmax, "
            "so their weights are exactly 0."
        )
        fig = charts.bars(
            [f"key {s}" for s in keys],
            reading.weights,
            title=f"Weights of query row {t}",
            y_title="weight",
            highlight=None,
            y_range=(0, 1.15),
            text=[f"{w:.4f}" if ok else "masked (0)" for w, ok in zip(reading.weights, reading.allowed)],
        )
        chart(
            fig,
            pd.DataFrame(
                {
                    "key s": keys,
                    "allowed": ["yes" if ok else "no (future)" for ok in reading.allowed],
                    "weight": [num(w, 8) for w in reading.weights],
                }
            ),
            f"Row {t} weights: "
            + ", ".join(
                f"key {s} {w:.4f}" if ok else f"key {s} masked (0)"
                for s, (w, ok) in enumerate(zip(reading.weights, reading.allowed))
            )
            + f"; the allowed weights sum to {reading.weight_sum:.8f}.",
            key="row_weights",
        )
        figures = st.columns(3)
        figures[0].metric("Sum of the allowed weights", f"{reading.weight_sum:.8f}")
        figures[1].metric("|sum − 1|", f"{reading.sum_error:.1e}")
        figures[2].metric("Allowed keys", f"0 to {t}" if t else "0 only")
        if t == 0:
            st.success(
                f"Row 0 may attend only to key 0, so its single allowed weight is exactly one: "
                f"weight {reading.weights[0]!r}, |weight − 1| = {reading.sum_error:g}."
            )

    with hand_tab:
        st.markdown(
            f"Start from the query row and the key rows. For each allowed key: multiply q and k entry by entry "
            f"and add (the dot product), divide by √D = √{D}, take the exponential, divide by the sum of the "
            f"exponentials, and multiply the value row by the weight. We subtract the largest allowed score "
            f"({trace.softmax.row_max:.6f}) before taking exponentials, which keeps them from overflowing; "
            "it cancels in the division, so the weights do not change."
        )
        st.markdown(f"Query row q_{t} = `{vec(q[t].tolist())}`")
        projector.dataframe(
            pd.DataFrame({"key s": keys, "k_s": [vec(r) for r in k.tolist()], "v_s": [vec(r) for r in v.tolist()]}),
            hide_index=True,
            key="row_inputs",
        )
        hand = pd.DataFrame(
            {
                "key s": [str(s) for s in keys] + ["sum"],
                "allowed": ["yes" if ok else "no" for ok in reading.allowed] + [""],
                "q·k term by term": [" + ".join(f"({x:.4f})" for x in d.terms) for d in trace.dots] + [""],
                "q·k": [num(d.total) for d in trace.dots] + [""],
                "score = q·k / √D": [num(x) for x in trace.scores] + [""],
                "exp(score − max)": [
                    num(e) if ok else "0 (masked)" for e, ok in zip(trace.softmax.exps, reading.allowed)
                ]
                + [num(trace.softmax.normaliser)],
                "weight": [num(w) for w in trace.softmax.weights] + [num(reading.hand_weight_sum)],
                "weight × v_s": [vec(wv, 6) for wv in trace.weighted_values] + [vec(trace.out, 9)],
            }
        )
        projector.dataframe(hand, hide_index=True, key="row_hand")
        st.caption(
            f"Hand computation in Python floats (float64): the bottom row sums each column, so the weights add to "
            f"{reading.hand_weight_sum:.9f} and the output row is {vec(trace.out, 9)}."
        )

    with compare_tab:
        st.markdown(
            "The tensor code computes every row at once; the hand computation works one number at a time. Adding "
            "the same numbers in another order rounds differently, so the two cannot agree to the last digit. We "
            "declare the allowance first: both work in float64 (the tensor code on these very numbers, cast exactly), "
            "and rounding alone can move a result by at most a small multiple of float64's epsilon times the length "
            "of the sums. A real mistake (a wrong mask, a missing √D) is off by far more. The float32 result, what "
            "the model computes with, is shown beside it with float32's own allowance; it does not decide."
        )
        compare = pd.DataFrame(
            {
                "output entry": [f"out[{t}][{j}]" for j in range(len(reading.out))],
                "by hand (float64)": [num(x, 12) for x in trace.out],
                "tensor (float64)": [num(x, 12) for x in reading.out],
                "|difference|": [f"{x:.2e}" for x in reading.difference],
                f"within {reading.atol:.1e}": ["yes" if x <= reading.atol else "no" for x in reading.difference],
                "tensor (float32, shown)": [num(x, 9) for x in reading.out32],
            }
        )
        projector.dataframe(compare, hide_index=True, key="row_compare")
        st.caption(
            f"Allowance {reading.decided.rule.removeprefix('<= ')}. In float32 the largest difference is "
            f"{reading.shown32.max_abs_diff:.2e} against float32's allowance {reading.shown32.allowed:.1e}."
        )
        check = (
            f"largest |difference| {reading.max_difference:.2e} against {reading.atol:.1e}; "
            f"|sum of weights − 1| = {reading.sum_error:.1e} against {reading.sum_allowed:.1e}."
        )
        verdict(
            reading.passed,
            f"PASS: row {t} by hand matches the tensor result: {check}",
            f"FAIL: row {t} by hand does not match the tensor result: {check}",
        )


page_section()
