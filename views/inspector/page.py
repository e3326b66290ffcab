"""Attention inspector: every layer's and head's weights for a text, one head enlarged, one row by hand.

Picture first: the selectors, then the grid of every head with the page's question beside it; once answered, the
chosen head enlarged (every text on it at least 16 px). The row by hand and the comparison are tabs.
"""

import math

import pandas as pd
import streamlit as st

from core.classroom.checkpoint import Question
from core.model.introspect import check_row, head_summaries, heaviest_keys, projections, weight_allowance
from core.model.prompt import encode_for_model
from ui import cached, charts, fragment, layout, params, predict, projector
from ui.charts import masked
from ui.companion import chart, matrix_table
from ui.models import require_bundle
from ui.text import escape_markdown, explain_encoding, link_if_registered, number, verdict
from views.inspector import compare_view
from views.inspector.grid_figure import grid_figure

DEFAULT_TEXT = "def add(a, b): return a + b"
BAR_VALUES_UP_TO = 32  # keys; a longer row's bars carry no printed values
NO_SINGLE_KEY = "no single key: the largest weights are too close to tell apart"
GRID_HEIGHT, PROJECTED_GRID_HEIGHT = 520, 420  # px at most, before projector.restyle: the grid fits the first screen
MAP_TEXT_PX = 16  # every text on the enlarged map: ticks, cell values, colour bar, titles
TICK_PITCH_PX = 22  # a category tick label needs this much room along its axis: tighter, label every n-th token


st.title("Attention inspector")
st.caption(
    "Where every attention head looks. Each small map is one head of one layer: row t is the query of token t, "
    "column s a key, and the colour the weight softmax gave it. Rows sum to one and nothing lies right of the "
    "diagonal: the causal mask hides the future."
)


@fragment.section
def inspect(bundle) -> None:
    """Everything the text and the layer, head and row selectors drive, which is the whole page below its title: a
    change of one of them reruns this fragment only, not app.py's sidebar (a fragment section, issue 26). The page's
    elements outside it (the title and its caption) depend on none of them."""
    config = bundle.config
    L, H, D = config.n_layer, config.n_head, config.head_dim

    cols = st.columns([3, 1, 1, 2])
    with cols[0]:
        text = params.text_input("Text to send through the model", "insp_text", DEFAULT_TEXT)
    enc = encode_for_model(bundle.tokenizer, text, config.context_length)
    explain_encoding(enc, "attend to")

    if not config.causal:
        st.warning(
            "This model was trained without the causal mask: every query also sees the keys to its right, "
            "so its maps are full squares. That is the leakage the Training page warns about."
        )
    T = enc.T
    labels = enc.labels()  # 'position piece', unique per token

    def named(t: int) -> str:
        """Token t for a sentence: its position and its piece in quotes, made inert for markdown."""
        return f"{t} ('{escape_markdown(enc.pieces[t])}')"

    with cols[1]:
        layer = params.selectbox("Layer to enlarge", "insp_layer", list(range(L)), 0)
    with cols[2]:
        head = params.selectbox("Head to enlarge", "insp_head", list(range(H)), 0)
    with cols[3]:
        # The options are the labels themselves ('position piece'): a new text brings new options, so a row chosen
        # for an old text is never shown under the old text's label; it falls back to the last token.
        t = labels.index(params.selectbox("Query row t (position and piece)", "insp_row", labels, labels[-1]))

    ids = cached.ids_key(enc.ids)
    grid = cached.attention_grid(bundle.model, bundle.version, ids)  # (L, H, T, T) from forward(return_weights=True)
    proj = projections(bundle.model, enc.ids, layer, head)  # this head's q, k, v for the hand check
    mask = proj.mask.tolist()  # (T, T) True = may attend
    grids = [[masked(grid[layer, h].tolist(), mask) for h in range(H)] for layer in range(L)]  # L x H x (T, T)
    summaries = head_summaries(grid)
    check = check_row(proj, grid[layer, head], t)
    keys = [s for s in range(T) if mask[t][s]]  # the keys query t may see
    key_labels = [labels[s] for s in keys]

    # ---- the picture: every head, with the question beside it ------------------------------------------
    with layout.picture():
        grid_col, ask_col = st.columns([3, 2])  # the question holds no chart: projector mode keeps these side by side
    summary_table = pd.DataFrame.from_records(
        [
            {
                "layer": s.layer,
                "head": s.head,
                "mean weight on itself": round(s.self_weight, 4),
                "mean weight on the previous token": None
                if s.previous_weight != s.previous_weight
                else round(s.previous_weight, 4),
                "mean weight on token 0": None if s.first_weight != s.first_weight else round(s.first_weight, 4),
                "mean largest weight per row": round(s.max_weight, 4),
            }
            for s in summaries
        ]
    )
    prev_head = max(summaries, key=lambda s: -1 if s.previous_weight != s.previous_weight else s.previous_weight)
    self_head = max(summaries, key=lambda s: s.self_weight)
    projected = projector.on()
    with grid_col:
        chart(
            # Projected, sixteen maps of 27 x 27 cells were specks from the back of a room: the chosen layer's heads
            # only, larger; the layer selector above picks the layer.
            grid_figure(
                grids,
                labels,
                selected=(layer, head),
                height=PROJECTED_GRID_HEIGHT if projected else GRID_HEIGHT,
                one_layer=projected,
            ),
            summary_table,
            (f"Shown: layer {layer}'s {H} heads (another layer: 'Layer to enlarge' above). " if projected else "")
            + f"{L} layers × {H} heads over {T} tokens. Most previous-token weight: layer {prev_head.layer}, head "
            f"{prev_head.head} ({number(prev_head.previous_weight)} on average); most weight on itself: layer "
            f"{self_head.layer}, head {self_head.head} ({number(self_head.self_weight)}). The table gives these "
            "averages for every head.",
            key="insp_grid",
        )

    # ---- the prediction: where does the chosen row look? -------------------------------------------
    heaviest = heaviest_keys(check.model_weights, config)  # indices into keys: one, or a tie within float32 rounding
    answer = key_labels[heaviest[0]] if len(heaviest) == 1 else NO_SINGLE_KEY
    options = (*key_labels, NO_SINGLE_KEY) if len(keys) > 1 else tuple(key_labels)  # a tie or not: the same options
    others = [i for i in range(len(keys)) if i not in heaviest]
    runner_up = max(others, key=lambda i: check.model_weights[i]) if others else None
    top = heaviest[0]
    sees = (f"It sees keys 0 to {t} only." if t else "It sees key 0 alone.") if config.causal else "It sees every key."
    weighs = [f"{check.model_weights[i]:.4f}" for i in heaviest]
    question = Question(
        id="insp_predict",
        topic="reading attention maps",
        page="views/inspector/page.py",
        prompt=f"In layer {layer}, head {head}, which key does query {labels[t]} weigh most? {sees} "
        "Keys are named by position and piece.",
        answer=answer,
        options=options,
        why=(
            (
                f"The model gives key {key_labels[top]} weight {weighs[0]}, the largest"
                if len(heaviest) == 1
                else f"The model gives keys {', '.join(key_labels[i] for i in heaviest)} weights {', '.join(weighs)}: "
                f"each within {weight_allowance(config):.1e} of the largest, the float32 allowance (16 × eps × the "
                "length of the model's sums): too close to order the same way on every computer, so no single key is "
                "the largest"
            )
            + f" of the {len(keys)} keys query {labels[t]} sees. The largest weight goes to the largest score q·k/√D "
            f"({check.trace.scores[top]:.4f}): softmax keeps the order of the scores."
            + (
                f" Next comes key {key_labels[runner_up]} with {check.model_weights[runner_up]:.4f}."
                if runner_up is not None
                else ""
            )
        ),
    )
    hint = (
        f"Find layer {layer}, head {head} in the grid and read its row {t}, the query {labels[t]}: the "
        "brightest cell of that row is the key with the largest weight. Many heads look at the token itself (the "
        "diagonal), the previous token (just below it) or token 0 (the first column)."
    )
    with ask_col:
        graded = predict.ask(question, hint=hint)
        st.markdown(
            "Look for patterns: a bright diagonal is a head that attends to the token itself, a line just below "
            "it a head that reads the previous character, a bright first column a head that parks its weight on "
            "the first token. Hover a cell for its query, key and weight."
        )

    if graded is not None:  # the enlarged map and the row's bars give the answer away
        # ---- one head, enlarged: every text on it at least MAP_TEXT_PX ------------------------------------------
        st.header(f"Layer {layer}, head {head}, enlarged")
        weights = grids[layer][head]  # (T, T) with None in the future
        map_height = min(900, 160 + 26 * T)
        # A tick label per token while they fit along the axis (about height - 130 px of cells), else every n-th one.
        every = max(1, math.ceil(T * TICK_PITCH_PX / (map_height - 130)))
        ticks = dict(tickmode="array", tickvals=labels[::every], tickfont=dict(size=MAP_TEXT_PX))
        big = dict(size=MAP_TEXT_PX)
        fig = charts.heatmap(
            weights,
            title=f"weights of layer {layer}, head {head} (T × T = {T} × {T})"
            + (f"; one token in {every} labelled" if every > 1 else ""),
            x_labels=labels,
            y_labels=labels,
            x_title="key",
            y_title="query",
            zmin=0,
            zmax=1,
            value_format=".2f",
            height=map_height,
            x_axis=ticks | dict(title=dict(text="key", font=big)),
            trace=dict(
                hovertemplate="query %{y}<br>key %{x}<br>weight %{z:.4f}<extra></extra>",
                hoverongaps=False,
                textfont=big,
                colorbar=dict(tickfont=big),
            ),
            # the key axis's labels turn upright when they crowd: room for them under the title
            layout=dict(font=big, yaxis=ticks | dict(title=dict(text="query", font=big)), margin=dict(t=140)),
        )
        this = summaries[layer * H + head]
        chart(
            fig,
            matrix_table(weights, labels, labels, row_name="query", col_name="key", value_name="weight"),
            f"Layer {layer}, head {head}: on average {number(this.self_weight)} of a row's weight goes to the token "
            f"itself, {number(this.previous_weight)} to the previous token and {number(this.first_weight)} to token 0; "
            "the largest "
            f"weight of a row is {number(this.max_weight)} on average.",
            key="insp_head_map",
        )

        row_tab, compare_tab = layout.more(["One row, checked by hand", "Compare side by side"])

    # ---- one row, by hand ----------------------------------------------------------------------------------------
    if graded is not None:
        with row_tab:
            st.header("One query row, checked by hand")
            st.markdown(
                "Pick a query. Its bar chart is one row of the map above. Below it the row is computed again by hand "
                "from this head's q, k and v, one number at a time (plain Python, no tensors): the dot products "
                "q·k, the scaling by 1/√D, softmax, and the weighted sum of the value rows."
            )
            bars = charts.bars(
                key_labels,
                list(check.model_weights),
                title=f"weights of query {labels[t]} (layer {layer}, head {head})",
                y_title="weight",
                x_title="key",
                value_format=".3f",
                highlight=top,
                y_range=(0, 1.15),
                text=[]
                if len(keys) > BAR_VALUES_UP_TO
                else None,  # many values would overlap; the table has every number
            )
            chart(
                bars,
                pd.DataFrame({"key": key_labels, "weight": [round(w, 6) for w in check.model_weights]}),
                f"Query {named(t)} spreads its weight over {len(keys)} keys; the largest, "
                f"{check.model_weights[top]:.3f}, goes to key {named(keys[top])}. "
                + (
                    f"The {T - len(keys)} keys to its right (its future) get weight {check.future_weight:g} in total."
                    if len(keys) < T
                    else "It is the last token: no key lies to its right."
                    if t == T - 1
                    else "Without a causal mask it also weighs the keys to its right."
                ),
                key="insp_row_bars",
            )

            tr = check.trace
            hand = pd.DataFrame(
                {
                    "key": key_labels,
                    "q·k (sum of D products)": [d.total for d in tr.dots],
                    f"score = q·k × {tr.scale:.4f}": list(tr.scores),
                    "exp(score − max)": list(tr.softmax.exps),
                    "weight by hand": list(tr.softmax.weights),
                    "weight by core.attention (float64)": list(check.tensor_weights),
                    "weight from the model (float32)": list(check.model_weights),
                    "|hand − model float32|": list(check.differences),
                }
            )
            six_places = st.column_config.NumberColumn(format="%.6f")
            projector.dataframe(
                hand,
                hide_index=True,
                key="insp_hand",
                height=min(420, 38 + 35 * len(keys)),
                column_config={c: six_places for c in hand.columns[1:-1]}
                | {"|hand − model float32|": st.column_config.NumberColumn(format="%.2e")},
            )
            st.markdown(
                f"Scale 1/√D = 1/√{D} = {tr.scale:.6f}. Largest allowed score {tr.softmax.row_max:.6f}; "
                f"Σ exp(score − max) = {tr.softmax.normaliser:.6f}; "
                f"**sum of the hand weights = {check.weight_sum:.6f}**."
            )
            decided, shown = check.decided, check.model_float32
            check_text = (
                f"Largest difference between the hand computation and the model's attention code: "
                f"{decided.max_abs_diff:.2e} (allowance {decided.allowed:.1e}, float64). "
            )
            how = (
                f"Both run in float64 on this head's q, k, v, so they differ only by rounding: the allowance is "
                f"{decided.rule.removeprefix('<= ')}, derived from float64's epsilon and the length of the sums, "
                "the same on every computer. The model itself computes in float32: its weights differ from the hand "
                "computation by "
                f"{shown.max_abs_diff:.2e}, within float32's rounding allowance of {shown.allowed:.1e} "
                f"({'yes' if shown.passed else 'no'}); that figure is shown, it does not decide."
            )
            verdict(
                check.within_tolerance,
                check_text + "The model's attention for this row is the hand computation's.",
                check_text
                + "The hand computation and the model disagree: this head's q, k, v do not give its weights.",
            )
            st.caption(how)

            with st.expander(f"The dot products term by term: `q_t[d] × k_s[d]` for the {D} head dimensions"):
                terms = pd.DataFrame(
                    [list(d.terms) + [d.total] for d in tr.dots], columns=[f"d={d}" for d in range(D)] + ["sum = q·k"]
                )
                terms.insert(0, "key", key_labels)
                projector.dataframe(
                    terms,
                    hide_index=True,
                    key="insp_terms",
                    column_config={c: st.column_config.NumberColumn(format="%.4f") for c in terms.columns[1:]},
                )
            with st.expander("The output row: the weighted sum of the value rows"):
                st.markdown(
                    f"$\\mathrm{{out}}_t = \\sum_s w_{{t,s}}\\, v_s$, a vector of D = {D} numbers: what this head "
                    f"adds for query {named(t)} (before the block's output projection mixes the heads)."
                )
                out = pd.DataFrame(
                    [list(row) for row in tr.weighted_values] + [list(tr.out)], columns=[f"d={d}" for d in range(D)]
                )
                out.insert(0, "term", [f"weight × v of key {k}" for k in key_labels] + ["sum = out of this row"])
                projector.dataframe(
                    out,
                    hide_index=True,
                    key="insp_out",
                    column_config={c: st.column_config.NumberColumn(format="%.4f") for c in out.columns[1:]},
                )

    # ---- compare side by side (side A is the enlarged head: it gives the answer away as well) ---------------
    if graded is not None:
        with compare_tab:
            compare_view.section(
                bundle, text, enc, layer, head, grid, grids[layer][head], summaries[layer * H + head], mask
            )

    st.session_state["inspector_row"] = {
        "text": enc.kept_text,  # what the model read (the end of a text longer than the context)
        "layer": layer,
        "head": head,
        "t": t,
        "q": proj.q[: t + 1].tolist(),  # (t+1, D) queries 0..t after RoPE: row t is the one read
        "k": [list(row) for row in check.k_rows],  # (t+1, D) keys 0..t after RoPE
        "v": [list(row) for row in check.v_rows],  # (t+1, D) values 0..t
        "pieces": [enc.pieces[s] for s in keys],  # pieces of keys 0..t; the last one is the query's
    }
    link_if_registered("views/read_row.py", "Read this row by hand on the Read one row page")
    link_if_registered("views/embeddings.py", "Embeddings and projections: where these q, k and v come from")


inspect(require_bundle())
