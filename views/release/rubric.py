"""The release gate's rubric, the gate's figures against the baselines, and the quick comparison, as the Release
page shows them.

The rubric is the gate's own, one row per check with its figure, its rule and a sentence on what it guards
against: measured in this session or, until then, the one recorded for the same version. The figures against the
baselines are exactly what `python -m core evaluate --compare` prints for the same config. The quick comparison
uses the page's small caps. Everything shown comes from a file or a model, so every markdown cell is escaped.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from core import i18n
from core.i18n import N_, _
from core.model.bundle_checks import BundleError
from core.release.evaluation.comparison import Evaluation
from core.release.evaluation.eval_report import EvalReport, Interval, SliceMetrics
from core.release.gate.rubric import RUBRIC, CheckResult, Rubric, read_rubric, side_dir
from core.release.registry.served import version_dir
from ui import charts, projector
from ui.companion import chart
from ui.text import escape_markdown
from views.release.wording import interval as shown_interval
from views.release.wording import known

# What each check of core.release.gate.gate guards against, in a sentence for the team.
# The keys are the checks' names as the rubric records them; both are shown translated (N_, then known()).
GUARDS = {
    N_("integrity"): N_(
        "Damaged, half-copied or edited files: every file's hash, the manifest fields, the tensor names "
        "and shapes, finite weights."
    ),
    N_("marked safe"): N_(
        "Shipping a model its own training flagged (for example one trained without the causal mask)."
    ),
    N_("causality"): N_(
        "A model that reads the future: changing a later character must not move any earlier prediction."
    ),
    N_("cache logits"): N_(
        "A KV cache that drifts: predictions computed token by token through the cache must equal "
        "the full forward pass."
    ),
    N_("cache greedy"): N_("Suggestions that change when the cache is on, including after the context window slides."),
    N_("held-out split"): N_(
        "Scores measured on text the model trained on: the evaluation uses the split and the corpus the bundle records."
    ),
    N_("plausible: no-peek"): N_(
        "A leak the edit test missed: a model that sees its target gets worse when the window "
        "ends just before the target."
    ),
    N_("plausible: canary"): N_(
        "Copying that looks like skill: on shuffled text no honest model beats the character entropy."
    ),
    N_("plausible: vs n-gram"): N_(
        "An impossibly good loss: a small character model is not four times better than a 5-gram."
    ),
    N_("beats baselines: loss"): N_(
        "Complexity that does not pay: the transformer must predict held-out text better than "
        "both the rule and the n-gram."
    ),
    N_("beats baselines: keystrokes"): N_(
        "A model that scores well but helps less: with the suggestions as served, its "
        "keystrokes saved must be above the rule's and the n-gram's, by more than the uncertainty (intervals apart)."
    ),
    N_("named fallback"): N_(
        "Having nothing to serve: an n-gram on the same split must save and load back, ready to serve."
    ),
}
KEYSTROKES_CHECK = N_("beats baselines: keystrokes")  # the check the picture's chart shows the figures of
EXACT = N_("The exact figures")  # the expander under a plain verdict: its figures and their rules, one click away
PICTURE_PX = 340  # the gate's chart opens the page: short enough to sit on the first screen, projected too
RUBRIC_COLUMNS = [N_("check"), N_("result"), N_("figure"), N_("threshold"), N_("guards against"), N_("detail")]
SLICE_COLUMNS = ["slice", "positions", "top1", "top1_ci_low", "top1_ci_high", "loss", "keystrokes_saved_per_100"]
# the gate's predictors, in the order shown
PREDICTORS = {"rule": N_("rule"), "ngram": N_("n-gram"), "transformer": N_("transformer")}
# (summary key, column): the figures of core.release.evaluation.comparison.summary the gate's table shows, intervals
# split
GATE_COLUMNS = (
    ("net_keystrokes_saved_per_100", N_("net keystrokes saved per 100 chars")),
    ("net_keystrokes_saved_ci", N_("net keystrokes 95% interval")),
    ("attention_cost", N_("attention cost (keystrokes)")),
    ("keystrokes_saved_per_100", N_("keystrokes saved per 100 chars")),
    ("keystrokes_saved_ci", N_("keystrokes 95% interval")),
    ("acceptance_rate", N_("acceptance rate")),
    ("acceptance_ci", N_("acceptance 95% interval")),
    ("shown_per_100", N_("suggestions shown per 100 chars")),
    ("threshold", N_("threshold")),
    ("threshold_tuned", N_("threshold tuned")),
    ("loss", N_("loss (nats/char)")),
    ("loss_ci", N_("loss 95% interval")),
    ("typed_chars", N_("characters typed")),
    ("documents", N_("documents")),
)
# The chart's words for the figure the keystrokes check decided on (decided_on), net or gross: its title, its axis,
# the summary's and the exact figures' sentence.
DECIDED_WORDS = {
    True: (
        N_("Net keystrokes saved per 100 characters, as served (the gate's figures)"),
        N_("net keystrokes saved per 100 chars"),
        N_("Net keystrokes saved per 100 characters: {figures}."),
        N_("Net keystrokes saved per 100 characters with 95% intervals: {figures}."),
    ),
    False: (
        N_("Keystrokes saved per 100 characters, as served (the gate's figures)"),
        N_("keystrokes saved per 100 chars"),
        N_("Keystrokes saved per 100 characters: {figures}."),
        N_("Keystrokes saved per 100 characters with 95% intervals: {figures}."),
    ),
}


def recorded(bundle, registry: Path) -> tuple[Rubric, str] | None:
    """(the rubric a release check recorded for exactly this version, where it was recorded), or None.

    Looked for beside the bundle (`python -m core release check` writes <bundle>.release/rubric.json) and in the
    registry (the rubric a promoted version passed); a file that is unreadable, not a rubric or of another version
    is passed over. The page opens on these figures, so the class sees the gate's comparison before anyone spends
    minutes running the checks again."""
    # Plain text, not a code span: inline code in a caption falls below WCAG AA contrast (axe-core).
    beside = _("recorded beside the bundle by the command python -m core release check")
    places = [(side_dir(bundle.path) / RUBRIC, beside)]
    try:
        places.append(
            (version_dir(registry, bundle.version) / RUBRIC, _("stored in the registry when it was promoted"))
        )
    except BundleError:  # not a version name: nothing in the registry
        pass
    for path, where in places:
        try:
            rubric = read_rubric(path)
        except (OSError, ValueError):
            continue
        if rubric.version == bundle.version:
            return rubric, where
    return None


def verdict(rubric: Rubric) -> None:
    """The gate's verdict in one box: how many checks pass and which failed, by name; the failed checks' figures and
    rules in an expander under it."""
    failed = [c for c in rubric.checks if not c.passed]
    counts = {"passed": str(len(rubric.checks) - len(failed)), "total": str(len(rubric.checks))}
    if failed:
        summary = _("{passed} of {total} checks pass; failed: {names}").format(
            **counts, names=", ".join(str(known(c.name)) for c in failed)
        )
        st.error(
            _("**Refused.** {summary}. What each guards against is in the Release checks tab.").format(
                summary=escape_markdown(summary)
            )
        )
        exact_figures([escape_markdown(failed_check(c)) for c in failed])
    else:
        summary = _("{passed} of {total} checks pass").format(**counts)
        st.success(_("**Passes the release gate.** {summary}.").format(summary=escape_markdown(summary)))


def failed_check(c: CheckResult) -> str:
    """A failed check in one line: its name, figure, rule and detail (plain text, for the caller to escape)."""
    return _("{name}: {figure} (rule: {rule}). {detail}").format(
        name=known(c.name), figure=known(c.figure), rule=known(c.threshold), detail=known(c.detail)
    )


def exact_figures(lines: list[str]) -> None:
    """A verdict's exact figures and rules (markdown lines, escaped by the caller), one click away under the plain
    sentence that says what they mean."""
    with st.expander(_(EXACT)):
        for line in lines:
            st.markdown(line)


def keystrokes_words(check: CheckResult | None) -> str:
    """The keystrokes check's verdict in plain words, from its result and its figure (the margin between the
    transformer's interval and the baselines', None when an interval is missing): core decides, this only says it."""
    if check is None:
        return ""
    apart = check.value is not None and check.value > 0
    if check.passed and apart:
        return _(
            "The transformer saves more keystrokes than the rule and the n-gram, even at the low end of its range: "
            "it passes the keystrokes check."
        )
    if check.passed:
        return _(
            "The transformer does not clearly save more keystrokes than every baseline, but this release policy "
            "does not require it to: the keystrokes check passes."
        )
    if check.value is None:
        return _(
            "Too few held-out documents to tell whether the transformer saves more keystrokes than the baselines: "
            "the keystrokes check fails."
        )
    return _(
        "The transformer does not clearly save more keystrokes than every baseline: the low end of its range "
        "does not clear a baseline's high end, so the keystrokes check fails."
    )


def show_rubric(rubric: Rubric, said: str) -> None:
    """Every check in a table (the figure it measured, the rule it is held to, what it guards against), with
    `said` (when and where the rubric was measured, markdown) above it and the named fallback below."""
    st.caption(said)
    # every cell in the reader's language where it is a code or a constant rule (known), else as core wrote it
    rows = [{**row, N_("guards against"): GUARDS.get(row["check"], "")} for row in rubric.table()]
    table = pd.DataFrame([{_(column): known(row[column]) for column in RUBRIC_COLUMNS} for row in rows])
    failed = sum(not c.passed for c in rubric.checks)
    with st.expander(
        _("Every check: its figure, its rule, what it guards against ({failed} failed)").format(failed=str(failed)),
        expanded=failed > 0,
    ):
        # st.table shows every row and wraps every cell (a rubric is read in full); its cells are markdown, so escaped
        st.table(table.set_index(_("check")).map(escape_markdown))
    if rubric.fallback:
        kind, order, version = (escape_markdown(known(rubric.fallback[k])) for k in ("kind", "order", "version"))
        threshold = rubric.fallback.get("threshold")
        if threshold is None:
            said = _("Named fallback of this version: {kind} of order {order}, version {version}.")
        else:
            said = _(
                "Named fallback of this version: {kind} of order {order}, version {version}, suggestion threshold "
                "tuned for it {threshold}."
            )
        shown = i18n.formatted(threshold) if isinstance(threshold, float) else threshold
        st.caption(said.format(kind=kind, order=order, version=version, threshold=escape_markdown(shown)))


def decided_on(figures: dict[str, dict]) -> tuple[str, str, str]:
    """(figure, its interval, its name) the keystrokes check decided on: net keystrokes saved (less the attention
    cost of every suggestion shown and not taken) when the rubric records it, else gross (a rubric from before
    the price of attention)."""
    if all(f.get("net_keystrokes_saved_per_100") is not None for f in figures.values()):
        return "net_keystrokes_saved_per_100", "net_keystrokes_saved_ci", N_("Net keystrokes saved")
    return "keystrokes_saved_per_100", "keystrokes_saved_ci", N_("Keystrokes saved")


def gate_figures(summary: dict) -> dict[str, dict]:
    """{shown name (in the reader's language): the comparison's `summary`} of the rule, the n-gram and the
    transformer, in that order; empty unless all three are there with keystrokes measured (the checks that measure
    them ran)."""
    predictors = summary.get("predictors") if isinstance(summary, dict) else None
    found = {_(name): (predictors or {}).get(kind) for kind, name in PREDICTORS.items()}
    if not all(isinstance(f, dict) and f.get("keystrokes_saved_per_100") is not None for f in found.values()):
        return {}
    return {name: f for name, f in found.items() if isinstance(f, dict)}


def gate_table(figures: dict[str, dict]) -> pd.DataFrame:
    """One row per predictor of the rubric summary's figures (each interval as its low and high columns)."""
    rows = []
    for name, f in figures.items():
        row: dict[str, object] = {_("predictor"): name}
        for key, column in GATE_COLUMNS:
            shown = _(column)
            if key.endswith("_ci"):
                ci = f.get(key)
                low, high = _("{column} low").format(column=shown), _("{column} high").format(column=shown)
                row[low], row[high] = (ci[0], ci[1]) if ci else (None, None)
            else:
                row[shown] = f.get(key)
        rows.append(row)
    return pd.DataFrame(rows)


def gate_chart(rubric: Rubric) -> bool:
    """The gate's own figures against the baselines as the page's picture: the keystrokes saved per 100 characters
    the keystrokes check decided on (decided_on), of the rule, the n-gram and the transformer with their 95%
    intervals, the check's verdict in the summary and every figure in the table beneath. False (nothing drawn)
    when the rubric holds no such figures."""
    figures = gate_figures(rubric.summary)
    if not figures:
        return False
    figure, interval, _name = decided_on(figures)
    title, y_title, saved_words, interval_words = DECIDED_WORDS[figure.startswith("net_")]
    names = list(figures)
    keys = [float(f[figure]) for f in figures.values()]
    cis = [f.get(interval) for f in figures.values()]  # [low, high] or None
    fig = charts.bars(
        names,
        keys,
        title=_(title),
        y_title=_(y_title),
        x_title=_("predictor"),
        value_format=".2f",
        highlight=len(keys) - 1,
    )  # the transformer in the other colour, outlined
    fig.update_traces(
        textposition="inside",
        insidetextanchor="start",
        error_y=dict(
            type="data",
            symmetric=False,
            color="#000000",
            thickness=1.5,
            width=6,
            array=[0.0 if ci is None else ci[1] - k for ci, k in zip(cis, keys)],
            arrayminus=[0.0 if ci is None else k - ci[0] for ci, k in zip(cis, keys)],
        ),
    )
    fig.update_layout(height=PICTURE_PX)
    check = next((c for c in rubric.checks if c.name == KEYSTROKES_CHECK), None)
    verdict_words = keystrokes_words(check)
    saved = _(saved_words).format(figures=", ".join(f"{who} {i18n.number(k, 1)}" for who, k in zip(names, keys)))
    chart(fig, gate_table(figures), escape_markdown(f"{verdict_words} {saved}".strip()), key="rel_gate_baselines")
    intervals = _(interval_words).format(
        figures="; ".join(
            f"{who} {i18n.number(k, 2)} " + (_("[no interval]") if ci is None else shown_interval(ci[0], ci[1], 2))
            for who, k, ci in zip(names, keys, cis)
        )
    )
    lines = [intervals]
    if check is not None:
        lines += [
            _("The keystrokes check: {result}: {detail}.").format(
                result=_("pass") if check.passed else _("FAIL"), detail=known(check.detail)
            ),
            _("Its rule: {rule}.").format(rule=known(check.threshold)),
        ]
    exact_figures([escape_markdown(line) for line in lines])
    return True


def gate_notes(rubric: Rubric) -> None:
    """How the gate's figures against the baselines were measured (the picture's chart shows them), and the
    evaluation's warnings."""
    if not gate_figures(rubric.summary):
        st.info(_("This rubric holds no figures against the baselines (the checks that measure them did not run)."))
        return
    ev = rubric.summary.get("evaluation", {})
    st.markdown(
        _(
            "**The gate's figures against the baselines** (the chart at the top) are the numbers the two **beats "
            "baselines** checks decided on, measured by the same evaluation as `python -m core evaluate --compare`: "
            "every predictor types the same held-out documents with the one suggestion policy, the transformer at "
            "the threshold its bundle records, each baseline at the threshold tuned for it on the validation "
            "documents. The keystrokes check decides on **net** keystrokes saved (each suggestion shown and not taken "
            "costs the typist the attention cost, in keystrokes, to read and dismiss it) and passes only when the "
            "transformer's 95% interval lies wholly above both baselines' (intervals by bootstrap over documents)."
        )
    )
    st.caption(
        _(
            "Caps of the gate's evaluation: {positions} scored positions, {typing} characters of simulated typing "
            "in stretches of {stretch}, seed {seed}."
        ).format(
            positions=i18n.integer(ev.get("max_positions", 0)),
            typing=i18n.integer(ev.get("typing_chars", 0)),
            stretch=i18n.integer(ev.get("segment_chars", 0)),
            seed=str(ev.get("seed", 0)),
        )
    )
    for w in rubric.summary.get("warnings", []):
        st.warning(escape_markdown(w))


def show_comparison(result: Evaluation) -> None:
    """One row per metric for the baselines and the transformer, the evaluation's warnings, the slice chart."""
    kinds = [r.predictor for r in result.baselines] + [result.report.predictor]
    shown = {k: _(k) for k in kinds}  # a predictor's kind as its column is headed
    metric, worst = _("metric"), _("worst slice")
    rows = [
        {
            metric: known(r["metric"]),
            **{shown[k]: r[k] for k in kinds},
            **{_("{predictor} 95% interval").format(predictor=shown[k]): _interval(r.get(f"{k}_ci")) for k in kinds},
            _("better"): known(r["better"]),
            worst: "; ".join(f"{known(k)}: {s}" for k, s in r["slice"].items()) if "slice" in r else "",
        }
        for r in result.comparison
    ]
    projector.dataframe(
        pd.DataFrame(rows),
        hide_index=True,
        key="rel_comparison_table",
        height=35 * (len(rows) + 1) + 3,
        column_config={
            metric: st.column_config.TextColumn(width="medium"),
            worst: st.column_config.TextColumn(width="large"),
            **{shown[k]: st.column_config.NumberColumn(format="%.4f") for k in kinds},
        },
    )
    for w in result.report.warnings:
        st.warning(escape_markdown(w))
    slice_chart(result.report)


def _interval(ci) -> str:
    return "" if not ci else shown_interval(ci[0], ci[1], 4)


def scored_slices(report: EvalReport) -> list[tuple[SliceMetrics, float, Interval]]:
    """(slice, top-1 accuracy, its interval) of every slice with scored positions, in report order. A slice
    within one document has no bootstrap interval: it is given the empty interval [top1, top1] (no error bar)."""
    scored = []
    for s in report.slices:
        top1, ci = s.metrics.top1, s.metrics.top1_ci
        if top1 is not None:
            scored.append((s, top1, ci if ci is not None else Interval(top1, top1)))
    return scored


def slice_chart(report: EvalReport) -> None:
    """Top-1 accuracy per slice with its 95% interval (bootstrap over documents), the worst slice highlighted."""
    scored = scored_slices(report)
    labels = [s.label for s, _, _ in scored]
    top1 = [v for _, v, _ in scored]
    worst = next((w for w in report.worst if w.metric == "top1"), None)
    highlight = labels.index(worst.slice) if worst and worst.slice in labels else None
    fig = charts.bars(
        labels,
        top1,
        title=_("Top-1 accuracy per slice, version {version}").format(version=report.version),
        y_title=_("top-1 accuracy"),
        x_title=_("slice"),
        value_format=".2f",
        y_range=(0, 1.12),
        highlight=highlight,
    )  # the worst slice in the other colour, outlined
    ci = [c for _, _, c in scored]
    # Values at the foot of each bar, clear of its error bar; above a bar too short to hold them.
    fig.update_traces(
        textposition=["inside" if v >= 0.1 else "outside" for v in top1],
        insidetextanchor="start",
        customdata=[[c.low, c.high, s.metrics.positions] for s, _, c in scored],
        hovertemplate=_(  # Plotly's own placeholders: no .format
            "%{x}: %{y:.3f}, 95% interval [%{customdata[0]:.3f}, %{customdata[1]:.3f}], "
            "%{customdata[2]} positions<extra></extra>"
        ),
        error_y=dict(
            type="data",
            symmetric=False,
            color="#000000",
            thickness=1.5,
            width=3,
            array=[c.high - v for c, v in zip(ci, top1)],
            arrayminus=[v - c.low for c, v in zip(ci, top1)],
        ),
    )
    fig.update_layout(height=520)
    fig.update_xaxes(tickangle=-45)
    table = pd.DataFrame(report.slice_table())[SLICE_COLUMNS]
    overall = report.overall
    figures = {
        "version": escape_markdown(report.version),
        "positions": i18n.integer(overall.positions),
        "top1": i18n.number(overall.top1, 3) if overall.top1 is not None else _("n/a"),
        "least": str(report.config.min_slice_positions),
    }
    if worst is not None:
        interval = (
            ""
            if worst.ci is None
            else _(", 95% interval {interval}").format(interval=shown_interval(worst.ci.low, worst.ci.high, 3))
        )
        summary = _(
            "Top-1 accuracy of version {version} over {positions} scored positions is {top1}; the worst slice "
            "(among those with at least {least} positions) is {slice} at {value}{interval}, over {count} positions "
            "(the highlighted bar)."
        ).format(
            **figures,
            slice=escape_markdown(worst.slice),
            value=i18n.number(worst.value, 3),
            interval=interval,
            count=str(worst.positions),
        )
    else:
        summary = _(
            "Top-1 accuracy of version {version} over {positions} scored positions is {top1}; no slice has the "
            "{least} positions needed to name a worst one."
        ).format(**figures)
    chart(fig, table, summary, key="rel_slices")
