"""Hostile and broken bundles, found by trying them: huge but consistent architecture numbers, huge finite
weights, symbolic links, an oversized manifest. Each is a BundleError naming what was wrong (exit 2 on the
command line), and a huge architecture is refused before any model is allocated."""

import dataclasses
import json
import os
import shutil

import pytest
import torch
from hang_check import finishes
from test_bundle import TEXT, make_model, read_manifest, refused, reseal, rewrite_tensors

import core.model.bundle
import core.model.bundle_checks
import core.model.gpt
from cli.main import main
from core.model.bundle import load_bundle, save_bundle
from core.model.bundle_checks import MANIFEST, WEIGHTS, BundleError, expected_tensors, file_sha256
from core.model.corpus import corpus_from_text
from core.model.gpt import GPT, PRESETS, ModelConfig
from core.release.baselines.baseline_bundle import (
    COUNTS,
    load_any,
    load_baseline,
    read_kind,
    save_baseline,
    train_baseline,
    verify_any,
)
from core.release.gate.rubric import CheckResult, Rubric

TINY = dict(vocab_size=50, context_length=32, n_layer=2, n_head=2, d_model=32)


@pytest.fixture(scope="module")
def corpus():
    return corpus_from_text("toy.py", TEXT)


@pytest.fixture(scope="module")
def saved(tmp_path_factory, corpus):
    """An honest tiny bundle (untrained), saved once; tests tamper with copies."""
    return save_bundle(
        tmp_path_factory.mktemp("hostile") / "bundle", *make_model(), metrics={}, command=["test"], corpus=corpus
    )


@pytest.fixture
def bundle_copy(saved, tmp_path):
    return shutil.copytree(saved, tmp_path / "copy")


# ---- the architecture's numbers ------------------------------------------------------------------


@pytest.mark.parametrize(
    "field, bound_name, over, at",
    [
        ("vocab_size", "MAX_VOCAB", {}, {}),
        ("context_length", "MAX_CONTEXT_LENGTH", {}, {}),
        ("n_layer", "MAX_LAYERS", {}, {}),
        ("n_head", "MAX_HEADS", {"d_model": 130}, {"d_model": 128}),  # head width 2: only the count is out of bounds
        ("d_model", "MAX_D_MODEL", {}, {"n_layer": 1}),  # one layer keeps the product under MAX_PARAMETERS
        ("mlp_ratio", "MAX_MLP_RATIO", {}, {}),
    ],
)
def test_every_architecture_number_is_bounded_by_a_named_constant(field, bound_name, over, at):
    bound = getattr(core.model.gpt, bound_name)
    with pytest.raises(ValueError) as err:
        ModelConfig(**{**TINY, **over, field: bound + 1})
    assert f"{field} must be <= {bound} ({bound_name}), got {bound + 1}" in str(err.value)
    assert getattr(ModelConfig(**{**TINY, **at, field: bound}), field) == bound  # the bound itself is allowed


def test_the_presets_sit_well_inside_the_bounds():
    large = PRESETS["large"]
    assert (
        core.model.gpt.MAX_CONTEXT_LENGTH >= 8 * large.context_length
        and core.model.gpt.MAX_D_MODEL >= 8 * large.d_model
    )
    assert core.model.gpt.MAX_LAYERS >= 8 * large.n_layer and core.model.gpt.MAX_HEADS >= 8 * large.n_head
    assert core.model.gpt.MAX_MLP_RATIO >= 4 * large.mlp_ratio
    params = GPT(dataclasses.replace(large, vocab_size=200)).num_parameters()
    assert core.model.gpt.MAX_PARAMETERS >= 30 * params


def test_the_parameter_count_is_bounded_and_counted_as_a_real_model_counts_it():
    # Within every per-field bound, but 2048^2 x 12 x 48 layers is 2.4 G parameters.
    with pytest.raises(ValueError, match="MAX_PARAMETERS=100,000,000"):
        ModelConfig(vocab_size=100, context_length=4096, n_layer=48, n_head=64, d_model=2048)
    # The count in the message is the real model's (GPT.num_parameters as the reference).
    config = ModelConfig(vocab_size=50, context_length=16, n_layer=3, n_head=2, d_model=12, mlp_ratio=3)
    real = GPT(config).num_parameters()
    with pytest.raises(ValueError, match=f"has {real:,} parameters"):
        with pytest.MonkeyPatch.context() as m:
            m.setattr(core.model.gpt, "MAX_PARAMETERS", real - 1)
            ModelConfig(**dataclasses.asdict(config))
    shapes, _ = expected_tensors(config)
    assert sum(torch.Size(s).numel() for s in shapes.values()) == real


def _huge(path, **arch):
    """The bundle's manifest with other architecture numbers and a consistent version (as a tamperer would)."""
    m = read_manifest(path)
    m["architecture"].update(arch)
    core.model.bundle.write_manifest(path, m)
    reseal(path)


@pytest.fixture
def gpt_builds(monkeypatch):
    """Every config core.model.bundle builds a GPT for (the allocation the header check must come before)."""
    built = []

    def spy(config):
        built.append(config)
        return GPT(config)

    monkeypatch.setattr(core.model.bundle, "GPT", spy)
    return built


def test_a_huge_architecture_over_small_tensors_is_refused_before_any_model_is_built(saved, bundle_copy, gpt_builds):
    _huge(bundle_copy, d_model=65536, context_length=1_000_000_000)  # 51 GB if allocated
    message = refused(bundle_copy, "architecture is invalid", "context_length must be <= 4096 (MAX_CONTEXT_LENGTH)")
    assert "1000000000" in message
    _huge(bundle_copy, context_length=32)
    refused(bundle_copy, "d_model must be <= 2048 (MAX_D_MODEL)")
    # Within every bound (50 M parameters, 0.2 GB), and still nothing is allocated: the header does not match.
    _huge(bundle_copy, d_model=1024, context_length=4096, n_layer=4, n_head=4)
    V = read_manifest(bundle_copy)["architecture"]["vocab_size"]
    refused(bundle_copy, f"tensor 'token_embedding.weight' has shape [{V}, 32], expected [{V}, 1024]")
    assert gpt_builds == []
    load_bundle(saved)
    assert len(gpt_builds) == 1  # the spy sees builds: an honest bundle is built once, after its header matched


def test_the_command_line_refuses_a_huge_architecture_with_one_line_and_exit_2(bundle_copy, capsys):
    _huge(bundle_copy, d_model=65536, context_length=1_000_000_000)
    assert main(["generate", "--bundle", str(bundle_copy), "--prompt", "def "]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "MAX_CONTEXT_LENGTH" in err[0]


# ---- weight values -------------------------------------------------------------------------------


def test_a_huge_finite_weight_is_refused_naming_the_tensor(bundle_copy):
    def poison(t):
        t["blocks.1.mlp.fc.weight"][0, 3] = 3e38  # finite float32, overflows to inf in the first matmul

    rewrite_tensors(bundle_copy, poison)
    refused(
        bundle_copy, "tensor 'blocks.1.mlp.fc.weight' has 1 value(s) with |w| > MAX_ABS_WEIGHT=10000", "largest 3e+38"
    )


def test_a_large_but_plausible_weight_still_loads(bundle_copy):
    def bump(t):
        t["blocks.0.attn.qkv.weight"][1, 1] = -core.model.bundle_checks.MAX_ABS_WEIGHT  # the bound itself is allowed

    rewrite_tensors(bundle_copy, bump)
    assert (
        load_bundle(bundle_copy).model.blocks[0].attn.qkv.weight[1, 1].item()
        == -core.model.bundle_checks.MAX_ABS_WEIGHT
    )


def test_release_check_of_a_huge_weight_gives_a_rubric_in_valid_json(bundle_copy, tmp_path, capsys):
    rewrite_tensors(bundle_copy, lambda t: t["norm_final.weight"].fill_(3e38))
    code = main(["release", "check", str(bundle_copy), "--out", str(tmp_path / "rel"), "--json"])
    out = capsys.readouterr().out

    def no_nan(name):
        raise AssertionError(f"{name} in the JSON")

    rubric = json.loads(out, parse_constant=no_nan)
    assert code == 1 and rubric["passed"] is False
    integrity = next(c for c in rubric["checks"] if c["name"] == "integrity")
    assert not integrity["passed"] and "'norm_final.weight'" in integrity["detail"]
    json.loads((tmp_path / "rel" / "rubric.json").read_text(), parse_constant=no_nan)


def test_release_check_prints_why_a_check_failed_on_the_console(bundle_copy, tmp_path, capsys):
    data = bytearray((bundle_copy / WEIGHTS).read_bytes())
    data[-10] ^= 0x01
    (bundle_copy / WEIGHTS).write_bytes(bytes(data))
    assert main(["release", "check", str(bundle_copy), "--out", str(tmp_path / "rel")]) == 1
    lines = capsys.readouterr().out.splitlines()
    reason = [line for line in lines if line.startswith("integrity FAIL: ")]
    assert len(reason) == 1 and f"{WEIGHTS}: sha256 mismatch" in reason[0], lines


def test_a_rubric_never_serialises_nan_or_inf():
    checks = (
        CheckResult("cache logits", False, "nan", float("nan"), "<= 1"),
        CheckResult("integrity", True, "0 problem(s)", 0.0, "none"),
    )
    rubric = Rubric(
        "b", "0123456789abcdef", "now", checks, None, {"loss": float("inf"), "pair": (float("-inf"), 2.5), "n": 3}
    )
    data = rubric.to_dict()
    assert data["checks"][0]["value"] is None and data["checks"][1]["value"] == 0.0
    assert data["summary"] == {"loss": None, "pair": (None, 2.5), "n": 3}
    json.dumps(data, allow_nan=False)  # raises on NaN / inf


# ---- symbolic links and sizes --------------------------------------------------------------------


def test_a_model_file_linked_to_an_identical_file_outside_is_refused(bundle_copy, tmp_path):
    outside = tmp_path / "elsewhere.safetensors"
    shutil.move(bundle_copy / WEIGHTS, outside)
    os.symlink(outside, bundle_copy / WEIGHTS)  # same bytes, same sha256
    refused(bundle_copy, f"{WEIGHTS} is a symbolic link", str(outside))


def test_a_linked_manifest_is_refused(bundle_copy, tmp_path):
    shutil.move(bundle_copy / MANIFEST, tmp_path / "m.json")
    os.symlink(tmp_path / "m.json", bundle_copy / MANIFEST)
    refused(bundle_copy, f"{MANIFEST} is a symbolic link")


def test_a_linked_baseline_counts_file_is_refused(corpus, tmp_path):
    model = train_baseline("ngram", corpus, val_fraction=0.2, seed=1, order=3)
    path = save_baseline(tmp_path / "ngram", model, corpus=corpus, val_fraction=0.2, seed=1)
    shutil.move(path / COUNTS, tmp_path / "counts.json")
    os.symlink(tmp_path / "counts.json", path / COUNTS)
    with pytest.raises(BundleError, match=f"{COUNTS} is a symbolic link"):
        load_baseline(path)


def test_an_oversized_manifest_is_refused_before_it_is_read(bundle_copy, monkeypatch):
    monkeypatch.setattr(core.model.bundle_checks, "MAX_MANIFEST_BYTES", 10_000)
    text = (bundle_copy / MANIFEST).read_text()
    (bundle_copy / MANIFEST).write_text(text + " " * 10_000)
    refused(bundle_copy, "more than MAX_MANIFEST_BYTES=10,000")


def test_a_directory_with_endless_entries_is_refused_without_listing_them(bundle_copy):
    for i in range(core.model.bundle_checks.MAX_BUNDLE_ENTRIES):
        (bundle_copy / f"junk{i}").write_text("x")
    message = refused(bundle_copy, f"more than {core.model.bundle_checks.MAX_BUNDLE_ENTRIES} entries")
    assert "junk1" not in message


# ---- a manifest that is not a file, a number that overflows, a key given twice -------------------


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_a_manifest_that_is_a_fifo_or_a_link_to_dev_zero_is_refused_by_every_reader(bundle_copy, kind):
    """`suggest`, `evaluate` and `release promote` read the manifest's kind before the bundle's checks: a FIFO hung
    them for good, a link to /dev/zero was read until a MemoryError."""
    (bundle_copy / MANIFEST).unlink()
    if kind == "fifo":
        os.mkfifo(bundle_copy / MANIFEST)  # opening it to read would wait for a writer
    else:
        os.symlink("/dev/zero", bundle_copy / MANIFEST)  # never ends
    what = "a named pipe (FIFO)" if kind == "fifo" else "a symbolic link to '/dev/zero'"
    for reader in (read_kind, load_any, load_bundle):
        raised = finishes(reader, bundle_copy)
        assert isinstance(raised, BundleError), raised
        assert f"{MANIFEST} is not a regular file (it is {what})" in str(raised) or (
            kind == "dev-zero" and f"{MANIFEST} is a symbolic link (to '/dev/zero')" in str(raised)  # entries first
        ), raised
    assert isinstance(finishes(load_baseline, bundle_copy), BundleError)
    assert finishes(verify_any, bundle_copy)


def test_a_bundle_file_that_is_a_fifo_is_hashed_never(bundle_copy):
    """Every file of a bundle is opened one way (core.files.open_regular): a FIFO is refused, never waited on."""
    (bundle_copy / WEIGHTS).unlink()
    os.mkfifo(bundle_copy / WEIGHTS)
    raised = finishes(file_sha256, bundle_copy / WEIGHTS)
    assert isinstance(raised, BundleError) and f"{WEIGHTS} is not a regular file (it is a named pipe" in str(raised)
    assert f"{WEIGHTS} is not a regular file" in refused(bundle_copy)


def test_a_metric_of_1e400_is_a_bundle_error_naming_the_file_and_the_field(bundle_copy):
    """1e400 is valid JSON that json.loads makes inf: load_bundle let it out as a plain ValueError (Out of range float
    values are not JSON compliant) from the version hash, and every page showed the exception box."""
    text = (bundle_copy / MANIFEST).read_text()
    (bundle_copy / MANIFEST).write_text(text.replace('"metrics": {}', '"metrics": {"val_loss": 1e400}'))
    message = refused(bundle_copy, MANIFEST, "field 'training.metrics.val_loss' holds 1e400", "must be finite")
    assert "Out of range" not in message
    with pytest.raises(BundleError, match="training.metrics.val_loss"):
        read_kind(bundle_copy)


def test_a_manifest_key_given_twice_is_refused_naming_it(bundle_copy):
    """json.loads keeps the last of two `safe` keys: the bundle's checks and a reader could see different values."""
    text = (bundle_copy / MANIFEST).read_text()
    assert '"safe": true,' in text
    (bundle_copy / MANIFEST).write_text(text.replace('"safe": true,', '"safe": false, "safe": true,'))
    refused(bundle_copy, MANIFEST, "field 'safe' is given twice")
