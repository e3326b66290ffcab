"""Embeddings and projections: a text through the loaded model, up to the scores of one head."""

import pandas as pd
import streamlit as st

from core.classroom.checkpoint import Question
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
    chart(
        charts.heatmap(
            rows,
            title=title,
            x_labels=dims,
            y_labels=labels,
            x_title=f"{'model' if width == 'c' else 'head'} dimension {width}",
            y_title="token",
            signed=True,
            height=height(len(labels)),
            **heatmap,
        ),
        matrix_table(rows, labels, dims, row_name="token", col_name=f"dimension {width}", value_name=value_name),
        summary,
        key=key,
    )


st.title("Embeddings and projections")
st.caption(
    "A text through the loaded model, up to the scores of one head. Pick the text, layer and head here; "
    "the tabs follow the text step by step."
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
            text = params.text_input("Text to send through the model", "emb_text", DEFAULT_TEXT)
        with mid:
            layer = params.selectbox("Layer", "emb_layer", list(range(L)), 0)
        with right:
            head = params.selectbox("Head", "emb_head", list(range(H)), 0)

        enc = encode_for_model(bundle.tokenizer, text, config.context_length)
        explain_encoding(
            enc, "embed", "The model cannot tell them apart: every one of them reads the same embedding row."
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
                title=f"scores = Q Kᵀ / √{D} (T × T = {T} × {T}), layer {layer}, head {head}",
                x_labels=labels,
                y_labels=labels,
                x_title="key",
                y_title="query",
                signed=True,
                height=height(T),
            ),
            matrix_table(z, labels, labels, row_name="query", col_name="key", value_name="score"),
            f"Layer {layer}, head {head}: the last query, {named(enc, T - 1)}, scores its {T} allowed keys from "
            f"{min(v for v in last if v is not None):.3f} to {last[best]:.3f}, highest for key {named(enc, best)}; "
            f"{sum(not ok for row in mask for ok in row)} future cells are masked.",
            key="emb_scores",
        )

    tokens_tab, rows_tab, qkv_tab, scores_tab = layout.more(
        ["1. Token ids", "2. Embedding rows", "3. Queries, keys, values", "4. How the scores are made"]
    )
    with tokens_tab:
        st.markdown(
            "The tokenizer gives every character of the training text its own id (ids 0-3 are special tokens, "
            "`<unk>` is 3). Spaces and line ends are drawn as ␣ and ↵ so you can see them."
        )
        tokens = pd.DataFrame(
            {
                "position t": list(range(T)),
                "piece": list(enc.pieces),
                "token id": list(enc.ids),
                "unseen character": [t in enc.unknown_positions for t in range(T)],
            }
        )
        projector.dataframe(tokens, hide_index=True, key="emb_tokens", height=min(400, 38 + 35 * T))
        st.caption(
            f"{T} tokens; vocabulary of {config.vocab_size} ids; the model's context holds {config.context_length}."
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
        question = Question(
            id="emb_predict",
            topic="token embeddings",
            page="views/embeddings.py",
            prompt=f"The text has T = {T} tokens (tab 1, the token ids). How many different rows does its "
            f"T × C = {T} × {C} embedding matrix have? Rows equal in all {C} numbers count once.",
            answer=distinct_rows,
            tolerance=0,
            why=(
                f"Its {T} tokens have {distinct_ids} different ids, and its embedding matrix has {distinct_rows} "
                "different "
                "rows: each id picks one row of the table, whatever its position"
                + (
                    ", so a repeated character repeats its row ("
                    + "; ".join(f"'{p}' at positions {', '.join(map(str, ts))}" for p, ts in repeats.items())
                    + ")"
                    if repeats
                    else " (no character repeats in this text, so every row differs)"
                )
                + ". This model adds no position vector here: position enters later, when RoPE rotates queries and "
                "keys."
            ),
        )
        hint = (
            "Each token's id picks one row of the table. Look at the token ids in tab 1: does a character "
            "that appears twice get a row of its own each time, or the same row again? Does anything here depend on "
            "the position?"
        )
        if predict.ask(question, hint=hint) is not None:  # the rows themselves give the answer away
            st.markdown(
                f"The embedding table has one row of C = {C} numbers per id. The text becomes a T × C matrix: "
                "row t is the row of token t's id. This model adds no position vector here (it rotates queries and "
                "keys instead, with RoPE), so **the same character gives the same row wherever it stands**."
            )
            repeat_text = (
                "; identical rows for repeated characters, e.g. "
                + ", ".join(
                    f"'{escape_markdown(p)}' at positions {', '.join(map(str, ts))}"
                    for p, ts in list(repeats.items())[:3]
                )
                if repeats
                else ""
            )
            token_map(
                embeddings,
                labels,
                dims,
                title=f"token embedding rows (T × C = {T} × {C})",
                width="c",
                value_name="embedding",
                summary=f"{T} tokens × {C} dimensions; values from {min(min(r) for r in embeddings):.3f} to "
                f"{max(max(r) for r in embeddings):.3f}{repeat_text}.",
                key="emb_embeddings",
            )

    with qkv_tab:
        st.subheader(f"Queries, keys and values of layer {layer}, head {head}")
        st.markdown(
            f"Block {layer} first normalises its input (LayerNorm), then one linear layer makes q, k and v for all "
            f"{H} heads at once; head {head} owns {D} of the {C} columns of each (D = C / H = {D}). "
            "RoPE then rotates each query and key by an angle that grows with its position, so that q·k depends on "
            "how far apart two tokens are. Values are not rotated."
        )
        with st.expander(f"What block {layer}'s q, k, v layers read: LayerNorm of the block input"):
            normed = proj.normed.tolist()  # (T, C)
            st.markdown(
                "Block 0 reads the embeddings; every later block reads the residual stream, the embeddings "
                "plus what the earlier blocks added."
            )
            token_map(
                normed,
                labels,
                dims,
                title=f"LayerNorm(block {layer} input) (T × C = {T} × {C})",
                width="c",
                value_name="normed input",
                summary=f"The normalised input of block {layer}: {T} rows of {C} numbers, each row with mean 0 and "
                "variance 1 before the learned scale and shift.",
                key="emb_normed",
            )
        after_rope = params.toggle("Show Q and K after RoPE (what the scores use)", "emb_rope", True)
        q_rows = (proj.q if after_rope else proj.q_raw).tolist()  # (T, D)
        k_rows = (proj.k if after_rope else proj.k_raw).tolist()  # (T, D)
        v_rows = proj.v.tolist()  # (T, D)
        when = "after RoPE" if after_rope else "before RoPE"
        head_dims = [str(d) for d in range(D)]
        bound = max(signed_range(q_rows), signed_range(k_rows), signed_range(v_rows)) or 1.0
        columns = st.columns(3)
        for column, name, rows, note in zip(
            columns, ("Q", "K", "V"), (q_rows, k_rows, v_rows), (when, when, "never rotated")
        ):
            with column:
                token_map(
                    rows,
                    labels,
                    head_dims,
                    title=f"{name} (T × D = {T} × {D}), {note}",
                    width="d",
                    value_name=name.lower(),
                    summary=f"{name} of layer {layer}, head {head} {note}: {T} rows of {D} numbers, from "
                    f"{min(min(r) for r in rows):.3f} to {max(max(r) for r in rows):.3f}.",
                    key=f"emb_{name.lower()}",
                    zmin=-bound,
                    zmax=bound,
                    x_axis=dict(title=None, side="bottom"),  # narrow: keep the title clear
                )
        st.caption(f"The three maps share one colour scale (−{bound:.2f} to {bound:.2f}), so their magnitudes compare.")

    with scores_tab:
        st.markdown(
            f"Every query is compared with every key: $\\mathrm{{score}}[t, s] = q_t \\cdot k_s / \\sqrt{{{D}}}$. "
            "In the scores above, row t belongs to token t. "
            "The causal mask hides the keys to the right of each query (the future), drawn as grey 'masked' cells: "
            "softmax will give them weight 0."
        )
        st.markdown(
            "Softmax turns each row of allowed scores into weights that sum to one. The attention pages show "
            "how the size of these scores shapes that softmax, and what the mask does:"
        )
        linked = [
            link_if_registered("views/score_geometry.py", "Score geometry: shapes, and why divide by √D"),
            link_if_registered("views/masks.py", "Masks: why the future goes before softmax"),
        ]
        if not any(linked):
            st.caption("(The Score geometry and Masks pages are in the Attention section of the sidebar.)")
        link_if_registered(
            "views/inspector/page.py", "Attention inspector: every layer's and head's weights for this model"
        )


page_section(bundle)
