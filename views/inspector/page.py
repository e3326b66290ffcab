"""Attention inspector: every layer's and head's weights for a text, one head enlarged, one row by hand.

Picture first: the selectors, then the grid of every head with the page's question beside it; once answered, the
chosen head enlarged (every text on it at least 16 px). The row by hand and the comparison are tabs.
"""

import math

import pandas as pd
import streamlit as st

from core import i18n
from core.classroom.checkpoint import Question
from core.i18n import N_, _
from core.model.introspect import check_row, head_summaries, heaviest_keys, projections, weight_allowance
from core.model.prompt import encode_for_model
from ui import cached, charts, fragment, layout, params, predict, projector
from ui.charts import masked
from ui.companion import chart, matrix_table
from ui.models import require_bundle
from ui.text import escape_markdown, explain_encoding, link_if_registered, number, verdict
from views.inspector import compare_view
from views.inspector.grid_figure import grid_figure

PROMPT_CAUSAL = N_(
    "In layer {layer}, head {head}, which key does query {query} weigh most? It sees keys 0 to {t} only. Keys are "
    "named by position and piece."
)  # the prediction's question, with its values as placeholders (and the two below)
PROMPT_FIRST = N_(
    "In layer {layer}, head {head}, which key does query {query} weigh most? It sees key 0 alone. Keys are named by "
    "position and piece."
)
PROMPT_ALL = N_(
    "In layer {layer}, head {head}, which key does query {query} weigh most? It sees every key. Keys are named by "
    "position and piece."
)

DEFAULT_TEXT = "def add(a, b): return a + b"
BAR_VALUES_UP_TO = 32  # keys; a longer row's bars carry no printed values
NO_SINGLE_KEY = N_("no single key: the largest weights are too close to tell apart")
GRID_HEIGHT, PROJECTED_GRID_HEIGHT = 520, 420  # px at most, before projector.restyle: the grid fits the first screen
MAP_TEXT_PX = 16  # every text on the enlarged map: ticks, cell values, colour bar, titles
TICK_PITCH_PX = 22  # a category tick label needs this much room along its axis: tighter, label every n-th token
OUT_FORMULA = r"$\mathrm{out}_t = \sum_s w_{t,s}\, v_s$"  # LaTeX: outside the sentence, whose braces .format reads


st.title(_("Attention inspector"))
st.caption(
    _(
        "Where every attention head looks. Each small map is one head of one layer: row t is the query of token t, "
        "column s a key, and the colour the weight softmax gave it. Rows sum to one and nothing lies right of the "
        "diagonal: the causal mask hides the future."
    )
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
        text = params.text_input(_("Text to send through the model"), "insp_text", DEFAULT_TEXT)
    enc = encode_for_model(bundle.tokenizer, text, config.context_length)
    explain_encoding(enc, _("attend to"))

    if not config.causal:
        st.warning(
            _(
                "This model was trained without the causal mask: every query also sees the keys to its right, "
                "so its maps are full squares. That is the leakage the Training page warns about."
            )
        )
    T = enc.T
    labels = enc.labels()  # 'position piece', unique per token

    def named(t: int) -> str:
        """Token t for a sentence: its position and its piece in quotes, made inert for markdown."""
        return f"{t} ('{escape_markdown(enc.pieces[t])}')"

    with cols[1]:
        layer = params.selectbox(_("Layer to enlarge"), "insp_layer", list(range(L)), 0)
    with cols[2]:
        head = params.selectbox(_("Head to enlarge"), "insp_head", list(range(H)), 0)
    with cols[3]:
        # The options are the labels themselves ('position piece'): a new text brings new options, so a row chosen
        # for an old text is never shown under the old text's label; it falls back to the last token.
        t = labels.index(params.selectbox(_("Query row t (position and piece)"), "insp_row", labels, labels[-1]))

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
                _("layer"): s.layer,
                _("head"): s.head,
                _("mean weight on itself"): round(s.self_weight, 4),
                _("mean weight on the previous token"): None
                if s.previous_weight != s.previous_weight
                else round(s.previous_weight, 4),
                _("mean weight on token 0"): None if s.first_weight != s.first_weight else round(s.first_weight, 4),
                _("mean largest weight per row"): round(s.max_weight, 4),
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
            (
                _("Shown: layer {layer}'s {heads} heads (another layer: 'Layer to enlarge' above).").format(
                    layer=layer, heads=H
                )
                + " "
                if projected
                else ""
            )
            + _(
                "{layers} layers × {heads} heads over {tokens} tokens. Most previous-token weight: layer "
                "{previous_layer}, head {previous_head} ({previous} on average); most weight on itself: layer "
                "{self_layer}, head {self_head} ({itself}). The table gives these averages for every head."
            ).format(
                layers=L,
                heads=H,
                tokens=T,
                previous_layer=prev_head.layer,
                previous_head=prev_head.head,
                previous=number(prev_head.previous_weight),
                self_layer=self_head.layer,
                self_head=self_head.head,
                itself=number(self_head.self_weight),
            ),
            key="insp_grid",
        )

    # ---- the prediction: where does the chosen row look? -------------------------------------------
    heaviest = heaviest_keys(check.model_weights, config)  # indices into keys: one, or a tie within float32 rounding
    # English option and answer (N_): ui/predict shows them translated, the fingerprint is every language's
    answer = key_labels[heaviest[0]] if len(heaviest) == 1 else NO_SINGLE_KEY
    options = (*key_labels, NO_SINGLE_KEY) if len(keys) > 1 else tuple(key_labels)  # a tie or not: the same options
    others = [i for i in range(len(keys)) if i not in heaviest]
    runner_up = max(others, key=lambda i: check.model_weights[i]) if others else None
    top = heaviest[0]
    # Kept in English (the prompt's msgid and its values): the question and its fingerprint are the same in every
    # language, and ui/predict shows it translated (Question.shown_prompt).
    template = (PROMPT_CAUSAL if t else PROMPT_FIRST) if config.causal else PROMPT_ALL
    values = {"layer": str(layer), "head": str(head), "query": labels[t], "t": str(t)}
    weighs = [i18n.number(check.model_weights[i], 4) for i in heaviest]
    largest = dict(n=len(keys), query=labels[t], score=i18n.number(check.trace.scores[top], 4))
    why = (
        _(
            "The model gives key {key} weight {weight}, the largest of the {n} keys query {query} sees. The largest "
            "weight goes to the largest score q·k/√D ({score}): softmax keeps the order of the scores."
        ).format(key=key_labels[top], weight=weighs[0], **largest)
        if len(heaviest) == 1
        else _(
            "The model gives keys {keys} weights {weights}: each within {allowance} of the largest, the float32 "
            "allowance (16 × eps × the length of the model's sums): too close to order the same way on every "
            "computer, so no single key is the largest of the {n} keys query {query} sees. The largest weight goes "
            "to the largest score q·k/√D ({score}): softmax keeps the order of the scores."
        ).format(
            keys=", ".join(key_labels[i] for i in heaviest),
            weights=", ".join(weighs),
            allowance=i18n.formatted(weight_allowance(config), ".1e"),
            **largest,
        )
    )
    if runner_up is not None:
        why += " " + _("Next comes key {key} with {weight}.").format(
            key=key_labels[runner_up], weight=i18n.number(check.model_weights[runner_up], 4)
        )
    question = Question(
        id="insp_predict",
        topic=N_("reading attention maps"),
        page="views/inspector/page.py",
        prompt=template.format(**values),
        template=template,
        values=tuple(values.items()),
        answer=answer,
        options=options,
        why=why,
    )
    hint = _(
        "Find layer {layer}, head {head} in the grid and read its row {t}, the query {query}: the brightest cell of "
        "that row is the key with the largest weight. Many heads look at the token itself (the diagonal), the "
        "previous token (just below it) or token 0 (the first column)."
    ).format(layer=layer, head=head, t=t, query=labels[t])
    with ask_col:
        graded = predict.ask(question, hint=hint)
        st.markdown(
            _(
                "Look for patterns: a bright diagonal is a head that attends to the token itself, a line just below "
                "it a head that reads the previous character, a bright first column a head that parks its weight on "
                "the first token. Hover a cell for its query, key and weight."
            )
        )

    if graded is not None:  # the enlarged map and the row's bars give the answer away
        # ---- one head, enlarged: every text on it at least MAP_TEXT_PX ------------------------------------------
        st.header(_("Layer {layer}, head {head}, enlarged").format(layer=layer, head=head))
        weights = grids[layer][head]  # (T, T) with None in the future
        map_height = min(900, 160 + 26 * T)
        # A tick label per token while they fit along the axis (about height - 130 px of cells), else every n-th one.
        every = max(1, math.ceil(T * TICK_PITCH_PX / (map_height - 130)))
        ticks = dict(tickmode="array", tickvals=labels[::every], tickfont=dict(size=MAP_TEXT_PX))
        big = dict(size=MAP_TEXT_PX)
        fig = charts.heatmap(
            weights,
            title=_("weights of layer {layer}, head {head} (T × T = {T} × {T})").format(layer=layer, head=head, T=T)
            + (_("; one token in {every} labelled").format(every=every) if every > 1 else ""),
            x_labels=labels,
            y_labels=labels,
            x_title=_("key"),
            y_title=_("query"),
            zmin=0,
            zmax=1,
            value_format=".2f",
            height=map_height,
            x_axis=ticks | dict(title=dict(text=_("key"), font=big)),
            trace=dict(
                hovertemplate=_("query %{y}<br>key %{x}<br>weight %{z:.4f}<extra></extra>"),
                hoverongaps=False,
                textfont=big,
                colorbar=dict(tickfont=big),
            ),
            # the key axis's labels turn upright when they crowd: room for them under the title
            layout=dict(font=big, yaxis=ticks | dict(title=dict(text=_("query"), font=big)), margin=dict(t=140)),
        )
        this = summaries[layer * H + head]
        chart(
            fig,
            matrix_table(weights, labels, labels, row_name=_("query"), col_name=_("key"), value_name=_("weight")),
            _(
                "Layer {layer}, head {head}: on average {itself} of a row's weight goes to the token itself, "
                "{previous} to the previous token and {first} to token 0; the largest weight of a row is {largest} on "
                "average."
            ).format(
                layer=layer,
                head=head,
                itself=number(this.self_weight),
                previous=number(this.previous_weight),
                first=number(this.first_weight),
                largest=number(this.max_weight),
            ),
            key="insp_head_map",
        )

        row_tab, compare_tab = layout.more([_("One row, checked by hand"), _("Compare side by side")])

    # ---- one row, by hand ----------------------------------------------------------------------------------------
    if graded is not None:
        with row_tab:
            st.header(_("One query row, checked by hand"))
            st.markdown(
                _(
                    "Pick a query. Its bar chart is one row of the map above. Below it the row is computed again by "
                    "hand from this head's q, k and v, one number at a time (plain Python, no tensors): the dot "
                    "products q·k, the scaling by 1/√D, softmax, and the weighted sum of the value rows."
                )
            )
            bars = charts.bars(
                key_labels,
                list(check.model_weights),
                title=_("weights of query {query} (layer {layer}, head {head})").format(
                    query=labels[t], layer=layer, head=head
                ),
                y_title=_("weight"),
                x_title=_("key"),
                value_format=".3f",
                highlight=top,
                y_range=(0, 1.15),
                text=[]
                if len(keys) > BAR_VALUES_UP_TO
                else None,  # many values would overlap; the table has every number
            )
            chart(
                bars,
                pd.DataFrame({_("key"): key_labels, _("weight"): [round(w, 6) for w in check.model_weights]}),
                (
                    _(
                        "Query {query} spreads its weight over {n} keys; the largest, {weight}, goes to key {key}. "
                        "The {future} keys to its right (its future) get weight {future_weight} in total."
                    )
                    if len(keys) < T
                    else _(
                        "Query {query} spreads its weight over {n} keys; the largest, {weight}, goes to key {key}. "
                        "It is the last token: no key lies to its right."
                    )
                    if t == T - 1
                    else _(
                        "Query {query} spreads its weight over {n} keys; the largest, {weight}, goes to key {key}. "
                        "Without a causal mask it also weighs the keys to its right."
                    )
                ).format(
                    query=named(t),
                    n=len(keys),
                    weight=i18n.number(check.model_weights[top], 3),
                    key=named(keys[top]),
                    future=T - len(keys),
                    future_weight=i18n.formatted(check.future_weight),
                ),
                key="insp_row_bars",
            )

            tr = check.trace
            difference = _("|hand − model float32|")
            hand = pd.DataFrame(
                {
                    _("key"): key_labels,
                    _("q·k (sum of D products)"): [d.total for d in tr.dots],
                    _("score = q·k × {scale}").format(scale=i18n.number(tr.scale, 4)): list(tr.scores),
                    _("exp(score − max)"): list(tr.softmax.exps),
                    _("weight by hand"): list(tr.softmax.weights),
                    _("weight by core.attention (float64)"): list(check.tensor_weights),
                    _("weight from the model (float32)"): list(check.model_weights),
                    difference: list(check.differences),
                }
            )
            six_places = st.column_config.NumberColumn(format="%.6f")
            projector.dataframe(
                hand,
                hide_index=True,
                key="insp_hand",
                height=min(420, 38 + 35 * len(keys)),
                column_config={c: six_places for c in hand.columns[1:-1]}
                | {difference: st.column_config.NumberColumn(format="%.2e")},
            )
            st.markdown(
                _(
                    "Scale 1/√D = 1/√{D} = {scale}. Largest allowed score {row_max}; Σ exp(score − max) = {total}; "
                    "**sum of the hand weights = {weights}**."
                ).format(
                    D=D,
                    scale=i18n.number(tr.scale, 6),
                    row_max=i18n.number(tr.softmax.row_max, 6),
                    total=i18n.number(tr.softmax.normaliser, 6),
                    weights=i18n.number(check.weight_sum, 6),
                )
            )
            decided, shown = check.decided, check.model_float32
            found = dict(
                difference=i18n.formatted(decided.max_abs_diff, ".2e"), allowance=i18n.formatted(decided.allowed, ".1e")
            )
            how = _(
                "Both run in float64 on this head's q, k, v, so they differ only by rounding: the allowance is "
                "{rule}, derived from float64's epsilon and the length of the sums, the same on every computer. The "
                "model itself computes in float32: its weights differ from the hand computation by {difference}, "
                "within float32's rounding allowance of {allowance} ({within}); that figure is shown, it does not "
                "decide."
            ).format(
                rule=decided.rule.removeprefix("<= "),
                difference=i18n.formatted(shown.max_abs_diff, ".2e"),
                allowance=i18n.formatted(shown.allowed, ".1e"),
                within=_("yes") if shown.passed else _("no"),
            )
            verdict(
                check.within_tolerance,
                _(
                    "Largest difference between the hand computation and the model's attention code: {difference} "
                    "(allowance {allowance}, float64). The model's attention for this row is the hand computation's."
                ).format(**found),
                _(
                    "Largest difference between the hand computation and the model's attention code: {difference} "
                    "(allowance {allowance}, float64). The hand computation and the model disagree: this head's q, k, "
                    "v do not give its weights."
                ).format(**found),
            )
            st.caption(how)

            with st.expander(
                _("The dot products term by term: `q_t[d] × k_s[d]` for the {D} head dimensions").format(D=D)
            ):
                terms = pd.DataFrame(
                    [list(d.terms) + [d.total] for d in tr.dots],
                    columns=[f"d={d}" for d in range(D)] + [_("sum = q·k")],
                )
                terms.insert(0, _("key"), key_labels)
                projector.dataframe(
                    terms,
                    hide_index=True,
                    key="insp_terms",
                    column_config={c: st.column_config.NumberColumn(format="%.4f") for c in terms.columns[1:]},
                )
            with st.expander(_("The output row: the weighted sum of the value rows")):
                st.markdown(
                    _(
                        "{formula}, a vector of D = {D} numbers: what this head adds for query {query} (before the "
                        "block's output projection mixes the heads)."
                    ).format(formula=OUT_FORMULA, D=D, query=named(t))
                )
                out = pd.DataFrame(
                    [list(row) for row in tr.weighted_values] + [list(tr.out)], columns=[f"d={d}" for d in range(D)]
                )
                out.insert(
                    0,
                    _("term"),
                    [_("weight × v of key {key}").format(key=k) for k in key_labels] + [_("sum = out of this row")],
                )
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
    link_if_registered("views/read_row.py", _("Read this row by hand on the Read one row page"))
    link_if_registered("views/embeddings.py", _("Embeddings and projections: where these q, k and v come from"))


inspect(require_bundle())
