"""Synthetic traffic: held-out text replayed as typing, every suggestion served and recorded as a learner's would be.

The typist is the evaluation's, served through the same call as every surface: it accepts a suggestion exactly when
it is shown and the text goes on with it, else types one character. Sessions take turns over seeded stretches, each
typed from the start of its document so the model reads that document, not the ones before it. Everything but the
latencies is fixed by the seed. With no store it writes nothing: the monitor's drift reference is such a replay.
"""

from __future__ import annotations

import random
from collections.abc import Generator, Sequence
from dataclasses import dataclass

from core.model.bundle import Bundle
from core.model.corpus import Document
from core.numbers import integer
from core.release.baselines.baseline_bundle import BaselineBundle
from core.release.evaluation.eval_report import EvalConfig
from core.release.evaluation.slices import slice_labels
from core.release.evaluation.typing_sim import typing_segments
from core.release.serving.autocomplete import prompt_for, suggest
from core.release.serving.policy import SuggestionPolicy, policy_from_manifest
from core.release.serving.predictor import Predictor
from core.release.serving.transformer_predictor import TransformerPredictor
from core.telemetry.record import suggestion_event
from core.telemetry.schema import SURFACES
from core.telemetry.store import TelemetryStore

MAX_EVENTS = 5000  # suggestions one replay serves at most
MAX_SESSIONS = 100
SEGMENT_CHARS = 120  # characters of one typed stretch


@dataclass(frozen=True)
class Replay:
    version: str
    events: int  # suggestions served
    recorded: int  # events the store kept
    shown: int
    accepted: int
    errors: int
    top1: tuple[float, ...]  # each event's top-1 probability (serving errors have none)


def replay(
    source: Bundle | BaselineBundle | Predictor,
    documents: Sequence[Document],
    *,
    seed: int,
    sessions: int = 3,
    surface: str = "synthetic",
    store: TelemetryStore | None,
    max_events: int = 200,
    policy: SuggestionPolicy | None = None,
    template: str | None = None,
    version: str | None = None,
) -> Replay:
    """Type `documents` as `sessions` seeded users for at most `max_events` suggestions (fewer when the documents
    run out: up to about 20 characters per event are set out to type; see the module docstring).
    A bundle brings its predictor, policy, prompt template and version; a bare predictor needs `version` (and
    takes the default policy and "{prompt}" unless given)."""
    predictor, policy, template, version = _serving(source, policy, template, version)
    for name, value, high in (("max_events", max_events, MAX_EVENTS), ("sessions", sessions, MAX_SESSIONS)):
        integer(name, value, 1, high)
    integer("seed", seed, 0)
    if surface not in SURFACES:
        raise ValueError(f"surface must be one of {SURFACES}, got {surface!r}")
    documents = [d for d in documents if isinstance(d, Document) and d.text]
    if not documents:
        raise ValueError("no documents to type: pass held-out documents with some text")
    config = EvalConfig(typing_chars=20 * max_events, segment_chars=SEGMENT_CHARS, seed=seed)
    starts, at = [], 0
    for doc in documents:  # the stream position of each document's first character (each ends with <eos>)
        starts.append(at)
        at += len(doc.text) + 1
    stretches = typing_segments(documents, config)
    random.Random(seed).shuffle(stretches)
    labels: dict[int, dict] = {}  # document index -> its slice labels, made when it is first typed
    counts = {"events": 0, "recorded": 0, "shown": 0, "accepted": 0, "errors": 0}
    top1: list[float] = []

    def positions(k: int) -> Generator[tuple[Document, dict, int], int, None]:
        """Session k's typing: (document, its labels, position) of each suggestion it is served; the caller
        sends back how many characters the typist moved on."""
        for seg in stretches[k::sessions]:
            doc = documents[seg.document]
            marks = labels.setdefault(seg.document, slice_labels([doc]))
            i, stop = seg.start - starts[seg.document], seg.stop - starts[seg.document]
            while i < stop:
                i += yield doc, marks, i

    # The sessions take turns, one suggestion each, like users typing at the same time.
    typists = {k: positions(k) for k in range(sessions)}
    moves: dict[int, int | None] = {k: None for k in typists}  # None starts a typist
    while typists and counts["events"] < max_events:
        for k in list(typists):
            if counts["events"] >= max_events:
                break
            try:
                move = moves[k]
                doc, marks, i = next(typists[k]) if move is None else typists[k].send(move)
            except StopIteration:
                del typists[k]
                continue
            text = doc.text[:i]
            measured = suggest(predictor, prompt_for(predictor, text, policy, template=template), policy)
            served, error = measured.suggestion, measured.error
            slices = {
                "char_class": str(marks["char_class"][i]),
                "column_bucket": str(marks["column"][i]),
                "indent": str(marks["indent"][i]),
                "document": doc.name,
            }
            event = suggestion_event(
                measured, version=version, surface=surface, session=f"synthetic-{seed}-{k}", slices=slices,
                typed_next=doc.text[i:],
            )  # fmt: skip
            counts["events"] += 1
            if store is not None and store.record(event) is not None:
                counts["recorded"] += 1
            if measured.top1_prob is not None:
                top1.append(measured.top1_prob)
            moves[k] = 1  # typed one character
            if error is not None or served is None:
                counts["errors"] += 1
                continue
            counts["shown"] += served.shown
            if served.shown and event.outcome == "accepted":
                counts["accepted"] += 1
                moves[k] = len(served.text)  # one Tab instead of its characters
    return Replay(version=version, top1=tuple(top1), **counts)


def _serving(source, policy, template, version) -> tuple[Predictor, SuggestionPolicy, str, str]:
    """(predictor, policy, template, version) of a bundle or a bare predictor."""
    if isinstance(source, (Bundle, BaselineBundle)):
        manifest = source.manifest
        predictor = (
            TransformerPredictor(source.model, source.tokenizer) if isinstance(source, Bundle) else source.predictor
        )
        return (
            predictor,
            policy or policy_from_manifest(manifest),
            template or manifest.get("prompt_template", "{prompt}"),
            version or manifest["version"],
        )
    if not hasattr(source, "continuations") or not hasattr(source, "tokenizer"):
        raise ValueError(f"source must be a Bundle, a BaselineBundle or a Predictor, got {type(source).__name__}")
    if not isinstance(version, str) or not version:
        raise ValueError("a bare predictor needs version= (the bundle version its events are recorded under)")
    return source, policy or SuggestionPolicy(), template or "{prompt}", version
