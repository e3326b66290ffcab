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

from core.model import leak
from core.model.bundle_checks import BundleError
from core.model.leak import CausalityProbe
from core.model.training import EvalRecord
from core.runs.events import SAMPLE_CHARS, SAMPLE_TEMPERATURE, Progress, Snapshot
from core.runs.queue import JobView
from ui import charts, layout, models, projector
from ui.companion import chart, matrix_table
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
        "train loss (sample of training text)": [e.loss for e in evals],
        "validation loss (held-out documents)": [e.val_loss for e in evals],
    }
    if reference:
        honest = {r.step: r.val_loss for r in reference}
        series["your causal run: validation loss"] = [honest.get(s) for s in steps]
    fig = charts.lines(
        steps,
        series,
        title="Loss while training",
        x_title="optimizer step",
        y_title="cross-entropy (nats per character)",
    )
    fig.add_vline(
        x=selected,
        line_dash="dot",
        line_color="#555555",
        annotation_text=f"map: step {selected}",
        annotation_position="top left" if selected > max_iters / 2 else "top right",
    )
    fig.update_xaxes(range=[0, max_iters])  # the curve grows into the whole budget
    fig.update_layout(height=PICTURE_HEIGHT)  # level with the attention map beside it
    if reference_loss is not None:
        fig.add_hline(
            y=reference_loss,
            line_dash="dash",
            line_color=charts.OKABE_ITO[5],
            annotation_text=f"shipped causal model {reference_loss:.3f}",
            annotation_position="bottom left",
        )
    return fig


def probe_word(probe: CausalityProbe | None) -> str:
    return "not run" if probe is None else "passed" if probe.passed else f"FAILED (x{probe.agreement.ratio:.3g})"


def show_losses(evals: Sequence[Progress], selected: int, reference: Reference, reference_loss: float | None) -> None:
    """The loss curves with their table (one row per evaluation, the probe's verdict included)."""
    table = pd.DataFrame(
        {
            "step": [e.step for e in evals],
            "train loss": [round(e.loss, 4) for e in evals],
            "validation loss": [round(e.val_loss, 4) for e in evals],
            "learning rate": [e.lr for e in evals],
            "elapsed (s)": [round(e.elapsed, 1) for e in evals],
            "causality probe": [probe_word(e.probe) for e in evals],
        }
    )
    first, now = evals[0], evals[-1]
    summary = (
        f"At step {now.step} the train loss is {now.loss:.3f} and the validation loss {now.val_loss:.3f} "
        f"nats per character (at step 0: {first.loss:.3f} and {first.val_loss:.3f}); "
        f"the dotted line marks step {selected}."
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
        f"**Step {now.step} writes:**",
        help=f"{SAMPLE_CHARS} characters drawn after the probe text at temperature {SAMPLE_TEMPERATURE:g}, with the "
        "same seed at every evaluation, so only the model changes.",
    )
    with line:
        st.code(one_line(now.sample or "") or "(nothing: it ends the text at once)", language=None)  # model output


def sample_history(evals: Sequence[Progress]) -> None:
    """What the model wrote at every evaluation, with the validation loss beside it."""
    lines = [e for e in evals if e.sample is not None]
    if not lines:
        return
    with st.expander(f"What the model wrote at each of the {len(lines)} evaluations"):
        projector.dataframe(
            pd.DataFrame(
                {
                    "step": [e.step for e in lines],
                    "validation loss": [round(e.val_loss, 4) for e in lines],
                    "what it writes": [one_line(e.sample or "") for e in lines],
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
        return f"The shipped model (trained {snap.step:,} steps), not your run yet"
    return f"Your run, step {snap.step}"


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
        title=f"{whose(snap, shipped)}: layer {snap.layer}, head {snap.head}",
        x_labels=labels,
        y_labels=labels,
        zmin=0,
        zmax=1,
        height=max(420, 18 * T + 140) if height is None else height,
    )
    fig.update_layout(margin=dict(t=125), title=dict(y=0.995, yanchor="top"))  # the title above the key labels
    where = (
        "above the diagonal are masked (0)"
        if snap.causal
        else f"{snap.future_weight:.1%} of each row's weight, on average, reads characters to its right"
    )
    summary = (
        f"{whose(snap, shipped)}, layer {snap.layer}, head {snap.head}, over {T} probe characters (␣ is a space, "
        f"↵ a line end): each row sums to 1; "
        f"the mean of each row's largest weight is {snap.mean_max_weight:.3f}; the cells {where}."
    )
    chart(fig, matrix_table(z, labels, labels, value_name="weight"), summary, key=f"train_attention_{key_suffix}")


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


EXACT = "The exact figures"  # the expander under a plain verdict: its figures and their tolerance, one click away


def exact_figures(lines: Sequence[str]) -> None:
    """A verdict's exact figures and tolerances (markdown lines, escaped by the caller), one click away under the
    plain sentence that says what they mean."""
    if lines:
        with st.expander(EXACT):
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
    loss_figure = [f"The loss: {escape_markdown(verdict.message)}."] if verdict.leaked else []
    if failed is None:
        probed = [(e.step, e.probe) for e in evals if e.probe is not None]
        if verdict.leaked:
            st.warning(
                "The causality probe passes, yet the validation loss fell impossibly low. With the mask on this is "
                "not a leak: is the text very repetitive? Check it before trusting this model."
            )
        probe_figures = []
        if probed:
            step, latest = probed[-1]
            st.caption(
                "Causality probe passed at every evaluation so far: changing a later character never changed the "
                "model's guess for an earlier one."
            )
            probe_figures = [
                f"The causality probe at step {step}, the latest: {escape_markdown(latest.describe())}.",
                f"The allowance: {escape_markdown(latest.agreement.rule)}.",
            ]
        exact_figures(loss_figure + probe_figures)
        return
    probe, now = failed.probe, evals[-1]
    j, t = probe.first_leak
    result = view.result
    if result is not None and result.metrics["stop_reason"] == "leak":
        what = f"**The causality probe stopped the run at step {failed.step}.**"
    elif info.get("leak_stop", True) and result is None:
        what = f"**The causality probe failed at step {failed.step}: the run stops there.**"
    else:
        what = (
            f"**The causality probe failed at step {failed.step}.** The stop is off, so the run goes on: "
            "watch the validation loss fall."
        )
    layout.lesson_case(
        "the model reads the future",
        f"{what} Editing the character at position {j} of a random sequence changed the model's predictions "
        f"at position {t}, before it: position {t} reads the future.",
    )
    st.caption("The probe works on any text: it asks the model's structure, not the loss.")
    honest = {r.step: r.val_loss for r in (reference or ())}
    if now.step in honest:
        compared = f"your causal run had {honest[now.step]:.3f} at the same step"
    elif reference_loss is not None:
        compared = f"the shipped causal model reaches {reference_loss:.3f} on this text"
    else:
        compared = (
            "no honest reference is known for this text yet (train the same preset and step budget once "
            "with the mask to get one)"
        )
    symptom = (
        "The loss shows the symptom: it fell impossibly low."
        if verdict.leaked
        else "The loss does not show it yet: the probe finds the leak before the loss can."
    )
    snap = next((e.snapshot for e in reversed(evals) if e.snapshot is not None), None)
    reads = (
        ""
        if snap is None
        else f" In the attention map (layer {snap.layer}, head {snap.head}, step {snap.step}) "
        f"{snap.future_weight:.1%} of each row's weight, on average, sits above the diagonal, on characters to "
        "the right of the query; a causal model puts exactly 0 there."
    )
    st.markdown(
        f"**The evidence.** Validation loss {now.val_loss:.3f} nats per character at step {now.step}; "
        f"{compared}. {symptom}{reads}"
    )
    exact_figures(
        [
            f"The causality probe at step {failed.step}: over every edit (positions 1 to {probe.length - 1}), the "
            f"largest change of an earlier prediction was {probe.agreement.max_abs_diff:.2e} in the logits, "
            f"computed in float64, where rounding alone allows {probe.agreement.allowed:.2e}: "
            f"{probe.agreement.ratio:.3g} times the allowance.",
            f"The allowance: {escape_markdown(probe.agreement.rule)}.",
        ]
        + loss_figure
    )


def overfit_chart(result) -> None:
    """The tiny-batch overfit (an `Overfit`): both losses against the step, table and summary."""
    fig = charts.lines(
        list(result.steps),
        {"the one training batch": list(result.batch_loss), "held-out text": list(result.held_out_loss)},
        title="One batch memorised: its loss against the held-out loss",
        x_title="step",
        y_title="loss (nats per character)",
        markers=False,
    )
    every = max(1, len(result.steps) // 50)  # the table lists every `every`-th step (and the last)
    rows = sorted(set(range(0, len(result.steps), every)) | {len(result.steps) - 1})
    table = pd.DataFrame(
        {
            "step": [result.steps[i] for i in rows],
            "batch loss": [round(result.batch_loss[i], 4) for i in rows],
            "held-out loss": [round(result.held_out_loss[i], 4) for i in rows],
        }
    )
    summary = (
        f"Over {result.steps[-1]} steps the batch's loss fell from {result.batch_loss[0]:.2f} to "
        f"{result.batch_loss[-1]:.3f}; the held-out loss went from {result.held_out_loss[0]:.2f} to "
        f"{result.held_out_loss[-1]:.2f} (lowest {min(result.held_out_loss):.2f})."
    )
    chart(fig, table, summary, key="overfit_losses")
