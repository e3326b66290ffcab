"""Tokenizer and architecture: what the loaded model reads (its vocabulary, a text as ids and back) and what
it is made of (every part with the shape on each arrow and its parameters)."""

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from core.model.architecture import architecture
from core.model.prompt import encode_for_model
from core.model.tokenizer import SPECIAL_TOKENS
from ui import charts, layout, params, projector
from ui.companion import chart
from ui.models import require_bundle
from ui.text import code_points, explain_encoding

DEFAULT_TEXT = (
    "def f(x):\n    return x  # é"  # the é is the lesson's unseen character (not in the shipped training text)
)
UNK_NOTE = "Decoding gives them back as \ufffd: the model cannot tell them apart."
CELLS_PER_LINE = 20  # a row of the picture holds this many tokens; a line break in the text also starts a new row
MAX_LINES = 8  # more rows than this (a text of many short lines): rows of CELLS_PER_LINE, line breaks ignored
ROW_PX = 26  # the height of a character row and of an id row below it
MARGIN_PX = 60  # the picture's title above, a little room below
DRAWN = {" ": "␣", "\n": "↵"}  # characters drawn as a visible sign


def token_lines(newline: list[bool]) -> list[range]:
    """The positions on each row of the picture: a row ends after a line break or when it is full, so the cells
    read like the text; a text of many short lines is cut into full rows instead (at most MAX_LINES rows)."""
    lines, start = [], 0
    for t, ends in enumerate(newline):
        if ends or t + 1 - start == CELLS_PER_LINE:
            lines.append(range(start, t + 1))
            start = t + 1
    if start < len(newline):
        lines.append(range(start, len(newline)))
    if len(lines) > MAX_LINES:
        lines = [range(s, min(s + CELLS_PER_LINE, len(newline))) for s in range(0, len(newline), CELLS_PER_LINE)]
    return lines


def token_cells(chars: list[str], ids: list[int], unknown: set[int], title: str) -> go.Figure:
    """The text as a grid of labelled cells: each character above its cell, the id written in the cell. An id is a
    name, not an amount, so every cell has the same size and colour; an unseen character's cell is orange and
    outlined. Row 2k holds line k's characters, row 2k + 1 its ids."""
    lines = token_lines([c == "\n" for c in chars])
    z = np.full((2 * len(lines), CELLS_PER_LINE), np.nan)  # (2 x lines, CELLS_PER_LINE): NaN draws nothing
    text = [[""] * CELLS_PER_LINE for _ in range(2 * len(lines))]  # what a cell shows: its id
    hover = [[""] * CELLS_PER_LINE for _ in range(2 * len(lines))]
    chars_x, chars_y, chars_text, outlines = [], [], [], []
    for k, line in enumerate(lines):
        for col, t in enumerate(line):
            z[2 * k + 1, col] = 1.0 if t in unknown else 0.0
            text[2 * k + 1][col] = str(ids[t])
            hover[2 * k + 1][col] = f"position {t}: {charts.plain(DRAWN.get(chars[t], chars[t]))}, id {ids[t]}"
            chars_x.append(col)
            chars_y.append(2 * k)
            chars_text.append(charts.plain(DRAWN.get(chars[t], chars[t])))
            if t in unknown:
                outlines.append(
                    dict(type="rect", x0=col - 0.5, x1=col + 0.5, y0=2 * k + 0.5, y1=2 * k + 1.5, line=dict(width=3))
                )
    cells = dict(
        type="heatmap",
        z=z,
        text=text,
        customdata=hover,
        texttemplate="%{text}",
        textfont=dict(color="#000000"),
        hovertemplate="%{customdata}<extra></extra>",
        hoverongaps=False,
        colorscale=[[0.0, charts.OKABE_ITO[4]], [1.0, charts.OKABE_ITO[1]]],
        zmin=0,
        zmax=1,
        showscale=False,
        xgap=2,
        ygap=2,
    )
    characters = dict(
        type="scatter", x=chars_x, y=chars_y, text=chars_text, mode="text", hoverinfo="skip", showlegend=False
    )
    layout = dict(
        title=dict(text=title, x=0.0, xanchor="left", y=1.0, yanchor="top", yref="container", pad=dict(t=10)),
        height=MARGIN_PX + 2 * len(lines) * ROW_PX,
        margin=dict(l=10, r=10, t=MARGIN_PX - 10, b=10),
        font=dict(size=14),
        plot_bgcolor="#ffffff",
        xaxis=dict(visible=False, range=[-0.5, CELLS_PER_LINE - 0.5]),
        yaxis=dict(
            autorange="reversed",
            tickvals=[2 * k + 1 for k in range(len(lines))],
            ticktext=[f"t = {line.start}" for line in lines],
            showgrid=False,
            zeroline=False,
        ),
        shapes=outlines,
    )
    return charts.figure([cells, characters], layout)


st.title("Tokenizer and architecture")
st.caption(
    "The model reads characters: each one its training text contained has an id, after four special tokens. "
    "Type a text to see the ids it becomes; the tabs below hold the vocabulary and the model's parts."
)
bundle = require_bundle()
tok, config = bundle.tokenizer, bundle.config

with layout.picture():
    left, right = st.columns([1, 2])
    with left:
        text = params.text_area("Text to encode", "anatomy_text", DEFAULT_TEXT, height=100)
    enc = encode_for_model(tok, text, config.context_length)
    # The page's own text holds an unseen character on purpose: that is a lesson, not a problem with the
    # reader's input, so it is a lesson case; what a reader types gets the usual notes (a warning for <unk>).
    lesson = text == DEFAULT_TEXT and bool(enc.unknown_chars) and not enc.truncated
    if not lesson:
        with left:
            explain_encoding(enc, "encode", UNK_NOTE)
    unknown = set(enc.unknown_positions)
    with left:
        st.caption(
            f"{enc.T} tokens; "
            + (
                f"{len(unknown)} of them {'is' if len(unknown) == 1 else 'are'} the unknown token (id 3), "
                "in orange and outlined."
                if unknown
                else "every one was seen in training."
            )
        )
    # The characters read: the text itself (an unseen character shown as typed), or the pieces when they differ
    # (an empty text reads <eos>).
    chars = list(enc.kept_text) if len(enc.kept_text) == enc.T else list(enc.pieces)
    fig = token_cells(
        chars, list(enc.ids), unknown, f"the {enc.T} token ids the model reads (vocabulary of {tok.vocab_size})"
    )
    ids_table = pd.DataFrame(
        {
            "position": list(range(enc.T)),
            "token": [tok.display_piece(i) for i in enc.ids],
            "id": list(enc.ids),
            "seen in training": ["no: <unk>" if t in unknown else "yes" for t in range(enc.T)],
        }
    )
    with right:
        chart(
            fig,
            ids_table,
            f"{enc.T} tokens with ids "
            + ", ".join(map(str, enc.ids))
            + (
                f"; {len(unknown)} unseen (id 3 at position{'s' if len(unknown) > 1 else ''} "
                + ", ".join(map(str, sorted(unknown)))
                + ")."
                if unknown
                else "."
            ),
            key="anatomy_ids_chart",
        )

if lesson:
    layout.lesson_case(
        "a character the model never saw",
        f"This text holds {code_points(enc.unknown_chars)}, which the training text never contained: it "
        f"becomes `<unk>` (id 3), like every other unseen character. {UNK_NOTE}",
    )

ids_tab, vocab_tab, parts_tab = layout.more(["A text as ids, and back", "The vocabulary", "The architecture"])
with ids_tab:
    decoded = tok.decode(enc.ids)
    st.markdown("The ids decoded back:")
    st.code(decoded, language=None)  # shown verbatim, never rendered
    st.caption(
        "Identical to the text the model read."
        if decoded == enc.kept_text
        else f"{len(enc.unknown_chars)} unseen character(s) came back as \ufffd: <unk> cannot say which it was."
    )

with vocab_tab:
    pieces = [tok.display_piece(i) for i in range(tok.vocab_size)]
    roles = {0: "storage filler, never predicted", 1: "sequence start", 2: "end of a document", 3: "unseen character"}
    vocab = pd.DataFrame(
        {
            "id": list(range(tok.vocab_size)),
            "token": pieces,
            "code point": ["special"] * len(SPECIAL_TOKENS) + [f"U+{ord(c):04X}" for c in tok.chars],
            "role": [roles[i] for i in range(len(SPECIAL_TOKENS))] + ["character"] * len(tok.chars),
        }
    )
    st.caption(
        f"{tok.vocab_size} tokens: the {len(SPECIAL_TOKENS)} special tokens {', '.join(SPECIAL_TOKENS)} and "
        f"{len(tok.chars)} characters (spaces and line breaks drawn as ␣ and ↵)."
    )
    projector.dataframe(vocab, hide_index=True, key="anatomy_vocab", height=260)

with parts_tab:
    guess = st.radio(
        "Predict first: how many parameters does the LM head (vectors to logits) add?",
        ["none: it reuses the token embedding", f"V × C = {tok.vocab_size * config.d_model:,}", "C × C"],
        index=None,
        key="anatomy_prediction",
        help="Hint: look for 'tied' in the parts below, after you answer.",
    )
    if guess is None:
        st.info("Answer the question above to reveal the model's parts.")
    else:
        parts = architecture(bundle.model)
        correct = guess.startswith("none")
        (st.success if correct else st.error)(
            ("Right: " if correct else "Not quite: ")
            + "the LM head is the token embedding's matrix used backwards (weight tying), so it adds 0 parameters; "
            f"the embedding holds V × C = {tok.vocab_size} × {config.d_model} = {tok.vocab_size * config.d_model:,}."
        )
        projector.dataframe(
            pd.DataFrame(
                {
                    "part": [p.name for p in parts],
                    "computes": [p.what for p in parts],
                    "shape in": [" × ".join(map(str, p.shape_in)) for p in parts],
                    "shape out": [" × ".join(map(str, p.shape_out)) for p in parts],
                    "parameters": [p.parameters for p in parts],
                }
            ),
            hide_index=True,
            key="anatomy_parts",
        )
        total = sum(p.parameters for p in parts)
        st.caption(
            f"Shapes from one forward pass of {config.context_length} tokens (batch 1): B × T, then B × T × C with "
            f"C = {config.d_model}, and B × T × V at the end with V = {tok.vocab_size}. The parts add up to "
            f"{total:,} parameters, the model's own count ({bundle.model.num_parameters():,})."
        )
