"""Tokenizer and architecture: what the loaded model reads (its vocabulary, a text as ids and back) and what
it is made of (every part with the shape on each arrow and its parameters)."""

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from core import i18n
from core.i18n import N_, _, ngettext
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
UNK_NOTE = N_("Decoding gives them back as \ufffd: the model cannot tell them apart.")
NO_PARAMETERS = N_("none: it reuses the token embedding")  # the right prediction of the parts tab
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
            hover[2 * k + 1][col] = _("position {t}: {char}, id {id}").format(
                t=t, char=charts.plain(DRAWN.get(chars[t], chars[t])), id=ids[t]
            )
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


st.title(_("Tokenizer and architecture"))
st.caption(
    _(
        "The model reads characters: each one its training text contained has an id, after four special tokens. "
        "Type a text to see the ids it becomes; the tabs below hold the vocabulary and the model's parts."
    )
)
bundle = require_bundle()
tok, config = bundle.tokenizer, bundle.config

with layout.picture():
    left, right = st.columns([1, 2])
    with left:
        text = params.text_area(_("Text to encode"), "anatomy_text", DEFAULT_TEXT, height=100)
    enc = encode_for_model(tok, text, config.context_length)
    # The page's own text holds an unseen character on purpose: that is a lesson, not a problem with the
    # reader's input, so it is a lesson case; what a reader types gets the usual notes (a warning for <unk>).
    lesson = text == DEFAULT_TEXT and bool(enc.unknown_chars) and not enc.truncated
    if not lesson:
        with left:
            explain_encoding(enc, _("encode"), i18n._(UNK_NOTE))  # "...so there is nothing to encode"
    unknown = set(enc.unknown_positions)
    with left:
        st.caption(
            ngettext(
                "{T} tokens; {count} of them is the unknown token (id 3), in orange and outlined.",
                "{T} tokens; {count} of them are the unknown token (id 3), in orange and outlined.",
                len(unknown),
            ).format(T=enc.T, count=len(unknown))
            if unknown
            else _("{T} tokens; every one was seen in training.").format(T=enc.T)
        )
    # The characters read: the text itself (an unseen character shown as typed), or the pieces when they differ
    # (an empty text reads <eos>).
    chars = list(enc.kept_text) if len(enc.kept_text) == enc.T else list(enc.pieces)
    fig = token_cells(
        chars,
        list(enc.ids),
        unknown,
        _("the {T} token ids the model reads (vocabulary of {vocabulary})").format(T=enc.T, vocabulary=tok.vocab_size),
    )
    ids_table = pd.DataFrame(
        {
            _("position"): list(range(enc.T)),
            _("token"): [tok.display_piece(i) for i in enc.ids],
            _("id"): list(enc.ids),
            _("seen in training"): [_("no: <unk>") if t in unknown else _("yes") for t in range(enc.T)],
        }
    )
    with right:
        chart(
            fig,
            ids_table,
            ngettext(
                "{T} tokens with ids {ids}; {count} unseen (id 3 at position {positions}).",
                "{T} tokens with ids {ids}; {count} unseen (id 3 at positions {positions}).",
                len(unknown),
            ).format(
                T=enc.T,
                ids=", ".join(map(str, enc.ids)),
                count=len(unknown),
                positions=", ".join(map(str, sorted(unknown))),
            )
            if unknown
            else _("{T} tokens with ids {ids}.").format(T=enc.T, ids=", ".join(map(str, enc.ids))),
            key="anatomy_ids_chart",
        )

if lesson:
    layout.lesson_case(
        _("a character the model never saw"),
        _(
            "This text holds {characters}, which the training text never contained: it becomes `<unk>` (id 3), like "
            "every other unseen character. {note}"
        ).format(characters=code_points(enc.unknown_chars), note=i18n._(UNK_NOTE)),
    )

ids_tab, vocab_tab, parts_tab = layout.more([_("A text as ids, and back"), _("The vocabulary"), _("The architecture")])
with ids_tab:
    decoded = tok.decode(enc.ids)
    st.markdown(_("The ids decoded back:"))
    st.code(decoded, language=None)  # shown verbatim, never rendered
    st.caption(
        _("Identical to the text the model read.")
        if decoded == enc.kept_text
        else _("{count} unseen character(s) came back as \ufffd: <unk> cannot say which it was.").format(
            count=len(enc.unknown_chars)
        )
    )

with vocab_tab:
    pieces = [tok.display_piece(i) for i in range(tok.vocab_size)]
    roles = {
        0: _("storage filler, never predicted"),
        1: _("sequence start"),
        2: _("end of a document"),
        3: _("unseen character"),
    }
    vocab = pd.DataFrame(
        {
            _("id"): list(range(tok.vocab_size)),
            _("token"): pieces,
            _("code point"): [_("special")] * len(SPECIAL_TOKENS) + [f"U+{ord(c):04X}" for c in tok.chars],
            _("role"): [roles[i] for i in range(len(SPECIAL_TOKENS))] + [_("character")] * len(tok.chars),
        }
    )
    st.caption(
        _(
            "{vocabulary} tokens: the {count} special tokens {specials} and {characters} characters (spaces and line "
            "breaks drawn as ␣ and ↵)."
        ).format(
            vocabulary=tok.vocab_size,
            count=len(SPECIAL_TOKENS),
            specials=", ".join(SPECIAL_TOKENS),
            characters=len(tok.chars),
        )
    )
    projector.dataframe(vocab, hide_index=True, key="anatomy_vocab", height=260)

with parts_tab:
    embedding_size = tok.vocab_size * config.d_model
    shown = {  # option (the widget's value) -> what the reader sees
        NO_PARAMETERS: i18n._(NO_PARAMETERS),
        f"V × C = {embedding_size:,}": f"V × C = {i18n.integer(embedding_size)}",
    }
    guess = st.radio(
        _("Predict first: how many parameters does the LM head (vectors to logits) add?"),
        [NO_PARAMETERS, f"V × C = {embedding_size:,}", "C × C"],
        index=None,
        key="anatomy_prediction",
        format_func=lambda option: shown.get(option, option),
        help=_("Hint: look for 'tied' in the parts below, after you answer."),
    )
    if guess is None:
        st.info(_("Answer the question above to reveal the model's parts."))
    else:
        parts = architecture(bundle.model)
        correct = guess == NO_PARAMETERS
        (st.success if correct else st.error)(
            (
                _(
                    "Right: the LM head is the token embedding's matrix used backwards (weight tying), so it adds 0 "
                    "parameters; the embedding holds V × C = {V} × {C} = {size}."
                )
                if correct
                else _(
                    "Not quite: the LM head is the token embedding's matrix used backwards (weight tying), so it adds "
                    "0 parameters; the embedding holds V × C = {V} × {C} = {size}."
                )
            ).format(V=tok.vocab_size, C=config.d_model, size=i18n.integer(embedding_size))
        )
        projector.dataframe(
            pd.DataFrame(
                {
                    _("part"): [p.name for p in parts],
                    _("computes"): [p.what for p in parts],
                    _("shape in"): [" × ".join(map(str, p.shape_in)) for p in parts],
                    _("shape out"): [" × ".join(map(str, p.shape_out)) for p in parts],
                    _("parameters"): [p.parameters for p in parts],
                }
            ),
            hide_index=True,
            key="anatomy_parts",
        )
        total = sum(p.parameters for p in parts)
        st.caption(
            _(
                "Shapes from one forward pass of {context} tokens (batch 1): B × T, then B × T × C with C = {C}, and "
                "B × T × V at the end with V = {V}. The parts add up to {total} parameters, the model's own count "
                "({own})."
            ).format(
                context=config.context_length,
                C=config.d_model,
                V=tok.vocab_size,
                total=i18n.integer(total),
                own=i18n.integer(bundle.model.num_parameters()),
            )
        )
