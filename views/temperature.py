"""Temperature: how dividing the scores before softmax sharpens or flattens the distribution."""

import sys

import pandas as pd
import streamlit as st

from core.classroom.checkpoint import Question
from core.lessons import scores as lessons
from ui import charts, fragment, layout, params, predict, projector
from ui.companion import chart, matrix_table
from ui.text import escape_markdown

SHARPER = "sharper: each row's largest weight grows, towards one-hot"
FLATTER = "flatter: the weights move towards uniform"
UNCHANGED = "unchanged: softmax only looks at the order of the scores"
PICTURE_PX = 380  # the bar chart's height: with the controls above it, one screen at 1440x900 and projected

st.title("Temperature")
st.caption(
    "Softmax of the scores divided by a temperature τ: below 1 it sharpens the distribution, above 1 flattens it."
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
            text = params.text_input("Scores, one per token (comma separated)", "scores", default_text)
        with slider_col:
            temperature = params.slider("Temperature τ", "temperature", 0.05, 5.0, 1.0, 0.05)
        try:
            scores = lessons.parse_scores(text)
        except ValueError as err:
            st.warning(f"Those scores could not be read: {escape_markdown(err)}. Showing the lesson's scores instead.")
            scores = lessons.TEMPERATURE_SCORES

        result = lessons.temperature_distribution(scores, temperature)
        tokens = [f"token {i}" for i in range(len(scores))]
        top = max(range(len(scores)), key=lambda i: result.probs[i])
        with entropy_col:
            st.metric(
                "Entropy (bits)",
                f"{result.entropy_bits:.3f}",
                help=f"0 bits = one-hot; a uniform distribution over {len(scores)} tokens has "
                f"{result.uniform_entropy_bits:.3f} bits (log2 of {len(scores)}).",
            )
        fig = charts.bars(
            tokens,
            result.probs,
            title=f"softmax(scores / {temperature:.2f})",
            y_title="probability",
            highlight=top,
            y_range=(0, 1.1),
        )
        fig.update_layout(height=PICTURE_PX)
        table = pd.DataFrame({"token": tokens, "score": scores, "probability": [round(p, 4) for p in result.probs]})
        summary = (
            f"At temperature {temperature:.2f} the probabilities are "
            + ", ".join(f"{p:.4f}" for p in result.probs)
            + f"; {tokens[top]} is the most likely; entropy {result.entropy_bits:.3f} bits "
            f"(uniform over {len(scores)} tokens: {result.uniform_entropy_bits:.3f} bits)."
        )
        chart(fig, table, summary, key="temperature_probs", table_open=True)


picture_section()

exercise_tab, how_tab = layout.more(["Predict: drop the √d and scale Q and K", "How temperature works"])
with how_tab:
    st.markdown(
        "Softmax turns scores into probabilities: $p_i = e^{s_i / \\tau} / \\sum_j e^{s_j / \\tau}$. "
        "Dividing by a **temperature** $\\tau$ below 1 widens the gaps between scores and sharpens the "
        "distribution; above 1 it flattens it. As $\\tau \\to 0$ softmax becomes argmax. The entropy above "
        "the chart measures how spread the distribution is: 0 bits is one-hot, log2(n) bits is uniform."
    )
with exercise_tab:

    @fragment.section
    def exercise_section() -> None:
        """The prediction exercise: its factor slider and causal toggle rerun only this tab."""
        heading = st.empty()  # filled once the factor slider below is read, so the heading names its current value
        st.markdown(
            "Take the worked example's causal attention for four tokens (head width 3, `torch.manual_seed(2)`). "
            "Now **remove the division by √3** and **multiply Q and K by a factor**. "
            "Before you look: what happens to the rows of the weight matrix, and to the gradient through softmax?"
        )
        factor = params.slider("Factor applied to Q and K", "factor", 1.0, 20.0, 10.0, 1.0)
        heading.subheader(f"Prediction exercise: drop the √d and multiply Q and K by {factor:g}")
        causal = params.toggle("Causal mask", "causal", True)
        example = lessons.worked_example()
        exp = lessons.scaling_experiment(example.q, example.k, example.v, factor=factor, causal=causal)
        change = exp.unscaled.mean_max_weight - exp.baseline.mean_max_weight
        rounding = 8 * sys.float_info.epsilon  # both means are of at most four weights in [0, 1], in float64
        outcome = SHARPER if change > rounding else FLATTER if change < -rounding else UNCHANGED
        question = Question(
            id="temperature_predict",
            topic="scaling and saturation",
            page="views/temperature.py",
            prompt=f"Without the division by √3 and with Q and K × {factor:g}{' (causal)' if causal else ''}: "
            "what happens to the rows of the weight matrix?",
            answer=outcome,
            options=(SHARPER, FLATTER, UNCHANGED),
            why=f"The mean of each row's largest weight goes from {exp.baseline.mean_max_weight:.3f} to "
            f"{exp.unscaled.mean_max_weight:.3f}: every score is multiplied by {factor:g}² × √3 = "
            f"{factor**2 * 3**0.5:.3g}, and larger gaps between scores concentrate the exponentials on the maximum.",
        )
        graded = predict.ask(
            question, hint="Large gaps between logits make the exponentials concentrate on the maximum."
        )

        if graded is not None:
            rows = [
                ("mean of each row's largest weight", exp.baseline.mean_max_weight, exp.unscaled.mean_max_weight),
                (
                    f"share of rows with a weight ≥ {lessons.ONE_HOT_THRESHOLD}",
                    exp.baseline.share_one_hot,
                    exp.unscaled.share_one_hot,
                ),
                ("mean row entropy (bits)", exp.baseline.mean_entropy_bits, exp.unscaled.mean_entropy_bits),
                (
                    "mean softmax gradient norm ‖∂weights/∂scores‖",
                    exp.baseline.mean_jacobian_norm,
                    exp.unscaled.mean_jacobian_norm,
                ),
            ]
            measured = pd.DataFrame(rows, columns=["measure", "scaled by 1/√3", f"×{factor:g}, no √d"])
            projector.dataframe(
                measured,
                hide_index=True,
                key="scaling_table",
                column_config={c: st.column_config.NumberColumn(format="%.6f") for c in measured.columns[1:]},
            )
            st.write(
                f"Without the division and with Q, K × {factor:g}, the mean largest weight goes from "
                f"{rows[0][1]:.3f} to {rows[0][2]:.3f}, and the softmax gradient norm from {rows[3][1]:.4f} to "
                f"{rows[3][2]:.2e}: "
                "saturated rows pass almost no gradient back."
            )
            T = example.q.shape[1]
            labels = [str(i) for i in range(T)]
            cols = st.columns(2)
            runs = [
                ("scaled by 1/√3", exp.baseline_result, exp.baseline, "scaling_base"),
                (f"×{factor:g}, no √d", exp.unscaled_result, exp.unscaled, "scaling_big"),
            ]
            allowed = example.mask if causal else None
            for col, (name, res, stats, key) in zip(cols, runs):
                z = [
                    [(res.weights[0, t, s].item() if allowed is None or allowed[t, s] else None) for s in range(T)]
                    for t in range(T)
                ]
                with col:
                    chart(
                        charts.heatmap(z, title=f"weights, {name}", x_labels=labels, y_labels=labels, zmin=0, zmax=1),
                        matrix_table(z, labels, labels, value_name="weight"),
                        f"Weights {name}: largest weight per row "
                        + ", ".join(f"{m:.3f}" for m in stats.max_weight[0].tolist())
                        + ".",
                        key=key,
                    )

    exercise_section()
