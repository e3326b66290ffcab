"""The KV cache's evidence on the Autocomplete page: what it saves (timed now) and that it changes nothing.

The timing draws the KV-cache lesson's measurement, with and without the cache, after a prompt that fills the
context and after a one-character prompt (where the cache barely helps); the parity draws the lesson's trace: the
float64 logit difference that decides, its allowance, and the float32 figure of the model as served.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from core.lessons.kv_cache import CacheTiming, ParityTrace
from core.model.tokenizer import CharTokenizer
from ui import charts, projector
from ui.companion import chart
from ui.text import verdict


def show_timing(full: CacheTiming, short: CacheTiming, measured_at: str, context_length: int) -> None:
    """Three figures, the per-step chart with its table, and the short-against-long window table."""
    st.caption(
        f"Measured on this server at {measured_at} (torch using {full.threads} thread(s)): every figure is "
        f"the median of {full.repeats} repeats after {full.warmup} warm-up run per mode, which is not counted."
    )
    m = st.columns(3)
    m[0].metric("With the cache (median ms/character)", f"{full.cached_ms_per_token:.2f}")
    m[1].metric("Without the cache (median ms/character)", f"{full.uncached_ms_per_token:.2f}")
    m[2].metric("Speed-up (without / with)", f"{full.speedup:.2f}x")
    window_end = full.positions[-1]  # the token at position p is predicted from the p tokens before it
    fig = charts.lines(
        full.positions,
        {"with KV cache": full.cached_ms, "without cache": full.uncached_ms},
        title=f"Time per new character after a {full.prompt_tokens}-character prompt (median of {full.repeats})",
        x_title="position of the new character (= characters read before it)",
        y_title="milliseconds",
    )
    table = pd.DataFrame(
        {
            "position": full.positions,
            "characters fed with the cache": [full.prompt_tokens] + [1] * (full.new_tokens - 1),
            "characters fed without the cache": list(full.positions),
            "with cache (ms, median)": full.cached_ms,
            "without cache (ms, median)": full.uncached_ms,
        }
    )
    one_token = full.cached_one_token_ms
    summary = (
        f"After a {full.prompt_tokens}-character prompt (window up to {window_end} of {context_length}), "
        f"generating {full.new_tokens} characters took a median {full.cached_ms_per_token:.2f} ms per character "
        f"with the cache and {full.uncached_ms_per_token:.2f} ms without ({full.speedup:.2f}x); the first cached "
        f"step, which reads the whole prompt, took {full.prefill_ms:.2f} ms"
        + (f", each later cached step {one_token:.2f} ms" if one_token is not None else "")
        + f". Median of {full.repeats} repeats after a warm-up."
    )
    chart(fig, table, summary, key="ac_cache_timing")
    st.markdown("**Short against long window** (the same measurement, median ms per new character):")
    projector.dataframe(
        pd.DataFrame(
            {
                "prompt (characters)": [short.prompt_tokens, full.prompt_tokens],
                "window while generating": [
                    f"{short.positions[0]}-{short.positions[-1]}",
                    f"{full.positions[0]}-{window_end}",
                ],
                "with cache (ms)": [short.cached_ms_per_token, full.cached_ms_per_token],
                "without cache (ms)": [short.uncached_ms_per_token, full.uncached_ms_per_token],
                "speed-up": [f"{short.speedup:.2f}x", f"{full.speedup:.2f}x"],
            }
        ),
        hide_index=True,
        key="ac_cache_windows",
        column_config={
            c: st.column_config.NumberColumn(format="%.2f") for c in ("with cache (ms)", "without cache (ms)")
        },
    )
    st.caption(
        f"With the short window the speed-up was {short.speedup:.2f}x, with the long one {full.speedup:.2f}x"
        + (
            ": the longer the window an uncached step must read again, the more the cache saves."
            if full.speedup > short.speedup
            else ". This time the long window did not show the larger saving: other work on this server can swamp "
            "the difference. Press Measure again."
        )
    )


def show_parity(trace: ParityTrace, tok: CharTokenizer) -> None:
    """The per-step differences on a log scale with their table, the verdict, and any flagged step."""
    if trace.worst_step is None:  # no step generated: nothing to compare
        return
    positions = [s.position for s in trace.steps]
    diffs = [s.max_abs_diff for s in trace.steps]
    diffs32 = [s.float32.max_abs_diff for s in trace.steps]
    fig = charts.lines(
        positions,
        {
            "float64 max |cached − uncached| (decides)": [d if d > 0 else None for d in diffs],
            "float64 allowance": [s.allowed for s in trace.steps],
            "float32 max |cached − uncached| (shown)": [d if d > 0 else None for d in diffs32],
            "float32 allowance": [s.float32.allowed for s in trace.steps],
        },
        title="Largest logit difference per step (log scale)",
        x_title="position of the new token",
        y_title="max |cached − uncached| logit",
        log_y=True,
    )
    fig.update_yaxes(tickformat=".1e")  # 1.0e-05, not the SI "10µ"
    table = pd.DataFrame(
        {
            "step": [s.step for s in trace.steps],
            "position": positions,
            "character (cached)": [tok.display_piece(s.token) for s in trace.steps],
            "character (uncached)": [tok.display_piece(s.uncached_token) for s in trace.steps],
            "max |cached − uncached| (float64)": diffs,
            "allowed (float64)": [s.allowed for s in trace.steps],
            "agree (float64)": [s.agreement.passed for s in trace.steps],
            "max |cached − uncached| (float32, shown)": diffs32,
            "allowed (float32)": [s.float32.allowed for s in trace.steps],
            "window slid": [s.reencoded for s in trace.steps],
            "context (tokens)": [s.context for s in trace.steps],
            "chosen character differs": [s.token_differs for s in trace.steps],
        }
    )
    worst = trace.steps[trace.worst_step]
    summary = (
        f"In float64 the largest difference is {trace.max_abs_diff:.2e} over {len(trace.steps)} steps; "
        f"every step {'within' if trace.within_tolerance else 'NOT within'} its allowance "
        f"(worst share {trace.worst_ratio:.2g}, at step {trace.worst_step}: allowed {worst.agreement.rule}); "
        f"in float32 the largest difference is {trace.float32_max_abs_diff:.2e} "
        f"({trace.float32_worst_ratio:.2g} of the float32 allowance, shown only); "
        f"the window slid at {len(trace.slid_steps)} step(s); "
        f"{len(trace.flagged_steps)} step(s) chose a different character."
        + (
            f" {len(trace.exact_zero_steps)} step(s) differ by exactly 0 in float64, which a log scale "
            "cannot draw (see the table)."
            if trace.exact_zero_steps
            else ""
        )
    )
    chart(fig, table, summary, key="ac_parity")
    verdict(
        trace.passed,
        f"PASS: in float64 every logit of every step agrees within rounding (largest difference "
        f"{trace.max_abs_diff:.2e}, worst share of the allowance {trace.worst_ratio:.2g}), "
        "and the chosen character never differs.",
        f"FAIL: cached and uncached logits disagree in float64 (largest difference {trace.max_abs_diff:.2e}, "
        f"{trace.worst_ratio:.3g} times the allowance), or a chosen character or window differs.",
    )
    if trace.flagged_steps:
        st.warning(
            "The cached and uncached logits choose a different character at step(s) "
            + ", ".join(map(str, trace.flagged_steps))
            + "."
        )
    if not all(s.window_agrees for s in trace.steps):
        st.error("Generation's own window differs from the sliding-window policy at some step.")
