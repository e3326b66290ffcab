"""The leakage detector: is a run's validation loss impossibly good?

A model trained without the causal mask sees the character it has to predict and copies it, so its
validation loss falls below anything an honest (causal) model reaches. `leak_verdict(history)` checks a
run's evaluations against an absolute floor and against causal references on the same text;
`causal_reference_loss` and `causal_reference` find those references (the shipped model's manifest, the
session's own causal runs from core.runs). Losses are in nats per character.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable

if TYPE_CHECKING:
    from core.runs import RunResult

# The leak rule (see leak_verdict).
LEAK_FLOOR_NATS = 0.4
LEAK_REFERENCE_RATIO = 0.5


@dataclass(frozen=True)
class LeakVerdict:
    leaked: bool
    rule: str | None  # "floor" | "reference run" | "reference model" | None
    step: int | None  # first evaluation that broke the rule
    val_loss: float | None  # its validation loss
    threshold: float | None  # the loss it fell below
    message: str


def leak_verdict(history: Iterable, *, floor: float = LEAK_FLOOR_NATS, reference: Iterable | None = None,
                 reference_loss: float | None = None, ratio: float = LEAK_REFERENCE_RATIO) -> LeakVerdict:
    """Is the validation loss impossibly good? `history`: evaluations with `.step` and `.val_loss`
    (EvalRecord, or eval Progress events), in nats per character. Rules, checked in this order:

    "floor": some evaluation has val_loss < floor (default 0.4 nats = 0.58 bits per character).
      Shannon (1951) put the entropy of English at 0.6 to 1.3 bits per character; the best published
      character-level models reach about 0.94 bits on enwik8. A small model trained here for minutes does
      not honestly predict held-out text or code better than that lower bound; a model that sees its own
      target does (it copies it). Highly repetitive text (logs, generated tables) can go below the floor
      honestly: the other rules compare with a causal model on the same text instead.
    "reference run": `reference` is the history of a causal run on the same corpus, preset and step
      budget; some step evaluated by both has val_loss < ratio * the reference's val_loss there (default:
      less than half the loss the causal run had at the same step). Step 0 (untrained) is never compared.
    "reference model": `reference_loss` is the final validation loss of a causal model trained on the
      same text (the shipped model, `causal_reference_loss`); some evaluation has val_loss < ratio * it.
    Every comparison is strict: a loss exactly at its threshold passes.
    """
    if not (isinstance(floor, (int, float)) and floor >= 0 and 0 < ratio < 1):
        raise ValueError(f"floor must be >= 0 and ratio in (0, 1), got floor={floor!r}, ratio={ratio!r}")
    records = sorted(history, key=lambda r: r.step)
    for r in records:
        if r.val_loss < floor:
            return LeakVerdict(True, "floor", r.step, r.val_loss, floor,
                               f"validation loss {r.val_loss:.3f} nats per character at step {r.step} is below "
                               f"{floor} nats ({floor / math.log(2):.2f} bits), better than the lower estimate "
                               f"of the entropy of natural text: impossibly good")
    ref = {r.step: r.val_loss for r in (reference or ()) if r.step > 0}
    for r in records:
        if r.step in ref and r.val_loss < ratio * ref[r.step]:
            return LeakVerdict(True, "reference run", r.step, r.val_loss, ratio * ref[r.step],
                               f"validation loss {r.val_loss:.3f} at step {r.step} is less than {ratio:g} x the "
                               f"{ref[r.step]:.3f} your causal run had at the same step: impossibly good")
    if reference_loss is not None:
        for r in records:
            if r.val_loss < ratio * reference_loss:
                return LeakVerdict(True, "reference model", r.step, r.val_loss, ratio * reference_loss,
                                   f"validation loss {r.val_loss:.3f} at step {r.step} is less than {ratio:g} x the "
                                   f"{reference_loss:.3f} the shipped causal model reaches on this text: "
                                   "impossibly good")
    return LeakVerdict(False, None, None, None, None, "no sign of leakage: the validation loss stays in the range "
                       "a causal model can reach")


def causal_reference_loss(manifest: dict, corpus_fingerprint: str) -> float | None:
    """The final validation loss recorded in a bundle manifest, if that bundle is a safe, causal model
    trained on the corpus with `corpus_fingerprint` (for the "reference model" rule); else None."""
    try:
        same = manifest["corpus"]["fingerprint"] == corpus_fingerprint
        causal = manifest["safe"] and manifest["architecture"]["causal"]
        loss = float(manifest["training"]["metrics"]["val_loss"])
    except (KeyError, TypeError, ValueError):
        return None
    return loss if same and causal and math.isfinite(loss) and loss > 0 else None


def causal_reference(results: Iterable[RunResult | None], *, corpus_fingerprint: str, preset_name: str,
                     max_iters: int) -> tuple | None:
    """The history of the last causal run in `results` (oldest first) on the same corpus and preset with
    the same step budget (so its evaluations fall on the same steps), for rule 2 of leak_verdict; None if none."""
    found = None
    for r in results:
        if (r is not None and r.causal and r.corpus_fingerprint == corpus_fingerprint
                and r.preset_name == preset_name and r.max_iters == max_iters):
            found = r.history
    return found
