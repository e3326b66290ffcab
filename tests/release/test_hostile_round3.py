"""Hostile inputs, third round (issue 24), each case as it was found: deeply nested JSON in the registry's `current`,
a version's record.json or rubric.json, a log line and a bundle's manifest; a NaN in a manifest; a vocabulary of
900,000 repeated characters; `train --batch-size 100000000` and `--seed 2**70`. Every one must end in the fallback
with its banner, or in one `error:`/`refused:` line naming the file (and field), never a traceback; a promotion
refused for it is logged."""

import json
import shutil
import stat
from pathlib import Path

import pytest
import streamlit as st
from apptest import APP
from streamlit.testing.v1 import AppTest
from test_registry import _version, make_bundles, make_checks

import ui.models
from cli.main import main
from core.model.bundle import load_bundle, manifest_version
from core.model.bundle_checks import MANIFEST, WEIGHTS
from core.model.tokenizer import CharTokenizer
from core.release.registry.registry import promote
from core.release.registry.registry_log import LOG, read_log
from core.release.registry.served import CURRENT, list_versions, resolve_version

# 1,000,000 bytes (under the registry's 1 MiB cap), as in the issue: json.loads recursed into RecursionError on it.
DEEP = "[" * 500_000 + "]" * 500_000
SHIPPED = Path(__file__).resolve().parents[2] / "models" / "default"  # the shipped model, only read


@pytest.fixture(scope="module")
def bundles(tmp_path_factory):
    return make_bundles(tmp_path_factory.mktemp("round3"))


@pytest.fixture(scope="module")
def checks(bundles):
    return make_checks(bundles)


@pytest.fixture
def reg(bundles, checks, tmp_path):
    """Version a promoted, then b: b is current, a the last known-good before it."""
    path = tmp_path / "registry"
    for name in ("a", "b"):
        assert promote(bundles[name], path, check=checks[name]).promoted
    return path


def overwrite(path, text: str) -> None:
    """Replace a registry file by hand (installed versions are read-only; tests run as root, elsewhere they may not)."""
    path.chmod(path.stat().st_mode | stat.S_IWUSR)
    path.write_text(text)


def cli(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def one_error_line(err: str, *words: str) -> None:
    assert err.count("\n") == 1 and err.startswith("error: ") and "Traceback" not in err, err
    for word in words:
        assert word in err, err


# ---- case 1: deeply nested JSON in the registry ----------------------------------------------------------------


def test_a_deeply_nested_current_falls_back_to_the_last_known_good_and_the_commands_say_so(bundles, reg, capsys):
    va, vb = _version(bundles["a"]), _version(bundles["b"])
    overwrite(reg / CURRENT, DEEP)
    served = resolve_version(reg)
    # Both versions still pass their checks; with no readable pointer the newest promoted one is the known-good one.
    assert served.kind == "transformer" and served.version == vb and served.degraded
    assert "the current pointer is unreadable" in served.reason and "nested 500,000 levels deep" in served.reason

    code, out, err = cli(capsys, "release", "status", "--registry", reg)
    assert code == 0 and err == "" and f"served: transformer {vb} -- the current pointer is unreadable" in out
    code, out, err = cli(capsys, "release", "rollback", "--registry", reg)
    assert code == 1 and err == ""  # a refusal, as for any other unreadable pointer
    assert out.count("\n") == 1 and out.startswith("refused: the current pointer is unreadable"), out
    assert read_log(reg)[-1]["event"] == "rollback-refused" and va in [v.version for v in list_versions(reg)]


def test_a_deeply_nested_rubric_of_the_current_version_serves_the_one_before(bundles, reg):
    va, vb = _version(bundles["a"]), _version(bundles["b"])
    overwrite(reg / "versions" / vb / "rubric.json", DEEP)
    served = resolve_version(reg)
    assert (served.version, served.kind, served.degraded) == (va, "transformer", True)
    assert f"versions/{vb}/rubric.json is missing or unreadable (JsonFileError: nested 500,000" in served.reason


def test_a_deeply_nested_record_and_log_line_are_read_past(bundles, reg, capsys):
    va, vb = _version(bundles["a"]), _version(bundles["b"])
    overwrite(reg / "versions" / va / "record.json", DEEP)
    before = read_log(reg)
    with open(reg / LOG, "a", encoding="utf-8") as f:  # a nested line, a NaN, a number, a torn line, then a good one
        f.write(DEEP + "\n" + '{"event": NaN}\n' + "7\n" + '{"event": "pro\n' + '{"event": "note", "version": null}\n')
    assert read_log(reg) == [*before, {"event": "note", "version": None}]
    versions = {v.version: v for v in list_versions(reg, verify=True)}
    assert versions[va].promoted is None and versions[va].verifies  # the record is unreadable; the version is fine
    assert resolve_version(reg).version == vb and not resolve_version(reg).degraded
    code, out, err = cli(capsys, "release", "status", "--registry", reg)
    assert code == 0 and err == "" and f"served: transformer {vb} -- serving the current version" in out


def test_every_page_shows_the_fallback_banner_when_current_is_deeply_nested(bundles, reg, monkeypatch):
    vb = _version(bundles["b"])
    overwrite(reg / CURRENT, DEEP)
    monkeypatch.setattr(ui.models, "REGISTRY_DIR", reg)
    st.cache_data.clear()
    st.cache_resource.clear()
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    [banner] = [w.value for w in at.warning if w.value.startswith("Serving transformer version")]
    assert vb in banner and "unreadable" in banner and "nested 500,000 levels deep" in banner.replace("\\", "")
    assert at.sidebar.selectbox(key="lab_bundle").value == ui.models.RELEASED_LABEL  # the sidebar is drawn


# ---- cases 2 and 6: a nested manifest, a NaN in a manifest ----------------------------------------------------


def hostile_bundle(tmp_path, name: str, text: str) -> Path:
    """A copy of the shipped bundle whose manifest.json holds `text`."""
    out = tmp_path / name
    out.mkdir()
    shutil.copyfile(SHIPPED / WEIGHTS, out / WEIGHTS)
    (out / MANIFEST).write_text(text)
    return out


def nan_manifest() -> str:
    """The shipped manifest with `"rope_base": NaN`, as a hand edit leaves it (no version can be recomputed)."""
    manifest = json.loads((SHIPPED / MANIFEST).read_text())
    manifest["architecture"]["rope_base"] = float("nan")
    text = json.dumps(manifest, indent=2)  # Python writes NaN; JSON has no such literal
    assert '"rope_base": NaN' in text
    return text


@pytest.mark.parametrize(
    "name, text, words",
    [
        ("deep", DEEP, ["manifest.json", "nested 500,000 levels deep"]),
        ("nan", None, ["manifest.json", "field 'architecture.rope_base' holds NaN"]),
    ],
)
def test_a_nested_or_nan_manifest_is_one_line_from_every_command_and_a_logged_refusal(
    name, text, words, tmp_path, capsys
):
    bundle = hostile_bundle(tmp_path, name, nan_manifest() if text is None else text)
    code, out, err = cli(capsys, "suggest", "--bundle", bundle, "--prompt", "def ")
    assert code == 2 and out == ""
    one_error_line(err, str(bundle), *words)
    code, out, err = cli(capsys, "generate", "--bundle", bundle, "--prompt", "def ")
    assert code == 2 and out == ""
    one_error_line(err, str(bundle), *words)

    code, out, err = cli(capsys, "release", "check", bundle, "--out", tmp_path / "rubric", "--json")
    rubric = json.loads(out)  # the rubric, as for any bundle that does not load: integrity fails, naming why
    assert code == 1 and not rubric["passed"] and "Traceback" not in err
    [integrity] = [c for c in rubric["checks"] if c["name"] == "integrity"]
    assert not integrity["passed"] and all(w in integrity["detail"] for w in words), integrity

    reg = tmp_path / "registry"
    code, out, err = cli(capsys, "release", "promote", bundle, "--registry", reg)
    assert code == 1 and "Traceback" not in err
    assert out.count("\n") == 1 and out.startswith(f"refused: {str(bundle)!r}: ") and all(w in out for w in words)
    [entry] = read_log(reg)
    assert entry["event"] == "refuse" and entry["source"] == str(bundle) and all(w in entry["reason"] for w in words)
    assert not (reg / CURRENT).exists()


# ---- case 4: a vocabulary of 900,000 repeated characters -----------------------------------------------------


class Counted(str):
    """A one-character string that counts how often it is compared for equality (the work of a duplicate check)."""

    calls = 0

    def __eq__(self, other):
        Counted.calls += 1
        return str.__eq__(self, other)

    __hash__ = str.__hash__


@pytest.mark.parametrize("n", [1_000, 4_000])
def test_the_duplicate_check_is_linear_in_the_vocabulary(n):
    """list.count per entry compared every pair (n**2 = 16,000,000 at n = 4,000); a Counter compares each entry
    with the one already counted under its hash, about n times."""
    Counted.calls = 0
    with pytest.raises(ValueError, match=r"must be unique, got duplicates \['x'\]"):
        CharTokenizer([Counted("x") for _ in range(n)])
    assert Counted.calls <= 2 * n, Counted.calls


def test_a_manifest_listing_900000_repeated_characters_is_refused_naming_the_duplicates(tmp_path):
    bundle = hostile_bundle(tmp_path, "dup", (SHIPPED / MANIFEST).read_text())
    manifest = json.loads((bundle / MANIFEST).read_text())
    manifest["tokenizer"]["chars"] = ["x"] * 900_000  # 3.6 MB, under the 4 MB manifest cap
    manifest["version"] = manifest_version(manifest)  # recomputed, so only the tokenizer check can refuse it
    (bundle / MANIFEST).write_text(json.dumps(manifest, separators=(",", ":")))  # compact, as a forger would
    with pytest.raises(ValueError, match=r"tokenizer is invalid \(vocabulary characters must be unique, got dup"):
        load_bundle(bundle)


# ---- cases 5 and 7: train's --batch-size and --seed ----------------------------------------------------------


def test_train_refuses_a_batch_that_would_take_gigabytes_before_anything_is_built(tmp_path, capsys):
    out = tmp_path / "never"
    code, stdout, err = cli(capsys, "train", "--corpus", "stdlib", "--out", out, "--batch-size", "100000000")
    assert code == 2 and stdout == "" and not out.exists()
    # the default preset's context is 128 tokens: 8,192 // 128 = 64 windows a step
    one_error_line(err, "--batch-size must be an integer from 1 to 64 at context length 128", "got 100000000")
    code, _, err = cli(capsys, "train", "--corpus", "stdlib", "--out", out, "--preset", "tiny", "--batch-size", "257")
    assert code == 2
    one_error_line(err, "from 1 to 256 at context length 32")


def test_train_refuses_a_seed_torch_cannot_take_in_generate_s_words(tmp_path, capsys):
    seed = str(2**70)
    code, _, train_err = cli(capsys, "train", "--corpus", "stdlib", "--out", tmp_path / "x", "--seed", seed)
    assert code == 2
    code, _, generate_err = cli(capsys, "generate", "--bundle", SHIPPED, "--prompt", "x", "--seed", seed)
    assert code == 2
    one_error_line(train_err, "--seed must be an integer from 0 to 2**63 - 1", f"got {seed}")
    assert train_err == generate_err  # the same message, word for word
