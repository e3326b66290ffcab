"""The shipped default bundle (models/default): it loads, verifies, matches its manifest and the command it
records (whatever that command's flags), is safe, reproduces its recorded validation loss, records a tuned
suggestion policy, and completes Python with printable text."""

import dataclasses
import math
from pathlib import Path

import pytest

from cli.main import DEFAULT_PRESET, build_parser
from core.model.batches import document_stream, evaluate_loss
from core.model.bundle import load_bundle, verify_bundle
from core.model.bundle_checks import WEIGHTS
from core.model.corpus import load_corpus, split_documents
from core.model.engine import generate
from core.model.gpt import PRESETS
from core.model.sampling import SampleConfig
from core.release.evaluation.tuning import THRESHOLDS
from core.release.serving.policy import policy_from_manifest

SHIPPED = Path(__file__).resolve().parents[2] / "models" / "default"
MAX_WEIGHT_BYTES = 8 * 1024 * 1024


@pytest.fixture(scope="module")
def bundle():
    assert SHIPPED.is_dir(), "models/default is missing: train it with the command in docs (python -m core train ...)"
    return load_bundle(SHIPPED)


@pytest.mark.smoke
def test_shipped_bundle_verifies(bundle):
    assert verify_bundle(SHIPPED) == []
    assert sorted(p.name for p in SHIPPED.iterdir()) == ["manifest.json", WEIGHTS]
    assert (SHIPPED / WEIGHTS).stat().st_size <= MAX_WEIGHT_BYTES


def recorded_args(manifest):
    """The recorded `python -m core train ...` parsed by the command line's own parser (defaults filled in)."""
    command = manifest["training"]["command"]
    assert command[:4] == ["python", "-m", "core", "train"], command
    return build_parser().parse_args(command[3:])


def test_shipped_bundle_matches_its_manifest_and_the_recorded_command(bundle):
    m = bundle.manifest
    args = recorded_args(m)
    assert args.corpus == "stdlib" and not args.no_causal_mask  # --out: where it was written before being copied here
    if args.init_from is not None:  # continued from a base (docs/RELEASE.md: its chain from the default preset)
        assert set(m["base"]) == {"version", "corpus"} and m["base"]["version"] != m["version"], m["base"]
    expected = dataclasses.replace(PRESETS[args.preset or DEFAULT_PRESET], vocab_size=bundle.tokenizer.vocab_size)
    assert bundle.config == expected
    assert m["architecture"] == dataclasses.asdict(expected)
    assert bundle.tokenizer.content_hash == m["tokenizer"]["content_hash"]
    assert bundle.model.token_embedding.weight.shape == (bundle.tokenizer.vocab_size, expected.d_model)
    assert m["safe"] is True and m["unsafe_reason"] is None
    assert m["corpus"]["source"] == "stdlib"
    config = m["training"]["config"]
    assert config["causal"] is True
    assert (config["seed"], config["batch_size"], config["max_iters"]) == (args.seed, args.batch_size, args.max_iters)
    assert (config["val_fraction"], config["learning_rate"]) == (args.val_fraction, args.learning_rate)
    metrics = m["training"]["metrics"]
    # the command ran to its end: all its steps, or the time budget it set (never a Ctrl-C, a leak, a divergence)
    assert (metrics["stop_reason"], metrics["iters"]) == ("max_iters", args.max_iters) or (
        args.max_seconds is not None and metrics["stop_reason"] == "max_seconds"
    ), metrics


def test_shipped_model_learned_far_better_than_uniform(bundle):
    metrics = bundle.manifest["training"]["metrics"]
    V = bundle.tokenizer.vocab_size
    assert metrics["val_loss"] < math.log(V) - 2.0  # ln V ~ 4.65 nats is the untrained model
    assert metrics["iters"] > 0 and metrics["tokens_per_second"] > 0


@pytest.mark.numerics
def test_recorded_validation_loss_is_reproduced_on_the_held_out_modules(bundle):
    corpus = load_corpus("stdlib")
    if corpus.fingerprint != bundle.manifest["corpus"]["fingerprint"]:
        pytest.skip("this interpreter's stdlib differs from the one the bundle was trained on")
    train_cfg = bundle.manifest["training"]["config"]
    _, val_docs = split_documents(corpus, train_cfg["val_fraction"], train_cfg["seed"])
    stream = document_stream(val_docs, bundle.tokenizer)  # (N_val,)
    loss = evaluate_loss(bundle.model, stream, batch_size=8, iters=6, seed=123)
    assert abs(loss - bundle.manifest["training"]["metrics"]["val_loss"]) < 0.2


def test_shipped_manifest_records_a_tuned_suggestion_policy(bundle):
    """`python -m core train` tunes the threshold on the validation documents unless --no-tune (then
    `python -m core tune` must have been run): the shipped model never serves the untuned default."""
    record = (bundle.manifest["generation"] or {}).get("suggestion")
    assert isinstance(record, dict), "models/default records no suggestion policy: run python -m core tune"
    assert record.get("tuned") is True, record
    policy = policy_from_manifest(bundle.manifest)  # a valid version-1 policy
    assert policy.tuned and policy.threshold in THRESHOLDS


@pytest.mark.numerics
def test_greedy_completion_of_python_is_printable_and_cache_agnostic(bundle):
    prompt = "def __init__(self, "
    ids = bundle.tokenizer.encode(prompt)
    assert bundle.tokenizer.unknown_chars(prompt) == []
    sample = SampleConfig(temperature=0, max_new_tokens=48)
    cached = [s.token for s in generate(bundle.model, ids, sample, use_cache=True)]
    uncached = [s.token for s in generate(bundle.model, ids, sample, use_cache=False)]
    assert cached == uncached
    text = bundle.tokenizer.decode(cached)
    assert len(text) >= 24  # a few <eos> may be skipped, most tokens are characters
    assert all(c.isprintable() or c in "\n\t" for c in text), repr(text)
    assert "\ufffd" not in text
    assert sum(c.isalpha() for c in text) >= 8, repr(text)  # words, not punctuation noise
