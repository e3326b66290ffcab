"""Masks: causal and padding masks, why they go before softmax, and what a row with no allowed key returns."""

import pandas as pd
import streamlit as st

from core.attention import causal_mask
from core.classroom.checkpoint import Question
from core.lessons import masks as masking
from core.lessons import scores as lessons
from ui import cached, charts, fragment, layout, params, predict, projector
from ui.companion import chart, matrix_table
from ui.mask_charts import mask_figure, mask_table
from ui.text import escape_markdown

NAN_TEXT = "NaN (undefined)"
DEFAULT_SENTENCE = "the cat sat down"
DEFAULT_LENGTHS = (6, 4, 2)
TABS = [  # the sections beyond the causal-mask picture, one click away
    "A batch of different lengths",
    "Mask before softmax, or zero after?",
    "Renormalising, and when it breaks",
    "A row with no allowed key",
]
SMALL_PX, PADDING_PX = 340, 220  # the batch tab's two square masks side by side, the three-row padding mask
ZERO_TOLERANCE = 0.05  # a hand estimate of a few exponentials


def fmt(values, digits=4):
    return ", ".join(f"{x:.{digits}f}" for x in values)


st.title("Masks")
st.caption(
    "A mask decides which keys each query may look at. It is applied to the scores before softmax: a forbidden "
    "score becomes −∞, its exponential is 0, and the allowed keys share all of the weight."
)
picture_col, side_col = st.columns([3, 2])
with side_col:  # the sentence that drives the picture, beside it
    text = params.text_input("A short sentence (one token per word, up to 8 words)", "mask_text", DEFAULT_SENTENCE)
    try:
        words = masking.word_tokens(text)
    except ValueError as err:
        st.warning(f"That sentence could not be used: {escape_markdown(err)}. Showing '{DEFAULT_SENTENCE}' instead.")
        words = masking.word_tokens(DEFAULT_SENTENCE)
word_labels = [f"{i} {w}" for i, w in enumerate(words)]
causal_words = causal_mask(len(words)).tolist()  # (T, S)
with picture_col, layout.picture():
    chart(
        mask_figure(
            causal_words,
            title=f"Causal mask for {len(words)} tokens",
            x_labels=word_labels,
            y_labels=word_labels,
            yes="allowed",
            no="forbidden",
        ),
        mask_table(causal_words, word_labels, word_labels, yes="allowed", no="forbidden"),
        "Causal mask: "
        + "; ".join(  # the words come from the link: escaped for the caption
            f"'{escape_markdown(w)}' sees "
            + " ".join(escape_markdown(words[s]) for s in range(len(words)) if causal_words[t][s])
            for t, w in enumerate(words)
        )
        + ".",
        key="mask_words",
    )
with side_col:
    st.markdown(
        "When a model predicts the next word, a word must not peek at the words after it. The **causal** "
        "mask allows query $t$ (a row) to see keys $0 … t$ and forbids every key to its right.\n\n"
        "The tabs below follow it: causal and padding masks on a batch of sequences of different lengths, "
        "and three things that go wrong when masking is done differently."
    )


@fragment.section
def tabs_section() -> None:
    """The tabs: the batch tab's lengths, padding and sequence drive it and the zeroing and empty-row tabs, so all
    four rerun together, without the sentence's picture above or app.py's sidebar."""
    batch_tab, zeroing_tab, renormalise_tab, empty_tab = layout.more(TABS)

    with batch_tab:
        st.markdown(
            "A batch fills shorter sequences up with **padding** to the longest one's length; the **padding mask** "
            "forbids those positions as keys. Right padding puts the words first, left padding (how prompts are "
            "batched for generation) puts them last. A key is allowed only if **both** masks allow it: the combined "
            "mask is causal AND padding."
        )
        cols = st.columns([0.9, 0.9, 0.9, 1.1, 1.2, 1.2, 0.9, 0.9])  # one row: the toggles need their labels
        lengths = []
        for b, col in enumerate(cols[:3]):
            with col:
                lengths.append(params.slider(f"Length of sequence {b}", f"mask_len{b}", 0, 8, DEFAULT_LENGTHS[b]))
        with cols[3]:
            side = params.radio("Padding side", "mask_side", ["right", "left"], "left", horizontal=True)
        with cols[4]:
            use_causal = params.toggle("Causal mask", "mask_causal", True)
        with cols[5]:
            use_padding = params.toggle("Padding mask", "mask_pad", True)
        with cols[6]:
            b = params.selectbox("Sequence to inspect", "mask_seq", [0, 1, 2], 1)
        with cols[7]:
            seed = params.number_input("Seed for the scores", "mask_seed", 0, 9999, 0, 1)
        try:
            masks = masking.ragged_masks(lengths, side=side, causal=use_causal, padding=use_padding)
        except ValueError as err:
            st.warning(f"Those lengths cannot form a batch: {err}. Showing lengths {list(DEFAULT_LENGTHS)} instead.")
            masks = masking.ragged_masks(DEFAULT_LENGTHS, side=side, causal=use_causal, padding=use_padding)
        T = len(masks.causal)
        pos = [str(i) for i in range(T)]
        seqs = [f"sequence {i}" for i in range(len(masks.lengths))]
        st.caption(
            f"Lengths {list(masks.lengths)}: every sequence is padded to T = {T}, the longest one. With left padding "
            "and the causal mask, the first rows of a short sequence see nothing but padding: they have no allowed "
            "key at all (the last tab)."
        )

        combined = masks.combined[b].tolist()  # (T, S)
        empty_rows = [t for t, e in enumerate(masks.no_allowed_key[b].tolist()) if e]
        left, right = st.columns(2)
        with left:
            causal_rows = masks.causal.tolist()  # (T, S)
            state = "on" if use_causal else "off: every query sees every key"
            chart(
                mask_figure(
                    causal_rows,
                    title=f"Causal mask ({state})",
                    x_labels=pos,
                    y_labels=pos,
                    yes="allowed",
                    no="forbidden",
                    height=SMALL_PX,
                ),
                mask_table(causal_rows, pos, pos, yes="allowed", no="forbidden"),
                f"Causal mask {state}; for T = {T}, query t may attend to keys 0 to t."
                if use_causal
                else f"Causal mask off: all {T} × {T} pairs are allowed.",
                key="mask_causal_fig",
            )
        with right:
            chart(
                mask_figure(
                    combined,
                    title=f"Combined mask, sequence {b} (length {masks.lengths[b]})",
                    x_labels=pos,
                    y_labels=pos,
                    yes="allowed",
                    no="forbidden",
                    height=SMALL_PX,
                ),
                mask_table(combined, pos, pos, yes="allowed", no="forbidden"),
                f"Sequence {b}, length {masks.lengths[b]}, {side} padding: "
                + "; ".join(
                    f"row {t} sees " + (", ".join(str(s) for s in range(T) if combined[t][s]) or "nothing")
                    for t in range(T)
                )
                + ".",
                key="mask_combined",
            )
        real = masks.real.tolist()  # (B, S)
        pad_word = "pad (masked)" if use_padding else "pad (not masked)"
        # Coloured by the mask as applied (padding off: all allowed), labelled by what each position holds;
        # two short lines fit the narrow cells where "pad (not masked)" would shrink to an unreadable size.
        pad_cell = "pad<br>masked" if use_padding else "pad<br>allowed"
        fig = mask_figure(
            masks.padding[:, 0].tolist(),
            title=f"Padding mask ({'on' if use_padding else 'off'}, {side} padding)",
            x_labels=pos,
            y_labels=seqs,
            yes="token",
            no=pad_word,
            x_title="position s",
            y_title="",
            text=[["token" if r else pad_cell for r in row] for row in real],
            height=PADDING_PX,
        )
        chart(
            fig,
            mask_table(real, seqs, pos, yes="token", no=pad_word, row_name="sequence", col_name="position s"),
            f"{side.capitalize()} padding: "
            + "; ".join(
                f"sequence {i} has {n} token{'s' if n != 1 else ''} and {T - n} padding "
                f"position{'s' if T - n != 1 else ''}"
                for i, n in enumerate(masks.lengths)
            )
            + (". Padding is masked." if use_padding else ". Padding is NOT masked."),
            key="mask_pad_fig",
        )

    with zeroing_tab:
        exp = masking.mask_experiment(masks, seed=seed)
        cmp = exp.comparison
        st.markdown(
            "A tempting shortcut: take softmax over every key and then set the forbidden weights to 0. "
            "It is too late. Softmax has already handed part of the probability to the forbidden keys, so "
            "the weights left in the row add up to **less than one**. The gap is the *missing mass*. "
            f"The scores here are random (seeded) for sequence {b}, the one inspected in the first tab."
        )
        asked = masking.first_partly_masked_row(masks.combined[b])  # the first row where zeroing loses something
        row_allowed = masks.combined[b, asked].tolist()  # (S,)
        row_scores = exp.result.scores[b, asked].tolist()  # (S,)
        projector.dataframe(
            pd.DataFrame(
                {
                    "key s": list(range(T)),
                    "allowed": ["yes" if ok else "no (forbidden)" for ok in row_allowed],
                    f"score of row {asked}": [round(x, 4) for x in row_scores],
                }
            ),
            hide_index=True,
            key="mask_row_scores",
        )
        after_sum = cmp.after_sum[b, asked].item()
        allowed_names = ", ".join(str(s) for s in range(T) if row_allowed[s]) or "none"
        forbidden_names = ", ".join(str(s) for s in range(T) if not row_allowed[s]) or "none"
        question = Question(
            id="masks_predict",
            topic="masking before softmax",
            page="views/masks.py",
            prompt=f"Row {asked} of sequence {b} has the scores in the table above: keys {allowed_names} are allowed, "
            f"keys {forbidden_names} forbidden. Take softmax over all {T} keys, then set the forbidden weights to 0. "
            f"What does row {asked} sum to?",
            answer=after_sum,
            tolerance=ZERO_TOLERANCE,
            why=f"Softmax over all {T} keys hands the forbidden keys ({forbidden_names}) "
            f"{cmp.missing_mass[b, asked].item():.4f} of the weight; zeroing them leaves the allowed keys "
            f"({allowed_names}) {after_sum:.4f}. Masking before softmax gives the allowed keys "
            f"{cmp.before_sum[b, asked].item():.4f}.",
        )
        hint = (
            "Softmax over every key sums to 1. Zeroing the forbidden weights afterwards removes their share, so what "
            "is left is the sum of e^score over the allowed keys divided by the sum of e^score over all keys. "
            "A score 1 higher than another gets e ≈ 2.7 times its weight."
        )
        if predict.ask(question, hint=hint) is not None:
            before = [[w if ok else None for w, ok in zip(row, m)] for row, m in zip(cmp.before[b].tolist(), combined)]
            after = [[w if ok else None for w, ok in zip(row, m)] for row, m in zip(cmp.after[b].tolist(), combined)]
            left, right = st.columns(2)
            with left:
                chart(
                    charts.heatmap(
                        before, title="Mask before softmax (the formula)", x_labels=pos, y_labels=pos, zmin=0, zmax=1
                    ),
                    matrix_table(before, pos, pos, value_name="weight"),
                    "Masked before softmax, row sums: " + fmt(cmp.before_sum[b].tolist()) + ".",
                    key="mask_before",
                )
            with right:
                chart(
                    charts.heatmap(
                        after,
                        title="Softmax first, forbidden weights zeroed after",
                        x_labels=pos,
                        y_labels=pos,
                        zmin=0,
                        zmax=1,
                    ),
                    matrix_table(after, pos, pos, value_name="weight"),
                    "Zeroed after softmax, row sums: " + fmt(cmp.after_sum[b].tolist()) + ".",
                    key="mask_after",
                )
            missing = cmp.missing_mass[b].tolist()  # (T,)
            chart(
                charts.bars(
                    [f"row {t}" for t in pos],
                    missing,
                    title="Missing mass per row when zeroing after softmax",
                    y_title="1 − sum of allowed weights",
                    y_range=(0, 1.15),
                ),
                pd.DataFrame(
                    {
                        "query t": list(range(T)),
                        "allowed keys": masks.allowed_keys[b].tolist(),
                        "row sum, mask before": [round(x, 6) for x in cmp.before_sum[b].tolist()],
                        "row sum, zeroed after": [round(x, 6) for x in cmp.after_sum[b].tolist()],
                        "missing mass": [round(x, 6) for x in missing],
                    }
                ),
                f"Missing mass per row of sequence {b}: {fmt(missing)}. A row with nothing forbidden misses 0; "
                "a row with every key forbidden misses all of it.",
                key="mask_missing",
                table_open=True,
            )

    with renormalise_tab:
        st.markdown(
            "Dividing the zeroed row by its sum puts the missing mass back, and in exact arithmetic gives the "
            "same weights as masking before softmax. Computers are not exact. If a forbidden key has a much "
            "larger score than the allowed ones, softmax gives it almost everything and the allowed weights "
            "**underflow**: they become too small for a float32 and are stored as 0. Renormalising is then "
            "0 / 0. The lab never does this: it masks before softmax, where the forbidden score is ignored. "
            "For this demonstration, the lab defines 0 / 0 as 0 so the table stays readable, and marks the "
            "plain division as undefined."
        )
        example = lessons.worked_example()
        spike = params.number_input(
            "Forbidden logit (key 3 of row 2 of the worked example)", "mask_spike", 0.0, 10000.0, 1000.0, 10.0
        )
        worked_scores, worked_allowed = example.result.scores[0, 2], example.mask[2]  # (S,), (S,)
        case = masking.renormalise_after_softmax(worked_scores, worked_allowed, forbidden_logit=spike)
        keys = list(range(len(case.logits)))
        plain = [NAN_TEXT if case.undefined else f"{x:.6f}" for x in case.renormalised.tolist()]
        projector.dataframe(
            pd.DataFrame(
                {
                    "key s": keys,
                    "allowed": ["yes" if ok else "no" for ok in case.allowed.tolist()],
                    "score": [f"{x:.4f}" for x in case.logits.tolist()],
                    "softmax over all keys": [f"{x:.6g}" for x in case.unmasked.tolist()],
                    "renormalised, plain division": plain,
                    "renormalised, what the lab returns": [f"{x:.6f}" for x in case.renormalised.tolist()],
                    "mask before softmax (correct)": [f"{x:.6f}" for x in case.masked.tolist()],
                }
            ),
            hide_index=True,
            key="mask_renorm_table",
        )
        if case.undefined:
            layout.lesson_case(
                f"renormalising is 0 / 0 = {NAN_TEXT}",
                f"With a forbidden logit of {spike:g}, the allowed keys keep {case.kept_mass:g} of the weight after "
                f"softmax: every allowed weight underflowed to 0, so the plain division is 0 / 0 = {NAN_TEXT}. The "
                f"lab's renormalised row is all zeros, off by {case.max_error:.4f} from the masked softmax "
                f"({fmt(case.masked.tolist())}), which is unaffected.",
            )
        else:
            st.info(
                f"With a forbidden logit of {spike:g}, the allowed keys keep {case.kept_mass:.6g} of the weight; "
                f"renormalising differs from the masked softmax by at most {case.max_error:.3g}."
            )
        sweep = cached.worked_row_sweep(2, masking.RENORMALISE_SWEEP)  # the same row 2 of the worked example
        first_bad = next((r for r in sweep if r.undefined), None)
        last_good = [r for r in sweep if r.max_error <= 1e-6][-1]  # logit 0 always qualifies
        sweep_fig = charts.lines(
            [r.forbidden_logit for r in sweep],
            {"max |renormalised − masked softmax|": [r.max_error if r.max_error > 0 else None for r in sweep]},
            title="Error of renormalising against the forbidden logit (float32, logarithmic axis)",
            x_title="forbidden logit",
            y_title="largest error in the row (0 is not drawn)",
            log_y=True,
            y_axis=dict(exponentformat="power"),
        )
        chart(
            sweep_fig,
            pd.DataFrame(
                {
                    "forbidden logit": [r.forbidden_logit for r in sweep],
                    "mass kept by allowed keys": [f"{r.kept_mass:.3e}" for r in sweep],
                    "plain division": [NAN_TEXT if r.undefined else "defined" for r in sweep],
                    "max error": [f"{r.max_error:.3e}" for r in sweep],
                }
            ),
            f"Renormalising agrees with the masked softmax within 1e-6 up to a forbidden logit of "
            f"{last_good.forbidden_logit:g} (kept mass {last_good.kept_mass:.2e}), drifts as the weights "
            "lose precision, and "
            + (
                f"from {first_bad.forbidden_logit:g} on every allowed weight is 0, the division is 0 / 0 and the "
                f"error is {first_bad.max_error:.4f}."
                if first_bad
                else "stays defined over this range."
            ),
            key="mask_sweep",
        )

    with empty_tab:
        empty = exp.empty
        st.markdown(
            "Sometimes a query has nothing it may look at, such as the first row of a left-padded sequence "
            "under the causal mask, which sees only padding. Softmax over a row of −∞ is 0 / 0. "
            "The lab defines the answer: **all weights 0, output 0**, and gradients that stay finite. "
            f"A naive softmax returns {NAN_TEXT} there, and during training that value spreads through the "
            "gradient to every value vector of the sequence."
        )
        if not empty_rows:
            st.info(
                f"No row of sequence {b} is fully masked with these settings. Try left padding with the causal "
                "mask on and a sequence shorter than the longest one, or a length of 0."
            )
        else:
            naive_rows = empty.naive_nan_rows[b].tolist()  # (T,)
            rows_table = pd.DataFrame(
                {
                    "query t": empty_rows,
                    "allowed keys": [masks.allowed_keys[b, t].item() for t in empty_rows],
                    "lab weights": [fmt(empty.weights[b, t].tolist(), 1) for t in empty_rows],
                    "lab output": [fmt(empty.out[b, t].tolist()) for t in empty_rows],
                    "gradient w.r.t. q_t": [fmt(empty.grad_q[b, t].tolist()) for t in empty_rows],
                    "naive softmax weights": [
                        NAN_TEXT if naive_rows[t] else fmt(empty.naive_weights[b, t].tolist(), 1) for t in empty_rows
                    ],
                }
            )
            projector.dataframe(rows_table, hide_index=True, key="mask_empty_table")
            st.markdown(
                f"Rows {', '.join(str(t) for t in empty_rows)} of sequence {b} have no allowed key. The lab returns "
                "zero "
                f"weights and a zero output for them, and every one of the {empty.grad_entries} gradient entries "
                f"(q, k and v of the whole batch) is {'finite' if empty.grads_finite else 'NOT finite'}. "
                f"The naive softmax gives {NAN_TEXT} weights on those rows, and {empty.naive_nan_grads} of the "
                f"{empty.grad_entries} gradient entries would be {NAN_TEXT}."
            )


tabs_section()
