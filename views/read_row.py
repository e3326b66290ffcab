"""Read one row: one query's attention weights, checked to sum to one, and its output computed by hand.

Every control is in the address bar (row_src, row_seed, row_T, row_D, row_t), so another page can link
to a given row with its own numbers.
"""

import pandas as pd
import streamlit as st

from core import i18n
from core.classroom.checkpoint import Question
from core.i18n import N_, _
from core.lessons import one_row as row_reading
from ui import charts, fragment, layout, params, predict, projector
from ui.companion import chart
from ui.text import verdict

WORKED, RANDOM, MODEL = N_("worked example"), N_("random"), N_("attention inspector")  # link values, shown with _()
# The question's options: how much of the row's one unit of weight its largest-scoring key takes. The scores chart
# shows which key that is, never how much it gets: that takes softmax (issue 38: the tallest bar gave it away).
PROMPT = N_(
    "Row {t}'s weights add up to one. How much of it goes to key {top}, the key with the largest score?"
)  # the prediction's question, with its numbers as placeholders
SHARES = ((0.0, N_("less than 0.4")), (0.4, N_("0.4 to 0.6")), (0.6, N_("0.6 to 0.8")), (0.8, N_("0.8 or more")))


def share_option(weight: float) -> str:
    """The option of SHARES that holds `weight` (each from its bound up to the next one's), in English."""
    return [label for bound, label in SHARES if weight >= bound][-1]


def local(text: str) -> str:
    """A number already written with '.' (repr, or a format spec such as 'g' or '.1e') in the language's sign."""
    return text.replace(".", i18n.number(0.5, 1)[1])


def sig(x: float, spec: str) -> str:
    return local(format(x, spec))


def listing(items) -> str:
    """Numbers in a row: 'a, b' (where the decimal sign is a comma, 'a; b')."""
    return ("; " if i18n.number(0.5, 1)[1] == "," else ", ").join(items)


def num(x: float, digits: int = 6) -> str:
    return i18n.number(x + 0.0, digits)  # + 0.0 turns -0.0 (a masked weight times a negative value) into 0.0


def vec(xs, digits: int = 4) -> str:
    return "(" + listing(num(x, digits) for x in xs) + ")"


st.title(_("Read one row"))
st.caption(
    _(
        "One row of the attention matrix belongs to one query. Under the causal mask, row t may look at keys 0 … t "
        "only; softmax spreads exactly one unit of weight over them, and the output of the row is the weighted sum "
        "of their value rows. Predict the row from its scores, then check it by hand against the tensor code."
    )
)


@fragment.section
def page_section() -> None:
    """The source, the row and its question drive the picture and every tab: a change reruns this page body only,
    not app.py's sidebar."""
    inspected = st.session_state.get("inspector_row")  # set by the Attention inspector page
    cols = st.columns([3, 1, 1, 1, 2])
    with cols[0]:
        sources = [WORKED, RANDOM] + ([MODEL] if inspected else [])
        source = params.radio(
            _("Numbers from"),
            "row_src",
            sources,
            MODEL if inspected else WORKED,
            horizontal=True,
            format_func={s: i18n._(s) for s in sources}.__getitem__,  # the names in this run's language
        )
    if source == WORKED:
        q, k, v = row_reading.row_inputs(worked=True)
        about = _(
            "The lesson's worked example (torch.manual_seed(2), causal mask): q {q}, k {k}, v {v} for its one sequence."
        ).format(q=tuple(q.shape), k=tuple(k.shape), v=tuple(v.shape))
    elif source == MODEL and inspected:
        q, k, v = row_reading.row_inputs_from_lists(inspected["q"], inspected["k"], inspected["v"])
        about = _(
            "The loaded model's layer {layer}, head {head} on the text the Attention inspector read, queries and "
            "keys 0 to {t} (after RoPE): q {q}, k {k}, v {v}. The last row is the one you picked there."
        ).format(
            layer=inspected["layer"],
            head=inspected["head"],
            t=inspected["t"],
            q=tuple(q.shape),
            k=tuple(k.shape),
            v=tuple(v.shape),
        )
    else:
        with cols[1]:
            seed = params.number_input(_("Random seed"), "row_seed", 0, 9999, 0, 1)
        with cols[2]:
            T_random = params.slider(_("Sequence length T"), "row_T", 2, 8, 5)
        with cols[3]:
            D_random = params.slider(_("Head width D"), "row_D", 1, 8, 3)
        q, k, v = row_reading.row_inputs(worked=False, seed=seed, T=T_random, D=D_random)
        about = _("Random q {q}, k {k}, v {v} drawn with seed {seed}.").format(
            q=tuple(q.shape), k=tuple(k.shape), v=tuple(v.shape), seed=seed
        )
    T, D = q.shape  # (T, D)
    with cols[4]:
        t = params.slider(_("Query row t"), "row_t", 0, T - 1, T - 1)

    reading = row_reading.read_row(q, k, v, t)
    trace = reading.trace
    keys = list(range(len(reading.weights)))
    key_labels = [_("key {s}").format(s=s) for s in keys]
    yes, no_future = _("yes"), _("no (future)")

    top = max(keys, key=lambda s: reading.weights[s])  # masked keys weigh exactly 0, so top is allowed
    # Kept in English (the prompt's msgid and its numbers, the options): the question and its fingerprint are the
    # same in every language, and ui/predict shows it translated. `why` is shown as it is.
    values = {"t": str(t), "top": str(top)}
    question = Question(
        id="row_predict",
        topic=N_("reading one row"),
        page="views/read_row.py",
        prompt=PROMPT.format(**values),
        template=PROMPT,
        values=tuple(values.items()),
        answer=share_option(reading.weights[top]),
        options=tuple(label for _bound, label in SHARES),
        why=(
            _("Row 0 may see key 0 only, so softmax gives it the whole unit: weight 1.")
            if t == 0
            else _(
                "Key {top} gets {weight}: each key's weight is exp(score) over the sum of exp(score) for keys 0 to "
                "{t}, so the other keys keep {rest} between them."
            ).format(
                top=top,
                weight=i18n.number(reading.weights[top], 4),
                t=t,
                rest=i18n.number(1 - reading.weights[top], 4),
            )
        ),
    )
    hint = _(
        "Softmax gives each key 0 to {t} the weight exp(score) / (sum of exp(score) over those keys): a score 1 "
        "higher weighs e ≈ 2.7 times as much, 2 higher about 7.4 times. The picture shows row {t}'s score for each "
        "key; keys to the right of {t} are in the future and get 0."
    ).format(t=t)
    picture_col, ask_col = st.columns([3, 2])
    with picture_col, layout.picture():  # the question's inputs: the scores, never the weights that answer it
        chart(
            charts.bars(
                key_labels,
                [x if ok else None for x, ok in zip(trace.scores, reading.allowed)],
                title=_("Scores of query row {t}: q·k / √{D}").format(t=t, D=D),
                y_title=_("score"),
                text=[
                    i18n.number(x, 4) if ok else _("future (masked)") for x, ok in zip(trace.scores, reading.allowed)
                ],
            ),
            pd.DataFrame(
                {
                    _("key s"): keys,
                    _("allowed"): [yes if ok else no_future for ok in reading.allowed],
                    _("score = q·k / √D"): [
                        num(x) if ok else _("masked") for x, ok in zip(trace.scores, reading.allowed)
                    ],
                }
            ),
            _("Row {t} scores: {scores}.").format(
                t=t,
                scores=listing(
                    _("key {s} {value}").format(s=s, value=i18n.number(x, 4))
                    if ok
                    else _("key {s} masked (future)").format(s=s)
                    for s, (x, ok) in enumerate(zip(trace.scores, reading.allowed))
                ),
            ),
            key="row_scores",
        )
    with ask_col:
        graded = predict.ask(question, hint=hint)
        st.caption(about)  # where the numbers come from
    if graded is None:
        return  # everything below shows the weights
    weights_tab, hand_tab, compare_tab = layout.more(
        [_("1. The weights of row {t}").format(t=t), _("2. The same row by hand"), _("3. Hand against tensor")]
    )

    with weights_tab:
        st.markdown(
            _(
                "Row {t} may attend to keys 0 to {t}. Keys to its right are in the future: the mask sets their "
                "scores to −∞ before softmax, so their weights are exactly 0."
            ).format(t=t)
            if t
            else _(
                "Row 0 may attend to key 0 only. Keys to its right are in the future: the mask sets their scores to "
                "−∞ before softmax, so their weights are exactly 0."
            )
        )
        fig = charts.bars(
            key_labels,
            reading.weights,
            title=_("Weights of query row {t}").format(t=t),
            y_title=_("weight"),
            highlight=None,
            y_range=(0, 1.15),
            text=[i18n.number(w, 4) if ok else _("masked (0)") for w, ok in zip(reading.weights, reading.allowed)],
        )
        chart(
            fig,
            pd.DataFrame(
                {
                    _("key s"): keys,
                    _("allowed"): [yes if ok else no_future for ok in reading.allowed],
                    _("weight"): [num(w, 8) for w in reading.weights],
                }
            ),
            _("Row {t} weights: {weights}; the allowed weights sum to {total}.").format(
                t=t,
                weights=listing(
                    _("key {s} {value}").format(s=s, value=i18n.number(w, 4))
                    if ok
                    else _("key {s} masked (0)").format(s=s)
                    for s, (w, ok) in enumerate(zip(reading.weights, reading.allowed))
                ),
                total=i18n.number(reading.weight_sum, 8),
            ),
            key="row_weights",
        )
        figures = st.columns(3)
        figures[0].metric(_("Sum of the allowed weights"), i18n.number(reading.weight_sum, 8))
        figures[1].metric(_("|sum − 1|"), sig(reading.sum_error, ".1e"))
        figures[2].metric(_("Allowed keys"), _("0 to {t}").format(t=t) if t else _("0 only"))
        if t == 0:
            st.success(
                _(
                    "Row 0 may attend only to key 0, so its single allowed weight is exactly one: weight {weight}, "
                    "|weight − 1| = {error}."
                ).format(weight=local(repr(reading.weights[0])), error=sig(reading.sum_error, "g"))
            )

    with hand_tab:
        st.markdown(
            _(
                "Start from the query row and the key rows. For each allowed key: multiply q and k entry by entry "
                "and add (the dot product), divide by √D = √{D}, take the exponential, divide by the sum of the "
                "exponentials, and multiply the value row by the weight. We subtract the largest allowed score "
                "({row_max}) before taking exponentials, which keeps them from overflowing; it cancels in the "
                "division, so the weights do not change."
            ).format(D=D, row_max=i18n.number(trace.softmax.row_max, 6))
        )
        st.markdown(_("Query row q_{t} = `{vector}`").format(t=t, vector=vec(q[t].tolist())))
        projector.dataframe(
            pd.DataFrame({_("key s"): keys, "k_s": [vec(r) for r in k.tolist()], "v_s": [vec(r) for r in v.tolist()]}),
            hide_index=True,
            key="row_inputs",
        )
        hand = pd.DataFrame(
            {
                _("key s"): [str(s) for s in keys] + [_("sum")],
                _("allowed"): [yes if ok else _("no") for ok in reading.allowed] + [""],
                _("q·k term by term"): [" + ".join(f"({i18n.number(x, 4)})" for x in d.terms) for d in trace.dots]
                + [""],
                "q·k": [num(d.total) for d in trace.dots] + [""],
                _("score = q·k / √D"): [num(x) for x in trace.scores] + [""],
                _("exp(score − max)"): [
                    num(e) if ok else _("0 (masked)") for e, ok in zip(trace.softmax.exps, reading.allowed)
                ]
                + [num(trace.softmax.normaliser)],
                _("weight"): [num(w) for w in trace.softmax.weights] + [num(reading.hand_weight_sum)],
                _("weight × v_s"): [vec(wv, 6) for wv in trace.weighted_values] + [vec(trace.out, 9)],
            }
        )
        projector.dataframe(hand, hide_index=True, key="row_hand")
        st.caption(
            _(
                "Hand computation in Python floats (float64): the bottom row sums each column, so the weights add "
                "to {total} and the output row is {out}."
            ).format(total=i18n.number(reading.hand_weight_sum, 9), out=vec(trace.out, 9))
        )

    with compare_tab:
        st.markdown(
            _(
                "The tensor code computes every row at once; the hand computation works one number at a time. "
                "Adding the same numbers in another order rounds differently, so the two cannot agree to the last "
                "digit. We declare the allowance first: both work in float64 (the tensor code on these very "
                "numbers, cast exactly), and rounding alone can move a result by at most a small multiple of "
                "float64's epsilon times the length of the sums. A real mistake (a wrong mask, a missing √D) is off "
                "by far more. The float32 result, what the model computes with, is shown beside it with float32's "
                "own allowance; it does not decide."
            )
        )
        compare = pd.DataFrame(
            {
                _("output entry"): [f"out[{t}][{j}]" for j in range(len(reading.out))],
                _("by hand (float64)"): [num(x, 12) for x in trace.out],
                _("tensor (float64)"): [num(x, 12) for x in reading.out],
                _("|difference|"): [sig(x, ".2e") for x in reading.difference],
                _("within {allowance}").format(allowance=sig(reading.atol, ".1e")): [
                    yes if x <= reading.atol else _("no") for x in reading.difference
                ],
                _("tensor (float32, shown)"): [num(x, 9) for x in reading.out32],
            }
        )
        projector.dataframe(compare, hide_index=True, key="row_compare")
        st.caption(
            _(
                "Allowance {rule}. In float32 the largest difference is {difference} against float32's allowance "
                "{allowance}."
            ).format(
                rule=reading.decided.rule.removeprefix("<= "),
                difference=sig(reading.shown32.max_abs_diff, ".2e"),
                allowance=sig(reading.shown32.allowed, ".1e"),
            )
        )
        check = _(
            "largest |difference| {difference} against {allowance}; |sum of weights − 1| = {error} against "
            "{sum_allowance}."
        ).format(
            difference=sig(reading.max_difference, ".2e"),
            allowance=sig(reading.atol, ".1e"),
            error=sig(reading.sum_error, ".1e"),
            sum_allowance=sig(reading.sum_allowed, ".1e"),
        )
        verdict(
            reading.passed,
            _("PASS: row {t} by hand matches the tensor result: {check}").format(t=t, check=check),
            _("FAIL: row {t} by hand does not match the tensor result: {check}").format(t=t, check=check),
        )


page_section()
