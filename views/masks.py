"""Masks: causal and padding masks, why they go before softmax, and what a row with no allowed key returns."""

import pandas as pd
import streamlit as st

from core import i18n
from core.attention import causal_mask
from core.classroom.checkpoint import Question
from core.i18n import N_, _, ngettext
from core.lessons import masks as masking
from core.lessons import scores as lessons
from ui import cached, charts, fragment, layout, params, predict, projector
from ui.companion import chart, matrix_table
from ui.mask_charts import mask_figure, mask_table
from ui.text import escape_markdown

NAN_TEXT = N_("NaN (undefined)")
DEFAULT_SENTENCE = N_("the cat sat down")  # the picture's sentence, in the reader's language
DEFAULT_LENGTHS = (6, 4, 2)
TABS = [  # the sections beyond the causal-mask picture, one click away
    N_("A batch of different lengths"),
    N_("Mask before softmax, or zero after?"),
    N_("Renormalising, and when it breaks"),
    N_("A row with no allowed key"),
]
SIDES = {"right": N_("right"), "left": N_("left")}  # the padding side: the link's value -> its shown name
SMALL_PX, PADDING_PX = 340, 220  # the batch tab's two square masks side by side, the three-row padding mask
ZERO_TOLERANCE = 0.05  # a hand estimate of a few exponentials
# The prediction's question, with its numbers as placeholders (a row with no allowed or no forbidden key says so).
PROMPT = N_(
    "Row {t} of sequence {b} has the scores in the table above: keys {allowed} are allowed, keys {forbidden} "
    "forbidden. Take softmax over all {T} keys, then set the forbidden weights to 0. What does row {t} sum to?"
)
PROMPT_NONE_ALLOWED = N_(
    "Row {t} of sequence {b} has the scores in the table above: keys none are allowed, keys {forbidden} "
    "forbidden. Take softmax over all {T} keys, then set the forbidden weights to 0. What does row {t} sum to?"
)
PROMPT_NONE_FORBIDDEN = N_(
    "Row {t} of sequence {b} has the scores in the table above: keys {allowed} are allowed, keys none "
    "forbidden. Take softmax over all {T} keys, then set the forbidden weights to 0. What does row {t} sum to?"
)


def local(text: str) -> str:
    """A number already written with '.' (a format spec such as 'g' or '.3e') in the language's decimal sign."""
    return text.replace(".", i18n.number(0.5, 1)[1])


def sig(x: float, spec: str) -> str:
    return local(format(x, spec))


def fmt(values, digits=4):
    """Numbers in a row: '0.5000, 0.2500' (where the decimal sign is a comma, '0,5000; 0,2500')."""
    sep = "; " if i18n.number(0.5, 1)[1] == "," else ", "
    return sep.join(i18n.number(x, digits) for x in values)


st.title(_("Masks"))
st.caption(
    _(
        "A mask decides which keys each query may look at. It is applied to the scores before softmax: a forbidden "
        "score becomes −∞, its exponential is 0, and the allowed keys share all of the weight."
    )
)
picture_col, side_col = st.columns([3, 2])
with side_col:  # the sentence that drives the picture, beside it
    default_sentence = i18n._(DEFAULT_SENTENCE)
    text = params.text_input(_("A short sentence (one token per word, up to 8 words)"), "mask_text", default_sentence)
    try:
        words = masking.word_tokens(text)
    except ValueError as err:
        st.warning(
            _("That sentence could not be used: {error}. Showing '{sentence}' instead.").format(
                error=escape_markdown(err), sentence=default_sentence
            )
        )
        words = masking.word_tokens(default_sentence)
word_labels = [f"{i} {w}" for i, w in enumerate(words)]
causal_words = causal_mask(len(words)).tolist()  # (T, S)
allowed_word, forbidden_word = _("allowed"), _("forbidden")
with picture_col, layout.picture():
    chart(
        mask_figure(
            causal_words,
            title=_("Causal mask for {n} tokens").format(n=len(words)),
            x_labels=word_labels,
            y_labels=word_labels,
            yes=allowed_word,
            no=forbidden_word,
        ),
        mask_table(causal_words, word_labels, word_labels, yes=allowed_word, no=forbidden_word),
        _("Causal mask: {rows}.").format(
            rows="; ".join(  # the words come from the link: escaped for the caption
                _("'{word}' sees {seen}").format(
                    word=escape_markdown(w),
                    seen=" ".join(escape_markdown(words[s]) for s in range(len(words)) if causal_words[t][s]),
                )
                for t, w in enumerate(words)
            )
        ),
        key="mask_words",
    )
with side_col:
    st.markdown(
        _(
            "When a model predicts the next word, a word must not peek at the words after it. The **causal** "
            "mask allows query $t$ (a row) to see keys $0 … t$ and forbids every key to its right.\n\n"
            "The tabs below follow it: causal and padding masks on a batch of sequences of different lengths, "
            "and three things that go wrong when masking is done differently."
        )
    )


@fragment.section
def tabs_section() -> None:
    """The tabs: the batch tab's lengths, padding and sequence drive it and the zeroing and empty-row tabs, so all
    four rerun together, without the sentence's picture above or app.py's sidebar."""
    batch_tab, zeroing_tab, renormalise_tab, empty_tab = layout.more([i18n._(t) for t in TABS])
    nan = i18n._(NAN_TEXT)
    allowed_word, forbidden_word = _("allowed"), _("forbidden")

    with batch_tab:
        st.markdown(
            _(
                "A batch fills shorter sequences up with **padding** to the longest one's length; the **padding "
                "mask** forbids those positions as keys. Right padding puts the words first, left padding (how "
                "prompts are batched for generation) puts them last. A key is allowed only if **both** masks allow "
                "it: the combined mask is causal AND padding."
            )
        )
        cols = st.columns([0.9, 0.9, 0.9, 1.1, 1.2, 1.2, 0.9, 0.9])  # one row: the toggles need their labels
        lengths = []
        for b, col in enumerate(cols[:3]):
            with col:
                lengths.append(
                    params.slider(_("Length of sequence {b}").format(b=b), f"mask_len{b}", 0, 8, DEFAULT_LENGTHS[b])
                )
        with cols[3]:
            side = params.radio(
                _("Padding side"),
                "mask_side",
                list(SIDES),
                "left",
                horizontal=True,
                format_func={s: i18n._(label) for s, label in SIDES.items()}.__getitem__,  # this run's language
            )
        with cols[4]:
            use_causal = params.toggle(_("Causal mask"), "mask_causal", True)
        with cols[5]:
            use_padding = params.toggle(_("Padding mask"), "mask_pad", True)
        with cols[6]:
            b = params.selectbox(_("Sequence to inspect"), "mask_seq", [0, 1, 2], 1)
        with cols[7]:
            seed = params.number_input(_("Seed for the scores"), "mask_seed", 0, 9999, 0, 1)
        try:
            masks = masking.ragged_masks(lengths, side=side, causal=use_causal, padding=use_padding)
        except ValueError as err:
            st.warning(
                _("Those lengths cannot form a batch: {error}. Showing lengths {lengths} instead.").format(
                    error=err, lengths=list(DEFAULT_LENGTHS)
                )
            )
            masks = masking.ragged_masks(DEFAULT_LENGTHS, side=side, causal=use_causal, padding=use_padding)
        T = len(masks.causal)
        pos = [str(i) for i in range(T)]
        seqs = [_("sequence {i}").format(i=i) for i in range(len(masks.lengths))]
        st.caption(
            _(
                "Lengths {lengths}: every sequence is padded to T = {T}, the longest one. With left padding and the "
                "causal mask, the first rows of a short sequence see nothing but padding: they have no allowed key "
                "at all (the last tab)."
            ).format(lengths=list(masks.lengths), T=T)
        )

        combined = masks.combined[b].tolist()  # (T, S)
        empty_rows = [t for t, e in enumerate(masks.no_allowed_key[b].tolist()) if e]
        left, right = st.columns(2)
        with left:
            causal_rows = masks.causal.tolist()  # (T, S)
            chart(
                mask_figure(
                    causal_rows,
                    title=_("Causal mask (on)") if use_causal else _("Causal mask (off: every query sees every key)"),
                    x_labels=pos,
                    y_labels=pos,
                    yes=allowed_word,
                    no=forbidden_word,
                    height=SMALL_PX,
                ),
                mask_table(causal_rows, pos, pos, yes=allowed_word, no=forbidden_word),
                _("Causal mask on; for T = {T}, query t may attend to keys 0 to t.").format(T=T)
                if use_causal
                else _("Causal mask off: all {T} × {T} pairs are allowed.").format(T=T),
                key="mask_causal_fig",
            )
        with right:
            seen = [", ".join(str(s) for s in range(T) if combined[t][s]) for t in range(T)]
            sees = "; ".join(
                _("row {t} sees {keys}").format(t=t, keys=keys) if keys else _("row {t} sees nothing").format(t=t)
                for t, keys in enumerate(seen)
            )
            combined_summary = (
                _("Sequence {b}, length {n}, right padding: {rows}.")
                if side == "right"
                else _("Sequence {b}, length {n}, left padding: {rows}.")
            )
            chart(
                mask_figure(
                    combined,
                    title=_("Combined mask, sequence {b} (length {n})").format(b=b, n=masks.lengths[b]),
                    x_labels=pos,
                    y_labels=pos,
                    yes=allowed_word,
                    no=forbidden_word,
                    height=SMALL_PX,
                ),
                mask_table(combined, pos, pos, yes=allowed_word, no=forbidden_word),
                combined_summary.format(b=b, n=masks.lengths[b], rows=sees),
                key="mask_combined",
            )
        real = masks.real.tolist()  # (B, S)
        pad_word = _("pad (masked)") if use_padding else _("pad (not masked)")
        # Coloured by the mask as applied (padding off: all allowed), labelled by what each position holds;
        # two short lines fit the narrow cells where "pad (not masked)" would shrink to an unreadable size.
        pad_cell = _("pad<br>masked") if use_padding else _("pad<br>allowed")
        token_word, position_title = _("token"), _("position s")
        if side == "right":
            pad_title = _("Padding mask (on, right padding)") if use_padding else _("Padding mask (off, right padding)")
        else:
            pad_title = _("Padding mask (on, left padding)") if use_padding else _("Padding mask (off, left padding)")
        fig = mask_figure(
            masks.padding[:, 0].tolist(),
            title=pad_title,
            x_labels=pos,
            y_labels=seqs,
            yes=token_word,
            no=pad_word,
            x_title=position_title,
            y_title="",
            text=[[token_word if r else pad_cell for r in row] for row in real],
            height=PADDING_PX,
        )
        layout_text = "; ".join(
            _("sequence {i} has {tokens} and {padding}").format(
                i=i,
                tokens=ngettext("{n} token", "{n} tokens", n).format(n=n),
                padding=ngettext("{n} padding position", "{n} padding positions", T - n).format(n=T - n),
            )
            for i, n in enumerate(masks.lengths)
        )
        if side == "right":
            pad_summary = (
                _("Right padding: {sequences}. Padding is masked.")
                if use_padding
                else _("Right padding: {sequences}. Padding is NOT masked.")
            )
        else:
            pad_summary = (
                _("Left padding: {sequences}. Padding is masked.")
                if use_padding
                else _("Left padding: {sequences}. Padding is NOT masked.")
            )
        chart(
            fig,
            mask_table(real, seqs, pos, yes=token_word, no=pad_word, row_name=_("sequence"), col_name=position_title),
            pad_summary.format(sequences=layout_text),
            key="mask_pad_fig",
        )

    with zeroing_tab:
        exp = masking.mask_experiment(masks, seed=seed)
        cmp = exp.comparison
        st.markdown(
            _(
                "A tempting shortcut: take softmax over every key and then set the forbidden weights to 0. It is too "
                "late. Softmax has already handed part of the probability to the forbidden keys, so the weights left "
                "in the row add up to **less than one**. The gap is the *missing mass*. The scores here are random "
                "(seeded) for sequence {b}, the one inspected in the first tab."
            ).format(b=b)
        )
        asked = masking.first_partly_masked_row(masks.combined[b])  # the first row where zeroing loses something
        row_allowed = masks.combined[b, asked].tolist()  # (S,)
        row_scores = exp.result.scores[b, asked].tolist()  # (S,)
        projector.dataframe(
            pd.DataFrame(
                {
                    _("key s"): list(range(T)),
                    allowed_word: [_("yes") if ok else _("no (forbidden)") for ok in row_allowed],
                    _("score of row {t}").format(t=asked): [round(x, 4) for x in row_scores],
                }
            ),
            hide_index=True,
            key="mask_row_scores",
        )
        after_sum = cmp.after_sum[b, asked].item()
        allowed_keys = [str(s) for s in range(T) if row_allowed[s]]
        forbidden_keys = [str(s) for s in range(T) if not row_allowed[s]]
        # Kept in English (the prompt's msgid and its numbers): the question and its fingerprint are the same in
        # every language, and ui/predict shows it translated. `why` is shown as it is.
        template = (
            PROMPT
            if allowed_keys and forbidden_keys
            else PROMPT_NONE_FORBIDDEN
            if allowed_keys
            else (PROMPT_NONE_ALLOWED)
        )
        values = {"t": str(asked), "b": str(b), "T": str(T)}
        values |= {"allowed": ", ".join(allowed_keys)} if allowed_keys else {}
        values |= {"forbidden": ", ".join(forbidden_keys)} if forbidden_keys else {}
        allowed_names = ", ".join(allowed_keys) or _("none")
        forbidden_names = ", ".join(forbidden_keys) or _("none")
        question = Question(
            id="masks_predict",
            topic=N_("masking before softmax"),
            page="views/masks.py",
            prompt=template.format(**values),
            template=template,
            values=tuple(values.items()),
            answer=after_sum,
            tolerance=ZERO_TOLERANCE,
            why=_(
                "Softmax over all {T} keys hands the forbidden keys ({forbidden}) {missing} of the weight; zeroing "
                "them leaves the allowed keys ({allowed}) {kept}. Masking before softmax gives the allowed keys "
                "{before}."
            ).format(
                T=T,
                forbidden=forbidden_names,
                missing=i18n.number(cmp.missing_mass[b, asked].item(), 4),
                allowed=allowed_names,
                kept=i18n.number(after_sum, 4),
                before=i18n.number(cmp.before_sum[b, asked].item(), 4),
            ),
        )
        hint = _(
            "Softmax over every key sums to 1. Zeroing the forbidden weights afterwards removes their share, so what "
            "is left is the sum of e^score over the allowed keys divided by the sum of e^score over all keys. "
            "A score 1 higher than another gets e ≈ 2.7 times its weight."
        )
        if predict.ask(question, hint=hint) is not None:
            before = [[w if ok else None for w, ok in zip(row, m)] for row, m in zip(cmp.before[b].tolist(), combined)]
            after = [[w if ok else None for w, ok in zip(row, m)] for row, m in zip(cmp.after[b].tolist(), combined)]
            weight_word = _("weight")
            left, right = st.columns(2)
            with left:
                chart(
                    charts.heatmap(
                        before,
                        title=_("Mask before softmax (the formula)"),
                        x_labels=pos,
                        y_labels=pos,
                        zmin=0,
                        zmax=1,
                    ),
                    matrix_table(before, pos, pos, value_name=weight_word),
                    _("Masked before softmax, row sums: {sums}.").format(sums=fmt(cmp.before_sum[b].tolist())),
                    key="mask_before",
                )
            with right:
                chart(
                    charts.heatmap(
                        after,
                        title=_("Softmax first, forbidden weights zeroed after"),
                        x_labels=pos,
                        y_labels=pos,
                        zmin=0,
                        zmax=1,
                    ),
                    matrix_table(after, pos, pos, value_name=weight_word),
                    _("Zeroed after softmax, row sums: {sums}.").format(sums=fmt(cmp.after_sum[b].tolist())),
                    key="mask_after",
                )
            missing = cmp.missing_mass[b].tolist()  # (T,)
            chart(
                charts.bars(
                    [_("row {t}").format(t=t) for t in pos],
                    missing,
                    title=_("Missing mass per row when zeroing after softmax"),
                    y_title=_("1 − sum of allowed weights"),
                    y_range=(0, 1.15),
                ),
                pd.DataFrame(
                    {
                        _("query t"): list(range(T)),
                        _("allowed keys"): masks.allowed_keys[b].tolist(),
                        _("row sum, mask before"): [round(x, 6) for x in cmp.before_sum[b].tolist()],
                        _("row sum, zeroed after"): [round(x, 6) for x in cmp.after_sum[b].tolist()],
                        _("missing mass"): [round(x, 6) for x in missing],
                    }
                ),
                _(
                    "Missing mass per row of sequence {b}: {missing}. A row with nothing forbidden misses 0; a row "
                    "with every key forbidden misses all of it."
                ).format(b=b, missing=fmt(missing)),
                key="mask_missing",
                table_open=True,
            )

    with renormalise_tab:
        st.markdown(
            _(
                "Dividing the zeroed row by its sum puts the missing mass back, and in exact arithmetic gives the "
                "same weights as masking before softmax. Computers are not exact. If a forbidden key has a much "
                "larger score than the allowed ones, softmax gives it almost everything and the allowed weights "
                "**underflow**: they become too small for a float32 and are stored as 0. Renormalising is then "
                "0 / 0. The lab never does this: it masks before softmax, where the forbidden score is ignored. "
                "For this demonstration, the lab defines 0 / 0 as 0 so the table stays readable, and marks the "
                "plain division as undefined."
            )
        )
        example = lessons.worked_example()
        spike = params.number_input(
            _("Forbidden logit (key 3 of row 2 of the worked example)"), "mask_spike", 0.0, 10000.0, 1000.0, 10.0
        )
        worked_scores, worked_allowed = example.result.scores[0, 2], example.mask[2]  # (S,), (S,)
        case = masking.renormalise_after_softmax(worked_scores, worked_allowed, forbidden_logit=spike)
        keys = list(range(len(case.logits)))
        plain = [nan if case.undefined else i18n.number(x, 6) for x in case.renormalised.tolist()]
        projector.dataframe(
            pd.DataFrame(
                {
                    _("key s"): keys,
                    allowed_word: [_("yes") if ok else _("no") for ok in case.allowed.tolist()],
                    _("score"): [i18n.number(x, 4) for x in case.logits.tolist()],
                    _("softmax over all keys"): [sig(x, ".6g") for x in case.unmasked.tolist()],
                    _("renormalised, plain division"): plain,
                    _("renormalised, what the lab returns"): [i18n.number(x, 6) for x in case.renormalised.tolist()],
                    _("mask before softmax (correct)"): [i18n.number(x, 6) for x in case.masked.tolist()],
                }
            ),
            hide_index=True,
            key="mask_renorm_table",
        )
        if case.undefined:
            layout.lesson_case(
                _("renormalising is 0 / 0 = {nan}").format(nan=nan),
                _(
                    "With a forbidden logit of {logit}, the allowed keys keep {kept} of the weight after softmax: "
                    "every allowed weight underflowed to 0, so the plain division is 0 / 0 = {nan}. The lab's "
                    "renormalised row is all zeros, off by {error} from the masked softmax ({masked}), which is "
                    "unaffected."
                ).format(
                    logit=sig(spike, "g"),
                    kept=sig(case.kept_mass, "g"),
                    nan=nan,
                    error=i18n.number(case.max_error, 4),
                    masked=fmt(case.masked.tolist()),
                ),
            )
        else:
            st.info(
                _(
                    "With a forbidden logit of {logit}, the allowed keys keep {kept} of the weight; renormalising "
                    "differs from the masked softmax by at most {error}."
                ).format(logit=sig(spike, "g"), kept=sig(case.kept_mass, ".6g"), error=sig(case.max_error, ".3g"))
            )
        sweep = cached.worked_row_sweep(2, masking.RENORMALISE_SWEEP)  # the same row 2 of the worked example
        first_bad = next((r for r in sweep if r.undefined), None)
        last_good = [r for r in sweep if r.max_error <= 1e-6][-1]  # logit 0 always qualifies
        logit_title = _("forbidden logit")
        sweep_fig = charts.lines(
            [r.forbidden_logit for r in sweep],
            {_("max |renormalised − masked softmax|"): [r.max_error if r.max_error > 0 else None for r in sweep]},
            title=_("Error of renormalising against the forbidden logit (float32, logarithmic axis)"),
            x_title=logit_title,
            y_title=_("largest error in the row (0 is not drawn)"),
            log_y=True,
            y_axis=dict(exponentformat="power"),
        )
        if first_bad:
            sweep_summary = _(
                "Renormalising agrees with the masked softmax within 1e-6 up to a forbidden logit of {logit} (kept "
                "mass {kept}), drifts as the weights lose precision, and from {bad} on every allowed weight is 0, "
                "the division is 0 / 0 and the error is {error}."
            ).format(
                logit=sig(last_good.forbidden_logit, "g"),
                kept=sig(last_good.kept_mass, ".2e"),
                bad=sig(first_bad.forbidden_logit, "g"),
                error=i18n.number(first_bad.max_error, 4),
            )
        else:
            sweep_summary = _(
                "Renormalising agrees with the masked softmax within 1e-6 up to a forbidden logit of {logit} (kept "
                "mass {kept}), drifts as the weights lose precision, and stays defined over this range."
            ).format(logit=sig(last_good.forbidden_logit, "g"), kept=sig(last_good.kept_mass, ".2e"))
        chart(
            sweep_fig,
            pd.DataFrame(
                {
                    logit_title: [r.forbidden_logit for r in sweep],
                    _("mass kept by allowed keys"): [sig(r.kept_mass, ".3e") for r in sweep],
                    _("plain division"): [nan if r.undefined else _("defined") for r in sweep],
                    _("max error"): [sig(r.max_error, ".3e") for r in sweep],
                }
            ),
            sweep_summary,
            key="mask_sweep",
        )

    with empty_tab:
        empty = exp.empty
        st.markdown(
            _(
                "Sometimes a query has nothing it may look at, such as the first row of a left-padded sequence "
                "under the causal mask, which sees only padding. Softmax over a row of −∞ is 0 / 0. The lab defines "
                "the answer: **all weights 0, output 0**, and gradients that stay finite. A naive softmax returns "
                "{nan} there, and during training that value spreads through the gradient to every value vector of "
                "the sequence."
            ).format(nan=nan)
        )
        if not empty_rows:
            st.info(
                _(
                    "No row of sequence {b} is fully masked with these settings. Try left padding with the causal "
                    "mask on and a sequence shorter than the longest one, or a length of 0."
                ).format(b=b)
            )
        else:
            naive_rows = empty.naive_nan_rows[b].tolist()  # (T,)
            rows_table = pd.DataFrame(
                {
                    _("query t"): empty_rows,
                    _("allowed keys"): [masks.allowed_keys[b, t].item() for t in empty_rows],
                    _("lab weights"): [fmt(empty.weights[b, t].tolist(), 1) for t in empty_rows],
                    _("lab output"): [fmt(empty.out[b, t].tolist()) for t in empty_rows],
                    _("gradient w.r.t. q_t"): [fmt(empty.grad_q[b, t].tolist()) for t in empty_rows],
                    _("naive softmax weights"): [
                        nan if naive_rows[t] else fmt(empty.naive_weights[b, t].tolist(), 1) for t in empty_rows
                    ],
                }
            )
            projector.dataframe(rows_table, hide_index=True, key="mask_empty_table")
            rows_text = ", ".join(str(t) for t in empty_rows)
            empty_text = (
                _(
                    "Rows {rows} of sequence {b} have no allowed key. The lab returns zero weights and a zero output "
                    "for them, and every one of the {entries} gradient entries (q, k and v of the whole batch) is "
                    "finite. The naive softmax gives {nan} weights on those rows, and {nan_entries} of the {entries} "
                    "gradient entries would be {nan}."
                )
                if empty.grads_finite
                else _(
                    "Rows {rows} of sequence {b} have no allowed key. The lab returns zero weights and a zero output "
                    "for them, and every one of the {entries} gradient entries (q, k and v of the whole batch) is "
                    "NOT finite. The naive softmax gives {nan} weights on those rows, and {nan_entries} of the "
                    "{entries} gradient entries would be {nan}."
                )
            )
            st.markdown(
                empty_text.format(
                    rows=rows_text, b=b, entries=empty.grad_entries, nan=nan, nan_entries=empty.naive_nan_grads
                )
            )


tabs_section()
