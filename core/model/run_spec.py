"""What a training run needs, checked before it waits in the queue: the corpus, the preset, the probe, the spec.

    load_run_corpus     an upload (data, never executed) or "stdlib" / a file path -> a Corpus
    check_fits          both sides of the document split hold one context window of the preset
    default_probe       the text the run's attention snapshots read
    parameter_count     the size of the model a preset builds, in closed form (shown before training)
    RunSpec             everything one run needs, validated; `command()` is the line the bundle records

`core.model.runs` turns a RunSpec into the job's work.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from core.model.corpus import STDLIB_SOURCE, Corpus, check_split_size, corpus_from_text, load_corpus, split_documents
from core.model.gpt import PRESETS, ModelConfig
from core.model.train_config import TrainConfig

APP_PRESETS = ("tiny", "baby", "default")  # the sizes the app offers ("large" is for benchmarks)
PYTHON_PROBE = "if key in self:\n    return key"  # 30 characters: fits every preset's context
PROBE_CHARS = 32  # an uploaded corpus probes with the start of its first validation document
APP_COMMAND = ("attention-lab-app", "views/training.py", "train")  # marks a bundle trained from the app


# ---- configuration -------------------------------------------------------------------------------


def parameter_count(config: ModelConfig, vocab_size: int) -> int:
    """Trainable parameters of GPT(config) with `vocab_size`, in closed form (the tied embedding counted once):
    V*C for the embedding, per block two LayerNorms (4C) + qkv and proj (4C^2) + MLP (2 * mlp_ratio * C^2),
    and the final LayerNorm (2C)."""
    C = config.d_model
    per_block = 4 * C + 4 * C * C + 2 * config.mlp_ratio * C * C
    return vocab_size * C + config.n_layer * per_block + 2 * C


def load_run_corpus(source: str, text: str | bytes | None = None) -> Corpus:
    """The corpus of a run: `text` (an upload: data, never executed) named `source`, or, without text,
    `load_corpus(source)` ("stdlib" or a file path). Raises CorpusError with a message for the user."""
    if text is None:
        return load_corpus(source)
    return corpus_from_text(source, text)


def check_fits(corpus: Corpus, preset_name: str, train_config: TrainConfig) -> None:
    """Raise CorpusError unless both sides of the document split hold one context window of the preset
    (the check train() makes, done before a run waits in the queue). One character is one token."""
    context = preset_config(preset_name).context_length
    train_docs, val_docs = split_documents(corpus, train_config.val_fraction, train_config.seed)
    check_split_size(sum(len(d.text) + 1 for d in train_docs), sum(len(d.text) + 1 for d in val_docs), context)


def default_probe(corpus: Corpus, train_config: TrainConfig) -> str:
    """PYTHON_PROBE for the standard library; otherwise the first PROBE_CHARS characters of the first
    validation document (text the model never trains on, in its own alphabet)."""
    if corpus.source == STDLIB_SOURCE:
        return PYTHON_PROBE
    _, val_docs = split_documents(corpus, train_config.val_fraction, train_config.seed)
    text = val_docs[0].text
    return (text.lstrip() or text)[:PROBE_CHARS]


@dataclass(frozen=True)
class RunSpec:
    """Everything one run needs. `out_dir` is a Path or a zero-argument callable returning one (a JobDir:
    the page names the directory after the job id it gets back), called when the run starts, so the
    directory is checked before training."""

    corpus: Corpus
    preset_name: str
    train_config: TrainConfig
    out_dir: Path | Callable[[], Path]
    snapshot_text: str = PYTHON_PROBE
    snapshot_layer: int = 0
    snapshot_head: int = 0

    def __post_init__(self):
        if not isinstance(self.corpus, Corpus) or not isinstance(self.train_config, TrainConfig):
            raise ValueError("RunSpec needs a Corpus (load_run_corpus) and a TrainConfig")
        config = preset_config(self.preset_name)
        if not isinstance(self.snapshot_text, str) or not self.snapshot_text:
            raise ValueError(f"snapshot_text must be a non-empty string, got {self.snapshot_text!r}")
        if not 0 <= self.snapshot_layer < config.n_layer or not 0 <= self.snapshot_head < config.n_head:
            raise ValueError(
                f"snapshot layer {self.snapshot_layer}, head {self.snapshot_head} do not exist in "
                f"preset {self.preset_name!r} ({config.n_layer} layers, {config.n_head} heads)"
            )

    def command(self) -> list[str]:
        """The command line recorded in the bundle: says it came from the app, with its settings."""
        cfg = self.train_config
        argv = [
            *APP_COMMAND,
            "--corpus",
            self.corpus.source,
            "--preset",
            self.preset_name,
            "--max-iters",
            str(cfg.max_iters),
            "--seed",
            str(cfg.seed),
            "--batch-size",
            str(cfg.batch_size),
            "--learning-rate",
            repr(cfg.learning_rate),
            "--eval-interval",
            str(cfg.eval_interval),
        ]
        if cfg.max_seconds is not None:
            argv += ["--max-seconds", repr(cfg.max_seconds)]
        return argv + ([] if cfg.causal else ["--no-causal-mask"]) + ([] if cfg.leak_stop else ["--no-leak-stop"])


def preset_config(name: str) -> ModelConfig:
    """PRESETS[name] (vocab_size still 0: train() fills it in); ValueError naming the presets otherwise."""
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; choose one of {sorted(PRESETS)}")
    return PRESETS[name]
