"""The leakage detector: can a position's prediction see a later token?

A model trained without the causal mask sees the character it must predict and copies it. The probe is structural,
so it works on any text: it edits each position of seeded sequences and checks, in float64, that no earlier logit
moves by more than rounding allows. Training runs it at every evaluation; the command line and the app stop a run at
the first failure. The loss rule (a validation loss impossibly good for the text) is the lesson's symptom shown
beside it, never the detector: a loss threshold cannot know an arbitrary text's entropy. Shapes: B edited copies,
T positions, V vocabulary.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import torch

from core.agreement import DECIDING_DTYPE, Agreement, allowance, float64_copy, model_terms
from core.model.gpt import GPT
from core.numbers import integer, is_int

# The leak rule's symptom (see leak_verdict).
LEAK_FLOOR_NATS = 0.4
LEAK_REFERENCE_RATIO = 0.5

# Bounds of the probe: the batch it runs is sequences x (length - 1) edited copies of `length` tokens.
MAX_PROBE_SEQUENCES = 64
PROBE_TOKENS_PER_CHUNK = 8192  # tokens per forward pass, so memory stays bounded at any context length
# Training probes every evaluation with one sequence: every position j is still edited. Measured on the
# shipped `default` preset (models/default: context 128, 4 layers, width 128, so 127 edited copies per
# sequence), one torch thread, on a shared 2-core AMD EPYC: sequences=1 3.7-3.9 s, sequences=2 6.6-7.7 s,
# against 3.4 s for the evaluation's own losses (2 x 20 batches of 12 x 128 in float32). float64 costs
# about 3x float32 there; the probe is compute-bound (matmuls, GELU, softmax), so it scales with
# sequences x context^2. The tiny preset (context 32) takes milliseconds.
TRAINING_PROBE_SEQUENCES = 1


@dataclass(frozen=True)
class CausalityProbe:
    """What editing each position j did to the logits before it (t < j) and from it on (t >= j)."""

    agreement: Agreement  # max |logit change| at positions < j over every edit j, against 0, float64
    max_change_after: float  # largest change at positions >= j (shows the edits do something)
    positions: tuple[int, ...]  # every edited position j: 1 .. length - 1
    sequences: int
    length: int
    first_leak: tuple[int, int] | None  # (edited j, earliest t < j whose logits moved beyond the allowance)

    @property
    def passed(self) -> bool:
        return self.agreement.passed

    def describe(self) -> str:
        """One line: what was edited, what moved, against what allowance."""
        setup = (
            f"every position 1..{self.length - 1} edited in {self.sequences} seeded sequence"
            f"{'s' if self.sequences != 1 else ''} of {self.length} tokens"
        )
        moved = (
            f"largest change of an earlier logit {self.agreement.max_abs_diff:.2e}, "
            f"allowed {self.agreement.allowed:.2e}"
        )
        if self.first_leak is None:
            return f"causal: {setup}; {moved}; at or after the edit {self.max_change_after:.2e}"
        j, t = self.first_leak
        return (
            f"LEAK: editing the token at position {j} moved the logits at earlier position {t}; {setup}; "
            f"{moved} (x{self.agreement.ratio:.3g} the allowance)"
        )


@torch.no_grad()
def causality_probe(model: GPT, *, sequences: int = 2, length: int | None = None, seed: int = 0) -> CausalityProbe:
    """For every position j in 1..length-1, change token j of each seeded random sequence to another token
    and compare the logits at positions < j with the unedited run, on `float64_copy(model)`. Allowed:
    allowance(float64, model_terms(config), scale=max |logit|). `model` itself is not touched."""
    if not isinstance(model, torch.nn.Module) or not hasattr(model, "config"):  # a GPT, or any sequence model
        raise ValueError(
            f"causality_probe needs a model with a config (a core.model.gpt.GPT), got {type(model).__name__}"
        )
    config = model.config
    L = config.context_length if length is None else length
    if not is_int(L) or not 2 <= L <= config.context_length:
        raise ValueError(f"length must be an integer in 2..context_length={config.context_length}, got {length!r}")
    integer("sequences", sequences, 1, MAX_PROBE_SEQUENCES)
    if not is_int(seed) or not 0 <= seed < 2**63:
        raise ValueError(f"seed must be an integer in 0..2^63 - 1, got {seed!r}")
    V = config.vocab_size
    if V < 2:
        raise ValueError(f"a probe needs a vocabulary of at least 2 tokens to edit one, got vocab_size={V}")
    reference = float64_copy(model)
    g = torch.Generator().manual_seed(seed)
    seqs = torch.randint(0, V, (sequences, L), generator=g)  # (N, T)
    shift = torch.randint(1, V, (sequences, L), generator=g)  # (N, T): adding 1..V-1 mod V changes the token
    rows = sequences * (L - 1)  # one edited copy per (sequence, position j)
    seq_of = torch.arange(sequences).repeat_interleave(L - 1)  # (B,) the sequence each copy edits
    j_of = torch.arange(1, L).repeat(sequences)  # (B,) the position each copy edits
    edited = seqs[seq_of].clone()  # (B, T)
    edited[torch.arange(rows), j_of] = (edited[torch.arange(rows), j_of] + shift[seq_of, j_of]) % V
    chunk = max(1, PROBE_TOKENS_PER_CHUNK // L)
    # A GPT through the lessons' kernel, which builds its causal mask itself (the fused kernel, held to parity with
    # it, takes SDPA's own square mask); any other sequence model as it is.
    kernel: dict[str, Any] = {"return_weights": True} if isinstance(reference, GPT) else {}
    base = torch.cat([reference(seqs[i : i + chunk], **kernel).logits for i in range(0, sequences, chunk)])  # (N, T, V)
    change = torch.empty(rows, L, dtype=DECIDING_DTYPE)  # (B, T): max over V of |edited - base| at each t
    for i in range(0, rows, chunk):
        out = reference(edited[i : i + chunk], **kernel).logits  # (b, T, V)
        change[i : i + chunk] = (out - base[seq_of[i : i + chunk]]).abs().amax(-1)  # (b, T)
    change = torch.where(torch.isfinite(change), change, torch.full_like(change, math.inf))  # NaN never agrees
    before = torch.arange(L)[None, :] < j_of[:, None]  # (B, T): positions t < j of each copy
    scale = float(base.abs().max()) if torch.isfinite(base).all() else 1.0
    terms = model_terms(config)
    allowed = allowance(DECIDING_DTYPE, terms, scale=scale)
    agreement = Agreement(
        float(change[before].max()), allowed, str(DECIDING_DTYPE).removeprefix("torch."), terms, scale
    )
    moved = before & (change > allowed)  # (B, T)
    first = None
    if moved.any():
        j = int(j_of[moved.any(-1)].min())  # the first edited position that moved anything before it
        t = int(torch.nonzero(moved[j_of == j].any(0))[0])  # the earliest position it moved
        first = (j, t)
    return CausalityProbe(agreement, float(change[~before].max()), tuple(range(1, L)), sequences, L, first)


def first_failed_probe(evaluations: Iterable[Any]) -> Any | None:
    """The leak rule: the first evaluation (by step) whose causality probe failed, else None.
    `evaluations`: records with `.step` and `.probe` (a CausalityProbe, or None where none was run), such
    as an `EvalRecord` or the eval events of a run."""
    for record in sorted(evaluations, key=lambda r: r.step):
        probe = getattr(record, "probe", None)
        if probe is not None and not probe.passed:
            return record
    return None


# ---- the symptom: an impossibly good validation loss --------------------------------------------


@dataclass(frozen=True)
class LeakVerdict:
    leaked: bool
    rule: str | None  # "floor" | "reference run" | "reference model" | None
    step: int | None  # first evaluation that broke the rule
    val_loss: float | None  # its validation loss
    threshold: float | None  # the loss it fell below
    message: str


def leak_verdict(
    history: Iterable,
    *,
    floor: float = LEAK_FLOOR_NATS,
    reference: Iterable | None = None,
    reference_loss: float | None = None,
    ratio: float = LEAK_REFERENCE_RATIO,
) -> LeakVerdict:
    """Is the validation loss impossibly good (the symptom of a leak; the probe is the detector)?
    `history`: evaluations with `.step` and `.val_loss` (EvalRecord, or eval Progress events), in nats
    per character. Rules, checked in this order:

    "floor": some evaluation has val_loss < floor (default 0.4 nats = 0.58 bits per character).
      Shannon (1951) put the entropy of English at 0.6 to 1.3 bits per character; the best published
      character-level models reach about 0.94 bits on enwik8. A small model trained here for minutes does
      not honestly predict held-out text or code better than that lower bound; a model that sees its own
      target does (it copies it). Highly repetitive text (logs, generated tables) can go below the floor
      honestly, and a leaking model on high-entropy text may never reach it: a symptom, not a detector.
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
            return LeakVerdict(
                True,
                "floor",
                r.step,
                r.val_loss,
                floor,
                f"validation loss {r.val_loss:.3f} nats per character at step {r.step} is below "
                f"{floor} nats ({floor / math.log(2):.2f} bits), better than the lower estimate "
                f"of the entropy of natural text: impossibly good",
            )
    ref = {r.step: r.val_loss for r in (reference or ()) if r.step > 0}
    for r in records:
        if r.step in ref and r.val_loss < ratio * ref[r.step]:
            return LeakVerdict(
                True,
                "reference run",
                r.step,
                r.val_loss,
                ratio * ref[r.step],
                f"validation loss {r.val_loss:.3f} at step {r.step} is less than {ratio:g} x the "
                f"{ref[r.step]:.3f} your causal run had at the same step: impossibly good",
            )
    if reference_loss is not None:
        for r in records:
            if r.val_loss < ratio * reference_loss:
                return LeakVerdict(
                    True,
                    "reference model",
                    r.step,
                    r.val_loss,
                    ratio * reference_loss,
                    f"validation loss {r.val_loss:.3f} at step {r.step} is less than {ratio:g} x the "
                    f"{reference_loss:.3f} the shipped causal model reaches on this text: "
                    "impossibly good",
                )
    return LeakVerdict(False, None, None, None, None, "the validation loss stays in the range a causal model can reach")


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


def causal_reference(
    results: Iterable[Any], *, corpus_fingerprint: str, preset_name: str, max_iters: int
) -> tuple | None:
    """The history of the last causal run in `results` (a run's RunResult or None, oldest first) on the
    same corpus and preset with the same step budget (so its evaluations fall on the same steps), for the
    "reference run" rule of leak_verdict; None if none. A run whose own probe failed is no reference."""
    found = None
    for r in results:
        if (
            r is not None
            and r.causal
            and r.corpus_fingerprint == corpus_fingerprint
            and r.preset_name == preset_name
            and r.max_iters == max_iters
            and first_failed_probe(r.history) is None
        ):
            found = r.history
    return found
