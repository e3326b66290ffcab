"""The KV cache's evidence on the Autocomplete page: what it saves (timed now) and that it changes nothing.

The timing draws the KV-cache lesson's measurement, with and without the cache, after a prompt that fills the
context and after a one-character prompt (where the cache barely helps); the parity draws the lesson's trace: the
float64 logit difference that decides, its allowance, and the float32 figure of the model as served.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from core import i18n
from core.i18n import _
from core.lessons.kv_cache import CacheTiming, ParityTrace
from core.model.tokenizer import CharTokenizer
from ui import charts, projector
from ui.companion import chart
from ui.text import verdict


def show_timing(full: CacheTiming, short: CacheTiming, measured_at: str, context_length: int) -> None:
    """Three figures, the per-step chart with its table, and the short-against-long window table."""
    st.caption(
        _(
            "Measured on this server at {time} (torch using {threads} thread(s)): every figure is the median of "
            "{repeats} repeats after {warmup} warm-up run per mode, which is not counted."
        ).format(time=measured_at, threads=full.threads, repeats=full.repeats, warmup=full.warmup)
    )
    m = st.columns(3)
    m[0].metric(_("With the cache (median ms/character)"), i18n.number(full.cached_ms_per_token, 2))
    m[1].metric(_("Without the cache (median ms/character)"), i18n.number(full.uncached_ms_per_token, 2))
    m[2].metric(_("Speed-up (without / with)"), _times(full.speedup))
    window_end = full.positions[-1]  # the token at position p is predicted from the p tokens before it
    fig = charts.lines(
        full.positions,
        {_("with KV cache"): full.cached_ms, _("without cache"): full.uncached_ms},
        title=_("Time per new character after a {prompt}-character prompt (median of {repeats})").format(
            prompt=full.prompt_tokens, repeats=full.repeats
        ),
        x_title=_("position of the new character (= characters read before it)"),
        y_title=_("milliseconds"),
    )
    table = pd.DataFrame(
        {
            _("position"): full.positions,
            _("characters fed with the cache"): [full.prompt_tokens] + [1] * (full.new_tokens - 1),
            _("characters fed without the cache"): list(full.positions),
            _("with cache (ms, median)"): full.cached_ms,
            _("without cache (ms, median)"): full.uncached_ms,
        }
    )
    one_token = full.cached_one_token_ms
    figures = dict(
        prompt=full.prompt_tokens,
        end=window_end,
        context=context_length,
        new=full.new_tokens,
        cached=i18n.number(full.cached_ms_per_token, 2),
        uncached=i18n.number(full.uncached_ms_per_token, 2),
        speedup=i18n.number(full.speedup, 2),
        prefill=i18n.number(full.prefill_ms, 2),
        repeats=full.repeats,
    )
    if one_token is None:
        summary = _(
            "After a {prompt}-character prompt (window up to {end} of {context}), generating {new} characters took a "
            "median {cached} ms per character with the cache and {uncached} ms without ({speedup}x); the first "
            "cached step, which reads the whole prompt, took {prefill} ms. Median of {repeats} repeats after a "
            "warm-up."
        ).format(**figures)
    else:
        summary = _(
            "After a {prompt}-character prompt (window up to {end} of {context}), generating {new} characters took a "
            "median {cached} ms per character with the cache and {uncached} ms without ({speedup}x); the first "
            "cached step, which reads the whole prompt, took {prefill} ms, each later cached step {one} ms. Median "
            "of {repeats} repeats after a warm-up."
        ).format(one=i18n.number(one_token, 2), **figures)
    chart(fig, table, summary, key="ac_cache_timing")
    st.markdown(_("**Short against long window** (the same measurement, median ms per new character):"))
    with_ms, without_ms = _("with cache (ms)"), _("without cache (ms)")
    projector.dataframe(
        pd.DataFrame(
            {
                _("prompt (characters)"): [short.prompt_tokens, full.prompt_tokens],
                _("window while generating"): [
                    f"{short.positions[0]}-{short.positions[-1]}",
                    f"{full.positions[0]}-{window_end}",
                ],
                with_ms: [short.cached_ms_per_token, full.cached_ms_per_token],
                without_ms: [short.uncached_ms_per_token, full.uncached_ms_per_token],
                _("speed-up"): [_times(short.speedup), _times(full.speedup)],
            }
        ),
        hide_index=True,
        key="ac_cache_windows",
        column_config={c: st.column_config.NumberColumn(format="%.2f") for c in (with_ms, without_ms)},
    )
    speedups = dict(short=i18n.number(short.speedup, 2), long=i18n.number(full.speedup, 2))
    st.caption(
        _(
            "With the short window the speed-up was {short}x, with the long one {long}x: the longer the window an "
            "uncached step must read again, the more the cache saves."
        ).format(**speedups)
        if full.speedup > short.speedup
        else _(
            "With the short window the speed-up was {short}x, with the long one {long}x. This time the long window "
            "did not show the larger saving: other work on this server can swamp the difference. Press Measure again."
        ).format(**speedups)
    )


def _times(factor: float) -> str:
    """A speed-up as the tables print it: 3.21x (the reader's decimal sign)."""
    return i18n.number(factor, 2) + "x"


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
            _("float64 max |cached − uncached| (decides)"): [d if d > 0 else None for d in diffs],
            _("float64 allowance"): [s.allowed for s in trace.steps],
            _("float32 max |cached − uncached| (shown)"): [d if d > 0 else None for d in diffs32],
            _("float32 allowance"): [s.float32.allowed for s in trace.steps],
        },
        title=_("Largest logit difference per step (log scale)"),
        x_title=_("position of the new token"),
        y_title=_("max |cached − uncached| logit"),
        log_y=True,
    )
    fig.update_yaxes(tickformat=".1e")  # 1.0e-05, not the SI "10µ"
    table = pd.DataFrame(
        {
            _("step"): [s.step for s in trace.steps],
            _("position"): positions,
            _("character (cached)"): [tok.display_piece(s.token) for s in trace.steps],
            _("character (uncached)"): [tok.display_piece(s.uncached_token) for s in trace.steps],
            _("max |cached − uncached| (float64)"): diffs,
            _("allowed (float64)"): [s.allowed for s in trace.steps],
            _("agree (float64)"): [s.agreement.passed for s in trace.steps],
            _("max |cached − uncached| (float32, shown)"): diffs32,
            _("allowed (float32)"): [s.float32.allowed for s in trace.steps],
            _("window slid"): [s.reencoded for s in trace.steps],
            _("context (tokens)"): [s.context for s in trace.steps],
            _("chosen character differs"): [s.token_differs for s in trace.steps],
        }
    )
    worst = trace.steps[trace.worst_step]
    figures = dict(
        largest=i18n.formatted(trace.max_abs_diff, ".2e"),
        steps=len(trace.steps),
        share=i18n.formatted(trace.worst_ratio, ".2g"),
        worst=trace.worst_step,
        rule=worst.agreement.rule,
        largest32=i18n.formatted(trace.float32_max_abs_diff, ".2e"),
        share32=i18n.formatted(trace.float32_worst_ratio, ".2g"),
        slid=len(trace.slid_steps),
        flagged=len(trace.flagged_steps),
    )
    if trace.within_tolerance:
        summary = _(
            "In float64 the largest difference is {largest} over {steps} steps; every step within its allowance "
            "(worst share {share}, at step {worst}: allowed {rule}); in float32 the largest difference is "
            "{largest32} ({share32} of the float32 allowance, shown only); the window slid at {slid} step(s); "
            "{flagged} step(s) chose a different character."
        ).format(**figures)
    else:
        summary = _(
            "In float64 the largest difference is {largest} over {steps} steps; every step NOT within its allowance "
            "(worst share {share}, at step {worst}: allowed {rule}); in float32 the largest difference is "
            "{largest32} ({share32} of the float32 allowance, shown only); the window slid at {slid} step(s); "
            "{flagged} step(s) chose a different character."
        ).format(**figures)
    if trace.exact_zero_steps:
        summary += " " + _(
            "{steps} step(s) differ by exactly 0 in float64, which a log scale cannot draw (see the table)."
        ).format(steps=len(trace.exact_zero_steps))
    chart(fig, table, summary, key="ac_parity")
    verdict(
        trace.passed,
        _(
            "PASS: in float64 every logit of every step agrees within rounding (largest difference {largest}, worst "
            "share of the allowance {share}), and the chosen character never differs."
        ).format(largest=i18n.formatted(trace.max_abs_diff, ".2e"), share=i18n.formatted(trace.worst_ratio, ".2g")),
        _(
            "FAIL: cached and uncached logits disagree in float64 (largest difference {largest}, {share} times the "
            "allowance), or a chosen character or window differs."
        ).format(largest=i18n.formatted(trace.max_abs_diff, ".2e"), share=i18n.formatted(trace.worst_ratio, ".3g")),
    )
    if trace.flagged_steps:
        st.warning(
            _("The cached and uncached logits choose a different character at step(s) {steps}.").format(
                steps=", ".join(map(str, trace.flagged_steps))
            )
        )
    if not all(s.window_agrees for s in trace.steps):
        st.error(_("Generation's own window differs from the sliding-window policy at some step."))
