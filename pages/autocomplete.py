"""Autocomplete: the model's next-token candidates, completions, latency with and without the KV cache,
and a parity inspector that compares cached with uncached logits step by step."""
import pandas as pd
import streamlit as st
import torch

from core import autocomplete as ac
from core.baselines import BaselineBundle
from core.sampling import SampleConfig
from ui import charts, params
from ui.companion import chart
from ui.models import require_bundle, selected_served
from ui.text import verdict


# The runs below are deterministic for a bundle version, prompt, sampling settings and seed, so a rerun
# caused by another widget (say, the number of candidates shown) reuses them instead of generating again.
# Latency figures are therefore those measured the first time these settings ran on this server.
@st.cache_data(max_entries=32, show_spinner="Generating with and without the KV cache...")
def _completions(_bundle, version: str, ids: tuple, filters: tuple, length: int, seed: int):
    run = SampleConfig(*filters, max_new_tokens=length)
    return (ac.complete(_bundle.model, _bundle.tokenizer, ids, run, seed=seed, use_cache=True),
            ac.complete(_bundle.model, _bundle.tokenizer, ids, run, seed=seed, use_cache=False))


@st.cache_data(max_entries=32, show_spinner="Comparing cached and uncached logits step by step...")
def _parity(_bundle, version: str, ids: tuple, filters: tuple, length: int, seed: int):
    return ac.parity_trace(_bundle.model, ids, length, SampleConfig(*filters), seed)


st.title("Autocomplete")
st.markdown(
    "The small transformer reads your text one character at a time and predicts the next character. "
    "Chaining predictions gives a **completion**; cutting it at the end of the next word gives the "
    "**suggestion** an editor would offer. Everything below is computed live by the selected model."
)

PROMPT_LABEL = "Text to complete (the prompt; Ctrl+Enter to apply)"

fallback = selected_served()
if isinstance(fallback, BaselineBundle):
    # The registry could not load any transformer version and serves its named fallback: the service
    # still suggests, from the n-gram; the transformer views below do not apply to it.
    st.warning(f"Serving the {fallback.kind} baseline `{fallback.version}` (the named fallback): no released "
               "transformer version loads. Its suggestions come from counted character sequences, not attention.")
    text = params.text_area(PROMPT_LABEL, "ac_prompt", "def main(", height=100)
    offered = ac.baseline_suggestion(fallback.model, text)
    labels = [c.piece for c in offered.candidates]
    probs = [c.prob for c in offered.candidates]
    chart(charts.bars(labels, probs, title=f"Top {len(labels)} next characters ({fallback.kind} baseline)",
                      y_title="probability", highlight=0),
          pd.DataFrame({"character (visible)": labels, "probability": [round(p, 4) for p in probs]}),
          f"The {fallback.kind} baseline's most likely next character is '{labels[0]}' with probability {probs[0]:.4f}.",
          key="ac_baseline")
    st.markdown("**Suggestion** (what pressing Tab would accept):")
    st.code(offered.suggestion or "(no suggestion)", language=None)
    st.stop()

bundle = require_bundle()
tok, model, arch = bundle.tokenizer, bundle.model, bundle.config
if not bundle.safe:
    st.warning(
        f"This bundle is marked **unsafe**: {bundle.manifest.get('unsafe_reason') or 'no reason given'}. "
        "Its suggestions are not to be trusted; use them only to study the failure."
    )

left, right = st.columns([1, 2])
with left:
    text = params.text_area(PROMPT_LABEL, "ac_prompt", "def main(", height=100)
    temperature = params.slider("Temperature (0 = always the most likely)", "ac_temperature", 0.0, 2.0, 1.0, 0.05)
    top_k = params.number_input("Top-k: keep only the k most likely (0 = off)", "ac_top_k", 0, 1000, 0, 1)
    top_p = params.slider("Top-p: keep the most likely up to this mass (1.0 = off)", "ac_top_p", 0.05, 1.0, 1.0, 0.05)
    n_shown = params.slider("Candidates shown", "ac_k", 1, 40, 10, 1)

prompt = ac.prepare_prompt(bundle, text)
sample = SampleConfig(temperature=temperature, top_k=top_k or None, top_p=None if top_p >= 1.0 else top_p)

with left:
    st.caption(f"What the model sees ({len(prompt.ids)} of at most {arch.context_length} tokens; "
               "␣ is a space, ↵ a newline):")
    st.code("".join(prompt.pieces), language=None)
    if prompt.empty:
        st.info(
            "The prompt is empty, so the model starts from the `<eos>` token: in training, documents are "
            "joined as `text <eos> text <eos> ...`, so `<eos>` is what comes right before the start of a "
            "document. The candidates are the model's guesses for the first character of a new file."
        )
    if prompt.truncated:
        st.warning(
            f"The prompt has {prompt.n_tokens} characters, but this model sees at most {arch.context_length}: "
            f"it was cut to its last {arch.context_length} characters (the first {prompt.dropped} are not seen)."
        )
    if prompt.unknown_chars:
        codes = ", ".join(f"U+{ord(c):04X}" for c in prompt.unknown_chars)
        st.warning(
            f"{len(prompt.unknown_chars)} character(s) are not in this model's vocabulary ({codes}) and became "
            "`<unk>`: the model never saw them in training, so it reads only 'some unknown character' there."
        )
        st.dataframe(pd.DataFrame({"character": list(prompt.unknown_chars),
                                   "code point": [f"U+{ord(c):04X}" for c in prompt.unknown_chars]}),
                     hide_index=True, key="ac_unknown_table")

candidates = ac.next_token_candidates(model, prompt.ids, sample, n_shown, tokenizer=tok)
filters = f"temperature {temperature:g}, top-k {top_k or 'off'}, top-p {sample.top_p or 'off'}"
with right:
    st.subheader("Next-character candidates")
    st.markdown(
        "The bars are the exact distribution the sampler draws the next character from: softmax of the "
        "model's last logits divided by the temperature, then the top-k and top-p filters, renormalised."
    )
    fig = charts.bars([c.piece for c in candidates], [c.prob for c in candidates],
                      title=f"Top {len(candidates)} next characters ({filters})", y_title="probability",
                      x_title="next character", highlight=0, y_range=(0, 1.1))
    table = pd.DataFrame({"rank": range(1, len(candidates) + 1), "token id": [c.id for c in candidates],
                          "character (visible)": [c.piece for c in candidates],
                          "code point": [ac.code_point(tok, c.id) for c in candidates],
                          "probability": [c.prob for c in candidates]})
    best = candidates[0]
    summary = (f"With {filters}, the most likely next character is {best.piece} (id {best.id}) with probability "
               f"{best.prob:.4f}; the top {len(candidates)}: "
               + ", ".join(f"{c.piece} {c.prob:.4f}" for c in candidates) + ".")
    chart(fig, table, summary, key="ac_candidates", table_open=True)

st.divider()
st.header("Completion and suggestion")
st.markdown(
    "The model draws one character, appends it, and repeats. The **seed** fixes the random draws, so the "
    "same settings give the same completion. With the **KV cache** each step feeds only the newest "
    "character and reuses the stored keys and values; without it, every step re-reads the whole window."
)
cols = st.columns(3)
with cols[0]:
    length = params.slider("New characters to generate", "ac_length", 1, 300, 40, 1)
with cols[1]:
    seed = params.number_input("Seed of the random draws", "ac_seed", 0, 2**31 - 1, 0, 1)
with cols[2]:
    use_cache = params.toggle("Use the KV cache for the completion", "ac_cache", True)

filter_values = (sample.temperature, sample.top_k, sample.top_p)
template = bundle.manifest["prompt_template"]
suggestion = ac.suggest(model, tok, text, sample, seed=seed, use_cache=use_cache, template=template)
with_cache, without_cache = _completions(bundle, bundle.version, prompt.ids, filter_values, length, seed)
shown = with_cache if use_cache else without_cache

reasons = {"word boundary": "it stops before the first space or punctuation after a word",
           "end of line": "it stops at the end of the line",
           "eos": "the model ended the text (`<eos>`)",
           "limit": f"no word ended within {ac.SUGGESTION_MAX_CHARS} characters"}


def show_text(text: str, what: str) -> None:
    """Model output as plain text; text that is only whitespace is also shown with visible pieces."""
    if not text:
        st.caption(f"The {what} is empty.")
        return
    st.code(text, language=None)
    if not text.strip():
        st.caption(f"The {what} is only whitespace ({len(text)} characters), made visible:")
        st.code("".join(tok.display_piece(i) for i in tok.encode(text)), language=None)


st.markdown("**Suggestion** (what pressing Tab would accept; " + reasons[suggestion.stop_reason] + "):")
show_text(suggestion.text, "suggestion")
ended = "the model ended the text (`<eos>`)" if shown.stop_reason == "eos" else f"the length limit of {length}"
st.markdown(f"**Completion** ({len(shown.tokens)} characters, {'with' if use_cache else 'without'} the cache; "
            f"it stopped at {ended}):")
show_text(shown.text, "completion")
if with_cache.tokens == without_cache.tokens:
    st.caption("With and without the cache the model chose exactly the same characters.")
else:
    st.warning("The completions with and without the cache differ; the parity inspector below shows where.")

st.subheader("Latency per token, with and without the cache")
latency = ac.compare_latency(with_cache, without_cache)
if not latency.positions:
    st.info("No character was generated (the model ended the text at once), so there is no latency to show.")
else:
    st.markdown(
        "Each point is the wall-clock time of one step (forward pass and sampling) against the position of "
        "the new character. Without the cache a step re-reads the whole window, so it costs more as the "
        f"window grows, up to {arch.context_length} characters; cached steps stay nearly flat, apart from "
        "the first (which encodes the whole prompt) and the steps where the window slid past the context "
        "(the cache is reset and the last half of the window re-encoded). The smaller the model and the "
        "context, the more the fixed cost of a step dominates and the smaller the gap. Timings on a shared "
        "machine are noisy: read the means, not single points."
    )
    st.caption(f"Measured the first time these settings ran on this server, with torch using "
               f"{torch.get_num_threads()} thread(s).")
    m = st.columns(4)
    one_token = latency.mean_cached_one_token_ms
    m[0].metric("With the cache (mean ms/token)", f"{latency.mean_cached_ms:.2f}")
    m[1].metric("Without the cache (mean ms/token)", f"{latency.mean_uncached_ms:.2f}")
    m[2].metric("Speed-up (mean without / with)", f"{latency.speedup:.2f}x" if latency.speedup else "n/a")
    m[3].metric("Cached one-token steps (mean ms)", f"{one_token:.2f}" if one_token is not None else "n/a",
                help="Leaves out the first step (it encodes the whole prompt) and the steps that re-encoded "
                     "the window.")
    slid = [with_cache.positions[i] for i in with_cache.reencoded_steps]
    fig = charts.lines(latency.positions, {"with KV cache": latency.cached_ms, "without cache": latency.uncached_ms},
                       title="Time per generated token against its position", x_title="position of the new token",
                       y_title="milliseconds")
    table = pd.DataFrame({
        "position": latency.positions,
        "character": [tok.display_piece(t) for t in latency.tokens],
        "with cache (ms)": latency.cached_ms,
        "without cache (ms)": latency.uncached_ms,
        "window slid (cached run)": [p in slid for p in latency.positions],
    })
    summary = (f"Measured: mean {latency.mean_cached_ms:.2f} ms/token with the cache over {len(with_cache.tokens)} "
               f"tokens and {latency.mean_uncached_ms:.2f} ms/token without over {len(without_cache.tokens)}; "
               f"the first cached step, which also encodes the {len(prompt.ids)}-token prompt, took "
               f"{latency.first_cached_ms:.2f} ms; "
               + (f"the cached steps that fed a single token averaged {latency.mean_cached_one_token_ms:.2f} ms; "
                  if latency.mean_cached_one_token_ms is not None else "")
               + (f"the window slid at position(s) {', '.join(map(str, slid))}." if slid
                  else "the window never slid (the text stayed within the context)."))
    chart(fig, table, summary, key="ac_latency")

st.divider()
st.header("Parity inspector: cached against uncached logits")
st.markdown(
    "The cache must not change what the model computes. Here the cached generation runs, and at every "
    "step the same window is computed again from scratch without the cache (following the same "
    "sliding-window policy past the context). The chart shows the largest absolute difference between "
    "the two logit vectors. Two float32 computations that add in a different order differ by rounding, "
    "and rounding grows with the size of the numbers, so a logit passes when "
    f"|cached − uncached| ≤ {ac.PARITY_ATOL:g} + {ac.PARITY_RTOL:g}·|uncached| (PyTorch's own float32 "
    "tolerance in torch.testing); a cache bug is off by whole units, not by 1e-5. A flag marks any step where the two would choose a "
    "different character with the same random draw."
)
trace = _parity(bundle, bundle.version, prompt.ids, filter_values, length, seed)
if trace.steps:
    positions = [s.position for s in trace.steps]
    diffs = [s.max_abs_diff for s in trace.steps]
    fig = charts.lines(positions, {"max |cached − uncached|": [d if d > 0 else None for d in diffs],
                                   "allowed difference there": [s.allowed for s in trace.steps]},
                       title="Largest logit difference per step (log scale)", x_title="position of the new token",
                       y_title="max |cached − uncached| logit", log_y=True)
    fig.update_yaxes(tickformat=".1e")  # 1.0e-05, not the SI "10µ"
    table = pd.DataFrame({
        "step": [s.step for s in trace.steps],
        "position": positions,
        "character (cached)": [tok.display_piece(s.token) for s in trace.steps],
        "character (uncached)": [tok.display_piece(s.uncached_token) for s in trace.steps],
        "max |cached − uncached|": diffs,
        "allowed there": [s.allowed for s in trace.steps],
        "within tolerance": [s.worst_ratio <= 1.0 for s in trace.steps],
        "window slid": [s.reencoded for s in trace.steps],
        "context (tokens)": [s.context for s in trace.steps],
        "chosen character differs": [s.token_differs for s in trace.steps],
    })
    summary = (f"Largest difference {trace.max_abs_diff:.2e} at step {trace.worst_step} over {len(trace.steps)} "
               f"steps; every logit {'within' if trace.within_tolerance else 'NOT within'} its allowance "
               f"(worst |difference|/allowance {trace.worst_ratio:.2f}); "
               f"the window slid at {len(trace.slid_steps)} step(s); "
               f"{len(trace.flagged_steps)} step(s) chose a different character."
               + (f" {len(trace.exact_zero_steps)} step(s) differ by exactly 0, which a log scale cannot draw "
                  "(see the table)." if trace.exact_zero_steps else ""))
    chart(fig, table, summary, key="ac_parity")
    verdict(trace.passed,
            f"PASS: every logit of every step within {ac.PARITY_ATOL:g} + {ac.PARITY_RTOL:g}·|logit| "
            f"(largest difference {trace.max_abs_diff:.2e}, worst ratio {trace.worst_ratio:.2f}), "
            "and the chosen character never differs.",
            f"FAIL: a logit differs by more than {ac.PARITY_ATOL:g} + {ac.PARITY_RTOL:g}·|logit| "
            f"(worst |difference|/allowance {trace.worst_ratio:.2f}; largest difference {trace.max_abs_diff:.2e}).")
    if trace.flagged_steps:
        st.warning("The cached and uncached logits choose a different character at step(s) "
                   + ", ".join(map(str, trace.flagged_steps)) + ".")
    if not all(s.window_agrees for s in trace.steps):
        st.error("Generation's own window differs from the sliding-window policy at some step.")
