"""Autocomplete: the suggestion the bundle serves, with an Accept button to type with the model, the next-token
candidates, a sampled completion, what the KV cache saves, and a parity check of cached against uncached logits.

The suggestion is the one policy of page, CLI and evaluation. The next-character chart asks first: until the
learner has predicted the top probability it draws the logits the sampler turns into probabilities. The text is
encoded once, and "what the model sees", the suggestion, the bars and the completion all read that one prompt.
"""

import math
import threading
import time

import pandas as pd
import streamlit as st

from core import i18n
from core.classroom.checkpoint import Question
from core.i18n import N_, _
from core.lessons import kv_cache
from core.model.engine import next_token_logits
from core.model.sampling import MIN_TEMPERATURE, SampleConfig
from core.release.baselines.baseline_bundle import BaselineBundle
from core.release.serving.autocomplete import baseline_candidates
from core.release.serving.candidates import code_point, next_token_candidates
from core.release.serving.completion import complete
from core.release.serving.transformer_predictor import TransformerPredictor
from ui import cache_view, charts, fragment, layout, params, predict, projector, suggestion_view
from ui.companion import chart
from ui.models import require_bundle, selected_model
from ui.text import escape_markdown

OFF = N_("off")  # a sampling filter that is not set, in the prediction's question
PROMPT = N_(
    "With temperature {temperature}, top-k {top_k}, top-p {top_p}: what probability does the model give its most "
    "likely next character after '{text}'? Type a number from 0 to 1."
)  # the prediction's question, with its values as placeholders
PROMPT_EMPTY = N_(
    "With temperature {temperature}, top-k {top_k}, top-p {top_p}: what probability does the model give its most "
    "likely next character after an empty prompt (it reads <eos>)? Type a number from 0 to 1."
)

# (header, anchor) of the page's sections after the picture, each in its own tab
COMPLETION = (N_("Sampled completion"), "ac-completion")
CACHE = (N_("The KV cache: what it saves, and when it does not"), "ac-cache")
PARITY = (N_("Parity inspector: cached against uncached logits"), "ac-parity")
TABS = [N_("The suggestion's numbers"), N_("Sampled completion"), N_("KV cache: what it saves"),
        N_("Parity: cached vs uncached"), N_("How it works")]  # fmt: skip
CHART_HEIGHT, PROJECTED_CHART_HEIGHT = 380, 260  # px before projector.restyle: the chart ends inside the first screen
PROMPT_SHOWN = 30  # the question names at most the last 30 characters of the prompt
# The page opens on a prompt where the shipped code model offers a suggestion (a test of this page holds it): the
# first screen shows what the model is for.
DEFAULT_PROMPT, DEFAULT_LENGTH, DEFAULT_SEED = "class Stack:\n    def __init__(self", 40, 0
PARITY_ASKED = "ac_parity_asked"  # session state: the settings this session asked the parity check for


# The runs below are deterministic for a bundle version, prompt, sampling settings and seed, so a rerun
# caused by another widget (say, the number of candidates shown) reuses them instead of generating again.
# Their timings are not shown: the cache section measures on purpose, with a warm-up and repeats. Only the
# completion shown is generated; the parity check compares the cached path with the uncached one.
@st.cache_data(max_entries=32, show_spinner=False)  # the caller's st.spinner says "Generating..."
def _completion(
    _bundle,
    version: str,
    ids: tuple,
    filters: tuple[float, int | None, float | None],
    length: int,
    seed: int,
    use_cache: bool,
):
    run = SampleConfig(*filters, max_new_tokens=length)
    return complete(_bundle.model, _bundle.tokenizer, ids, run, seed=seed, use_cache=use_cache)


@st.cache_data(max_entries=64, show_spinner=False)
def _candidates(_bundle, version: str, ids: tuple, filters: tuple):
    """Every drawable next token, most likely first: the same for every session with this model and prompt."""
    return next_token_candidates(_bundle.model, list(ids), SampleConfig(*filters), None, tokenizer=_bundle.tokenizer)


@st.cache_data(max_entries=64, show_spinner=False)
def _logits(_bundle, version: str, ids: tuple) -> list[float]:
    """The model's next-token logits after `ids` (V floats): what every sampling setting starts from."""
    return next_token_logits(_bundle.model, list(ids)).tolist()  # (V,)


@st.cache_resource
def _timings() -> dict:
    """The KV-cache timing per model version, for the whole server: {"by_version": {version: (full, short, clock
    time)}, "lock": the lock a measurement holds}.

    Measured when someone asks ("Measure now"), once for everyone: a class of 30 does not time the same model 30
    times while it works, and a timing taken while 30 pages load would time the load. The section says when."""
    return {"by_version": {}, "lock": threading.Lock()}


@st.cache_data(max_entries=32, show_spinner=False)  # the caller's st.spinner says what it computes
def _parity(_bundle, version: str, ids: tuple, filters: tuple, length: int, seed: int):
    return kv_cache.parity_trace(_bundle.model, ids, length, SampleConfig(*filters), seed)


def header(section: tuple[str, str]) -> None:
    title, anchor = section
    st.header(i18n._(title), anchor=anchor)


st.title(_("Autocomplete"))
st.caption(
    _(
        "Your text, the model's **suggestion** for it and its next-character candidates, computed live by the "
        "selected model (how it works: the last tab)."
    )
)
INTRO = N_(
    "The small transformer reads your text one character at a time and predicts the next character. "
    "Chaining its most likely characters gives a completion; the **suggestion** is the part of it, cut where a "
    "word, a run of spaces or a line ends, that saves the most keystrokes, and an editor offers it only when its "
    "probability clears a **threshold**. Press **Accept suggestion** to append it to your text and type with the "
    "model. Everything on this page is computed live by the selected model."
)

PROMPT_LABEL = N_("Text to complete (the prompt; Ctrl+Enter to apply)")
PROMPT_KEY = "ac_prompt"
SUGGESTION_NOTE = N_(
    "The suggestion follows the one policy every surface uses (this page, `python -m core suggest` and the "
    "evaluation's simulated typist): the same text gets the same suggestion everywhere."
)
BARS_NOTE = N_(
    "The bars are the exact distribution the sampler draws the next character from: softmax of the "
    "model's last logits divided by the temperature, then the top-k and top-p filters, renormalised. "
    "`<pad>`, `<bos>` and `<unk>` are never drawn and never listed (they are not text: a drawn `<unk>` "
    "would show as '\ufffd'); `<eos>` can be drawn: it ends the completion."
)
chart_height = PROJECTED_CHART_HEIGHT if projector.on() else CHART_HEIGHT

fallback = selected_model()
if isinstance(fallback, BaselineBundle):
    # The registry could not load any transformer version and serves its named fallback: the service
    # still suggests, from the n-gram; the transformer views below do not apply to it.
    st.warning(
        _(
            "Serving the {kind} baseline `{version}` (the named fallback): no released transformer version loads. "
            "Its suggestions come from counted character sequences, not attention."
        ).format(kind=fallback.kind, version=fallback.version)
    )
    with layout.picture():
        left, right = st.columns(2)
        with left:
            text = params.text_area(i18n._(PROMPT_LABEL), PROMPT_KEY, DEFAULT_PROMPT, height=100)
        with right:
            fallback_prompt = suggestion_view.page_prompt(fallback.predictor, text, fallback.manifest)
            suggestion_view.section(fallback.predictor, fallback_prompt, fallback.manifest, PROMPT_KEY)
        candidates = baseline_candidates(fallback.predictor, text)
        labels = [c.piece for c in candidates]
        probs = [c.prob for c in candidates]
        fig = charts.bars(
            labels,
            probs,
            title=_("Top {count} next characters ({kind} baseline)").format(count=len(labels), kind=fallback.kind),
            y_title=_("probability"),
            highlight=0,
        )
        fig.update_layout(height=chart_height)
        chart(
            fig,
            pd.DataFrame({_("character (visible)"): labels, _("probability"): [round(p, 4) for p in probs]}),
            _(
                "The {kind} baseline's most likely next character is '{character}' with probability {probability}."
            ).format(kind=fallback.kind, character=escape_markdown(labels[0]), probability=i18n.number(probs[0], 4)),
            key="ac_baseline",
        )
    st.stop()

bundle = require_bundle()
if not bundle.safe:
    st.warning(
        _(
            "This bundle is marked **unsafe**: {reason}. Its suggestions are not to be trusted; use them only to study "
            "the failure."
        ).format(reason=escape_markdown(bundle.manifest.get("unsafe_reason") or _("no reason given")))
    )


@fragment.section
def explore(bundle) -> None:
    """The picture and the tabs under it: everything the text, the sampling settings and the completion's settings
    drive, so a change of one of them reruns this fragment only, not app.py's sidebar (issue 26). What
    the page draws outside it (the title, the unsafe-bundle warning) depends on the bundle alone."""
    tok, model, arch = bundle.tokenizer, bundle.model, bundle.config
    predictor = TransformerPredictor(model, tok)
    with layout.picture():  # the text box and the suggestion, then the chart with its controls and question beside it
        left, right = st.columns([3, 2])
        plot, side = st.columns([3, 2])  # the chart first: projector mode stacks these columns, chart on top
    with left:
        text = params.text_area(i18n._(PROMPT_LABEL), PROMPT_KEY, DEFAULT_PROMPT, height=100)
        prompt = suggestion_view.page_prompt(predictor, text, bundle.manifest)  # the one encoding of the text
        room = arch.context_length - prompt.window
        if room:
            sees = _(
                "What the model sees ({count} of at most {window} tokens: its context of {context} less {room} for the "
                "longest suggestion; ␣ is a space, ↵ a newline):"
            )
        else:
            sees = _("What the model sees ({count} of at most {window} tokens; ␣ is a space, ↵ a newline):")
        st.caption(sees.format(count=len(prompt.ids), window=prompt.window, context=arch.context_length, room=room))
        st.code("".join(prompt.pieces), language=None)
        if prompt.empty:
            st.info(
                _(
                    "The prompt is empty, so the model starts from the `<eos>` token: in training, documents are "
                    "joined as `text <eos> text <eos> ...`, so `<eos>` is what comes right before the start of a "
                    "document. Its guesses are for the first characters of a new file."
                )
            )
        if prompt.truncated:
            st.warning(
                _(
                    "The prompt has {count} characters, but this model sees at most {window}: it was cut to its last "
                    "{window} characters (the first {dropped} are not seen)."
                ).format(count=prompt.n_tokens, window=prompt.window, dropped=prompt.dropped)
            )
        if prompt.unknown_chars:
            codes = ", ".join(f"U+{ord(c):04X}" for c in prompt.unknown_chars)
            st.warning(
                _(
                    "{count} character(s) are not in this model's vocabulary ({codes}) and became `<unk>`: the model "
                    "never saw them in training, so it reads only 'some unknown character' there."
                ).format(count=len(prompt.unknown_chars), codes=codes)
            )
            projector.dataframe(
                pd.DataFrame(
                    {
                        _("character"): list(prompt.unknown_chars),
                        _("code point"): [f"U+{ord(c):04X}" for c in prompt.unknown_chars],
                    }
                ),
                hide_index=True,
                key="ac_unknown_table",
            )
    with right:
        offered = suggestion_view.offer(predictor, prompt, bundle.manifest, PROMPT_KEY)

    with side:
        if offered is not None:  # under the suggestion (beside the text box), not between the text box and the chart
            suggestion_view.show_verdict(offered)
        knobs = st.columns(2)
        with knobs[0]:
            temperature = params.slider(
                _("Temperature (0 = always the most likely)"), "ac_temperature", 0.0, 2.0, 1.0, 0.05
            )
            top_p = params.slider(
                _("Top-p: keep the most likely up to this mass (1.0 = off)"), "ac_top_p", 0.05, 1.0, 1.0, 0.05
            )
        with knobs[1]:
            top_k = params.number_input(_("Top-k: keep only the k most likely (0 = off)"), "ac_top_k", 0, 1000, 0, 1)
            n_shown = params.slider(_("Candidates shown"), "ac_k", 1, 40, 10, 1)

    try:
        sample = SampleConfig(temperature=temperature, top_k=top_k or None, top_p=None if top_p >= 1.0 else top_p)
    except ValueError as e:  # a widget value no control could produce (a crafted link): fall back, say why
        sample = SampleConfig()
        temperature, top_k, top_p = sample.temperature, 0, 1.0
        with side:
            st.warning(
                _(
                    "These sampling settings are not usable ({error}); showing temperature 1, top-k off, top-p off "
                    "instead."
                ).format(error=escape_markdown(e))
            )

    with side:
        if 0 < temperature < MIN_TEMPERATURE:
            st.info(
                _(
                    "A temperature of {temperature} is below {smallest}, the smallest the sampler divides by: there "
                    "even a logit 0.1 below the largest gets probability exactly 0 in float32, and smaller "
                    "temperatures overflow to NaN. It is treated as 0: always the most likely character."
                ).format(
                    temperature=escape_markdown(i18n.formatted(temperature, "g")),
                    smallest=i18n.formatted(MIN_TEMPERATURE, "g"),
                )
            )

    filter_values = (sample.temperature, sample.top_k, sample.top_p)
    everything = _candidates(bundle, bundle.version, tuple(prompt.ids), filter_values)  # every drawable token
    candidates = everything[:n_shown]  # the most likely first: what the chart draws
    # Kept in English (the prompt's msgid and its values, "off" marked N_): the question and its fingerprint are the
    # same in every language, and ui/predict shows it translated (Question.shown_prompt).
    values = {
        "temperature": f"{sample.temperature:g}",
        "top_k": str(top_k) if top_k else OFF,
        "top_p": str(sample.top_p) if sample.top_p else OFF,
    }
    filters = _("temperature {temperature}, top-k {top_k}, top-p {top_p}").format(
        temperature=i18n.signs(values["temperature"]), top_k=_(values["top_k"]), top_p=i18n.signs(_(values["top_p"]))
    )
    best = candidates[0]
    drawable = [c for c in everything if c.prob > 0]
    seen = "".join(prompt.pieces)
    seen = seen if len(seen) <= PROMPT_SHOWN else "…" + seen[-PROMPT_SHOWN:]
    question = Question(
        id="ac_predict",
        topic=N_("next-character probabilities"),
        page="views/autocomplete.py",
        prompt=(PROMPT_EMPTY if prompt.empty else PROMPT).format(**values, text=seen),
        template=PROMPT_EMPTY if prompt.empty else PROMPT,
        values=(*values.items(), ("text", seen)),
        answer=best.prob,
        tolerance=0.1,
        why=(
            _(
                "Its most likely next character, '{character}', gets probability {probability}; the other {count} "
                "characters it may draw share the remaining {rest}."
            ).format(
                character=best.piece,
                probability=i18n.number(best.prob, 4),
                count=len(drawable) - 1,
                rest=i18n.number(math.fsum(c.prob for c in drawable[1:]), 4),
            )
            if len(drawable) > 1
            else _(
                "Its most likely next character, '{character}', gets probability {probability}; with these settings "
                "no other character can be drawn."
            ).format(character=best.piece, probability=i18n.number(best.prob, 4))
        ),
    )
    hint = _(
        "The bars are the model's logits: the sampler divides them by the temperature and takes softmax, so a "
        "character whose logit leads by g gets e^(g / temperature) times the probability of the other. "
        "A temperature below 1 sharpens the distribution towards the most likely character (at 0 it gets "
        "probability 1); above 1 flattens it. Top-k and top-p drop the unlikely characters and share their "
        "probability out among the rest, which raises the top one."
    )
    if sample.temperature == 1.0 and sample.top_k is None and sample.top_p is None and offered and offered.text:
        hint = predict.sentences(
            hint,
            _(
                "The suggestion has probability {probability}: that is its first character's probability times the "
                "others', so the most likely next character has at least that much."
            ).format(probability=i18n.number(offered.probability, 4)),
        )
    with side:
        graded = predict.ask(question, hint=hint)
    with plot:
        if graded is None:  # the probabilities give the answer away: until then, the logits they are computed from
            ranked = _candidates(bundle, bundle.version, tuple(prompt.ids), (1.0, None, None))[:n_shown]  # logit order
            logits = _logits(bundle, bundle.version, tuple(prompt.ids))  # (V,)
            scores = [logits[c.id] for c in ranked]
            fig = charts.bars(
                [c.piece for c in ranked],
                scores,
                title=_(
                    "The model's logits for its {count} likeliest characters (before temperature and softmax)"
                ).format(count=len(ranked)),
                y_title="logit",
                x_title=_("next character"),
                value_format=".3f",
                highlight=0,
            )
            fig.update_layout(height=chart_height)
            chart(
                fig,
                pd.DataFrame(
                    {
                        _("rank"): range(1, len(ranked) + 1),
                        _("token id"): [c.id for c in ranked],
                        _("character (visible)"): [c.piece for c in ranked],
                        _("code point"): [code_point(tok, c.id) for c in ranked],
                        "logit": scores,
                    }
                ),
                _(
                    "The model's largest logit is {logit}, for {character} (id {id}); the next: {others}. Predict the "
                    "probability the sampler gives the first: the bars then show the probabilities."
                ).format(
                    logit=i18n.number(scores[0], 3),
                    character=escape_markdown(ranked[0].piece),
                    id=ranked[0].id,
                    others=", ".join(
                        f"{escape_markdown(c.piece)} {i18n.number(x, 3)}" for c, x in zip(ranked[1:], scores[1:])
                    ),
                ),
                key="ac_logits",
            )  # model output
        else:  # the bars give the answer away
            fig = charts.bars(
                [c.piece for c in candidates],
                [c.prob for c in candidates],
                title=_("Top {count} next characters ({filters})").format(count=len(candidates), filters=filters),
                y_title=_("probability"),
                x_title=_("next character"),
                highlight=0,
                y_range=(0, 1.1),
            )
            fig.update_layout(height=chart_height)
            table = pd.DataFrame(
                {
                    _("rank"): range(1, len(candidates) + 1),
                    _("token id"): [c.id for c in candidates],
                    _("character (visible)"): [c.piece for c in candidates],
                    _("code point"): [code_point(tok, c.id) for c in candidates],
                    _("probability"): [c.prob for c in candidates],
                }
            )
            summary = _(
                "With {filters}, the most likely next character is {character} (id {id}) with probability "
                "{probability}; the top {count}: {candidates}."
            ).format(
                filters=filters,
                character=escape_markdown(best.piece),
                id=best.id,
                probability=i18n.number(best.prob, 4),
                count=len(candidates),
                candidates=", ".join(f"{escape_markdown(c.piece)} {i18n.number(c.prob, 4)}" for c in candidates),
            )  # model output
            chart(fig, table, summary, key="ac_candidates", table_open=True)
            st.markdown(i18n._(BARS_NOTE))

    numbers_tab, completion_tab, cache_tab, parity_tab, about_tab = layout.more([i18n._(t) for t in TABS])
    with numbers_tab:
        if offered is not None:
            suggestion_view.show_numbers(offered)
        st.markdown(i18n._(SUGGESTION_NOTE))
    with about_tab:
        st.markdown(i18n._(INTRO))
        st.markdown(i18n._(BARS_NOTE))
    with completion_tab:
        header(COMPLETION)
        st.markdown(
            _(
                "The model draws one character from the next-character candidates, appends it, and repeats: with the "
                "sampling settings beside them, not the suggestion's greedy choice. The **seed** fixes the random "
                "draws, so the same settings give the same completion. With the **KV cache** each step feeds only the "
                "newest character and reuses the stored keys and values; without it, every step re-reads the whole "
                "window."
            )
        )
        cols = st.columns(3)
        with cols[0]:
            length = params.slider(_("New characters to generate"), "ac_length", 1, 300, DEFAULT_LENGTH, 1)
        with cols[1]:
            seed = params.number_input(_("Seed of the random draws"), "ac_seed", 0, 2**31 - 1, DEFAULT_SEED, 1)
        with cols[2]:
            use_cache = params.toggle(_("Use the KV cache for the completion"), "ac_cache", True)

        asked = time.perf_counter()
        with st.spinner(_("Generating...")):
            shown = _completion(bundle, bundle.version, prompt.ids, filter_values, length, seed, use_cache)
        waited_ms = 1000 * (time.perf_counter() - asked)  # a cached completion: the lookup
        suggestion_view.record_completion(bundle, prompt, shown, waited_ms, (filter_values, length, seed))

        if shown.stop_reason == "eos":
            ended = _("the model ended the text (`<eos>`)")
        else:
            ended = _("the length limit of {length}").format(length=length)
        if use_cache:
            completed = _("**Completion** ({count} characters, with the cache; it stopped at {ended}):")
        else:
            completed = _("**Completion** ({count} characters, without the cache; it stopped at {ended}):")
        st.markdown(completed.format(count=len(shown.tokens), ended=ended))
        if shown.text:
            st.code(shown.text, language=None)  # model output: plain text
            if not shown.text.strip():
                st.caption(
                    _("The completion is only whitespace ({count} characters), made visible:").format(
                        count=len(shown.text)
                    )
                )
                st.code("".join(tok.display_piece(i) for i in tok.encode(shown.text)), language=None)
        else:
            st.caption(_("The completion is empty."))
        st.caption(
            _(
                "Turn the cache off to generate the same completion without it; the Parity tab compares the two paths "
                "step by step and flags any step where they would draw different characters."
            )
        )

    with cache_tab:
        header(CACHE)
        st.markdown(
            _(
                "Without a cache, every new character means reading the whole window again: all its characters go "
                "through every layer, although only the newest one is new. With the **KV cache** the keys and values "
                "of the earlier characters are kept, so a step feeds one character and attends over the stored ones. "
                "The first cached step still reads the whole prompt (the *prefill*), like an uncached step."
            )
        )
        st.markdown(
            _(
                "**When the cache does not help.** With a short window (a few characters), a full forward pass of "
                "those few characters costs about as much as one cached step: the work per step is then mostly fixed "
                "costs, not arithmetic. Each step is a Python call through every layer, and for a model this small "
                "that per-call overhead can outweigh the multiplications the cache saves. And past the context length "
                "the window slides: the cache is reset and the last half of the window is read again, so that step "
                "costs as much as an uncached one. The saving shows when the window is long: below, the prompt fills "
                "the context but for the {count} new characters, and for contrast a prompt of one character."
            ).format(count=kv_cache.TIMING_NEW_TOKENS)
        )
        store = _timings()
        measured = store["by_version"].get(bundle.version)
        remeasure = st.button(
            _("Measure again") if measured else _("Measure now"),
            key="ac_measure_again",
            help=_("Times both ways now, for everyone on this server; other work on the server moves single timings."),
        )
        if remeasure:
            with store["lock"]:  # one session measures at a time: two timings at once would time each other
                with st.spinner(
                    _("Timing generation with and without the cache ({count} repeats after a warm-up)...").format(
                        count=kv_cache.TIMING_REPEATS
                    )
                ):
                    full = kv_cache.measure_cache_latency(model)
                    short = kv_cache.measure_cache_latency(model, prompt_tokens=1)
                store["by_version"][bundle.version] = measured = (full, short, time.strftime("%H:%M:%S"))
        if measured is None:
            st.info(
                _(
                    "Nobody has timed this model on this server yet. Press **Measure now**: it takes a few seconds, "
                    "and everyone on this server then sees the same figures (a class does not time one model thirty "
                    "times)."
                )
            )
        else:
            full, short, measured_at = measured
            cache_view.show_timing(full, short, measured_at, arch.context_length)

    with parity_tab:
        header(PARITY)
        st.markdown(
            _(
                "The cache must not change what the model computes. Here the cached generation runs, and at every "
                "step the same window is computed again from scratch without the cache (following the same "
                "sliding-window policy past the context). Two correct computations that add the same numbers in a "
                "different order differ by rounding alone, and that rounding depends on the processor. So the "
                "verdict runs both on a **float64** copy of the model, where rounding is about 1e-15 of the numbers "
                "on any machine, and allows at most 16 × eps × (the length of the longest sum behind a logit) × (the "
                "size of the logits): a cache bug is off by whole units, about ten orders of magnitude above that. "
                "The float32 difference of the model as it is served is drawn beside it with its own float32 "
                "allowance, as a figure only. A flag marks any step where the two would choose a different character "
                "with the same random draw."
            )
        )
        # The check at the page's own settings is the same for everyone, computed once per server and model (cached);
        # at other settings it runs when asked: it computes every step twice, the second time in float64.
        settings = (bundle.version, tuple(prompt.ids), filter_values, int(length), int(seed))
        at_defaults = (text, filter_values, length, seed) == (
            DEFAULT_PROMPT,
            (SampleConfig().temperature, SampleConfig().top_k, SampleConfig().top_p),
            DEFAULT_LENGTH,
            DEFAULT_SEED,
        )
        asked = st.session_state.setdefault(PARITY_ASKED, set())
        if at_defaults or settings in asked:
            with st.spinner(_("Comparing cached and uncached logits step by step...")):
                trace = _parity(bundle, bundle.version, prompt.ids, filter_values, length, seed)
            cache_view.show_parity(trace, tok)
        else:
            st.info(
                _(
                    "At the page's own settings this check is shown at once. For these settings it runs when you ask: "
                    "it generates again and computes every step twice, the second time on a float64 copy of the model."
                )
            )
            if st.button(_("Check cached against uncached for these settings"), key="ac_parity_run"):
                asked.add(settings)
                st.rerun()


explore(bundle)
