"""Tokenizer and architecture: what the loaded model reads (its vocabulary, a text as ids and back) and what
it is made of (every part with the shape on each arrow and its parameters)."""

import pandas as pd
import streamlit as st

from core.model.architecture import architecture
from core.model.introspect import encode_for_model
from core.model.tokenizer import SPECIAL_TOKENS
from ui import params, projector
from ui.models import require_bundle
from ui.text import explain_encoding

st.title("Tokenizer and architecture")
st.markdown(
    "The model reads **characters**: each one the training text contained has an id, after four special "
    "tokens. Below: the loaded model's vocabulary, any text as the ids it becomes and decoded back, then the "
    "model itself, part by part, with the tensor shape on every arrow and each part's parameter count."
)
bundle = require_bundle()
tok, config = bundle.tokenizer, bundle.config

st.header("1. The vocabulary")
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

st.header("2. A text as ids, and back")
text = params.text_area("Text to encode", "anatomy_text", "def f(x):\n    return x  # é", height=100)
enc = encode_for_model(tok, text, config.context_length)
explain_encoding(enc, "encode", "Decoding gives them back as \ufffd: the model cannot tell them apart.")
unknown = set(enc.unknown_positions)
projector.dataframe(
    pd.DataFrame(
        {
            "position": list(range(enc.T)),
            "token": [tok.display_piece(i) for i in enc.ids],
            "id": list(enc.ids),
            "seen in training": ["no: <unk>" if t in unknown else "yes" for t in range(enc.T)],
        }
    ),
    hide_index=True,
    key="anatomy_ids",
)
decoded = tok.decode(enc.ids)
st.markdown("Decoded back:")
st.code(decoded, language=None)  # shown verbatim, never rendered
st.caption(
    "Identical to the text the model read."
    if decoded == enc.text
    else f"{len(enc.unknown_chars)} unseen character(s) came back as \ufffd: <unk> cannot say which it was."
)

st.header("3. The architecture of the loaded model")
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
    right = guess.startswith("none")
    (st.success if right else st.error)(
        ("Right: " if right else "Not quite: ")
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
