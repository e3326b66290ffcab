"""core.model.bundle: round trip, and every tampered bundle refused with a message naming the problem."""

import ast
import dataclasses
import hashlib
import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from core.model.bundle import _stored_tensors, load_bundle, manifest_version, save_bundle, verify_bundle, write_manifest
from core.model.bundle_checks import MANIFEST, WEIGHTS, BundleError, expected_tensors
from core.model.corpus import corpus_from_text
from core.model.gpt import GPT, PRESETS, ModelConfig
from core.model.sampling import SampleConfig
from core.model.tokenizer import CharTokenizer

ROOT = Path(__file__).resolve().parents[2]
FIRST_PARTY = [p for d in ("core", "cli", "ui", "views") for p in sorted((ROOT / d).rglob("*.py"))]
TEXT = "\n\n".join(f"def f{i}(x):\n    return x + {i}\n" for i in range(40))


def make_model(causal=True, seed=0):
    tok = CharTokenizer.from_text(TEXT)
    torch.manual_seed(seed)
    model = GPT(dataclasses.replace(PRESETS["tiny"], vocab_size=tok.vocab_size, causal=causal))
    return model.eval(), tok


@pytest.fixture(scope="module")
def corpus():
    return corpus_from_text("toy.py", TEXT)


@pytest.fixture(scope="module")
def saved(tmp_path_factory, corpus):
    model, tok = make_model()
    path = tmp_path_factory.mktemp("b") / "bundle"
    save_bundle(
        path,
        model,
        tok,
        metrics={"val_loss": 1.5},
        command=["python", "-m", "core", "train"],
        corpus=corpus,
        sample_config=SampleConfig(temperature=0.7, top_k=5),
    )
    return path, model, tok


@pytest.fixture
def bundle_copy(saved, tmp_path):
    dst = tmp_path / "copy"
    shutil.copytree(saved[0], dst)
    return dst


def read_manifest(path):
    return json.loads((path / MANIFEST).read_text())


def reseal(path):
    """Make the manifest agree with the files again, as a careless tool (or a tamperer) would."""
    m = read_manifest(path)
    m["files"][WEIGHTS] = hashlib.sha256((path / WEIGHTS).read_bytes()).hexdigest()
    m["version"] = manifest_version(m)
    write_manifest(path, m)


def rewrite_tensors(path, edit):
    with safe_open(str(path / WEIGHTS), framework="pt") as f:
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    edit(tensors)
    save_file(tensors, str(path / WEIGHTS))
    reseal(path)


def refused(path, *words):
    with pytest.raises(BundleError) as err:
        load_bundle(path)
    message = str(err.value)
    for w in words:
        assert w in message, message
    assert verify_bundle(path)  # the same problem, as a list
    return message


# ---- round trip ----------------------------------------------------------------------------------


def test_round_trip_gives_identical_logits_and_tokenizer(saved):
    path, model, tok = saved
    bundle = load_bundle(path)
    assert not bundle.model.training
    assert bundle.tokenizer == tok and bundle.config == model.config
    idx = torch.randint(0, tok.vocab_size, (3, 20), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert torch.equal(bundle.model(idx).logits, model(idx).logits)
    assert verify_bundle(path) == []


def test_loading_leaves_the_global_rng_alone(saved):
    torch.manual_seed(5)
    state = torch.get_rng_state()
    load_bundle(saved[0])
    assert torch.equal(torch.get_rng_state(), state)


def test_manifest_records_what_the_model_needs(saved, corpus):
    path, model, tok = saved
    m = read_manifest(path)
    assert m["format_version"] == 1 and m["kind"] == "transformer"
    assert m["architecture"] == dataclasses.asdict(model.config)
    assert m["tokenizer"]["chars"] == list(tok.chars) and m["tokenizer"]["content_hash"] == tok.content_hash
    assert m["corpus"] == {"fingerprint": corpus.fingerprint, "source": "upload:toy.py"}
    assert m["training"]["command"] == ["python", "-m", "core", "train"]
    assert m["training"]["metrics"] == {"val_loss": 1.5}
    assert m["safe"] is True and m["unsafe_reason"] is None
    assert m["generation"]["temperature"] == 0.7 and m["generation"]["top_k"] == 5
    assert m["generation"]["use_cache"] is True
    assert m["files"] == {WEIGHTS: hashlib.sha256((path / WEIGHTS).read_bytes()).hexdigest()}
    assert sorted(p.name for p in path.iterdir()) == [MANIFEST, WEIGHTS]
    assert len(m["version"]) == 16 and m["version"] == manifest_version(m)
    assert load_bundle(path).sample_config == SampleConfig(temperature=0.7, top_k=5)


def test_the_tied_lm_head_is_stored_once(saved):
    path, model, _ = saved
    with safe_open(str(path / WEIGHTS), framework="pt") as f:
        names = set(f.keys())
    assert "token_embedding.weight" in names and "lm_head.weight" not in names
    assert names == set(model.state_dict()) - {"lm_head.weight"}
    loaded = load_bundle(path).model
    assert loaded.lm_head.weight.data_ptr() == loaded.token_embedding.weight.data_ptr()  # still tied


@pytest.mark.parametrize(
    "config",
    [
        *[dataclasses.replace(p, vocab_size=57) for p in PRESETS.values()],
        ModelConfig(vocab_size=9, context_length=8, n_layer=3, n_head=1, d_model=6, mlp_ratio=3),
    ],
    ids=[*PRESETS, "odd"],
)
def test_the_closed_form_tensors_are_those_of_a_real_model(config):
    """The header check runs on expected_tensors(config) before any model exists: it must name exactly the
    tensors (in state_dict order), shapes and tied alias that a real GPT(config) stores."""
    shapes, aliases = expected_tensors(config)
    stored, real_aliases = _stored_tensors(GPT(config))
    assert list(shapes) == list(stored)
    assert shapes == {name: tuple(t.shape) for name, t in stored.items()}
    assert aliases == real_aliases == {"lm_head.weight": "token_embedding.weight"}


def test_saving_replaces_an_old_bundle_and_leaves_no_temporary_files(tmp_path, corpus):
    model, tok = make_model(seed=1)
    out = tmp_path / "b"
    save_bundle(out, *make_model(seed=2), metrics={}, command=[], corpus=corpus)
    save_bundle(out, model, tok, metrics={}, command=[], corpus=corpus, overwrite=True)  # replacing is asked for
    idx = torch.zeros(1, 4, dtype=torch.long)
    with torch.no_grad():
        assert torch.equal(load_bundle(out).model(idx).logits, model(idx).logits)
    assert [p.name for p in tmp_path.iterdir()] == ["b"]


def test_saving_refuses_a_directory_that_is_not_a_bundle(tmp_path, corpus):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(BundleError, match="not a bundle directory"):
        save_bundle(tmp_path, *make_model(), metrics={}, command=[], corpus=corpus)
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_saving_refuses_non_finite_weights_and_metrics(tmp_path, corpus):
    model, tok = make_model()
    with pytest.raises(BundleError, match="finite"):
        save_bundle(tmp_path / "m", model, tok, metrics={"val_loss": float("nan")}, command=[], corpus=corpus)
    with torch.no_grad():
        model.blocks[0].mlp.fc.weight[0, 0] = float("inf")
    with pytest.raises(BundleError, match="blocks.0.mlp.fc.weight"):
        save_bundle(tmp_path / "w", model, tok, metrics={}, command=[], corpus=corpus)
    assert not (tmp_path / "w").exists() and not (tmp_path / "m").exists()


def test_a_model_without_the_causal_mask_is_saved_and_stays_unsafe(tmp_path, corpus):
    out = tmp_path / "leaky"
    save_bundle(out, *make_model(causal=False), metrics={}, command=[], corpus=corpus)
    bundle = load_bundle(out)
    assert bundle.safe is False and "causal mask" in bundle.manifest["unsafe_reason"]
    m = read_manifest(out)
    m["safe"], m["unsafe_reason"] = True, None  # claim it is safe
    write_manifest(out, m)
    refused(out, "version", "edited")
    reseal(out)  # even with a consistent version, the architecture gives it away
    refused(out, "safe is true", "causal is false")


# ---- tampered weights ----------------------------------------------------------------------------


def test_flipped_byte_in_the_weights_is_refused(bundle_copy):
    data = bytearray((bundle_copy / WEIGHTS).read_bytes())
    data[-10] ^= 0x01
    (bundle_copy / WEIGHTS).write_bytes(bytes(data))
    refused(bundle_copy, WEIGHTS, "sha256 mismatch")


def test_truncated_weights_are_refused_before_and_after_resealing(bundle_copy):
    data = (bundle_copy / WEIGHTS).read_bytes()
    (bundle_copy / WEIGHTS).write_bytes(data[: len(data) // 2])
    refused(bundle_copy, WEIGHTS, "truncated")
    reseal(bundle_copy)
    refused(bundle_copy, WEIGHTS, "not a readable safetensors file")


def test_missing_tensor_is_named(bundle_copy):
    rewrite_tensors(bundle_copy, lambda t: t.pop("blocks.1.attn.qkv.weight"))
    refused(bundle_copy, "tensor 'blocks.1.attn.qkv.weight' is missing")


def test_extra_tensor_is_named(bundle_copy):
    rewrite_tensors(bundle_copy, lambda t: t.update(backdoor=torch.zeros(3)))
    refused(bundle_copy, "unexpected tensor 'backdoor'")


def test_wrong_shape_is_named(bundle_copy):
    rewrite_tensors(bundle_copy, lambda t: t.update({"norm_final.weight": torch.ones(31)}))
    refused(bundle_copy, "'norm_final.weight' has shape [31], expected [32]")


def test_wrong_dtype_is_named(bundle_copy):
    def to_double(t):
        t["norm_final.bias"] = t["norm_final.bias"].double()

    rewrite_tensors(bundle_copy, to_double)
    refused(bundle_copy, "'norm_final.bias' has dtype F64", "float32")


def test_nan_weight_is_named(bundle_copy):
    def poison(t):
        t["blocks.0.mlp.proj.weight"][3, 4] = float("nan")

    rewrite_tensors(bundle_copy, poison)
    refused(bundle_copy, "'blocks.0.mlp.proj.weight' has 1 non-finite value")


def test_several_tensor_problems_are_all_listed(bundle_copy):
    def edit(t):
        t.pop("norm_final.bias")
        t["extra"] = torch.zeros(1)

    rewrite_tensors(bundle_copy, edit)
    problems = verify_bundle(bundle_copy)
    assert len(problems) == 2 and any("norm_final.bias" in p for p in problems)


# ---- tampered manifest and files -----------------------------------------------------------------


def test_changed_architecture_is_refused(bundle_copy):
    m = read_manifest(bundle_copy)
    m["architecture"]["n_layer"] = 1
    write_manifest(bundle_copy, m)
    refused(bundle_copy, "version", "edited")
    reseal(bundle_copy)  # a consistent manifest whose weights do not fit
    refused(bundle_copy, "unexpected tensor 'blocks.1.attn.qkv.weight'")


def test_changed_file_hash_is_refused(bundle_copy):
    m = read_manifest(bundle_copy)
    m["files"][WEIGHTS] = "0" * 64
    write_manifest(bundle_copy, m)
    refused(bundle_copy, WEIGHTS, "sha256 mismatch")


def test_tokenizer_that_does_not_fit_the_model_is_refused(bundle_copy):
    m = read_manifest(bundle_copy)
    m["tokenizer"]["chars"] = m["tokenizer"]["chars"][:-1]
    write_manifest(bundle_copy, m)
    reseal(bundle_copy)
    refused(bundle_copy, "tokenizer.content_hash")
    m = read_manifest(bundle_copy)
    m["tokenizer"]["content_hash"] = CharTokenizer(m["tokenizer"]["chars"]).content_hash
    write_manifest(bundle_copy, m)
    reseal(bundle_copy)
    refused(bundle_copy, "tokenizer vocabulary size", "architecture.vocab_size")


@pytest.mark.parametrize(
    "edit, words",
    [
        (lambda m: m.pop("architecture"), "field 'architecture' is missing"),
        (lambda m: m.update(safe="yes"), "field 'safe' must be bool"),
        (lambda m: m.update(format_version=True), "field 'format_version' must be int"),
        (lambda m: m["corpus"].pop("fingerprint"), "field 'corpus.fingerprint' is missing"),
        (lambda m: m.update(format_version=99), "format_version 99 is not supported"),
        (lambda m: m.update(kind="ngram"), "kind 'ngram'"),
        (lambda m: m["architecture"].update(n_head=3), "architecture is invalid"),
        (lambda m: m["architecture"].update(secret=1), "unknown ['secret']"),
        (lambda m: m["generation"].update(temperature=-1), "generation is invalid"),
        (lambda m: m["files"].update({"../escape": "0" * 64}), "'../escape' is not a plain file name"),
        (lambda m: m.update(base=["0" * 16]), "field 'base' must be null or"),
        (
            lambda m: m.update(base={"version": "0" * 16, "corpus": {"source": "x" * 5000, "fingerprint": "f"}}),
            "'base'",
        ),
        (lambda m: m.update(base={"version": "../v", "corpus": {"source": "s", "fingerprint": "f"}}), "base.version"),
    ],
)
def test_malformed_manifest_fields_are_named(bundle_copy, edit, words):
    m = read_manifest(bundle_copy)
    edit(m)
    write_manifest(bundle_copy, m)
    m = read_manifest(bundle_copy)
    if isinstance(m.get("files"), dict) and "version" in m:
        m["version"] = manifest_version(m)  # only the edit itself should be refused
        write_manifest(bundle_copy, m)
    refused(bundle_copy, words)


def test_broken_json_is_refused(bundle_copy):
    (bundle_copy / MANIFEST).write_text('{"format_version": 1,')
    refused(bundle_copy, MANIFEST, "not valid JSON")


def test_missing_files_are_named(bundle_copy, tmp_path):
    (bundle_copy / WEIGHTS).unlink()
    refused(bundle_copy, f"{WEIGHTS} is missing")
    (bundle_copy / MANIFEST).unlink()
    refused(bundle_copy, f"{MANIFEST} is missing")
    refused(tmp_path / "nowhere", "missing bundle")


def test_unlisted_file_is_refused(bundle_copy):
    (bundle_copy / "payload.pkl").write_bytes(b"\x80\x04")
    refused(bundle_copy, "unexpected file 'payload.pkl'")


# ---- no pickle anywhere in core ------------------------------------------------------------------


def test_core_never_unpickles():
    """Parse every first-party module (so docstrings that mention the rule do not count) and look for
    pickle imports and torch.load / *.load(..., allow_pickle=...) calls."""
    offences = []
    for path in FIRST_PARTY:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] + ([node.module] if isinstance(node, ast.ImportFrom) else [])
                if any(n and n.split(".")[0] in ("pickle", "cPickle", "dill", "joblib", "shelve") for n in names):
                    offences.append(f"{path.name}:{node.lineno} imports a pickle module")
            if (
                isinstance(node, ast.Attribute)
                and node.attr == "load"
                and isinstance(node.value, ast.Name)
                and node.value.id == "torch"
            ):
                offences.append(f"{path.name}:{node.lineno} uses torch.load")
            if isinstance(node, ast.keyword) and node.arg in ("allow_pickle", "weights_only"):
                offences.append(f"{path.name}:{node.lineno} passes {node.arg}=")
    assert offences == []
    assert ROOT / "core" / "model" / "bundle.py" in FIRST_PARTY and len(FIRST_PARTY) > 30  # the walk saw the wings
