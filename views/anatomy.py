"""Tokenizer and architecture: what the loaded model reads (its vocabulary, a text as ids and back) and what
it is made of (every part with the shape on each arrow and its parameters)."""

import pandas as pd
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
PICTURE_PX = 330  # the ids chart's height: one screen at 1440x900 and projected, with the text box beside it

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
                f"{len(unknown)} of them {'is' if len(unknown) == 1 else 'are'} the unknown token (id 3), in orange."
                if unknown
                else "every one was seen in training."
            )
        )
    labels = [charts.plain(label) for label in enc.labels()]  # typed text: no HTML for Plotly
    fig = charts.bars(
        labels,
        list(enc.ids),
        title=f"the {enc.T} token ids the model reads (vocabulary of {tok.vocab_size})",
        y_title="token id",
        x_title="position and character",
        value_format="d",
    )
    fig.update_traces(marker_color=[charts.OKABE_ITO[1] if t in unknown else charts.OKABE_ITO[0] for t in range(enc.T)])
    fig.update_layout(height=PICTURE_PX)
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
