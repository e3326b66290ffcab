"""Score geometry: the shapes that flow through Q Kᵀ, the score matrix, and why we divide by √D."""

import pandas as pd
import streamlit as st

from core import i18n
from core.classroom.checkpoint import Question
from core.i18n import N_, _
from core.lessons import scores as lessons
from ui import cached, charts, fragment, layout, params, predict, projector
from ui.companion import chart, matrix_table

VARIANCE_TOLERANCE = 0.1  # a hand estimate within 10 % of the closed form counts as right
# The prediction's question, with its number as a placeholder. Kept in English (the prompt's msgid and its number):
# the question and its fingerprint are the same in every language, and ui/predict shows it translated.
PROMPT = N_(
    "The head width is D = {D}, and every entry of q and k is an independent random number with mean 0 and "
    "variance 1. What is the variance of the unscaled dot product q·k (no division by √D)? Within 10 % of the lab's "
    "answer counts as right."
)


def sig(x: float, spec: str) -> str:
    """`x` with a format spec such as 'g', in the language's decimal sign."""
    return format(x, spec).replace(".", i18n.number(0.5, 1)[1])


def listing(items) -> str:
    """Numbers in a row: 'a, b' (where the decimal sign is a comma, 'a; b')."""
    return ("; " if i18n.number(0.5, 1)[1] == "," else ", ").join(items)


st.title(_("Score geometry"))
st.caption(
    _(
        "Every query compares itself with every key through a dot product: row t of the score matrix holds what "
        "query t thinks of each key s. Pick the sizes and follow the shapes."
    )
)


@fragment.section
def page_section() -> None:
    """Every control sits at the top and drives the picture and the tabs alike: a change reruns this page body only,
    not app.py's sidebar."""
    cols = st.columns([1, 1, 1.2, 1, 1, 1, 1, 1.3])  # the toggle label needs the room
    with cols[0]:
        B = params.slider(_("Batch size B"), "geo_B", 1, 4, 2)
    with cols[1]:
        H = params.slider(_("Heads H"), "geo_H", 1, 4, 2)
    with cols[2]:
        T = params.slider(_("Sequence length T"), "geo_T", 1, 12, 5)
    with cols[3]:
        D = params.slider(_("Head width D"), "geo_D", 1, 256, 16)
    with cols[4]:
        seed = params.number_input(_("Random seed"), "geo_seed", 0, 9999, 0, 1)
    with cols[5]:
        b = params.selectbox(_("Batch element b"), "geo_b", list(range(B)), 0)
    with cols[6]:
        h = params.selectbox(_("Head h"), "geo_h", list(range(H)), 0)
    with cols[7]:
        scaled = params.toggle(_("Divide by √D"), "geo_scale", True)

    geo = cached.score_geometry(B, H, T, D, seed, scaled, b, h)
    scale_text = (
        _("scale 1/√{D} = {scale}").format(D=D, scale=i18n.number(geo.scale, 4))
        if scaled
        else _("scale 1 (no division)")
    )
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
                    title=_("scores = Q Kᵀ × {scale} (b={b}, h={h})").format(scale=i18n.number(geo.scale, 4), b=b, h=h),
                    x_labels=labels,
                    y_labels=labels,
                    signed=True,
                ),
                matrix_table(scores, labels, labels, value_name=_("score")),
                _("Scores for batch element {b}, head {h} with {scale}: the largest |score| is {largest}.").format(
                    b=b, h=h, scale=scale_text, largest=i18n.number(geo.max_abs_score, 3)
                ),
                key="geo_scores",
            )
        with right:
            row_max = geo.max_weight  # (T,)
            chart(
                charts.heatmap(
                    weights,
                    title=_("weights = softmax(scores) (b={b}, h={h})").format(b=b, h=h),
                    x_labels=labels,
                    y_labels=labels,
                    zmin=0,
                    zmax=1,
                ),
                matrix_table(weights, labels, labels, value_name=_("weight")),
                _("Weights for batch element {b}, head {h} with {scale}: largest weight per row {values}.").format(
                    b=b, h=h, scale=scale_text, values=listing(i18n.number(w, 3) for w in row_max)
                ),
                key="geo_weights",
            )
    batch_variance = st.container()  # the scores' variance: filled once the √D prediction is checked

    shapes_tab, reading_tab, scaling_tab = layout.more(
        [_("Shapes on the way"), _("Reading the matrices"), _("Why divide by √D")]
    )
    with shapes_tab:
        st.markdown(
            _(
                "The matrix product works on the last two dimensions; batch and heads simply ride along. "
                "Transposing K swaps its last two dimensions, so the head width D meets D and disappears: "
                "what is left is a T × S grid of scores (S = T here, because every token is both a query and a key)."
            )
        )
        step = {s.name: s for s in geo.steps}
        st.markdown(  # the tensors by their names in the code
            _("`Q {q}` @ `Kᵀ {kt}` → `scores {scores}`, then `weights {weights}` @ `V {v}` → `out {out}`").format(
                q=step["Q"].shape,
                kt=step["Kᵀ"].shape,
                scores=step["scores"].shape,
                weights=step["weights"].shape,
                v=step["V"].shape,
                out=step["out"].shape,
            )
        )
        shapes = pd.DataFrame(
            {
                _("tensor"): [s.name for s in geo.steps],  # its name in the code
                _("code"): [s.code for s in geo.steps],
                _("shape in the legend"): [s.legend for s in geo.steps],
                _("shape here"): [str(s.shape) for s in geo.steps],
            }
        )
        projector.dataframe(shapes, hide_index=True, key="geo_shapes")
        st.caption(_("Legend: B batch, H heads, T query positions, S key positions, D head width."))
    with reading_tab:
        st.markdown(
            _(
                "The picture shows one batch element and one head: its T × S scores, and the weights softmax makes "
                "of them. Orange cells are negative, purple positive, white near zero; every cell also prints its "
                "number. Turn off the division by √D to see the raw dot products: they grow with the head width, "
                "and softmax turns large gaps into rows with almost all weight on one key."
            )
        )
    with scaling_tab:
        variance = cached.score_variance(tuple(lessons.VARIANCE_WIDTHS), seed)
        at_D = next((r for r in variance if r.width == D), None) or cached.score_variance((D,), seed)[0]
        question = Question(
            id="score_geometry_predict",
            topic=N_("why divide by √D"),
            page="views/score_geometry.py",
            prompt=PROMPT.format(D=D),
            template=PROMPT,
            values=(("D", str(D)),),
            answer=at_D.expected_unscaled,
            tolerance=VARIANCE_TOLERANCE * at_D.expected_unscaled,
            why=_(
                "q·k adds D = {D} products q_d k_d. Each has variance 1 (mean 0, E[q_d² k_d²] = 1 · 1) and they are "
                "independent, so their variances add: Var(q·k) = {expected}. Measured over {samples} random (q, k) "
                "pairs at D = {D}: {unscaled}; divided by √{D} it is {scaled}, close to 1."
            ).format(
                D=D,
                expected=sig(at_D.expected_unscaled, "g"),
                samples=at_D.samples,
                unscaled=i18n.number(at_D.var_unscaled, 2),
                scaled=i18n.number(at_D.var_scaled, 3),
            ),
        )
        hint = _(
            "q·k is a sum of D products q_d k_d. What is the variance of one product of two independent numbers with "
            "mean 0 and variance 1, and what happens to variances when independent terms are added?"
        )
        graded = predict.ask(question, hint=hint)
        if graded is not None:  # everything below, and the variance under the matrices, shows the answer
            with batch_variance:
                st.caption(
                    _(
                        "Over the whole batch ({n} scores, {scale}) the scores have variance {variance}; the closed "
                        "form for unit-variance Q and K is {expected}."
                    ).format(
                        n=geo.numel,
                        scale=scale_text,
                        variance=i18n.number(geo.score_variance, 3),
                        expected=sig(geo.expected_variance, "g"),
                    )
                )
            st.markdown(
                _(
                    "If the entries of q and k are random with variance 1, each product $q_d k_d$ has variance 1, "
                    "and the dot product adds D of them, so its variance is D. Wide heads therefore produce big "
                    "scores. Dividing by √D divides the variance by D, bringing it back to 1 whatever the head "
                    "width. Below, the lab measures this on random vectors and draws the closed forms D and 1 "
                    "beside it."
                )
            )
            widths = [r.width for r in variance]
            ticks = [1, 4, 16, 64, 256]
            width_title, measured_unscaled, measured_scaled = (
                _("head width D"),
                _("measured Var(q·k)"),
                _("measured Var(q·k / √D)"),
            )
            fig = charts.lines(
                widths,
                {
                    measured_unscaled: [r.var_unscaled for r in variance],
                    _("closed form: D"): [r.expected_unscaled for r in variance],
                    measured_scaled: [r.var_scaled for r in variance],
                    _("closed form: 1"): [r.expected_scaled for r in variance],
                },
                title=_("Variance of the score against head width (both axes logarithmic)"),
                x_title=width_title,
                y_title=_("variance"),
                log_y=True,
                x_axis=dict(type="log", tickvals=widths, ticktext=[str(w) for w in widths]),
                y_axis=dict(tickvals=ticks, ticktext=[str(x) for x in ticks]),
            )
            variance_table = pd.DataFrame(
                {
                    width_title: widths,
                    measured_unscaled: [round(r.var_unscaled, 4) for r in variance],
                    _("closed form D"): [r.expected_unscaled for r in variance],
                    measured_scaled: [round(r.var_scaled, 4) for r in variance],
                    _("closed form 1"): [r.expected_scaled for r in variance],
                    _("standard error of Var(q·k / √D)"): [round(r.std_error_scaled, 4) for r in variance],
                }
            )
            first, last = variance[0], variance[-1]
            chart(
                fig,
                variance_table,
                _(
                    "Measured over {samples} random (q, k) pairs per width: unscaled variance {first_unscaled} at "
                    "D={first_width} and {last_unscaled} at D={last_width} (closed form D); scaled variance "
                    "{first_scaled} and {last_scaled} (closed form 1)."
                ).format(
                    samples=last.samples,
                    first_unscaled=i18n.number(first.var_unscaled, 2),
                    first_width=first.width,
                    last_unscaled=i18n.number(last.var_unscaled, 1),
                    last_width=last.width,
                    first_scaled=i18n.number(first.var_scaled, 3),
                    last_scaled=i18n.number(last.var_scaled, 3),
                ),
                key="geo_variance",
                table_open=True,
            )


page_section()
