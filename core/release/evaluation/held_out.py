"""The held-out documents of a bundle: the validation side of the split its manifest records, with warnings when the
split or the corpus differ.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from core.model.corpus import Corpus, CorpusError, Document, load_corpus, split_documents


@dataclass(frozen=True)
class HeldOut:
    corpus: Corpus
    train: tuple[Document, ...]
    val: tuple[Document, ...]
    val_fraction: float
    seed: int
    recorded: bool  # the split came from the manifest's training config
    warnings: tuple[str, ...] = field(default=())

    def describe(self) -> dict:
        return {
            "source": self.corpus.source,
            "fingerprint": self.corpus.fingerprint,
            "val_fraction": self.val_fraction,
            "seed": self.seed,
            "split_recorded": self.recorded,
            "documents": [d.name for d in self.val],
            "characters": sum(len(d.text) for d in self.val),
        }


def held_out(manifest: dict, corpus: Corpus | str | None = None) -> HeldOut:
    """The split a bundle was trained with, on `corpus` (default: the source its manifest names)."""
    warnings: list[str] = []
    source = manifest.get("corpus", {}).get("source")
    if corpus is None:
        if not isinstance(source, str) or source.startswith("upload:"):
            raise CorpusError(
                f"the bundle was trained on {source!r}, which cannot be read back; pass the same text with --corpus"
            )
        corpus = source
    if not isinstance(corpus, Corpus):
        corpus = load_corpus(corpus)
    if corpus.fingerprint != manifest.get("corpus", {}).get("fingerprint"):
        warnings.append(
            "the corpus differs from the one the bundle was trained on (fingerprint mismatch): "
            "held-out documents may have been trained on, so the figures may be optimistic"
        )
    config = (manifest.get("training") or {}).get("config") or {}
    recorded = isinstance(config.get("val_fraction"), (int, float)) and isinstance(config.get("seed"), int)
    val_fraction, seed = (float(config["val_fraction"]), config["seed"]) if recorded else (0.1, 0)
    if not recorded:
        warnings.append("the manifest records no training split; assumed val_fraction=0.1, seed=0")
    train_docs, val_docs = split_documents(corpus, val_fraction, seed)
    return HeldOut(corpus, train_docs, val_docs, val_fraction, seed, recorded, tuple(warnings))
