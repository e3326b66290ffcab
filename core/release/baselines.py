"""The named fallbacks: a rule and an n-gram character model, behind the interface every model is
evaluated through. This module gathers them; each concept lives in its own module:

    core.release.predictor        the Predictor interface, is_word_char, continuations_by_log_probs, check_positions
    core.release.counts           count keys as text, the add-k unigram both baselines start from
    core.release.ngram            NGramModel, train_ngram (interpolated Witten-Bell)
    core.release.rule             RuleModel, train_rule (the next letters of the training words)
    core.release.baseline_bundle  BaselineBundle, train_baseline, save_baseline, load_baseline, load_any, ...

Both baselines are trained on the training documents of the same split as the transformer, and stored as
bundles with the transformer's manifest shape (kind "ngram" or "rule", counts in `counts.json`).
"""

from __future__ import annotations

from core.release.baseline_bundle import (
    COUNTS,
    KINDS,
    Baseline,
    BaselineBundle,
    load_any,
    load_baseline,
    read_kind,
    save_baseline,
    train_baseline,
    verify_any,
    verify_baseline,
)
from core.release.counts import DEFAULT_ADD_K, SPECIAL_BASE, key_alphabet
from core.release.ngram import DEFAULT_ORDER, NGramModel, train_ngram
from core.release.predictor import Predictor, check_positions, continuations_by_log_probs, is_word_char, word_ids
from core.release.rule import MAX_WORD_CHARS, RuleModel, train_rule

__all__ = [
    "COUNTS",
    "DEFAULT_ADD_K",
    "DEFAULT_ORDER",
    "KINDS",
    "MAX_WORD_CHARS",
    "SPECIAL_BASE",
    "Baseline",
    "BaselineBundle",
    "NGramModel",
    "Predictor",
    "RuleModel",
    "check_positions",
    "continuations_by_log_probs",
    "is_word_char",
    "key_alphabet",
    "load_any",
    "load_baseline",
    "read_kind",
    "save_baseline",
    "train_baseline",
    "train_ngram",
    "train_rule",
    "verify_any",
    "verify_baseline",
    "word_ids",
]
