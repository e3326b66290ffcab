"""RoPE: rotary position embedding, one pair at a time, and why the score depends only on m - n."""

import pandas as pd
import streamlit as st

from core import i18n
from core.classroom.checkpoint import Question
from core.i18n import N_, _
from core.lessons import rope as rope_lab
from core.model.prompt import encode_for_model
from ui import cached, charts, fragment, layout, params, predict, projector, rope_figure
from ui.companion import chart, matrix_table
from ui.models import selected_bundle
from ui.text import escape_markdown, explain_encoding, verdict

DEFAULT_TEXT = "def add(a, b): return a + b"
WIDTHS = [4, 8, 16, 32, 64, 128]
SHIFT = 5  # the prediction tab's question moves both positions by this much
SAME, GROWS, SHRINKS = N_("it stays the same"), N_("it grows"), N_("it shrinks")
PROMPT = N_(
    "The drawing puts the query at m = {m} and the key at n = {n}. Shift both by {shift}: the query to "
    "m = {m_shifted}, the key to n = {n_shifted}. What happens to q·k after RoPE (all {D} features)?"
)  # the prediction's question, with its numbers as placeholders
SLIDER_POSITIONS = 32  # the position sliders run 0-31, so a step is visible and the lesson's 5 and 2 sit apart...
MAX_POSITION = 255  # ...and moving both along (a number input) reaches far positions up to this one


st.title(_("RoPE: rotary position embedding"))
st.caption(
    _(
        "RoPE turns each pair of features of a query and a key by its position times the pair's speed θᵢ: lengths "
        "stay, only directions change. Move the positions and watch one pair turn."
    )
)


@fragment.section
def page_section() -> None:
    """The positions, base, width and pair drive the picture and the first four tabs, so the page body reruns
    together, without app.py's sidebar."""
    cols = st.columns([4, 4, 3, 3, 3, 4])
    with cols[0]:
        m = params.slider(_("Query position m"), "rope_m", 0, SLIDER_POSITIONS - 1, 5)
    with cols[1]:
        n = params.slider(_("Key position n"), "rope_n", 0, SLIDER_POSITIONS - 1, 2)
    with cols[2]:
        far = params.number_input(
            _("Move both by"), "rope_far", 0, MAX_POSITION - SLIDER_POSITIONS + 1, 0, 1,
            help=_("Adds this to m and to n: far positions such as m = 105, n = 102 (offset m − n unchanged)"),
        )  # fmt: skip
    with cols[3]:
        base = params.number_input(_("RoPE base"), "rope_base", 2.0, 1_000_000.0, 10000.0, 1000.0, format="%g")
    with cols[4]:
        D = params.selectbox(_("Head width D"), "rope_D", WIDTHS, 16)
    with cols[5]:
        pair = params.slider(_("Pair index i"), "rope_pair", 0, D // 2 - 1, 0)
    m, n = m + far, n + far  # the positions the tokens stand at

    q, k = rope_lab.seeded_qk(D)
    rot = rope_lab.rotate_pair(q, k, m, n, pair, base)
    with layout.picture():
        left, right = st.columns([3, 2])
        with right:
            st.metric(_("θᵢ (radians per position)"), i18n.formatted(rot.theta, ".6g"))
            st.metric(_("q turned by m·θᵢ"), _("{angle} rad").format(angle=i18n.number(rot.angle_q, 4)))
            st.metric(_("k turned by n·θᵢ"), _("{angle} rad").format(angle=i18n.number(rot.angle_k, 4)))
            st.metric(
                _("this pair's q·k before → after"),
                f"{i18n.number(rot.pair_score_before, 4)} → {i18n.number(rot.pair_score_after, 4)}",
            )
            st.metric(
                _("q·k after RoPE, all D features"),
                i18n.number(rot.score_after, 6),
                help=_("The score before the 1/√D scale, with q rotated at m and k at n"),
            )
            st.caption(
                _(
                    "Without RoPE q·k = {score} at every pair of positions. Offset m − n = {offset}. Dotted arrows are "
                    "before, solid after: both keep their length, and the angle between them changes by (m − n)·θᵢ."
                ).format(score=i18n.number(rot.score_before, 6), offset=rot.offset)
            )
        with left:
            table = pd.DataFrame(
                {
                    _("vector"): [i18n._(name) for name in rot.lengths],  # "q before", ...: core marks them N_()
                    _("position"): ["-", str(m), "-", str(n)],
                    _("turned by (rad)"): [0.0, rot.angle_q, 0.0, rot.angle_k],
                    _("feature {index}").format(index=rot.dims[0]): [
                        rot.q_before[0],
                        rot.q_after[0],
                        rot.k_before[0],
                        rot.k_after[0],
                    ],
                    _("feature {index}").format(index=rot.dims[1]): [
                        rot.q_before[1],
                        rot.q_after[1],
                        rot.k_before[1],
                        rot.k_after[1],
                    ],
                    _("length"): list(rot.lengths.values()),
                    _("direction (rad)"): list(rot.angles.values()),
                }
            )
            q_before, q_after, k_before, k_after = rot.lengths.values()  # q before, q after, k before, k after
            chart(
                rope_figure.pair_figure(rot),
                table,
                _(
                    "Pair {pair}: q turns by {angle_q} rad (length {q_before} before, {q_after} after), k turns by "
                    "{angle_k} rad (length {k_before}, {k_after}); the pair's q·k goes from {before} to {after}."
                ).format(
                    pair=pair,
                    angle_q=i18n.number(rot.angle_q, 3),
                    q_before=i18n.number(q_before, 4),
                    q_after=i18n.number(q_after, 4),
                    angle_k=i18n.number(rot.angle_k, 3),
                    k_before=i18n.number(k_before, 4),
                    k_after=i18n.number(k_after, 4),
                    before=i18n.number(rot.pair_score_before, 4),
                    after=i18n.number(rot.pair_score_after, 4),
                ),
                key="rope_pair_drawing",
            )

    predict_tab, how_tab, speeds_tab, layouts_tab, model_tab = layout.more(
        [
            _("Predict: move both together"),
            _("How RoPE works"),
            _("Every pair's speed"),
            _("Adjacent pairs or split halves"),
            _("A model's head, RoPE on and off"),
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
        why = (
            _(
                "q·k after RoPE is {now} at m = {m}, n = {n} and {shifted} at m = {m_shifted}, n = {n_shifted}: a "
                "difference of {difference}, within float64 rounding ({tolerance}). (R_m q)·(R_n k) = qᵀ R_(n−m) k: "
                "only the offset m − n = {offset} enters, and shifting both positions does not change it."
            )
            if outcome == SAME
            else _(
                "q·k after RoPE is {now} at m = {m}, n = {n} and {shifted} at m = {m_shifted}, n = {n_shifted}: a "
                "difference of {difference}, beyond float64 rounding ({tolerance}). (R_m q)·(R_n k) = qᵀ R_(n−m) k: "
                "only the offset m − n = {offset} enters, and shifting both positions does not change it."
            )
        )
        # Kept in English (the prompt's msgid and its numbers, the options, the answer): the question and its
        # fingerprint are the same in every language, and ui/predict shows them translated. `why` is shown as it is.
        values = {"m": m, "n": n, "shift": SHIFT, "m_shifted": m + SHIFT, "n_shifted": n + SHIFT, "D": D}
        values = {name: str(value) for name, value in values.items()}
        question = Question(
            id="rope_predict",
            topic=N_("RoPE and relative position"),
            page="views/rope.py",
            prompt=PROMPT.format(**values),
            answer=outcome,
            options=(SAME, GROWS, SHRINKS),
            why=why.format(
                now=i18n.number(now, 6),
                m=m,
                n=n,
                shifted=i18n.number(shifted, 6),
                m_shifted=m + SHIFT,
                n_shifted=n + SHIFT,
                difference=i18n.formatted(abs(change), ".1e"),
                tolerance=i18n.formatted(pair_of_scores.tolerance, ".1e"),
                offset=m - n,
            ),
            template=PROMPT,
            values=tuple(values.items()),
        )
        hint = _(
            "Rotations add their angles, and turning two vectors by the same angle does not change their dot product. "
            "Shifting both positions by {shift} turns q's pair i by {shift}·θᵢ more and k's pair i by how much more?"
        ).format(shift=SHIFT)
        if predict.ask(question, hint=hint) is not None:
            st.markdown(
                _(
                    "Rotating q by mθ and k by nθ is the same, for their dot product, as leaving k alone and turning q "
                    "by (m − n)θ: (R_m q)·(R_n k) = qᵀ R_mᵀ R_n k = qᵀ R_(n−m) k. For one pair this is "
                    "|q||k| cos(φ_q − φ_k + (m − n)θ). Below, q·k over all D features is computed for many offsets, "
                    "each time with the earlier of the two tokens at several absolute positions. If RoPE depends only "
                    "on the offset, the curves lie exactly on top of each other."
                )
            )
            fig = charts.lines(
                offsets,
                {_("earlier token at {position}").format(position=a): row for a, row in zip(off.positions, off.scores)},
                title=_("q·k after RoPE against the offset m − n (D = {D}, base {base})").format(
                    D=D, base=i18n.formatted(base, "g")
                ),
                x_title=_("offset m − n (query position − key position)"),
                y_title=_("q·k after RoPE"),
                markers=False,
                extra=[
                    dict(
                        type="scatter",
                        x=[rot.offset],
                        y=[rot.score_after],
                        mode="markers+text",
                        name=_("your m = {m}, n = {n}").format(m=m, n=n),
                        marker=dict(symbol="diamond", size=13, color="#000000"),
                        text=[f"m={m}, n={n}"],
                        textposition="top center",
                    )
                ],
            )
            offset_table = pd.DataFrame(
                {
                    _("offset m − n"): offsets,
                    **{
                        _("q·k, earlier token at {position}").format(position=a): row
                        for a, row in zip(off.positions, off.scores)
                    },
                    _("spread across positions"): off.spreads,
                }
            )
            chart(
                fig,
                offset_table,
                _(
                    "For offsets {first} to {last} the {count} curves (earlier token at {positions}) coincide: the "
                    "largest spread is {spread}. At your offset {offset} the score is {score}."
                ).format(
                    first=offsets[0],
                    last=offsets[-1],
                    count=len(anchors),
                    positions=", ".join(map(str, anchors)),
                    spread=i18n.formatted(off.max_spread, ".2e"),
                    offset=rot.offset,
                    score=i18n.number(rot.score_after, 6),
                ),
                key="rope_offsets",
            )
            check = _(
                "largest spread across absolute positions: {spread}, allowance {allowance} (float64's epsilon × the "
                "length of the sums × |q||k|, |q||k| = {norm})"
            ).format(
                spread=i18n.formatted(off.max_spread, ".2e"),
                allowance=i18n.formatted(off.tolerance, ".2e"),
                norm=i18n.number(off.norm_product, 4),
            )
            verdict(
                off.passed,
                _("Offset check passed: {check}.").format(check=check),
                _("Offset check failed: {check}.").format(check=check),
            )
            st.caption(
                _(
                    "The spread is not exactly 0 because m·θ is rounded to float64; the rounding grows with the "
                    "position."
                )
            )

    with how_tab:
        st.markdown(
            _(
                "Attention on its own has no idea where a token stands: q·k is the same wherever the two tokens are. "
                "**RoPE** gives it positions by *rotating* every query and key before the dot product. A head vector "
                "of width D is read as D/2 pairs of adjacent features (x₂ᵢ, x₂ᵢ₊₁); at position m, pair i is turned "
                "counter-clockwise by the angle m·θᵢ, with θᵢ = base^(−2i/D). Rotations keep lengths, so nothing but "
                "the direction changes."
            )
        )
        st.markdown(
            _(
                "Pair {pair} holds features {first} and {second} of q and of k. RoPE turns q's pair by m·θ and k's "
                "pair by n·θ, with θ = {base}^(−2·{pair}/{D}) = {theta} rad per position. Dotted arrows are before, "
                "solid arrows after. Both arrows keep their length; the angle *between* them changes by (m − n)·θ."
            ).format(
                pair=pair,
                first=rot.dims[0],
                second=rot.dims[1],
                base=i18n.formatted(base, "g"),
                D=D,
                theta=i18n.formatted(rot.theta, ".6g"),
            )
        )
        st.caption(
            _(
                "The query and key are fixed random vectors of width D = {D} (torch seed {seed}), the same for every "
                "position, so anything that changes in the drawing is RoPE's doing. The last tab uses a loaded model."
            ).format(D=D, seed=rope_lab.SEED)
        )

    with speeds_tab:
        st.markdown(
            _(
                "Pair 0 turns 1 radian per position; every later pair turns slower, by a factor base^(2/D) per pair. "
                "The fast pairs tell neighbours apart; the slow ones change so little over a text that they act almost "
                "like no rotation at all and can carry meaning. The **wavelength** 2π/θᵢ is how many positions a pair "
                "needs for one full turn: beyond it the pair's angle repeats."
            )
        )
        freq = rope_lab.pair_frequencies(D, base)
        fig = charts.lines(
            list(freq.pairs),
            {_("θᵢ = base^(−2i/D)"): freq.thetas},
            title=_("rotation speed of each pair (D = {D}, base {base})").format(D=D, base=i18n.formatted(base, "g")),
            x_title=_("pair index i"),
            y_title=_("θᵢ (radians per position, log scale)"),
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
                    text=_("pair {pair}").format(pair=pair),
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
                _("pair i"): list(freq.pairs),
                _("features"): [f"{a}, {b}" for a, b in freq.dims],
                _("θᵢ (rad per position)"): freq.thetas,
                _("wavelength 2π/θᵢ (positions)"): freq.wavelengths,
            }
        )
        chart(
            fig,
            freq_table,
            _(
                "Pair 0 turns {theta_first} rad per position (a full turn every {wave_first} positions); pair {last} "
                "turns {theta_last} rad (every {wave_last} positions). Your pair {pair}: {theta} rad, wavelength "
                "{wave} positions."
            ).format(
                theta_first=i18n.formatted(freq.thetas[0], ".4g"),
                wave_first=i18n.formatted(freq.wavelengths[0], ".4g"),
                last=freq.pairs[-1],
                theta_last=i18n.formatted(freq.thetas[-1], ".4g"),
                wave_last=i18n.formatted(freq.wavelengths[-1], ".4g"),
                pair=pair,
                theta=i18n.formatted(freq.thetas[pair], ".4g"),
                wave=i18n.formatted(freq.wavelengths[pair], ".4g"),
            ),
            key="rope_frequencies",
            table_open=True,
        )

    with layouts_tab:
        st.markdown(
            _(
                "This lab pairs adjacent features (2i, 2i+1), as the RoFormer paper and meta-llama do. GPT-NeoX and "
                "Hugging Face pair feature i with feature i + D/2 (`rotate_half`). That is the same rotation after a "
                "fixed reordering of the features: move the even features to the first half and the odd ones to the "
                "second. A checkpoint from one library only works in the other after that permutation of its q and k "
                "weights."
            )
        )
        equivalence = cached.rope_layout_equivalence(D, m, n, base)  # q at m, k at n
        half, shown = D // 2, min(D // 2, 8)  # spell out at most 8 pairs; the table below lists every feature
        more = " …" if shown < half else ""
        st.markdown(
            _("**Adjacent layout**, feature order with each pair in brackets: {pairs}").format(
                pairs=" ".join(f"({2 * i} {2 * i + 1})" for i in range(shown)) + more
            )
            + "  \n"
            + _(
                "**Split-half layout**, the feature each slot holds: slots 0–{first_end} hold {first}; slots "
                "{half}–{last} hold {second}. Pair i sits in slots i and i + D/2 = i + {half}."
            ).format(
                first_end=half - 1,
                first=" ".join(str(equivalence.permutation[j]) for j in range(shown)) + more,
                half=half,
                last=D - 1,
                second=" ".join(str(equivalence.permutation[half + j]) for j in range(shown)) + more,
            )
        )
        adjacent_q = equivalence.adjacent[0].tolist()  # (D,) q after RoPE, adjacent layout
        split_q = equivalence.split_half[0].tolist()  # (D,) q after RoPE, split-half layout
        mapping = pd.DataFrame(
            {
                _("feature d (adjacent layout)"): list(range(D)),
                _("pair i"): [d // 2 for d in range(D)],
                _("member"): [_("first") if d % 2 == 0 else _("second") for d in range(D)],
                _("slot in split-half layout"): list(equivalence.destination),
                _("q after RoPE, adjacent [d]"): adjacent_q,
                _("q after RoPE, split half [slot]"): [split_q[j] for j in equivalence.destination],
            }
        )
        projector.dataframe(mapping, hide_index=True, key="rope_layout_table", height=min(400, 38 + 35 * D))
        layout_check = _(
            "largest difference between the two layouts after the permutation (q at m = {m}, k at n = {n}): "
            "{difference}, tolerance {tolerance}"
        ).format(
            m=m,
            n=n,
            difference=i18n.formatted(equivalence.max_abs_diff, ".2e"),
            tolerance=i18n.formatted(equivalence.tolerance, ".0e"),
        )
        verdict(
            equivalence.passed,
            _("Same rotation: {check}.").format(check=layout_check),
            _("The layouts disagree: {check}.").format(check=layout_check),
        )
        st.caption(
            _(
                "Without the permutation (rotating the adjacent layout as if it were split half) the largest "
                "difference is {difference}: the pairing has to match the layout the weights were trained with."
            ).format(difference=i18n.number(equivalence.unpermuted_max_abs_diff, 4))
        )

    with model_tab:
        st.markdown(
            _(
                "The same head's scores q kᵀ/√D for a text, once with the rotation the model uses and once with the "
                "rotation skipped. The model was trained with RoPE, so 'off' is not a model anyone trained: it shows "
                "what the learned queries and keys say when positions are taken away. Grey cells are the future, "
                "hidden by the causal mask."
            )
        )
        bundle = selected_bundle()
        if bundle is None:
            st.info(
                _("This section needs a model: pick a usable bundle in the sidebar, or train one on the Training page.")
            )
            return  # the last tab: nothing of the page comes after it
        config = bundle.config
        left, mid, right = st.columns([3, 1, 1])
        with left:
            text = params.text_input(_("Text to send through the model"), "rope_text", DEFAULT_TEXT)
        with mid:
            layer = params.selectbox(_("Layer"), "rope_layer", list(range(config.n_layer)), 0)
        with right:
            head = params.selectbox(_("Head"), "rope_head", list(range(config.n_head)), 0)
        enc = encode_for_model(bundle.tokenizer, text, config.context_length)
        explain_encoding(enc, _("draw scores for"))  # "...so there is nothing to draw scores for"
        onoff = cached.rope_on_off_scores(bundle.model, bundle.version, cached.ids_key(enc.ids), layer, head)
        T, labels = onoff.T, enc.labels()
        st.caption(
            _(
                "The model rotates with its own base {base} and head width {width}, not the controls at the top of "
                "the page."
            ).format(base=i18n.formatted(config.rope_base, "g"), width=config.head_dim)
        )
        mask = onoff.mask.tolist()  # (T, T)
        maps = [
            [[v if ok else None for v, ok in zip(row, allowed)] for row, allowed in zip(scores.tolist(), mask)]
            for scores in (onoff.scores_on, onoff.scores_off)
        ]  # 2 x (T, T) with the future as None
        bound = max(abs(v) for z in maps for row in z for v in row if v is not None) or 1.0
        st.write(
            _(
                "With RoPE off, the allowed scores of layer {layer}, head {head} change by up to {largest} (mean "
                "{mean}), and {changed} of {T} queries give their highest score to a different key: without the "
                "rotation a query scores a key only by what the two tokens hold, not by how far apart they stand."
            ).format(
                layer=layer,
                head=head,
                largest=i18n.number(onoff.max_abs_change, 3),
                mean=i18n.number(onoff.mean_abs_change, 3),
                changed=onoff.top_key_changed,
                T=T,
            )
        )
        names, keys = (_("RoPE on (the model)"), _("RoPE off")), ("rope_scores_on", "rope_scores_off")
        for column, z, name, key in zip(st.columns(2), maps, names, keys):
            last = [v for v in z[T - 1] if v is not None]  # the last query's allowed scores
            best = max(range(len(last)), key=lambda s: last[s])
            hidden = sum(v is None for row in z for v in row)
            with column:
                fig = charts.heatmap(
                    z,
                    title=_("scores, {name}, layer {layer}, head {head}").format(name=name, layer=layer, head=head),
                    x_labels=labels,
                    y_labels=labels,
                    x_title=_("key"),
                    y_title=_("query"),
                    signed=True,
                    zmin=-bound,
                    zmax=bound,
                    height=min(900, 190 + 22 * T),
                    # The key labels and their axis title sit on top: pin the chart title to the container's top edge.
                    layout=dict(margin=dict(t=130), title=dict(yref="container", y=0.995, yanchor="top")),
                )
                chart(
                    fig,
                    matrix_table(z, labels, labels, row_name=_("query"), col_name=_("key"), value_name=_("score")),
                    _(
                        "{name}: the last query ({query}) scores its {count} allowed keys from {low} to {high}, "
                        "highest for key {best}; {hidden} future cells are masked."
                    ).format(
                        name=name,
                        query=escape_markdown(labels[-1]),
                        count=len(last),
                        low=i18n.number(min(last), 3),
                        high=i18n.number(last[best], 3),
                        best=escape_markdown(labels[best]),
                        hidden=hidden,
                    ),
                    key=key,
                )
        st.caption(
            _("Both maps share one colour scale (−{bound} to {bound}); orange is negative, purple positive.").format(
                bound=i18n.number(bound, 2)
            )
        )


page_section()
