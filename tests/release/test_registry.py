"""core.release.registry.registry: the gate refuses a leaking model and current stays put, a tampered current version
falls back (to the last known-good version, then to the n-gram), rollback restores the previous version."""

import ast
import json
import math
import stat
import threading
from pathlib import Path

import pytest
from filelock import FileLock

import core.release.registry.registry as registry
from cli.main import main
from core.files import staged_dir
from core.model.bundle import load_bundle, save_bundle, verify_bundle
from core.model.corpus import load_corpus
from core.model.gpt import PRESETS
from core.model.train_config import TrainConfig
from core.model.training import train
from core.release.evaluation.eval_report import EvalConfig
from core.release.gate.gate import check_release
from core.release.gate.rubric import ReleasePolicy
from core.release.registry.registry import promote, rollback
from core.release.registry.registry_log import read_log
from core.release.registry.registry_status import status
from core.release.registry.served import CURRENT, LOCK, RegistryError, read_current, resolve_version
from core.release.serving.autocomplete import prompt_for, suggest
from core.release.serving.policy import policy_from_manifest


def suggestion_after(predictor, text, policy, template="{prompt}"):
    """The suggestion a surface serves after `text`: the prompt encoded once (prompt_for), then the one serving call."""
    return suggest(predictor, prompt_for(predictor, text, policy, template=template), policy).suggestion_or_raise()


ROOT = Path(__file__).resolve().parents[2]
TEXT = "\n\n".join(f"def g{i}(y):\n    return y - {i % 5}\n" for i in range(80))
# Known-good models in seconds: only the beats-the-n-gram comparison is waived (see tests/release/test_gate.py).
POLICY = ReleasePolicy(
    require_beats_baseline=False, evaluation=EvalConfig(max_positions=256, typing_chars=80, latency_samples=0)
)


def make_bundles(root):
    """Three tiny bundles trained in seconds: "leak" (no causal mask), "a", and "b" (a's weights, another version)."""
    (root / "toy.py").write_text(TEXT)
    corpus = load_corpus(root / "toy.py")
    paths = {}
    for name, causal in (("leak", False), ("a", True)):
        cfg = TrainConfig(
            batch_size=8,
            max_iters=20,
            warmup_iters=2,
            eval_interval=20,
            eval_iters=1,
            learning_rate=5e-3,
            min_lr=5e-4,
            causal=causal,
            num_threads=1,
        )
        result = train(PRESETS["tiny"], cfg, corpus)
        paths[name] = save_bundle(
            root / name,
            result.model,
            result.tokenizer,
            metrics={"run": name},
            command=["test"],
            corpus=corpus,
            train_config=cfg,
        )
    # A second known-good version: the same weights under other metrics (so another version hash).
    a = load_bundle(paths["a"])
    paths["b"] = save_bundle(
        root / "b", a.model, a.tokenizer, metrics={"run": "b"}, command=["test"], corpus=corpus, train_config=cfg
    )
    return paths


def make_checks(bundles):
    """Each bundle's rubric, computed once; promote() re-checks the installed copy's version against it."""
    return {name: check_release(path, policy=POLICY) for name, path in bundles.items()}


@pytest.fixture(scope="module")
def bundles(tmp_path_factory):
    return make_bundles(tmp_path_factory.mktemp("registry"))


@pytest.fixture(scope="module")
def checks(bundles):
    return make_checks(bundles)


def _version(path):
    return json.loads((path / "manifest.json").read_text())["version"]


def _tamper(path):
    weights = path / "model.safetensors"
    weights.chmod(stat.S_IRUSR | stat.S_IWUSR)  # versions are installed read-only; tampering takes intent
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1
    weights.write_bytes(bytes(data))


def test_a_model_trained_without_the_mask_is_refused_and_current_stays(bundles, checks, tmp_path):
    reg = tmp_path / "registry"
    assert promote(bundles["a"], reg, check=checks["a"]).promoted
    result = promote(bundles["leak"], reg, check=checks["leak"])
    assert not result.promoted and result.current == _version(bundles["a"])
    assert read_current(reg)["version"] == _version(bundles["a"])
    refusal = read_log(reg)[-1]
    assert refusal["event"] == "refuse" and refusal["version"] == _version(bundles["leak"])
    assert {"causality", "cache logits"} <= set(refusal["failed"]) and "causality" in refusal["reason"]
    assert not (reg / "versions" / _version(bundles["leak"])).exists()
    assert verify_bundle(bundles["leak"]) == []  # nothing the user trained is deleted or changed
    served = resolve_version(reg)
    assert (served.version, served.degraded) == (_version(bundles["a"]), False)


@pytest.mark.numerics
def test_a_tampered_current_version_falls_back_to_known_good_then_to_the_ngram(bundles, checks, tmp_path):
    reg = tmp_path / "registry"
    va, vb = _version(bundles["a"]), _version(bundles["b"])
    assert promote(bundles["a"], reg, check=checks["a"]).promoted
    assert promote(bundles["b"], reg, check=checks["b"]).promoted
    assert resolve_version(reg).version == vb
    _tamper(reg / "versions" / vb / "bundle")
    served = resolve_version(reg)
    assert (served.version, served.kind, served.degraded) == (va, "transformer", True)
    assert f"current version {vb} fails to load or verify" in served.reason
    assert f"last known-good version {va}" in served.reason
    _tamper(reg / "versions" / va / "bundle")
    served = resolve_version(reg)
    assert served.kind == "ngram" and served.degraded and "n-gram baseline" in served.reason
    assert served.bundle.version in served.reason
    # the fallback still serves the one suggestion policy: its probability is the product of its own rows
    fallback = served.predictor
    s = suggestion_after(fallback, "def g1(y):\n    ret", policy_from_manifest(served.bundle.manifest))
    ids = fallback.tokenizer.encode("def g1(y):\n    ret" + s.text)
    n = len(s.text)
    rows = fallback.log_probs(ids, range(len(ids) - n, len(ids))).exp()  # (n, V)
    assert s.text and math.prod(float(rows[j, ids[len(ids) - n + j]]) for j in range(n)) == pytest.approx(
        s.probability, rel=1e-12
    )
    assert read_current(reg)["version"] == vb  # serving never moves the pointer


def test_rollback_restores_the_previous_version_and_logs_everything(bundles, checks, tmp_path):
    reg = tmp_path / "registry"
    va, vb = _version(bundles["a"]), _version(bundles["b"])
    promote(bundles["a"], reg, check=checks["a"])
    promote(bundles["b"], reg, check=checks["b"])
    assert (read_current(reg)["version"], read_current(reg)["history"]) == (vb, [va])
    result = rollback(reg, reason="users saw bad suggestions")
    assert result.switched and (result.version, result.previous) == (va, vb)
    assert read_current(reg)["version"] == va and resolve_version(reg).version == va
    assert not rollback(reg).switched  # nothing older than the first version
    events = [(e["event"], e["version"]) for e in read_log(reg)]
    assert events == [("promote", va), ("promote", vb), ("rollback", va), ("rollback-refused", va)]
    assert all("time" in e and "reason" in e for e in read_log(reg))
    assert sorted(p.name for p in reg.iterdir()) == [".lock", CURRENT, "log.jsonl", "versions"]  # no temp files
    stored = reg / "versions" / vb / "bundle" / "model.safetensors"
    assert stat.S_IMODE(stored.stat().st_mode) & 0o222 == 0  # installed read-only
    st = status(reg)
    assert st.current == va and [v.version for v in st.versions] == [va, vb] and all(v.verifies for v in st.versions)


def test_promote_and_status_commands(bundles, tmp_path, capsys):
    reg = tmp_path / "registry"
    (tmp_path / "not-a-bundle").mkdir()
    assert main(["release", "promote", str(tmp_path / "not-a-bundle"), "--registry", str(reg)]) == 1
    assert "refused:" in capsys.readouterr().out and read_current(reg) is None
    assert main(["release", "status", "--registry", str(reg), "--json"]) == 0
    st = json.loads(capsys.readouterr().out)
    assert st["current"] is None and st["served"]["version"] is None and st["log"][-1]["event"] == "refuse"
    assert main(["release", "rollback", "--registry", str(reg)]) == 1


def test_the_release_commands_use_the_apps_registry_unless_given_one(tmp_path, monkeypatch, capsys):
    """Without --registry, `release rollback` and `release status` act on LAB_REGISTRY_DIR, the registry the app
    serves from (core.settings), not on a ./registry of whatever directory the shell is in."""
    reg = tmp_path / "served"
    monkeypatch.setenv("LAB_REGISTRY_DIR", str(reg))
    monkeypatch.chdir(tmp_path)
    assert main(["release", "rollback"]) == 1  # nothing promoted there: refused, and logged in that registry
    capsys.readouterr()
    assert main(["release", "status", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["log"][-1]["event"] == "rollback-refused"
    assert read_log(reg)[-1]["event"] == "rollback-refused" and not (tmp_path / "registry").exists()


# ---- the lock and atomicity ------------------------------------------------------------------------


def test_a_second_writer_waits_for_the_lock_and_gives_up_with_a_clear_error(bundles, checks, tmp_path, monkeypatch):
    """The lock is filelock's, so it holds between processes and threads alike on every OS; a holder that
    never lets go costs the other writer LOCK_TIMEOUT seconds, then a RegistryError (exit 2), not a hang."""
    reg = tmp_path / "registry"
    va, vb = _version(bundles["a"]), _version(bundles["b"])
    promote(bundles["a"], reg, check=checks["a"])
    promote(bundles["b"], reg, check=checks["b"])
    monkeypatch.setattr(registry, "LOCK_TIMEOUT", 0.2)
    with FileLock(str(reg / LOCK)):  # another writer, with its own handle on the lock file
        with pytest.raises(RegistryError, match="locked by another promotion or rollback"):
            rollback(reg)
    assert read_current(reg)["version"] == vb and [e["event"] for e in read_log(reg)] == ["promote", "promote"]
    assert rollback(reg).switched and read_current(reg)["version"] == va  # released: the next writer proceeds


def test_concurrent_promotions_each_land_whole(bundles, checks, tmp_path):
    reg = tmp_path / "registry"
    results = []
    threads = [
        threading.Thread(target=lambda n=n: results.append(promote(bundles[n], reg, check=checks[n])))
        for n in ("a", "b")
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(r.promoted for r in results)
    current = read_current(reg)
    assert sorted([current["version"], *current["history"]]) == sorted(_version(bundles[n]) for n in ("a", "b"))
    assert [e["event"] for e in read_log(reg)] == ["promote", "promote"]
    assert sorted(p.name for p in (reg / "versions").iterdir()) == sorted(_version(bundles[n]) for n in ("a", "b"))
    assert status(reg).leftovers == ()


def test_a_promotion_that_fails_midway_leaves_nothing_behind(bundles, checks, tmp_path, monkeypatch):
    reg = tmp_path / "registry"
    promote(bundles["a"], reg, check=checks["a"])
    before = (reg / CURRENT).read_bytes()

    def disk_full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(registry, "save_baseline", disk_full)
    with pytest.raises(OSError, match="No space left"):
        promote(bundles["b"], reg, check=checks["b"])
    assert (reg / CURRENT).read_bytes() == before
    assert [p.name for p in (reg / "versions").iterdir()] == [_version(bundles["a"])]  # no temporary directory


def test_a_staged_version_left_by_a_killed_promotion_is_listed_and_then_removed(tmp_path):
    """A version is staged by core.files.staged_dir (tempfile.mkdtemp names, not hex): a SIGKILL inside the
    block leaves the directory, which status must list and the next rollback (even a refused one) remove."""
    reg = tmp_path / "registry"
    vdir = reg / "versions" / "0123456789abcdef"
    blocks = [staged_dir(vdir) for _ in range(5)]  # five random names: all-hex odds ~1e-15
    staged = [block.__enter__() for block in blocks]  # never exited, as when the process is killed inside
    for path in staged:
        (path / "bundle").mkdir()
    names = sorted(p.relative_to(reg).as_posix() for p in staged)
    assert sorted(v.path for v in status(reg).leftovers) == names
    result = rollback(reg)
    assert not result.switched and sorted(result.cleaned) == names
    assert not any(p.exists() for p in staged) and status(reg).leftovers == ()
    del blocks  # kept alive until here: a collected block would close and remove its directory itself


def test_nothing_the_app_imports_uses_fcntl():
    """fcntl does not exist on Windows: parse every module of core/, ui/, views/ and app.py (an import in
    a docstring does not count, an __import__("fcntl") or importlib.import_module("fcntl") does)."""
    files = [ROOT / "app.py", *[p for d in ("core", "cli", "ui", "views") for p in sorted((ROOT / d).rglob("*.py"))]]
    offences = []
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
                func = node.func
                called = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
                names = [str(node.args[0].value)] if called in ("__import__", "import_module") else []
            offences += [f"{path.relative_to(ROOT)}:{node.lineno}" for n in names if n.split(".")[0] == "fcntl"]
    assert offences == []
    assert (
        len(files) > 20 and (ROOT / "core" / "release" / "registry" / "registry.py") in files
    )  # the walk saw the registry


# ---- who and why -----------------------------------------------------------------------------------


def test_promote_and_rollback_log_who_asked_and_why(bundles, checks, tmp_path):
    reg = tmp_path / "registry"
    va, vb = _version(bundles["a"]), _version(bundles["b"])
    promote(bundles["a"], reg, check=checks["a"])  # the command line gives neither: no such fields
    promote(bundles["b"], reg, check=checks["b"], actor="session 3f2a", why="saves more keystrokes")
    promote(bundles["leak"], reg, check=checks["leak"], actor="session 3f2a", why="try the leak")
    rollback(reg, reason="bad suggestions", actor="session 9c1d", why="users complained")
    rollback(reg, actor="session 9c1d", why="once more")  # refused: nothing older
    entries = read_log(reg)
    assert [(e["event"], e.get("actor"), e.get("why")) for e in entries] == [
        ("promote", None, None),
        ("promote", "session 3f2a", "saves more keystrokes"),
        ("refuse", "session 3f2a", "try the leak"),
        ("rollback", "session 9c1d", "users complained"),
        ("rollback-refused", "session 9c1d", "once more"),
    ]
    assert "actor" not in entries[0] and entries[3]["version"] == va
    record = json.loads((reg / "versions" / vb / "record.json").read_text())
    assert (record["actor"], record["why"]) == ("session 3f2a", "saves more keystrokes")
    with pytest.raises(RegistryError, match="why is 501 characters"):
        rollback(reg, why="x" * 501)
    with pytest.raises(RegistryError, match="actor must be a string"):
        rollback(reg, actor=7)
    assert len(read_log(reg)) == len(entries)  # bad input is refused before anything is written
