"""Inside the model: a text goes in, the next character comes out, through every stage of the loaded model.

Picture first: the text and the stage to step to, then the whole model as one picture (views/inside/flow_figure.py);
under it, the stage stepped to with its real numbers and the lesson page that teaches it. Every number is the loaded
model's own, from one forward pass (core/model/forward_trace.py).
"""

import pandas as pd
import streamlit as st

from core import i18n
from core.i18n import N_, _, pgettext
from core.model.forward_trace import ForwardTrace, top_choices, trace_forward
from core.model.prompt import encode_for_model
from ui import charts, fragment, layout, params, projector
from ui.companion import chart, matrix_table
from ui.models import require_bundle
from ui.text import escape_markdown, explain_encoding, link_if_registered
from views.inside.flow_figure import (
    EMBEDDING_STAGE,
    FLOW_HEIGHT,
    NEXT_STAGE,
    NORM_STAGE,
    TEXT_STAGE,
    flow_figure,
    label,
    stages,
)

DEFAULT_TEXT = "def __init__(self"
ALL = N_("every stage at once")
TOP_K = 8  # characters in the layer-by-layer table
PROJECTED_FLOW_HEIGHT = 380

st.title(_("Inside the model"))
st.caption(
    _(
        "Type a short text and watch the model turn it into a guess for the next character: characters become ids, "
        "ids become vectors, each block's attention and MLP add to them, and the output head scores every character."
    )
)


def lessons(stage: str) -> list[tuple[str, str]]:
    """The lesson pages that teach `stage` (a stage name of flow_figure.stages): (page file, link label)."""
    if stage.startswith("block"):
        return [
            ("views/read_row.py", _("Read one row: how one query weighs the keys")),
            ("views/inspector/page.py", _("Attention inspector: every head, enlarged")),
            ("views/rope.py", _("RoPE: where the positions come in")),
        ]
    return {
        TEXT_STAGE: [("views/anatomy.py", _("Tokenizer and architecture"))],
        EMBEDDING_STAGE: [("views/embeddings.py", _("Embeddings and projections"))],
        NORM_STAGE: [("views/anatomy.py", _("Tokenizer and architecture: the parts and their shapes"))],
        NEXT_STAGE: [("views/temperature.py", _("Temperature: the last softmax"))],
    }.get(stage, [])


def layer_table(trace: ForwardTrace, vocabulary: list[str]) -> tuple[list[str], list[str], list[list[float]]]:
    """What each layer would predict, for the final prediction's TOP_K characters: (row names, characters, (L+1, K))."""
    top = [i for i, _p in top_choices(trace.probs, TOP_K)]
    rows = [_("after the embedding"), *(_("after block {layer}").format(layer=b.layer) for b in trace.blocks)]
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
            text = params.text_input(_("Text to send through the model"), "inside_text", DEFAULT_TEXT, max_chars=64)
        enc = encode_for_model(tok, text, config.context_length)
        trace = trace_forward(bundle.model, enc.ids)
        steps = stages(trace, vocabulary)
        options = [ALL, *(f"{k + 1}. {s.name}" for k, s in enumerate(steps))]
        names = {
            ALL: i18n._(ALL),
            **{o: f"{k + 1}. {label(s.name)}" for k, (o, s) in enumerate(zip(options[1:], steps))},
        }
        with stage_col:
            chosen = params.selectbox(
                _("Step through the model"), "inside_stage", options, ALL, format_func=names.__getitem__
            )
        current = None if chosen == ALL else options.index(chosen) - 1
        fig = flow_figure(
            trace,
            list(enc.pieces),
            vocabulary,
            current=current,
            height=PROJECTED_FLOW_HEIGHT if projector.on() else FLOW_HEIGHT,
        )
        final_piece, final_p = steps[-1].guess or ("", 0.0)
        guesses = _("; ").join(
            _("after {stage} '{piece}' ({p})").format(
                stage=label(s.name), piece=s.guess[0], p=i18n.number(s.guess[1], 2)
            )
            for s in steps[1:-1]
            if s.guess is not None
        )
        summary = _(
            "The model reads {T} characters and predicts '{piece}' next with probability {p}. Stopped early, it would "
            "have said: {guesses}."
        ).format(T=enc.T, piece=final_piece, p=i18n.number(final_p, 2), guesses=guesses)
        table = pd.DataFrame(
            {
                _("stage"): [label(s.name) for s in steps],
                _("hands on a tensor of shape"): [s.shape for s in steps],
                _("‖x‖ at the last position"): [
                    None if s.stream_norm is None else round(s.stream_norm, 3) for s in steps
                ],
                _("would predict"): [None if s.guess is None else s.guess[0] for s in steps],
                _("with probability"): [None if s.guess is None else round(s.guess[1], 4) for s in steps],
            }
        )
        chart(fig, table, escape_markdown(summary), key="inside_flow")
        explain_encoding(enc, _("send through the model"))  # under the picture, so a warning never pushes it down

    if current is None:
        st.subheader(_("The answer, layer by layer"))
        rows, chars, z = layer_table(trace, vocabulary)
        chart(
            charts.heatmap(
                z,
                title=_("what the model would predict if it stopped after each layer"),
                x_labels=[f"'{c}'" for c in chars],
                y_labels=rows,
                x_title=_("next character"),
                y_title="",
                zmin=0,
                zmax=1,
                height=120 + 34 * len(rows),
            ),
            matrix_table(
                z, rows, chars, row_name=_("stopped"), col_name=_("next character"), value_name=_("probability")
            ),
            escape_markdown(
                _(
                    "After the last block the model gives '{piece}' {last}; after the embedding alone it gives it "
                    "{first}."
                ).format(piece=chars[0], last=i18n.number(z[-1][0], 2), first=i18n.number(z[0][0], 2))
            ),
            key="inside_layers",
        )
        st.markdown(
            _(
                "Each row takes the residual stream after that layer and sends it through the model's own final norm "
                "and output head, as if the model ended there. The embedding alone mostly repeats the character it "
                "read (the output head is the embedding matrix, shared); block by block the answer forms. The last "
                "row is the model's real prediction."
            )
        )
        return
    stage = steps[current].name
    st.subheader(_("Stage {number}: {stage}").format(number=current + 1, stage=label(stage)))
    show_stage(trace, enc, vocabulary, stage)
    for page, link_label in lessons(stage):
        link_if_registered(page, link_label)


def show_stage(trace: ForwardTrace, enc, vocabulary: list[str], stage: str) -> None:
    """The stage stepped to, with its real numbers."""
    labels = enc.labels()
    T, C = trace.embeddings.shape
    if stage == TEXT_STAGE:
        st.markdown(_("Each character is looked up in the vocabulary; its id is a row number, a label, not a size."))
        projector.dataframe(
            pd.DataFrame({_("position"): range(T), _("character"): list(enc.pieces), _("id"): list(trace.ids)}),
            hide_index=True,
            key="inside_ids",
        )
        return
    if stage.startswith("block"):
        b = trace.blocks[int(stage.split()[1])]
        head = params.selectbox(_("Head to enlarge"), "inside_head", list(range(b.weights.shape[0])), 0)
        z = charts.masked(b.weights[head].tolist(), [[s <= t for s in range(T)] for t in range(T)])
        left, right = st.columns(2)
        with left:
            chart(
                charts.heatmap(z, title=_("block {layer}, head {head}: attention weights").format(layer=b.layer,
                               head=head), x_labels=labels, y_labels=labels, zmin=0, zmax=1,
                               height=min(700, 160 + 22 * T)),
                matrix_table(z, labels, labels, row_name=_("query t"), col_name=_("key s"), value_name=_("weight")),
                _("Block {layer}, head {head}: row t spreads one unit of weight over keys 0 to t.").format(
                    layer=b.layer, head=head
                ),
                key="inside_head_map",
            )  # fmt: skip
        hidden = b.mlp_hidden[-1]  # (4C,) the last position's hidden units
        on = int((hidden > 0).sum())
        strongest = sorted(range(hidden.shape[0]), key=lambda j: -abs(float(hidden[j])))[:12]
        with right:
            chart(
                charts.bars([_("unit {j}").format(j=j) for j in strongest], [float(hidden[j]) for j in strongest],
                            title=_("block {layer}, MLP: its 12 strongest hidden units at the last position").format(
                                layer=b.layer),
                            y_title="GELU(fc(norm(x)))", value_format=".2f"),
                pd.DataFrame({
                    pgettext("an MLP's hidden unit", "unit"): range(hidden.shape[0]),
                    _("value"): [round(float(v), 4) for v in hidden],
                }),
                _("Block {layer}'s MLP: {on} of its {units} hidden units are positive at the last position; what it "
                  "adds to the stream has size ‖mlp_out‖ {mlp}, attention's {attention}.").format(
                    layer=b.layer, on=on, units=hidden.shape[0], mlp=i18n.number(float(b.mlp_out[-1].norm()), 2),
                    attention=i18n.number(float(b.attention_out[-1].norm()), 2)),
                key="inside_mlp",
            )  # fmt: skip
        return
    if stage == NEXT_STAGE:
        top = top_choices(trace.probs, TOP_K)
        chars = [vocabulary[i] for i, _p in top]
        chart(
            charts.bars(chars, [p for _i, p in top], title=_("softmax(logits): the next character"),
                        y_title=_("probability"), highlight=0, y_range=(0, 1.1), value_format=".3f"),
            pd.DataFrame({_("character"): chars, "logit": [round(float(trace.logits[i]), 4) for i, _p in top],
                          _("probability"): [round(p, 4) for _i, p in top]}),
            escape_markdown(_("The most likely next character is '{piece}' at {p}.").format(
                piece=chars[0], p=i18n.number(top[0][1], 3))),
            key="inside_probs",
        )  # fmt: skip
        return
    rows = trace.embeddings if stage == EMBEDDING_STAGE else trace.final_normed  # (T, C)
    z = rows.tolist()
    dims = [str(c) for c in range(C)]
    title = (
        _("embedding rows (T × C = {T} × {C})")
        if stage == EMBEDDING_STAGE
        else _("the stream after the final norm (T × C = {T} × {C})")
    ).format(T=T, C=C)
    chart(
        charts.heatmap(z, title=title, x_labels=dims, y_labels=labels, x_title=_("dimension"), y_title=_("token"),
                       signed=True, height=min(600, 140 + 18 * T)),
        matrix_table(z, labels, dims, row_name=_("token"), col_name=_("dimension"), value_name=_("value")),
        _("{T} rows of {C} numbers; the last row has size {size}.").format(
            T=T, C=C, size=i18n.number(float(rows[-1].norm()), 2)),
        key="inside_rows",
    )  # fmt: skip


bundle = require_bundle()
inside(bundle)
