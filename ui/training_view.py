"""What the Training page shows of a run: its losses, the line its model writes now, one head's map, the leak evidence.

The leak evidence is the causality probe's first failure (the detector) and the loss rule (the symptom), against
an honest reference when one is known: this session's own causal run on the same text, preset and budget, or the
shipped causal model's final validation loss on that text.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from core import i18n
from core.i18n import N_, _
from core.model import leak
from core.model.bundle_checks import BundleError
from core.model.leak import CausalityProbe
from core.model.training import EvalRecord
from core.runs.events import SAMPLE_CHARS, SAMPLE_TEMPERATURE, Progress, Snapshot
from core.runs.queue import JobView
from ui import charts, layout, models, projector
from ui.companion import chart, matrix_table
from ui.predict import sentences
from ui.text import escape_markdown

Reference = Sequence[EvalRecord] | None  # the honest run's evaluations, on the same steps
PICTURE_HEIGHT = 430  # the map on the page's first screen, beside the loss curve (px; the probe text is ~30 characters)


def loss_figure(
    evals: Sequence[Progress], selected: int, reference: Reference = None, reference_loss: float | None = None
) -> go.Figure:
    """The run's two losses; beside them, where known, an honest (causal) reference on the same text: the
    session's own causal run at the same steps, or the shipped model's final validation loss."""
    steps = [e.step for e in evals]
    max_iters = evals[-1].max_iters
    series: dict[str, list[float | None]] = {
        _("train loss (sample of training text)"): [e.loss for e in evals],
        _("validation loss (held-out documents)"): [e.val_loss for e in evals],
    }
    if reference:
        honest = {r.step: r.val_loss for r in reference}
        series[_("your causal run: validation loss")] = [honest.get(s) for s in steps]
    fig = charts.lines(
        steps,
        series,
        title=_("Loss while training"),
        x_title=_("optimizer step"),
        y_title=_("cross-entropy (nats per character)"),
    )
    fig.add_vline(
        x=selected,
        line_dash="dot",
        line_color="#555555",
        annotation_text=_("map: step {step}").format(step=selected),
        annotation_position="top left" if selected > max_iters / 2 else "top right",
    )
    fig.update_xaxes(range=[0, max_iters])  # the curve grows into the whole budget
    fig.update_layout(height=PICTURE_HEIGHT)  # level with the attention map beside it
    if reference_loss is not None:
        fig.add_hline(
            y=reference_loss,
            line_dash="dash",
            line_color=charts.OKABE_ITO[5],
            annotation_text=_("shipped causal model {loss}").format(loss=i18n.number(reference_loss, 3)),
            annotation_position="bottom left",
        )
    return fig


def probe_word(probe: CausalityProbe | None) -> str:
    if probe is None:
        return _("not run")
    if probe.passed:
        return _("passed")
    return _("FAILED (x{ratio})").format(ratio=i18n.formatted(probe.agreement.ratio, ".3g"))


def show_losses(evals: Sequence[Progress], selected: int, reference: Reference, reference_loss: float | None) -> None:
    """The loss curves with their table (one row per evaluation, the probe's verdict included)."""
    table = pd.DataFrame(
        {
            _("step"): [e.step for e in evals],
            _("train loss"): [round(e.loss, 4) for e in evals],
            _("validation loss"): [round(e.val_loss, 4) for e in evals],
            _("learning rate"): [e.lr for e in evals],
            _("elapsed (s)"): [round(e.elapsed, 1) for e in evals],
            _("causality probe"): [probe_word(e.probe) for e in evals],
        }
    )
    first, now = evals[0], evals[-1]
    summary = _(
        "At step {step} the train loss is {train} and the validation loss {validation} nats per character (at step "
        "0: {train_0} and {validation_0}); the dotted line marks step {selected}."
    ).format(
        step=now.step,
        train=i18n.number(now.loss, 3),
        validation=i18n.number(now.val_loss, 3),
        train_0=i18n.number(first.loss, 3),
        validation_0=i18n.number(first.val_loss, 3),
        selected=selected,
    )
    chart(loss_figure(evals, selected, reference, reference_loss), table, summary, key="train_losses")


def show_sample(evals: Sequence[Progress]) -> None:
    """The line the model writes now after the probe text, on one row (a line break drawn as ↵): a room watches noise
    turn into words while the loss falls. Every evaluation's line is `sample_history`, under the pictures."""
    lines = [e for e in evals if e.sample is not None]
    if not lines:
        return
    now = lines[-1]
    label, line = st.columns([1, 5], vertical_alignment="center")
    label.markdown(
        _("**Step {step} writes:**").format(step=now.step),
        help=_(
            "{count} characters drawn after the probe text at temperature {temperature}, with the same seed at every "
            "evaluation, so only the model changes."
        ).format(count=SAMPLE_CHARS, temperature=i18n.formatted(SAMPLE_TEMPERATURE, "g")),
    )
    with line:
        st.code(one_line(now.sample or "") or _("(nothing: it ends the text at once)"), language=None)  # model output


def sample_history(evals: Sequence[Progress]) -> None:
    """What the model wrote at every evaluation, with the validation loss beside it."""
    lines = [e for e in evals if e.sample is not None]
    if not lines:
        return
    with st.expander(_("What the model wrote at each of the {count} evaluations").format(count=len(lines))):
        projector.dataframe(
            pd.DataFrame(
                {
                    _("step"): [e.step for e in lines],
                    _("validation loss"): [round(e.val_loss, 4) for e in lines],
                    _("what it writes"): [one_line(e.sample or "") for e in lines],
                }
            ),
            hide_index=True,
            key="train_samples",
        )


def one_line(text: str) -> str:
    """`text` on one line: line breaks and tabs drawn (↵, →) as the lab draws them elsewhere."""
    return text.replace("\r\n", "↵").replace("\n", "↵").replace("\r", "↵").replace("\t", "→")


def whose(snap: Snapshot, shipped: bool) -> str:
    """Whose map it is, and at which step: the shipped model's (not a step of the learner's run), or the run's."""
    if shipped:
        return _("The shipped model (trained {steps} steps), not your run yet").format(steps=i18n.integer(snap.step))
    return _("Your run, step {step}").format(step=snap.step)


def snapshot_view(snap: Snapshot, key_suffix: str, height: int | None = None, *, shipped: bool = False) -> None:
    """One head's attention over the probe text at one evaluation, masked cells drawn as gaps; `height` (px) keeps
    it on a first screen, else it grows with the text. `shipped`: the map is the shipped model's (before the learner
    has run anything), and its title says so, so that its step is not taken for one of the learner's run."""
    labels = [f"{t} {tok}" for t, tok in enumerate(snap.tokens)]
    T = len(labels)
    z: list[list[float | None]] = [
        [(w if (s <= t or not snap.causal) else None) for s, w in enumerate(row)]  # masked cells drawn as gaps
        for t, row in enumerate(snap.weights)
    ]
    fig = charts.heatmap(
        z,
        title=_("{whose}: layer {layer}, head {head}").format(
            whose=whose(snap, shipped), layer=snap.layer, head=snap.head
        ),
        x_labels=labels,
        y_labels=labels,
        zmin=0,
        zmax=1,
        height=max(420, 18 * T + 140) if height is None else height,
    )
    fig.update_layout(margin=dict(t=125), title=dict(y=0.995, yanchor="top"))  # the title above the key labels
    if snap.causal:
        where = _("the cells above the diagonal are masked (0)")
    else:
        where = _("the cells {share}% of each row's weight, on average, reads characters to its right").format(
            share=i18n.number(100 * snap.future_weight, 1)
        )
    summary = _(
        "{whose}, layer {layer}, head {head}, over {count} probe characters (␣ is a space, ↵ a line end): each row "
        "sums to 1; the mean of each row's largest weight is {mean}; {where}."
    ).format(
        whose=whose(snap, shipped),
        layer=snap.layer,
        head=snap.head,
        count=T,
        mean=i18n.number(snap.mean_max_weight, 3),
        where=where,
    )
    chart(fig, matrix_table(z, labels, labels, value_name=_("weight")), summary, key=f"train_attention_{key_suffix}")


def shipped_reference_loss(fingerprint: str) -> float | None:
    """The shipped causal model's validation loss, when it was trained on this same text."""
    try:
        return leak.causal_reference_loss(models.load(models.SHIPPED_DIR).manifest, fingerprint)
    except (BundleError, OSError):
        return None


def honest_reference(info: dict[str, Any], view: JobView) -> tuple[Reference, float | None]:
    """(history of this session's last causal run with the same text, preset and budget, or None;
    the shipped causal model's validation loss on this text, or None)."""
    reference = leak.causal_reference(
        [j.result for j in models.job_queue().jobs_of(models.session_id()) if j.id != view.id],
        corpus_fingerprint=info["fingerprint"],
        preset_name=info["preset"],
        max_iters=info["max_iters"],
    )
    return reference, shipped_reference_loss(info["fingerprint"])


EXACT = N_("The exact figures")  # the expander under a plain verdict: its figures and their tolerance, one click away


def exact_figures(lines: Sequence[str]) -> None:
    """A verdict's exact figures and tolerances (markdown lines, escaped by the caller), one click away under the
    plain sentence that says what they mean."""
    if lines:
        with st.expander(i18n._(EXACT)):
            for line in lines:
                st.markdown(line)


def leak_section(
    evals: Sequence[Progress], info: dict[str, Any], view: JobView, reference: Reference, reference_loss: float | None
) -> None:
    """The detector's finding (the causality probe), then the lesson's symptom as the evidence: each in plain words,
    their exact figures in an expander under them."""
    failed = leak.first_failed_probe(evals)
    # leak.leak_verdict looked up on the module at every call: a page test replaces it to move the rule's floor
    verdict = leak.leak_verdict(evals, reference=reference, reference_loss=reference_loss)
    loss_figure = [_("The loss: {verdict}.").format(verdict=escape_markdown(verdict.message))] if verdict.leaked else []
    if failed is None:
        probed = [(e.step, e.probe) for e in evals if e.probe is not None]
        if verdict.leaked:
            st.warning(
                _(
                    "The causality probe passes, yet the validation loss fell impossibly low. With the mask on this is "
                    "not a leak: is the text very repetitive? Check it before trusting this model."
                )
            )
        probe_figures = []
        if probed:
            step, latest = probed[-1]
            st.caption(
                _(
                    "Causality probe passed at every evaluation so far: changing a later character never changed the "
                    "model's guess for an earlier one."
                )
            )
            probe_figures = [
                _("The causality probe at step {step}, the latest: {result}.").format(
                    step=step, result=escape_markdown(latest.describe())
                ),
                _("The allowance: {rule}.").format(rule=escape_markdown(latest.agreement.rule)),
            ]
        exact_figures(loss_figure + probe_figures)
        return
    probe, now = failed.probe, evals[-1]
    j, t = probe.first_leak
    result = view.result
    if result is not None and result.metrics["stop_reason"] == "leak":
        what = _("**The causality probe stopped the run at step {step}.**")
    elif info.get("leak_stop", True) and result is None:
        what = _("**The causality probe failed at step {step}: the run stops there.**")
    else:
        what = _(
            "**The causality probe failed at step {step}.** The stop is off, so the run goes on: watch the validation "
            "loss fall."
        )
    layout.lesson_case(
        _("the model reads the future"),
        sentences(
            what.format(step=failed.step),
            _(
                "Editing the character at position {edited} of a random sequence changed the model's predictions at "
                "position {moved}, before it: position {moved} reads the future."
            ).format(edited=j, moved=t),
        ),
    )
    st.caption(_("The probe works on any text: it asks the model's structure, not the loss."))
    honest = {r.step: r.val_loss for r in (reference or ())}
    if now.step in honest:
        compared = _("your causal run had {loss} at the same step").format(loss=i18n.number(honest[now.step], 3))
    elif reference_loss is not None:
        compared = _("the shipped causal model reaches {loss} on this text").format(loss=i18n.number(reference_loss, 3))
    else:
        compared = _(
            "no honest reference is known for this text yet (train the same preset and step budget once "
            "with the mask to get one)"
        )
    symptom = (
        _("The loss shows the symptom: it fell impossibly low.")
        if verdict.leaked
        else _("The loss does not show it yet: the probe finds the leak before the loss can.")
    )
    snap = next((e.snapshot for e in reversed(evals) if e.snapshot is not None), None)
    reads = (
        ""
        if snap is None
        else _(
            "In the attention map (layer {layer}, head {head}, step {step}) {share}% of each row's weight, on "
            "average, sits above the diagonal, on characters to the right of the query; a causal model puts exactly "
            "0 there."
        ).format(layer=snap.layer, head=snap.head, step=snap.step, share=i18n.number(100 * snap.future_weight, 1))
    )
    evidence = _(
        "**The evidence.** Validation loss {loss} nats per character at step {step}; {compared}. {symptom}"
    ).format(loss=i18n.number(now.val_loss, 3), step=now.step, compared=compared, symptom=symptom)
    st.markdown(sentences(evidence, reads))
    exact_figures(
        [
            _(
                "The causality probe at step {step}: over every edit (positions 1 to {last}), the largest change of "
                "an earlier prediction was {largest} in the logits, computed in float64, where rounding alone allows "
                "{allowed}: {ratio} times the allowance."
            ).format(
                step=failed.step,
                last=probe.length - 1,
                largest=i18n.formatted(probe.agreement.max_abs_diff, ".2e"),
                allowed=i18n.formatted(probe.agreement.allowed, ".2e"),
                ratio=i18n.formatted(probe.agreement.ratio, ".3g"),
            ),
            _("The allowance: {rule}.").format(rule=escape_markdown(probe.agreement.rule)),
        ]
        + loss_figure
    )


def overfit_chart(result) -> None:
    """The tiny-batch overfit (an `Overfit`): both losses against the step, table and summary."""
    fig = charts.lines(
        list(result.steps),
        {_("the one training batch"): list(result.batch_loss), _("held-out text"): list(result.held_out_loss)},
        title=_("One batch memorised: its loss against the held-out loss"),
        x_title=_("step"),
        y_title=_("loss (nats per character)"),
        markers=False,
    )
    every = max(1, len(result.steps) // 50)  # the table lists every `every`-th step (and the last)
    rows = sorted(set(range(0, len(result.steps), every)) | {len(result.steps) - 1})
    table = pd.DataFrame(
        {
            _("step"): [result.steps[i] for i in rows],
            _("batch loss"): [round(result.batch_loss[i], 4) for i in rows],
            _("held-out loss"): [round(result.held_out_loss[i], 4) for i in rows],
        }
    )
    summary = _(
        "Over {steps} steps the batch's loss fell from {start} to {end}; the held-out loss went from {held_start} to "
        "{held_end} (lowest {lowest})."
    ).format(
        steps=result.steps[-1],
        start=i18n.number(result.batch_loss[0], 2),
        end=i18n.number(result.batch_loss[-1], 3),
        held_start=i18n.number(result.held_out_loss[0], 2),
        held_end=i18n.number(result.held_out_loss[-1], 2),
        lowest=i18n.number(min(result.held_out_loss), 2),
    )
    chart(fig, table, summary, key="overfit_losses")
