"""RoPE: rotary position embedding, one pair at a time, and why the score depends only on m - n."""

import pandas as pd
import streamlit as st

from core.classroom.checkpoint import Question
from core.lessons import rope as rope_lab
from core.model.prompt import encode_for_model
from ui import cached, charts, fragment, layout, params, predict, projector, rope_figure
from ui.companion import chart, matrix_table
from ui.models import selected_bundle
from ui.text import escape_markdown, explain_encoding, verdict

DEFAULT_TEXT = "def add(a, b): return a + b"
WIDTHS = [4, 8, 16, 32, 64, 128]
SHIFT = 5  # the prediction tab's question moves both positions by this much
SAME, GROWS, SHRINKS = "it stays the same", "it grows", "it shrinks"
SLIDER_POSITIONS = 32  # the position sliders run 0-31, so a step is visible and the lesson's 5 and 2 sit apart...
MAX_POSITION = 255  # ...and moving both along (a number input) reaches far positions up to this one

st.title("RoPE: rotary position embedding")
st.caption(
    "RoPE turns each pair of features of a query and a key by its position times the pair's speed θᵢ: lengths "
    "stay, only directions change. Move the positions and watch one pair turn."
)


@fragment.section
def page_section() -> None:
    """The positions, base, width and pair drive the picture and the first four tabs, so the page body reruns
    together, without app.py's sidebar."""
    cols = st.columns([4, 4, 3, 3, 3, 4])
    with cols[0]:
        m = params.slider("Query position m", "rope_m", 0, SLIDER_POSITIONS - 1, 5)
    with cols[1]:
        n = params.slider("Key position n", "rope_n", 0, SLIDER_POSITIONS - 1, 2)
    with cols[2]:
        far = params.number_input(
            "Move both by", "rope_far", 0, MAX_POSITION - SLIDER_POSITIONS + 1, 0, 1,
            help="Adds this to m and to n: far positions such as m = 105, n = 102 (offset m − n unchanged)",
        )  # fmt: skip
    with cols[3]:
        base = params.number_input("RoPE base", "rope_base", 2.0, 1_000_000.0, 10000.0, 1000.0, format="%g")
    with cols[4]:
        D = params.selectbox("Head width D", "rope_D", WIDTHS, 16)
    with cols[5]:
        pair = params.slider("Pair index i", "rope_pair", 0, D // 2 - 1, 0)
    m, n = m + far, n + far  # the positions the tokens stand at

    q, k = rope_lab.seeded_qk(D)
    rot = rope_lab.rotate_pair(q, k, m, n, pair, base)
    with layout.picture():
        left, right = st.columns([3, 2])
        with right:
            st.metric("θᵢ (radians per position)", f"{rot.theta:.6g}")
            st.metric("q turned by m·θᵢ", f"{rot.angle_q:.4f} rad")
            st.metric("k turned by n·θᵢ", f"{rot.angle_k:.4f} rad")
            st.metric("this pair's q·k before → after", f"{rot.pair_score_before:.4f} → {rot.pair_score_after:.4f}")
            st.metric(
                "q·k after RoPE, all D features",
                f"{rot.score_after:.6f}",
                help="The score before the 1/√D scale, with q rotated at m and k at n",
            )
            st.caption(
                f"Without RoPE q·k = {rot.score_before:.6f} at every pair of positions. Offset m − n = {rot.offset}. "
                "Dotted arrows are before, solid after: both keep their length, and the angle between them changes by "
                "(m − n)·θᵢ."
            )
        with left:
            table = pd.DataFrame(
                {
                    "vector": list(rot.lengths),
                    "position": ["-", str(m), "-", str(n)],
                    "turned by (rad)": [0.0, rot.angle_q, 0.0, rot.angle_k],
                    f"feature {rot.dims[0]}": [rot.q_before[0], rot.q_after[0], rot.k_before[0], rot.k_after[0]],
                    f"feature {rot.dims[1]}": [rot.q_before[1], rot.q_after[1], rot.k_before[1], rot.k_after[1]],
                    "length": list(rot.lengths.values()),
                    "direction (rad)": list(rot.angles.values()),
                }
            )
            lengths = rot.lengths
            chart(
                rope_figure.pair_figure(rot),
                table,
                f"Pair {pair}: q turns by {rot.angle_q:.3f} rad (length {lengths['q before']:.4f} before, "
                f"{lengths['q after']:.4f} after), k turns by {rot.angle_k:.3f} rad (length {lengths['k before']:.4f}, "
                f"{lengths['k after']:.4f}); the pair's q·k goes from {rot.pair_score_before:.4f} to "
                f"{rot.pair_score_after:.4f}.",
                key="rope_pair_drawing",
            )

    predict_tab, how_tab, speeds_tab, layouts_tab, model_tab = layout.more(
        [
            "Predict: move both together",
            "How RoPE works",
            "Every pair's speed",
            "Adjacent pairs or split halves",
            "A model's head, RoPE on and off",
        ]
    )
    with predict_tab:
        R = max(32, abs(m - n))
        offsets = list(range(-R, R + 1))
        anchors = sorted({0, min(m, n), 100, 1000})
        off = cached.rope_offset_scores(D, tuple(offsets), tuple(anchors), base)
        # The question: the same offset with the earlier token at min(m, n) and SHIFT later, i.e. (m, n) and
        # both + SHIFT.
        pair_of_scores = cached.rope_offset_scores(D, (m - n,), (min(m, n), min(m, n) + SHIFT), base)
        now, shifted = (row[0] for row in pair_of_scores.scores)
        change = shifted - now
        outcome = (
            GROWS if change > pair_of_scores.tolerance else SHRINKS if change < -pair_of_scores.tolerance else SAME
        )
        question = Question(
            id="rope_predict",
            topic="RoPE and relative position",
            page="views/rope.py",
            prompt=f"The drawing puts the query at m = {m} and the key at n = {n}. Shift both by {SHIFT}: the query to "
            f"m = {m + SHIFT}, the key to n = {n + SHIFT}. What happens to q·k after RoPE (all {D} features)?",
            answer=outcome,
            options=(SAME, GROWS, SHRINKS),
            why=f"q·k after RoPE is {now:.6f} at m = {m}, n = {n} and {shifted:.6f} at m = {m + SHIFT}, "
            f"n = {n + SHIFT}: a difference of {abs(change):.1e}, "
            + ("within" if outcome == SAME else "beyond")
            + f" float64 rounding ({pair_of_scores.tolerance:.1e}). (R_m q)·(R_n k) = qᵀ R_(n−m) k: only the offset "
            f"m − n = {m - n} enters, and shifting both positions does not change it.",
        )
        hint = (
            "Rotations add their angles, and turning two vectors by the same angle does not change their dot product. "
            f"Shifting both positions by {SHIFT} turns q's pair i by {SHIFT}·θᵢ more and k's pair i by how much more?"
        )
        if predict.ask(question, hint=hint) is not None:
            st.markdown(
                "Rotating q by mθ and k by nθ is the same, for their dot product, as leaving k alone and turning q by "
                "(m − n)θ: (R_m q)·(R_n k) = qᵀ R_mᵀ R_n k = qᵀ R_(n−m) k. For one pair this is "
                "|q||k| cos(φ_q − φ_k + (m − n)θ). Below, q·k over all D features is computed for many offsets, each "
                "time "
                "with the earlier of the two tokens at several absolute positions. If RoPE depends only on the offset, "
                "the "
                "curves lie exactly on top of each other."
            )
            fig = charts.lines(
                offsets,
                {f"earlier token at {a}": row for a, row in zip(off.positions, off.scores)},
                title=f"q·k after RoPE against the offset m − n (D = {D}, base {base:g})",
                x_title="offset m − n (query position − key position)",
                y_title="q·k after RoPE",
                markers=False,
                extra=[
                    dict(
                        type="scatter",
                        x=[rot.offset],
                        y=[rot.score_after],
                        mode="markers+text",
                        name=f"your m = {m}, n = {n}",
                        marker=dict(symbol="diamond", size=13, color="#000000"),
                        text=[f"m={m}, n={n}"],
                        textposition="top center",
                    )
                ],
            )
            offset_table = pd.DataFrame(
                {
                    "offset m − n": offsets,
                    **{f"q·k, earlier token at {a}": row for a, row in zip(off.positions, off.scores)},
                    "spread across positions": off.spreads,
                }
            )
            chart(
                fig,
                offset_table,
                f"For offsets {offsets[0]} to {offsets[-1]} the {len(anchors)} curves (earlier token at "
                f"{', '.join(map(str, anchors))}) coincide: the largest spread is {off.max_spread:.2e}. "
                f"At your offset {rot.offset} the score is {rot.score_after:.6f}.",
                key="rope_offsets",
            )
            check = (
                f"largest spread across absolute positions: {off.max_spread:.2e}, allowance {off.tolerance:.2e} "
                f"(float64's epsilon × the length of the sums × |q||k|, |q||k| = {off.norm_product:.4f})"
            )
            verdict(off.passed, f"Offset check passed: {check}.", f"Offset check failed: {check}.")
            st.caption(
                "The spread is not exactly 0 because m·θ is rounded to float64; the rounding grows with the position."
            )

    with how_tab:
        st.markdown(
            "Attention on its own has no idea where a token stands: q·k is the same wherever the two tokens are. "
            "**RoPE** gives it positions by *rotating* every query and key before the dot product. A head vector of "
            "width D is read as D/2 pairs of adjacent features (x₂ᵢ, x₂ᵢ₊₁); at position m, pair i is turned "
            "counter-clockwise by the angle m·θᵢ, with θᵢ = base^(−2i/D). Rotations keep lengths, so nothing but the "
            "direction changes."
        )
        st.markdown(
            f"Pair {pair} holds features {rot.dims[0]} and {rot.dims[1]} of q and of k. RoPE turns q's pair by m·θ and "
            f"k's pair by n·θ, with θ = {base:g}^(−2·{pair}/{D}) = {rot.theta:.6g} rad per position. Dotted arrows are "
            "before, solid arrows after. Both arrows keep their length; the angle *between* them changes by (m − n)·θ."
        )
        st.caption(
            f"The query and key are fixed random vectors of width D = {D} (torch seed {rope_lab.SEED}), the same "
            "for every position, so anything that changes in the drawing is RoPE's doing. The last tab uses a loaded "
            "model."
        )

    with speeds_tab:
        st.markdown(
            "Pair 0 turns 1 radian per position; every later pair turns slower, by a factor base^(2/D) per pair. The "
            "fast pairs tell neighbours apart; the slow ones change so little over a text that they act almost like no "
            "rotation at all and can carry meaning. The **wavelength** 2π/θᵢ is how many positions a pair needs for "
            "one "
            "full turn: beyond it the pair's angle repeats."
        )
        freq = rope_lab.pair_frequencies(D, base)
        fig = charts.lines(
            list(freq.pairs),
            {"θᵢ = base^(−2i/D)": freq.thetas},
            title=f"rotation speed of each pair (D = {D}, base {base:g})",
            x_title="pair index i",
            y_title="θᵢ (radians per position, log scale)",
            log_y=True,
            # a dotted vertical line at your pair, labelled at its top right (what Figure.add_vline draws)
            shapes=[
                dict(
                    type="line",
                    x0=pair,
                    x1=pair,
                    xref="x",
                    y0=0,
                    y1=1,
                    yref="y domain",
                    line=dict(dash="dot", color="#555555"),
                )
            ],
            annotations=[
                dict(
                    text=f"pair {pair}",
                    x=pair,
                    xref="x",
                    y=1,
                    yref="y domain",
                    xanchor="left",
                    yanchor="top",
                    showarrow=False,
                )
            ],
        )
        freq_table = pd.DataFrame(
            {
                "pair i": list(freq.pairs),
                "features": [f"{a}, {b}" for a, b in freq.dims],
                "θᵢ (rad per position)": freq.thetas,
                "wavelength 2π/θᵢ (positions)": freq.wavelengths,
            }
        )
        chart(
            fig,
            freq_table,
            f"Pair 0 turns {freq.thetas[0]:.4g} rad per position (a full turn every {freq.wavelengths[0]:.4g} "
            "positions); "
            f"pair {freq.pairs[-1]} turns {freq.thetas[-1]:.4g} rad (every {freq.wavelengths[-1]:.4g} positions). "
            f"Your pair {pair}: {freq.thetas[pair]:.4g} rad, wavelength {freq.wavelengths[pair]:.4g} positions.",
            key="rope_frequencies",
            table_open=True,
        )

    with layouts_tab:
        st.markdown(
            "This lab pairs adjacent features (2i, 2i+1), as the RoFormer paper and meta-llama do. GPT-NeoX and "
            "Hugging "
            "Face pair feature i with feature i + D/2 (`rotate_half`). That is the same rotation after a fixed "
            "reordering of the features: move the even features to the first half and the odd ones to the second. "
            "A checkpoint from one library only works in the other after that permutation of its q and k weights."
        )
        equivalence = cached.rope_layout_equivalence(D, m, n, base)  # q at m, k at n
        half, shown = D // 2, min(D // 2, 8)  # spell out at most 8 pairs; the table below lists every feature
        more = " …" if shown < half else ""
        st.markdown(
            "**Adjacent layout**, feature order with each pair in brackets: "
            + " ".join(f"({2 * i} {2 * i + 1})" for i in range(shown))
            + more
            + "  \n"
            + f"**Split-half layout**, the feature each slot holds: slots 0–{half - 1} hold "
            + " ".join(str(equivalence.permutation[j]) for j in range(shown))
            + more
            + f"; slots {half}–{D - 1} hold "
            + " ".join(str(equivalence.permutation[half + j]) for j in range(shown))
            + more
            + f". Pair i sits in slots i and i + D/2 = i + {half}."
        )
        adjacent_q = equivalence.adjacent[0].tolist()  # (D,) q after RoPE, adjacent layout
        split_q = equivalence.split_half[0].tolist()  # (D,) q after RoPE, split-half layout
        mapping = pd.DataFrame(
            {
                "feature d (adjacent layout)": list(range(D)),
                "pair i": [d // 2 for d in range(D)],
                "member": ["first" if d % 2 == 0 else "second" for d in range(D)],
                "slot in split-half layout": list(equivalence.destination),
                "q after RoPE, adjacent [d]": adjacent_q,
                "q after RoPE, split half [slot]": [split_q[j] for j in equivalence.destination],
            }
        )
        projector.dataframe(mapping, hide_index=True, key="rope_layout_table", height=min(400, 38 + 35 * D))
        layout_check = (
            f"largest difference between the two layouts after the permutation (q at m = {m}, k at n = {n}): "
            f"{equivalence.max_abs_diff:.2e}, tolerance {equivalence.tolerance:.0e}"
        )
        verdict(equivalence.passed, f"Same rotation: {layout_check}.", f"The layouts disagree: {layout_check}.")
        st.caption(
            f"Without the permutation (rotating the adjacent layout as if it were split half) the largest "
            f"difference is {equivalence.unpermuted_max_abs_diff:.4f}: the pairing has to match the layout the weights "
            "were trained with."
        )

    with model_tab:
        st.markdown(
            "The same head's scores q kᵀ/√D for a text, once with the rotation the model uses and once with the "
            "rotation "
            "skipped. The model was trained with RoPE, so 'off' is not a model anyone trained: it shows what the "
            "learned "
            "queries and keys say when positions are taken away. Grey cells are the future, hidden by the causal mask."
        )
        bundle = selected_bundle()
        if bundle is None:
            st.info(
                "This section needs a model: pick a usable bundle in the sidebar, or train one on the Training page."
            )
            return  # the last tab: nothing of the page comes after it
        config = bundle.config
        left, mid, right = st.columns([3, 1, 1])
        with left:
            text = params.text_input("Text to send through the model", "rope_text", DEFAULT_TEXT)
        with mid:
            layer = params.selectbox("Layer", "rope_layer", list(range(config.n_layer)), 0)
        with right:
            head = params.selectbox("Head", "rope_head", list(range(config.n_head)), 0)
        enc = encode_for_model(bundle.tokenizer, text, config.context_length)
        explain_encoding(enc, "draw scores for")
        onoff = cached.rope_on_off_scores(bundle.model, bundle.version, cached.ids_key(enc.ids), layer, head)
        T, labels = onoff.T, enc.labels()
        st.caption(
            f"The model rotates with its own base {config.rope_base:g} and head width {config.head_dim}, "
            "not the controls at the top of the page."
        )
        mask = onoff.mask.tolist()  # (T, T)
        maps = [
            [[v if ok else None for v, ok in zip(row, allowed)] for row, allowed in zip(scores.tolist(), mask)]
            for scores in (onoff.scores_on, onoff.scores_off)
        ]  # 2 x (T, T) with the future as None
        bound = max(abs(v) for z in maps for row in z for v in row if v is not None) or 1.0
        st.write(
            f"With RoPE off, the allowed scores of layer {layer}, head {head} change by up to "
            f"{onoff.max_abs_change:.3f} "
            f"(mean {onoff.mean_abs_change:.3f}), and {onoff.top_key_changed} of {T} queries give their highest score "
            "to "
            "a different key: without the rotation a query scores a key only by what the two tokens hold, not by how "
            "far "
            "apart they stand."
        )
        names, keys = ("RoPE on (the model)", "RoPE off"), ("rope_scores_on", "rope_scores_off")
        for column, z, name, key in zip(st.columns(2), maps, names, keys):
            last = [v for v in z[T - 1] if v is not None]  # the last query's allowed scores
            best = max(range(len(last)), key=lambda s: last[s])
            hidden = sum(v is None for row in z for v in row)
            with column:
                fig = charts.heatmap(
                    z,
                    title=f"scores, {name}, layer {layer}, head {head}",
                    x_labels=labels,
                    y_labels=labels,
                    x_title="key",
                    y_title="query",
                    signed=True,
                    zmin=-bound,
                    zmax=bound,
                    height=min(900, 190 + 22 * T),
                    # The key labels and their axis title sit on top: pin the chart title to the container's top edge.
                    layout=dict(margin=dict(t=130), title=dict(yref="container", y=0.995, yanchor="top")),
                )
                chart(
                    fig,
                    matrix_table(z, labels, labels, row_name="query", col_name="key", value_name="score"),
                    f"{name}: the last query ({escape_markdown(labels[-1])}) scores its {len(last)} allowed keys from "
                    f"{min(last):.3f} to {last[best]:.3f}, highest for key {escape_markdown(labels[best])}; "
                    f"{hidden} future cells are masked.",
                    key=key,
                )
        st.caption(
            f"Both maps share one colour scale (−{bound:.2f} to {bound:.2f}); orange is negative, purple positive."
        )


page_section()
