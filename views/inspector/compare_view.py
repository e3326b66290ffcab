"""The Attention inspector's "Compare side by side": one layer and head for two texts, or for one text in two
models, on one colour scale and the same axes, with a B − A map when the two sides pair cell by cell.

Side A is what the page already computed; side B goes through the same cached computation, so the two can differ
only by their inputs.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from core.i18n import N_, _
from core.model.bundle import Bundle
from core.model.bundle_checks import BundleError
from core.model.compare import align, attention_mask, describe, difference, lacks, small_edit
from core.model.compare import table as compare_table
from core.model.introspect import head_summaries, weight_allowance
from core.model.prompt import Prompt, encode_for_model
from ui import cached, charts, models, params
from ui.charts import masked
from ui.companion import chart, matrix_table
from ui.text import escape_markdown, explain_encoding, number

BY_TEXT, BY_MODEL = N_("another text"), N_("another model")


def other_models(shown: str) -> dict[str, Bundle]:
    """Sidebar label -> transformer bundle for every choice but the one shown (told apart by version), each loaded
    through the models' `load` (verified, cached). A choice that does not load, or a baseline, is left out."""
    found, seen = {}, {shown}
    for label, path in models.choices().items():
        if path is None:  # the registry's served version: a transformer, or a baseline without attention
            release = models.served_version()
            candidate = None if release is None else release.bundle
        else:
            try:
                candidate = models.load(path)
            except BundleError:
                continue
        if isinstance(candidate, Bundle) and candidate.version not in seen:
            seen.add(candidate.version)
            found[label] = candidate
    return found


def side_summary(name: str, s, n: int, layer: int, head: int) -> str:
    """One line for a side's map from its `HeadSummary`."""
    return _(
        "{side}, layer {layer}, head {head} over {n} tokens: on average {itself} of a row's weight goes to the token "
        "itself, {previous} to the previous token and {first} to token 0."
    ).format(
        side=name,
        layer=layer,
        head=head,
        n=n,
        itself=number(s.self_weight),
        previous=number(s.previous_weight),
        first=number(s.first_weight),
    )


def section(bundle: Bundle, text: str, enc: Prompt, layer: int, head: int, grid, side_a, summary_a, mask) -> None:
    """The inspector's "Compare side by side" tab. `grid` (L, H, T, T) is side A's attention, `side_a` its
    layer/head weights with None where masked, `summary_a` its HeadSummary, `mask` (T, T) True where a query may
    attend."""
    config, T, labels = bundle.config, enc.T, enc.labels()
    st.header(_("Compare side by side"))
    st.markdown(
        _(
            "Layer {layer}, head {head} on two inputs at once: side A is the enlarged map, side B the same layer and "
            "head for another text, or for the same text in another model. Both use one colour scale (0 to 1) and the "
            "same axes, so position t of A faces position t of B. When both sides have as many tokens, the map below "
            "them shows where the weights changed."
        ).format(layer=layer, head=head)
    )
    others = other_models(bundle.version)
    by = params.radio(
        _("Side B differs in"),
        "insp_cmp_by",
        [BY_TEXT, BY_MODEL] if others else [BY_TEXT],
        BY_TEXT,
        horizontal=True,
        format_func=_,
    )
    if not others:
        st.caption(
            _(
                "There is no other transformer model to compare with: the sidebar offers only this one, so side B is "
                "another text. A model trained on the Training page appears here too."
            )
        )
    if by == BY_MODEL:
        label_b = params.selectbox(_("Side B's model"), "insp_cmp_model", list(others), next(iter(others)))
        bundle_b = others[label_b]
        st.caption(
            _("Side B: '{label}', version `{version}`, reading the same text as side A.").format(
                label=escape_markdown(label_b), version=escape_markdown(bundle_b.version)
            )
        )
        enc_b = encode_for_model(bundle_b.tokenizer, text, bundle_b.config.context_length)
        name_b, unknown_note = _("Side B (the other model)"), _("Side B's model was trained on another text.")
    else:
        bundle_b = bundle
        # The default changes one character and keeps the length, so the difference map shows at once.
        text_b = params.text_input(_("Side B's text"), "insp_cmp_text", small_edit(text, bundle.tokenizer.chars))
        enc_b = encode_for_model(bundle.tokenizer, text_b, config.context_length)  # cut to the context like text A
        name_b, unknown_note = _("Side B (the other text)"), _("That is in side B's text.")
    missing = lacks(bundle_b.config, layer, head)
    if enc_b.empty:
        problem = _("Side B's text is empty: type at least one character to compare it with side A.")
    elif missing is not None:
        problem = _("Side B's model lacks layer {layer}, head {head}: {missing}. Only side A is shown.").format(
            layer=layer, head=head, missing=missing
        )
    else:
        problem = None
        explain_encoding(enc_b, _("compare"), unknown_note)  # never stops here: side B has tokens
        grid_b = cached.attention_grid(bundle_b.model, bundle_b.version, cached.ids_key(enc_b.ids))  # (L', H', T', T')
        mask_b = attention_mask(bundle_b.config, enc_b.T)  # (T', T') True = may attend
        side_b = masked(grid_b[layer, head].tolist(), mask_b)  # (T', T') with None in the future
        this_b = head_summaries(grid_b)[layer * bundle_b.config.n_head + head]
        labels_b = enc_b.labels()
    aligned = align(enc.pieces, enc_b.pieces if problem is None else enc.pieces)
    lo, hi = aligned.extent
    height = min(720, 200 + 16 * aligned.T)  # one height for both sides

    def side_map(z, axis_labels, title):
        """One side's heatmap on the shared colour scale and axes (positions 0 .. aligned.T - 1 on both)."""
        return charts.heatmap(
            z,
            title=title,
            x_labels=axis_labels,
            y_labels=axis_labels,
            x_title=_("key"),
            y_title=_("query"),
            zmin=0,
            zmax=1,
            value_format=".2f",
            height=height,
            x_axis=dict(range=[lo, hi]),
            layout=dict(yaxis=dict(range=[hi, lo], autorange=False), margin=dict(l=10, r=10, t=100, b=10)),
            trace=dict(hovertemplate=_("query %{y}<br>key %{x}<br>weight %{z:.4f}<extra></extra>"), hoverongaps=False),
        )

    left, right = st.columns(2)
    with left:
        chart(
            side_map(
                side_a, labels, _("side A: layer {layer}, head {head} (T = {T})").format(layer=layer, head=head, T=T)
            ),
            matrix_table(side_a, labels, labels, row_name=_("query"), col_name=_("key"), value_name=_("weight")),
            side_summary(_("Side A (the text above)"), summary_a, T, layer, head),
            key="insp_cmp_a",
        )
    with right:
        if problem is not None:
            st.info(problem)
        else:
            chart(
                side_map(
                    side_b,
                    labels_b,
                    _("side B: layer {layer}, head {head} (T = {T})").format(layer=layer, head=head, T=enc_b.T),
                ),
                matrix_table(
                    side_b, labels_b, labels_b, row_name=_("query"), col_name=_("key"), value_name=_("weight")
                ),
                side_summary(name_b, this_b, enc_b.T, layer, head),
                key="insp_cmp_b",
            )
    if problem is None and not aligned.same_length:
        st.caption(
            _(
                "Side A has {a} tokens and side B {b}: their cells do not pair one to one, so there is no difference "
                "map. Make side B's text as long as side A's to see one."
            ).format(a=aligned.T_a, b=aligned.T_b)
        )
    elif problem is None:
        # Two float32 weights each carry their own rounding: changes closer than twice the larger allowance tie.
        margin = 2 * max(weight_allowance(config), weight_allowance(bundle_b.config))
        diff = difference(grid[layer, head], grid_b[layer, head], mask, mask_b, margin=margin)
        said = _("B − A: {description}").format(description=describe(diff, aligned.labels, margin))
        changed = (
            " "
            + _("Positions where the pieces differ: {positions}.").format(
                positions=", ".join(str(t) for t in aligned.changed)
            )
            if aligned.changed
            else ""
        )
        chart(
            charts.heatmap(
                diff.delta,
                title=_("B − A: change of the weights of layer {layer}, head {head} (T = {T})").format(
                    layer=layer, head=head, T=aligned.T
                ),
                x_labels=aligned.labels,
                y_labels=aligned.labels,
                x_title=_("key"),
                y_title=_("query"),
                signed=True,
                value_format="+.2f",
                height=min(900, 160 + 26 * aligned.T),
                trace=dict(
                    hovertemplate=_("query %{y}<br>key %{x}<br>B − A %{z:+.4f}<extra></extra>"),
                    hoverongaps=False,
                    colorbar=dict(title="B − A"),
                ),
                x_axis=dict(showgrid=False),
                # masked cells: a grey that no change (near white) resembles, without grid lines across it
                layout=dict(plot_bgcolor="#bdbdbd", yaxis=dict(showgrid=False)),
            ),
            pd.DataFrame(compare_table(diff, aligned.labels)),
            escape_markdown(said + changed)
            + " "
            + _("Purple: side B weighs the key more; orange: less; grey: masked on either side."),
            key="insp_cmp_diff",
        )
