"""Embeddings and projections: a text through the loaded model, up to the scores of one head."""

import pandas as pd
import streamlit as st

from core import i18n
from core.classroom.checkpoint import Question
from core.i18n import N_, _
from core.model.bundle import Bundle
from core.model.introspect import projections
from core.model.prompt import encode_for_model
from ui import charts, fragment, layout, params, predict, projector
from ui.companion import chart, matrix_table
from ui.models import require_bundle
from ui.text import escape_markdown, explain_encoding, link_if_registered

DEFAULT_TEXT = "def add(a, b):"
ROW_PX = 30  # a token's row in a heatmap: cells about half as tall as they are wide, not flat strips
MIN_ROW_PX = 14  # a long text's rows shrink to fit FIT_PX, never below this (a label still reads)
FIT_PX = 640  # a map up to this tall sits on the first screen under the controls (1440x900, and projected)
PROMPT = N_(
    "The text has T = {T} tokens (tab 1, the token ids). How many different rows does its T × C = {T} × {C} "
    "embedding matrix have? Rows equal in all {C} numbers count once."
)  # the prediction's question, with its numbers as placeholders


def height(rows: int) -> int:
    """A heatmap of `rows` tokens: ROW_PX a row while the map fits in FIT_PX, shrinking to MIN_ROW_PX for a long
    text (which then runs past the screen rather than into flat strips)."""
    row_px = max(MIN_ROW_PX, min(ROW_PX, (FIT_PX - charts.HEATMAP_MARGIN_PX) // max(rows, 1)))
    return charts.HEATMAP_MARGIN_PX + rows * row_px


def named(enc, t: int) -> str:
    """Token t of `enc` for a sentence: its position and its piece in quotes, made inert for markdown."""
    return f"{t} ('{escape_markdown(enc.pieces[t])}')"


def signed_range(z) -> float:
    values = [abs(v) for row in z for v in row if v is not None]
    return max(values, default=0.0)


def token_map(
    rows: list[list[float]],
    labels: list[str],
    dims: list[str],
    *,
    title: str,
    width: str,
    value_name: str,
    summary: str,
    key: str,
    **heatmap,
) -> None:
    """One row per token, one column per dimension of `width` ("c" for the model's, "d" for a head's): the signed
    heatmap, its data table (token, dimension, value) and its one-line summary, as every such map on this page."""
    x_title = _("model dimension {width}") if width == "c" else _("head dimension {width}")
    chart(
        charts.heatmap(
            rows,
            title=title,
            x_labels=dims,
            y_labels=labels,
            x_title=x_title.format(width=width),
            y_title=_("token"),
            signed=True,
            height=height(len(labels)),
            **heatmap,
        ),
        matrix_table(
            rows,
            labels,
            dims,
            row_name=_("token"),
            col_name=_("dimension {width}").format(width=width),
            value_name=value_name,
        ),
        summary,
        key=key,
    )


st.title(_("Embeddings and projections"))
st.caption(
    _(
        "A text through the loaded model, up to the scores of one head. Pick the text, layer and head here; the tabs "
        "follow the text step by step."
    )
)

bundle = require_bundle()  # a fallback's banner, or the page stops: outside the section, drawn by whole runs


@fragment.section
def page_section(bundle: Bundle) -> None:
    """The text, layer and head drive the picture and the tabs alike: a change reruns this page body only, not
    app.py's sidebar or the bundle's lookup."""
    config = bundle.config
    L, H, C, D = config.n_layer, config.n_head, config.d_model, config.head_dim
    with layout.picture():
        # The controls in one row above the scores (projector mode stacks columns that hold a chart).
        left, mid, right = st.columns([3, 1, 1])
        with left:
            text = params.text_input(_("Text to send through the model"), "emb_text", DEFAULT_TEXT)
        with mid:
            layer = params.selectbox(_("Layer"), "emb_layer", list(range(L)), 0)
        with right:
            head = params.selectbox(_("Head"), "emb_head", list(range(H)), 0)

        enc = encode_for_model(bundle.tokenizer, text, config.context_length)
        explain_encoding(
            enc,
            _("embed"),  # "...so there is nothing to embed"
            _("The model cannot tell them apart: every one of them reads the same embedding row."),
        )

        proj = projections(bundle.model, enc.ids, layer, head)
        T = enc.T
        labels = enc.labels()  # 'position piece', one per token

        scores = proj.scores.tolist()  # (T, T)
        mask = proj.mask.tolist()  # (T, T)
        z = [[scores[t][s] if mask[t][s] else None for s in range(T)] for t in range(T)]
        last = z[T - 1]
        best = max((s for s in range(T) if mask[T - 1][s]), key=lambda s: scores[T - 1][s])
        chart(
            charts.heatmap(
                z,
                title=_("scores = Q Kᵀ / √{D} (T × T = {T} × {T}), layer {layer}, head {head}").format(
                    D=D, T=T, layer=layer, head=head
                ),
                x_labels=labels,
                y_labels=labels,
                x_title=_("key"),
                y_title=_("query"),
                signed=True,
                height=height(T),
            ),
            matrix_table(z, labels, labels, row_name=_("query"), col_name=_("key"), value_name=_("score")),
            _(
                "Layer {layer}, head {head}: the last query, {query}, scores its {T} allowed keys from {low} to "
                "{high}, highest for key {key}; {masked} future cells are masked."
            ).format(
                layer=layer,
                head=head,
                query=named(enc, T - 1),
                T=T,
                low=i18n.number(min(v for v in last if v is not None), 3),
                high=i18n.number(float(last[best] or 0.0), 3),  # the best key is one the query may see: never None
                key=named(enc, best),
                masked=sum(not ok for row in mask for ok in row),
            ),
            key="emb_scores",
        )

    tokens_tab, rows_tab, qkv_tab, scores_tab = layout.more(
        [_("1. Token ids"), _("2. Embedding rows"), _("3. Queries, keys, values"), _("4. How the scores are made")]
    )
    with tokens_tab:
        st.markdown(
            _(
                "The tokenizer gives every character of the training text its own id (ids 0-3 are special tokens, "
                "`<unk>` is 3). Spaces and line ends are drawn as ␣ and ↵ so you can see them."
            )
        )
        tokens = pd.DataFrame(
            {
                _("position t"): list(range(T)),
                _("piece"): list(enc.pieces),
                _("token id"): list(enc.ids),
                _("unseen character"): [t in enc.unknown_positions for t in range(T)],
            }
        )
        projector.dataframe(tokens, hide_index=True, key="emb_tokens", height=min(400, 38 + 35 * T))
        st.caption(
            _("{T} tokens; vocabulary of {vocabulary} ids; the model's context holds {context}.").format(
                T=T, vocabulary=config.vocab_size, context=config.context_length
            )
        )

    with rows_tab:
        embeddings = proj.embeddings.tolist()  # (T, C)
        dims = [str(c) for c in range(C)]
        repeats = {p: [t for t, q in enumerate(enc.pieces) if q == p] for p in enc.pieces}
        repeats = {p: ts for p, ts in repeats.items() if len(ts) > 1}
        distinct_rows = len(
            {tuple(row) for row in embeddings}
        )  # rows equal in all C numbers count once (exact: a lookup)
        distinct_ids = len(set(enc.ids))
        why = (
            _(
                "Its {T} tokens have {ids} different ids, and its embedding matrix has {rows} different rows: each id "
                "picks one row of the table, whatever its position, so a repeated character repeats its row "
                "({repeats}). This model adds no position vector here: position enters later, when RoPE rotates "
                "queries and keys."
            )
            if repeats
            else _(
                "Its {T} tokens have {ids} different ids, and its embedding matrix has {rows} different rows: each id "
                "picks one row of the table, whatever its position (no character repeats in this text, so every row "
                "differs). This model adds no position vector here: position enters later, when RoPE rotates queries "
                "and keys."
            )
        )
        repeated = "; ".join(
            _("'{piece}' at positions {positions}").format(piece=p, positions=", ".join(map(str, ts)))
            for p, ts in repeats.items()
        )
        # Kept in English (the prompt's msgid and its numbers): the question and its fingerprint are the same in
        # every language, and ui/predict shows it translated. `why` is shown as it is.
        values = {"T": str(T), "C": str(C)}
        question = Question(
            id="emb_predict",
            topic=N_("token embeddings"),
            page="views/embeddings.py",
            prompt=PROMPT.format(**values),
            answer=distinct_rows,
            tolerance=0,
            why=why.format(T=T, ids=distinct_ids, rows=distinct_rows, repeats=repeated),
            template=PROMPT,
            values=tuple(values.items()),
        )
        hint = _(
            "Each token's id picks one row of the table. Look at the token ids in tab 1: does a character that appears "
            "twice get a row of its own each time, or the same row again? Does anything here depend on the position?"
        )
        if predict.ask(question, hint=hint) is not None:  # the rows themselves give the answer away
            st.markdown(
                _(
                    "The embedding table has one row of C = {C} numbers per id. The text becomes a T × C matrix: row t "
                    "is the row of token t's id. This model adds no position vector here (it rotates queries and keys "
                    "instead, with RoPE), so **the same character gives the same row wherever it stands**."
                ).format(C=C)
            )
            summary = (
                _(
                    "{T} tokens × {C} dimensions; values from {low} to {high}; identical rows for repeated "
                    "characters, e.g. {examples}."
                )
                if repeats
                else _("{T} tokens × {C} dimensions; values from {low} to {high}.")
            )
            token_map(
                embeddings,
                labels,
                dims,
                title=_("token embedding rows (T × C = {T} × {C})").format(T=T, C=C),
                width="c",
                value_name=_("embedding"),
                summary=summary.format(
                    T=T,
                    C=C,
                    low=i18n.number(min(min(r) for r in embeddings), 3),
                    high=i18n.number(max(max(r) for r in embeddings), 3),
                    examples=", ".join(
                        _("'{piece}' at positions {positions}").format(
                            piece=escape_markdown(p), positions=", ".join(map(str, ts))
                        )
                        for p, ts in list(repeats.items())[:3]
                    ),
                ),
                key="emb_embeddings",
            )

    with qkv_tab:
        st.subheader(_("Queries, keys and values of layer {layer}, head {head}").format(layer=layer, head=head))
        st.markdown(
            _(
                "Block {layer} first normalises its input (LayerNorm), then one linear layer makes q, k and v for all "
                "{H} heads at once; head {head} owns {D} of the {C} columns of each (D = C / H = {D}). RoPE then "
                "rotates each query and key by an angle that grows with its position, so that q·k depends on how far "
                "apart two tokens are. Values are not rotated."
            ).format(layer=layer, H=H, head=head, D=D, C=C)
        )
        with st.expander(
            _("What block {layer}'s q, k, v layers read: LayerNorm of the block input").format(layer=layer)
        ):
            normed = proj.normed.tolist()  # (T, C)
            st.markdown(
                _(
                    "Block 0 reads the embeddings; every later block reads the residual stream, the embeddings plus "
                    "what the earlier blocks added."
                )
            )
            token_map(
                normed,
                labels,
                dims,
                title=_("LayerNorm(block {layer} input) (T × C = {T} × {C})").format(layer=layer, T=T, C=C),
                width="c",
                value_name=_("normed input"),
                summary=_(
                    "The normalised input of block {layer}: {T} rows of {C} numbers, each row with mean 0 and "
                    "variance 1 before the learned scale and shift."
                ).format(layer=layer, T=T, C=C),
                key="emb_normed",
            )
        after_rope = params.toggle(_("Show Q and K after RoPE (what the scores use)"), "emb_rope", True)
        q_rows = (proj.q if after_rope else proj.q_raw).tolist()  # (T, D)
        k_rows = (proj.k if after_rope else proj.k_raw).tolist()  # (T, D)
        v_rows = proj.v.tolist()  # (T, D)
        when = _("after RoPE") if after_rope else _("before RoPE")
        head_dims = [str(d) for d in range(D)]
        bound = max(signed_range(q_rows), signed_range(k_rows), signed_range(v_rows)) or 1.0
        columns = st.columns(3)
        for column, name, rows, note in zip(
            columns, ("Q", "K", "V"), (q_rows, k_rows, v_rows), (when, when, _("never rotated"))
        ):
            with column:
                token_map(
                    rows,
                    labels,
                    head_dims,
                    title=_("{name} (T × D = {T} × {D}), {note}").format(name=name, T=T, D=D, note=note),
                    width="d",
                    value_name=name.lower(),
                    summary=_(
                        "{name} of layer {layer}, head {head} {note}: {T} rows of {D} numbers, from {low} to {high}."
                    ).format(
                        name=name,
                        layer=layer,
                        head=head,
                        note=note,
                        T=T,
                        D=D,
                        low=i18n.number(min(min(r) for r in rows), 3),
                        high=i18n.number(max(max(r) for r in rows), 3),
                    ),
                    key=f"emb_{name.lower()}",
                    zmin=-bound,
                    zmax=bound,
                    x_axis=dict(title=None, side="bottom"),  # narrow: keep the title clear
                )
        st.caption(
            _("The three maps share one colour scale (−{bound} to {bound}), so their magnitudes compare.").format(
                bound=i18n.number(bound, 2)
            )
        )

    with scores_tab:
        st.markdown(
            _(
                "Every query is compared with every key: $\\mathrm{{score}}[t, s] = q_t \\cdot k_s / \\sqrt{{{D}}}$. "
                "In the scores above, row t belongs to token t. The causal mask hides the keys to the right of each "
                "query (the future), drawn as grey 'masked' cells: softmax will give them weight 0."
            ).format(D=D)
        )
        st.markdown(
            _(
                "Softmax turns each row of allowed scores into weights that sum to one. The attention pages show how "
                "the size of these scores shapes that softmax, and what the mask does:"
            )
        )
        linked = [
            link_if_registered("views/score_geometry.py", _("Score geometry: shapes, and why divide by √D")),
            link_if_registered("views/masks.py", _("Masks: why the future goes before softmax")),
        ]
        if not any(linked):
            st.caption(_("(The Score geometry and Masks pages are in the Attention section of the sidebar.)"))
        link_if_registered(
            "views/inspector/page.py", _("Attention inspector: every layer's and head's weights for this model")
        )


page_section(bundle)
