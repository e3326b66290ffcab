"""Inside the model: a text goes in, the next character comes out, through every stage of the loaded model.

Picture first: the text and the stage to step to, then the whole model as one picture (views/inside/flow_figure.py);
under it, the stage stepped to with its real numbers and the lesson page that teaches it. Every number is the loaded
model's own, from one forward pass (core/model/forward_trace.py).
"""

import pandas as pd
import streamlit as st

from core.model.forward_trace import ForwardTrace, top_choices, trace_forward
from core.model.prompt import encode_for_model
from ui import charts, fragment, layout, params, projector
from ui.companion import chart, matrix_table
from ui.models import require_bundle
from ui.text import escape_markdown, explain_encoding, link_if_registered
from views.inside.flow_figure import FLOW_HEIGHT, flow_figure, stages

DEFAULT_TEXT = "def __init__(self"
ALL = "every stage at once"
TOP_K = 8  # characters in the layer-by-layer table
PROJECTED_FLOW_HEIGHT = 380

st.title("Inside the model")
st.caption(
    "Type a short text and watch the model turn it into a guess for the next character: characters become ids, ids "
    "become vectors, each block's attention and MLP add to them, and the output head scores every character."
)


def lessons(stage: str) -> list[tuple[str, str]]:
    """The lesson pages that teach `stage` (a stage name of flow_figure.stages): (page file, link label)."""
    if stage.startswith("block"):
        return [
            ("views/read_row.py", "Read one row: how one query weighs the keys"),
            ("views/inspector/page.py", "Attention inspector: every head, enlarged"),
            ("views/rope.py", "RoPE: where the positions come in"),
        ]
    return {
        "text → ids": [("views/anatomy.py", "Tokenizer and architecture")],
        "embedding": [("views/embeddings.py", "Embeddings and projections")],
        "final norm": [("views/anatomy.py", "Tokenizer and architecture: the parts and their shapes")],
        "next character": [("views/temperature.py", "Temperature: the last softmax")],
    }.get(stage, [])


def layer_table(trace: ForwardTrace, vocabulary: list[str]) -> tuple[list[str], list[str], list[list[float]]]:
    """What each layer would predict, for the final prediction's TOP_K characters: (row names, characters, (L+1, K))."""
    top = [i for i, _ in top_choices(trace.probs, TOP_K)]
    rows = ["after the embedding", *(f"after block {b.layer}" for b in trace.blocks)]
    z = [[float(trace.layer_probs[r, i]) for i in top] for r in range(len(rows))]
    return rows, [vocabulary[i] for i in top], z


@fragment.section
def inside(bundle) -> None:
    """The text and the stage drive everything below the title: a change reruns this fragment only."""
    config = bundle.config
    tok = bundle.tokenizer
    vocabulary = [tok.display_piece(i) for i in range(tok.vocab_size)]
    with layout.picture():
        text_col, stage_col = st.columns([3, 2])
        with text_col:
            text = params.text_input("Text to send through the model", "inside_text", DEFAULT_TEXT, max_chars=64)
        enc = encode_for_model(tok, text, config.context_length)
        trace = trace_forward(bundle.model, enc.ids)
        steps = stages(trace, vocabulary)
        options = [ALL, *(f"{k + 1}. {s.name}" for k, s in enumerate(steps))]
        with stage_col:
            chosen = params.selectbox("Step through the model", "inside_stage", options, ALL)
        current = None if chosen == ALL else options.index(chosen) - 1
        fig = flow_figure(
            trace,
            list(enc.pieces),
            vocabulary,
            current=current,
            height=PROJECTED_FLOW_HEIGHT if projector.on() else FLOW_HEIGHT,
        )
        final_piece, final_p = steps[-1].guess or ("", 0.0)
        guesses = "; ".join(
            f"after {s.name} '{s.guess[0]}' ({s.guess[1]:.2f})" for s in steps[1:-1] if s.guess is not None
        )
        summary = (
            f"The model reads {enc.T} characters and predicts '{final_piece}' next with probability {final_p:.2f}. "
            f"Stopped early, it would have said: {guesses}."
        )
        table = pd.DataFrame(
            {
                "stage": [s.name for s in steps],
                "hands on a tensor of shape": [s.shape for s in steps],
                "‖x‖ at the last position": [None if s.stream_norm is None else round(s.stream_norm, 3) for s in steps],
                "would predict": [None if s.guess is None else s.guess[0] for s in steps],
                "with probability": [None if s.guess is None else round(s.guess[1], 4) for s in steps],
            }
        )
        chart(fig, table, escape_markdown(summary), key="inside_flow")
        explain_encoding(enc, "send through the model")  # under the picture, so a warning never pushes it down

    if current is None:
        st.subheader("The answer, layer by layer")
        rows, chars, z = layer_table(trace, vocabulary)
        chart(
            charts.heatmap(
                z,
                title="what the model would predict if it stopped after each layer",
                x_labels=[f"'{c}'" for c in chars],
                y_labels=rows,
                x_title="next character",
                y_title="",
                zmin=0,
                zmax=1,
                height=120 + 34 * len(rows),
            ),
            matrix_table(z, rows, chars, row_name="stopped", col_name="next character", value_name="probability"),
            escape_markdown(
                f"After the last block the model gives '{chars[0]}' {z[-1][0]:.2f}; "
                f"after the embedding alone it gives it {z[0][0]:.2f}."
            ),
            key="inside_layers",
        )
        st.markdown(
            "Each row takes the residual stream after that layer and sends it through the model's own final norm "
            "and output head, as if the model ended there. The embedding alone mostly repeats the character it read "
            "(the output head is the embedding matrix, shared); block by block the answer forms. The last row is the "
            "model's real prediction."
        )
        return
    stage = steps[current].name
    st.subheader(f"Stage {current + 1}: {stage}")
    show_stage(trace, enc, vocabulary, stage)
    for page, label in lessons(stage):
        link_if_registered(page, label)


def show_stage(trace: ForwardTrace, enc, vocabulary: list[str], stage: str) -> None:
    """The stage stepped to, with its real numbers."""
    labels = enc.labels()
    T, C = trace.embeddings.shape
    if stage == "text → ids":
        st.markdown("Each character is looked up in the vocabulary; its id is a row number, a label, not a size.")
        projector.dataframe(
            pd.DataFrame({"position": range(T), "character": list(enc.pieces), "id": list(trace.ids)}),
            hide_index=True,
            key="inside_ids",
        )
        return
    if stage.startswith("block"):
        b = trace.blocks[int(stage.split()[1])]
        head = params.selectbox("Head to enlarge", "inside_head", list(range(b.weights.shape[0])), 0)
        z = charts.masked(b.weights[head].tolist(), [[s <= t for s in range(T)] for t in range(T)])
        left, right = st.columns(2)
        with left:
            chart(
                charts.heatmap(z, title=f"block {b.layer}, head {head}: attention weights", x_labels=labels,
                               y_labels=labels, zmin=0, zmax=1, height=min(700, 160 + 22 * T)),
                matrix_table(z, labels, labels, value_name="weight"),
                f"Block {b.layer}, head {head}: row t spreads one unit of weight over keys 0 to t.",
                key="inside_head_map",
            )  # fmt: skip
        hidden = b.mlp_hidden[-1]  # (4C,) the last position's hidden units
        on = int((hidden > 0).sum())
        strongest = sorted(range(hidden.shape[0]), key=lambda j: -abs(float(hidden[j])))[:12]
        with right:
            chart(
                charts.bars([f"unit {j}" for j in strongest], [float(hidden[j]) for j in strongest],
                            title=f"block {b.layer}, MLP: its 12 strongest hidden units at the last position",
                            y_title="GELU(fc(norm(x)))", value_format=".2f"),
                pd.DataFrame({"unit": range(hidden.shape[0]), "value": [round(float(v), 4) for v in hidden]}),
                f"Block {b.layer}'s MLP: {on} of its {hidden.shape[0]} hidden units are positive at the last position; "
                f"what it adds to the stream has size ‖mlp_out‖ {float(b.mlp_out[-1].norm()):.2f}, attention's "
                f"{float(b.attention_out[-1].norm()):.2f}.",
                key="inside_mlp",
            )  # fmt: skip
        return
    if stage == "next character":
        top = top_choices(trace.probs, TOP_K)
        chars = [vocabulary[i] for i, _ in top]
        chart(
            charts.bars(chars, [p for _, p in top], title="softmax(logits): the next character", y_title="probability",
                        highlight=0, y_range=(0, 1.1), value_format=".3f"),
            pd.DataFrame({"character": chars, "logit": [round(float(trace.logits[i]), 4) for i, _ in top],
                          "probability": [round(p, 4) for _, p in top]}),
            escape_markdown(f"The most likely next character is '{chars[0]}' at {top[0][1]:.3f}."),
            key="inside_probs",
        )  # fmt: skip
        return
    rows = trace.embeddings if stage == "embedding" else trace.final_normed  # (T, C)
    z = rows.tolist()
    dims = [str(c) for c in range(C)]
    what = "embedding rows" if stage == "embedding" else "the stream after the final norm"
    chart(
        charts.heatmap(z, title=f"{what} (T × C = {T} × {C})", x_labels=dims, y_labels=labels, x_title="dimension",
                       y_title="token", signed=True, height=min(600, 140 + 18 * T)),
        matrix_table(z, labels, dims, row_name="token", col_name="dimension"),
        f"{T} rows of {C} numbers; the last row has size {float(rows[-1].norm()):.2f}.",
        key="inside_rows",
    )  # fmt: skip


bundle = require_bundle()
inside(bundle)
