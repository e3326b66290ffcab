"""Two small versions to serve telemetry from, trained in seconds on one text file: an n-gram baseline (it
suggests, and its suggestions are often accepted) and a tiny transformer (the page's selected model: its held-out
split is readable from the file, so the Monitoring page can build its drift reference)."""

from pathlib import Path

from core.model.bundle import save_bundle
from core.model.corpus import Corpus, load_corpus, split_documents
from core.model.gpt import PRESETS
from core.model.train_config import TrainConfig
from core.model.training import train
from core.release.baselines.baseline_bundle import save_baseline, train_baseline

TOY = "\n\n".join(f"def add{i}(a, b):\n    return a + b * {i}\n" for i in range(60))
VAL_FRACTION, SEED = 0.3, 0


def toy_corpus(root: Path) -> Corpus:
    (root / "toy.py").write_text(TOY)
    return load_corpus(root / "toy.py")


def held_out_documents(corpus: Corpus):
    return split_documents(corpus, VAL_FRACTION, SEED)[1]


def ngram_bundle(root: Path, corpus: Corpus) -> Path:
    model = train_baseline("ngram", corpus, val_fraction=VAL_FRACTION, seed=SEED)
    return save_baseline(root / "ngram", model, corpus=corpus, val_fraction=VAL_FRACTION, seed=SEED)


def transformer_bundle(root: Path, corpus: Corpus, iters: int = 30) -> Path:
    config = TrainConfig(
        batch_size=4, max_iters=iters, warmup_iters=1, eval_interval=iters, eval_iters=1, num_threads=1,
        val_fraction=VAL_FRACTION, seed=SEED,
    )  # fmt: skip
    result = train(PRESETS["tiny"], config, corpus)
    return save_bundle(
        root / "transformer", result.model, result.tokenizer, metrics=result.metrics,
        command=["tests", "telemetry"], corpus=corpus, train_config=config,
    )  # fmt: skip
