"""Temperature: how dividing the scores before softmax sharpens or flattens the distribution."""

import sys

import pandas as pd
import streamlit as st

from core import i18n
from core.classroom.checkpoint import Question
from core.i18n import N_, _
from core.lessons import scores as lessons
from ui import charts, fragment, layout, params, predict, projector
from ui.companion import chart, matrix_table
from ui.text import escape_markdown

SHARPER = N_("sharper: each row's largest weight grows, towards one-hot")
FLATTER = N_("flatter: the weights move towards uniform")
UNCHANGED = N_("unchanged: softmax only looks at the order of the scores")
PROMPT = N_(
    "Without the division by √3 and with Q and K × {factor}: what happens to the rows of the weight matrix?"
)  # the prediction's question, with its number as a placeholder
PROMPT_CAUSAL = N_(
    "Without the division by √3 and with Q and K × {factor} (causal): what happens to the rows of the weight matrix?"
)
PICTURE_PX = 380  # the bar chart's height: with the controls above it, one screen at 1440x900 and projected


def sig(x: float, spec: str) -> str:
    """`x` with a format spec such as 'g' or '.2e', in the language's decimal sign."""
    return format(x, spec).replace(".", i18n.number(0.5, 1)[1])


def listing(items) -> str:
    """Numbers in a row: 'a, b' (where the decimal sign is a comma, 'a; b')."""
    return ("; " if i18n.number(0.5, 1)[1] == "," else ", ").join(items)


st.title(_("Temperature"))
st.caption(
    _("Softmax of the scores divided by a temperature τ: below 1 it sharpens the distribution, above 1 flattens it.")
)

default_text = ", ".join(str(s) for s in lessons.TEMPERATURE_SCORES)


@fragment.section
def picture_section() -> None:
    """The scores, the temperature and their distribution: the slider reruns only this picture, not the exercise
    below."""
    with layout.picture():
        # The controls in one row above the chart (not a column beside it): projector mode stacks columns that hold
        # a chart, and a stacked column of controls would push the chart below a projected screen.
        scores_col, slider_col, entropy_col = st.columns([3, 3, 2])
        with scores_col:
            text = params.text_input(_("Scores, one per token (comma separated)"), "scores", default_text)
        with slider_col:
            temperature = params.slider(_("Temperature τ"), "temperature", 0.05, 5.0, 1.0, 0.05)
        try:
            scores = lessons.parse_scores(text)
        except ValueError as err:
            st.warning(
                _("Those scores could not be read: {error}. Showing the lesson's scores instead.").format(
                    error=escape_markdown(err)
                )
            )
            scores = lessons.TEMPERATURE_SCORES

        result = lessons.temperature_distribution(scores, temperature)
        tokens = [_("token {i}").format(i=i) for i in range(len(scores))]
        top = max(range(len(scores)), key=lambda i: result.probs[i])
        with entropy_col:
            st.metric(
                _("Entropy (bits)"),
                i18n.number(result.entropy_bits, 3),
                help=_(
                    "0 bits = one-hot; a uniform distribution over {n} tokens has {bits} bits (log2 of {n})."
                ).format(n=len(scores), bits=i18n.number(result.uniform_entropy_bits, 3)),
            )
        fig = charts.bars(
            tokens,
            result.probs,
            title=_("softmax(scores / {t})").format(t=i18n.number(temperature, 2)),
            y_title=_("probability"),
            highlight=top,
            y_range=(0, 1.1),
        )
        fig.update_layout(height=PICTURE_PX)
        table = pd.DataFrame(
            {_("token"): tokens, _("score"): scores, _("probability"): [round(p, 4) for p in result.probs]}
        )
        summary = _(
            "At temperature {t} the probabilities are {probs}; {top} is the most likely; entropy {bits} bits "
            "(uniform over {n} tokens: {uniform} bits)."
        ).format(
            t=i18n.number(temperature, 2),
            probs=listing(i18n.number(p, 4) for p in result.probs),
            top=tokens[top],
            bits=i18n.number(result.entropy_bits, 3),
            n=len(scores),
            uniform=i18n.number(result.uniform_entropy_bits, 3),
        )
        chart(fig, table, summary, key="temperature_probs", table_open=True)


picture_section()

exercise_tab, how_tab = layout.more([_("Predict: drop the √d and scale Q and K"), _("How temperature works")])
with how_tab:
    st.markdown(  # LaTeX braces: no .format
        _(
            "Softmax turns scores into probabilities: $p_i = e^{s_i / \\tau} / \\sum_j e^{s_j / \\tau}$. "
            "Dividing by a **temperature** $\\tau$ below 1 widens the gaps between scores and sharpens the "
            "distribution; above 1 it flattens it. As $\\tau \\to 0$ softmax becomes argmax. The entropy above "
            "the chart measures how spread the distribution is: 0 bits is one-hot, log2(n) bits is uniform."
        )
    )
with exercise_tab:

    @fragment.section
    def exercise_section() -> None:
        """The prediction exercise: its factor slider and causal toggle rerun only this tab."""
        heading = st.empty()  # filled once the factor slider below is read, so the heading names its current value
        st.markdown(
            _(
                "Take the worked example's causal attention for four tokens (head width 3, `torch.manual_seed(2)`). "
                "Now **remove the division by √3** and **multiply Q and K by a factor**. "
                "Before you look: what happens to the rows of the weight matrix, and to the gradient through softmax?"
            )
        )
        factor = params.slider(_("Factor applied to Q and K"), "factor", 1.0, 20.0, 10.0, 1.0)
        factor_text = sig(factor, "g")
        heading.subheader(
            _("Prediction exercise: drop the √d and multiply Q and K by {factor}").format(factor=factor_text)
        )
        causal = params.toggle(_("Causal mask"), "causal", True)
        example = lessons.worked_example()
        exp = lessons.scaling_experiment(example.q, example.k, example.v, factor=factor, causal=causal)
        change = exp.unscaled.mean_max_weight - exp.baseline.mean_max_weight
        rounding = 8 * sys.float_info.epsilon  # both means are of at most four weights in [0, 1], in float64
        outcome = SHARPER if change > rounding else FLATTER if change < -rounding else UNCHANGED
        # Kept in English (the prompt's msgid and its number, the options): the question and its fingerprint are
        # the same in every language, and ui/predict shows it translated. `why` is shown as it is.
        template, factor_value = (PROMPT_CAUSAL if causal else PROMPT), f"{factor:g}"
        question = Question(
            id="temperature_predict",
            topic=N_("scaling and saturation"),
            page="views/temperature.py",
            prompt=template.format(factor=factor_value),
            template=template,
            values=(("factor", factor_value),),
            answer=outcome,
            options=(SHARPER, FLATTER, UNCHANGED),
            why=_(
                "The mean of each row's largest weight goes from {before} to {after}: every score is multiplied by "
                "{factor}² × √3 = {times}, and larger gaps between scores concentrate the exponentials on the "
                "maximum."
            ).format(
                before=i18n.number(exp.baseline.mean_max_weight, 3),
                after=i18n.number(exp.unscaled.mean_max_weight, 3),
                factor=factor_text,
                times=sig(factor**2 * 3**0.5, ".3g"),
            ),
        )
        graded = predict.ask(
            question, hint=_("Large gaps between logits make the exponentials concentrate on the maximum.")
        )

        if graded is not None:
            rows = [
                (_("mean of each row's largest weight"), exp.baseline.mean_max_weight, exp.unscaled.mean_max_weight),
                (
                    _("share of rows with a weight ≥ {threshold}").format(threshold=sig(lessons.ONE_HOT_THRESHOLD, "")),
                    exp.baseline.share_one_hot,
                    exp.unscaled.share_one_hot,
                ),
                (_("mean row entropy (bits)"), exp.baseline.mean_entropy_bits, exp.unscaled.mean_entropy_bits),
                (
                    _("mean softmax gradient norm ‖∂weights/∂scores‖"),
                    exp.baseline.mean_jacobian_norm,
                    exp.unscaled.mean_jacobian_norm,
                ),
            ]
            scaled_name = _("scaled by 1/√3")
            unscaled_name = _("×{factor}, no √d").format(factor=factor_text)
            measured = pd.DataFrame(rows, columns=[_("measure"), scaled_name, unscaled_name])
            projector.dataframe(
                measured,
                hide_index=True,
                key="scaling_table",
                column_config={c: st.column_config.NumberColumn(format="%.6f") for c in measured.columns[1:]},
            )
            st.write(
                _(
                    "Without the division and with Q, K × {factor}, the mean largest weight goes from {before} to "
                    "{after}, and the softmax gradient norm from {grad_before} to {grad_after}: saturated rows pass "
                    "almost no gradient back."
                ).format(
                    factor=factor_text,
                    before=i18n.number(rows[0][1], 3),
                    after=i18n.number(rows[0][2], 3),
                    grad_before=i18n.number(rows[3][1], 4),
                    grad_after=sig(rows[3][2], ".2e"),
                )
            )
            T = example.q.shape[1]
            labels = [str(i) for i in range(T)]
            cols = st.columns(2)
            runs = [
                (scaled_name, exp.baseline_result, exp.baseline, "scaling_base"),
                (unscaled_name, exp.unscaled_result, exp.unscaled, "scaling_big"),
            ]
            allowed = example.mask if causal else None
            for col, (name, res, stats, key) in zip(cols, runs):
                z = [
                    [(res.weights[0, t, s].item() if allowed is None or allowed[t, s] else None) for s in range(T)]
                    for t in range(T)
                ]
                with col:
                    chart(
                        charts.heatmap(
                            z,
                            title=_("weights, {name}").format(name=name),
                            x_labels=labels,
                            y_labels=labels,
                            zmin=0,
                            zmax=1,
                        ),
                        matrix_table(z, labels, labels, value_name=_("weight")),
                        _("Weights {name}: largest weight per row {values}.").format(
                            name=name, values=listing(i18n.number(m, 3) for m in stats.max_weight[0].tolist())
                        ),
                        key=key,
                    )

    exercise_section()
