"""Score geometry: the shapes that flow through Q Kᵀ, the score matrix, and why we divide by √D."""

import pandas as pd
import streamlit as st

from core.classroom.checkpoint import Question
from core.lessons import scores as lessons
from ui import cached, charts, fragment, layout, params, predict, projector
from ui.companion import chart, matrix_table

VARIANCE_TOLERANCE = 0.1  # a hand estimate within 10 % of the closed form counts as right

st.title("Score geometry")
st.caption(
    "Every query compares itself with every key through a dot product: row t of the score matrix holds what "
    "query t thinks of each key s. Pick the sizes and follow the shapes."
)


@fragment.section
def page_section() -> None:
    """Every control sits at the top and drives the picture and the tabs alike: a change reruns this page body only,
    not app.py's sidebar."""
    cols = st.columns([1, 1, 1.2, 1, 1, 1, 1, 1.3])  # the toggle label needs the room
    with cols[0]:
        B = params.slider("Batch size B", "geo_B", 1, 4, 2)
    with cols[1]:
        H = params.slider("Heads H", "geo_H", 1, 4, 2)
    with cols[2]:
        T = params.slider("Sequence length T", "geo_T", 1, 12, 5)
    with cols[3]:
        D = params.slider("Head width D", "geo_D", 1, 256, 16)
    with cols[4]:
        seed = params.number_input("Random seed", "geo_seed", 0, 9999, 0, 1)
    with cols[5]:
        b = params.selectbox("Batch element b", "geo_b", list(range(B)), 0)
    with cols[6]:
        h = params.selectbox("Head h", "geo_h", list(range(H)), 0)
    with cols[7]:
        scaled = params.toggle("Divide by √D", "geo_scale", True)

    geo = cached.score_geometry(B, H, T, D, seed, scaled, b, h)
    scale_text = f"scale 1/√{D} = {geo.scale:.4f}" if scaled else "scale 1 (no division)"
    labels = [str(i) for i in range(T)]
    scores = geo.scores  # (T, S)
    weights = geo.weights  # (T, S)
    with layout.picture():
        # Scores beside the weights softmax makes of them, the page's point, in both views. A horizontal container,
        # not st.columns: projector mode stacks columns of charts, and the weights fell off the projected screen.
        pair = st.container(horizontal=True, gap="medium")
        left, right = pair.container(), pair.container()
        with left:
            chart(
                charts.heatmap(
                    scores,
                    title=f"scores = Q Kᵀ × {geo.scale:.4f} (b={b}, h={h})",
                    x_labels=labels,
                    y_labels=labels,
                    signed=True,
                ),
                matrix_table(scores, labels, labels, value_name="score"),
                f"Scores for batch element {b}, head {h} with {scale_text}: the largest |score| is "
                f"{geo.max_abs_score:.3f}.",
                key="geo_scores",
            )
        with right:
            row_max = geo.max_weight  # (T,)
            chart(
                charts.heatmap(
                    weights,
                    title=f"weights = softmax(scores) (b={b}, h={h})",
                    x_labels=labels,
                    y_labels=labels,
                    zmin=0,
                    zmax=1,
                ),
                matrix_table(weights, labels, labels, value_name="weight"),
                f"Weights for batch element {b}, head {h} with {scale_text}: largest weight per row "
                + ", ".join(f"{w:.3f}" for w in row_max)
                + ".",
                key="geo_weights",
            )
    batch_variance = st.container()  # the scores' variance: filled once the √D prediction is checked

    shapes_tab, reading_tab, scaling_tab = layout.more(
        ["Shapes on the way", "Reading the matrices", "Why divide by √D"]
    )
    with shapes_tab:
        st.markdown(
            "The matrix product works on the last two dimensions; batch and heads simply ride along. "
            "Transposing K swaps its last two dimensions, so the head width D meets D and disappears: "
            "what is left is a T × S grid of scores (S = T here, because every token is both a query and a key)."
        )
        step = {s.name: s for s in geo.steps}
        st.markdown(
            f"`Q {step['Q'].shape}` @ `Kᵀ {step['Kᵀ'].shape}` → `scores {step['scores'].shape}`, "
            f"then `weights {step['weights'].shape}` @ `V {step['V'].shape}` → `out {step['out'].shape}`"
        )
        shapes = pd.DataFrame(
            {
                "tensor": [s.name for s in geo.steps],
                "code": [s.code for s in geo.steps],
                "shape in the legend": [s.legend for s in geo.steps],
                "shape here": [str(s.shape) for s in geo.steps],
            }
        )
        projector.dataframe(shapes, hide_index=True, key="geo_shapes")
        st.caption("Legend: B batch, H heads, T query positions, S key positions, D head width.")
    with reading_tab:
        st.markdown(
            "The picture shows one batch element and one head: its T × S scores, and the weights softmax makes of "
            "them. Orange cells are negative, purple positive, white near zero; every cell also prints its number. "
            "Turn off the division by √D to see the raw dot products: they grow with the head width, and "
            "softmax turns large gaps into rows with almost all weight on one key."
        )
    with scaling_tab:
        variance = cached.score_variance(tuple(lessons.VARIANCE_WIDTHS), seed)
        at_D = next((r for r in variance if r.width == D), None) or cached.score_variance((D,), seed)[0]
        question = Question(
            id="score_geometry_predict",
            topic="why divide by √D",
            page="views/score_geometry.py",
            prompt=f"The head width is D = {D}, and every entry of q and k is an independent random number with mean 0 "
            "and variance 1. What is the variance of the unscaled dot product q·k (no division by √D)? "
            "Within 10 % of the lab's answer counts as right.",
            answer=at_D.expected_unscaled,
            tolerance=VARIANCE_TOLERANCE * at_D.expected_unscaled,
            why=f"q·k adds D = {D} products q_d k_d. Each has variance 1 (mean 0, E[q_d² k_d²] = 1 · 1) and they are "
            f"independent, so their variances add: Var(q·k) = {at_D.expected_unscaled:g}. Measured over {at_D.samples} "
            f"random (q, k) pairs at D = {D}: {at_D.var_unscaled:.2f}; divided by √{D} it is {at_D.var_scaled:.3f}, "
            "close to 1.",
        )
        hint = (
            "q·k is a sum of D products q_d k_d. What is the variance of one product of two independent numbers with "
            "mean 0 and variance 1, and what happens to variances when independent terms are added?"
        )
        graded = predict.ask(question, hint=hint)
        if graded is not None:  # everything below, and the variance under the matrices, shows the answer
            with batch_variance:
                st.caption(
                    f"Over the whole batch ({geo.numel} scores, {scale_text}) the scores have variance "
                    f"{geo.score_variance:.3f}; the closed form for unit-variance Q and K is {geo.expected_variance:g}."
                )
            st.markdown(
                "If the entries of q and k are random with variance 1, each product $q_d k_d$ has variance 1, and "
                "the dot product adds D of them, so its variance is D. Wide heads therefore produce big scores. "
                "Dividing by √D divides the variance by D, bringing it back to 1 whatever the head width. "
                "Below, the lab measures this on random vectors and draws the closed forms D and 1 beside it."
            )
            widths = [r.width for r in variance]
            ticks = [1, 4, 16, 64, 256]
            fig = charts.lines(
                widths,
                {
                    "measured Var(q·k)": [r.var_unscaled for r in variance],
                    "closed form: D": [r.expected_unscaled for r in variance],
                    "measured Var(q·k / √D)": [r.var_scaled for r in variance],
                    "closed form: 1": [r.expected_scaled for r in variance],
                },
                title="Variance of the score against head width (both axes logarithmic)",
                x_title="head width D",
                y_title="variance",
                log_y=True,
                x_axis=dict(type="log", tickvals=widths, ticktext=[str(w) for w in widths]),
                y_axis=dict(tickvals=ticks, ticktext=[str(x) for x in ticks]),
            )
            variance_table = pd.DataFrame(
                {
                    "head width D": widths,
                    "measured Var(q·k)": [round(r.var_unscaled, 4) for r in variance],
                    "closed form D": [r.expected_unscaled for r in variance],
                    "measured Var(q·k / √D)": [round(r.var_scaled, 4) for r in variance],
                    "closed form 1": [r.expected_scaled for r in variance],
                    "standard error of Var(q·k / √D)": [round(r.std_error_scaled, 4) for r in variance],
                }
            )
            first, last = variance[0], variance[-1]
            chart(
                fig,
                variance_table,
                f"Measured over {last.samples} random (q, k) pairs per width: unscaled variance "
                f"{first.var_unscaled:.2f} "
                f"at D={first.width} and {last.var_unscaled:.1f} at D={last.width} (closed form D); scaled variance "
                f"{first.var_scaled:.3f} and {last.var_scaled:.3f} (closed form 1).",
                key="geo_variance",
                table_open=True,
            )


page_section()
