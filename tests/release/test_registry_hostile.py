"""A hostile or broken registry, found by trying it: a `current` pointer that names a path, a version
directory that is a link or holds another bundle, a version the gate refused placed by hand, a huge
architecture, leftovers of a killed promotion, a read-only log. resolve_version falls back with a reason
naming what was wrong (never raises); bad input on the command line exits 2."""

import json
import os
import shutil
import stat

import pytest
from hang_check import finishes
from test_registry import _version, make_bundles, make_checks

import core.model.bundle
import core.release.registry.registry as registry
from cli.main import main
from core.model.bundle import manifest_version, write_manifest
from core.model.bundle_checks import MANIFEST
from core.model.gpt import GPT
from core.release.registry.registry import promote, rollback
from core.release.registry.registry_log import LOG, read_log
from core.release.registry.registry_status import status
from core.release.registry.served import CURRENT, RegistryError, read_current, resolve_version

OTHER = "0123456789abcdef"  # a well-formed version name that no bundle here has


@pytest.fixture(scope="module")
def bundles(tmp_path_factory):
    return make_bundles(tmp_path_factory.mktemp("hostile"))


@pytest.fixture(scope="module")
def checks(bundles):
    return make_checks(bundles)


def writable(path):
    """Installed versions are read-only (tests run as root, where that stops nothing; elsewhere it does)."""
    for p in [path, *path.rglob("*")]:
        p.chmod(p.stat().st_mode | stat.S_IWUSR)


def point(reg, version, history=()):
    (reg / CURRENT).write_text(json.dumps({"version": version, "history": list(history)}))


def install_by_hand(reg, name, bundle, rubric: dict | None):
    """A version directory made without the gate, as a careless tool or a tamperer would."""
    vdir = reg / "versions" / name
    shutil.copytree(bundle, vdir / "bundle")
    if rubric is not None:
        (vdir / "rubric.json").write_text(json.dumps(rubric))
    return vdir


def forged_rubric(version):
    return {"version": version, "passed": True, "checks": [{"name": "integrity", "passed": True}]}


@pytest.fixture
def reg(bundles, checks, tmp_path):
    """A registry where version a is current and passed the gate."""
    path = tmp_path / "registry"
    assert promote(bundles["a"], path, check=checks["a"]).promoted
    return path


def served_from_versions(reg, served):
    return served.bundle.path.resolve().is_relative_to((reg / "versions").resolve())


def test_a_current_pointer_naming_a_path_is_not_served(bundles, checks, reg, capsys):
    va = _version(bundles["a"])
    # The attack that worked: the refused leaking bundle outside versions/, with a forged rubric beside it.
    evil = reg / "versions" / ".." / ".." / "evil"  # tmp_path/evil, beside the registry
    shutil.copytree(bundles["leak"], evil / "bundle")
    (evil / "rubric.json").write_text(json.dumps(forged_rubric("../../evil")))
    point(reg, "../../evil", [va])
    served = resolve_version(reg)
    assert (served.version, served.kind, served.degraded) == (va, "transformer", True)
    assert "current pointer's version '../../evil' is not a version name (16 lowercase hex digits" in served.reason
    assert served_from_versions(reg, served) and read_current(reg) is None
    assert main(["release", "status", "--registry", str(reg), "--json"]) == 0
    assert "'../../evil' is not a version name" in json.loads(capsys.readouterr().out)["served"]["reason"]


def test_a_history_entry_naming_a_path_is_not_trusted(bundles, checks, reg):
    va = _version(bundles["a"])
    point(reg, va, ["../../evil"])
    served = resolve_version(reg)
    assert served.version == va and served.degraded and "history entry '../../evil'" in served.reason
    result = rollback(reg)  # would have switched to ../../evil
    assert not result.switched and "history entry '../../evil' is not a version name" in result.reason
    again = promote(bundles["b"], reg, check=checks["b"])  # a promotion writes a sound pointer again
    assert again.promoted and "it is replaced" in again.reason and read_current(reg)["history"] == []


def test_a_rollback_target_that_is_not_a_version_name_is_bad_input(bundles, checks, reg, capsys):
    entries = len(read_log(reg))
    with pytest.raises(RegistryError, match="rollback target '../../evil' is not a version name"):
        rollback(reg, to="../../evil")
    assert main(["release", "rollback", "--registry", str(reg), "--to", "../../evil"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "not a version name" in err[0]
    assert len(read_log(reg)) == entries and read_current(reg)["version"] == _version(bundles["a"])


def test_a_version_directory_that_is_a_link_is_not_served(bundles, checks, reg, tmp_path):
    va, vb = _version(bundles["a"]), _version(bundles["b"])
    assert promote(bundles["b"], reg, check=checks["b"]).promoted
    shutil.move(reg / "versions" / vb, tmp_path / "elsewhere")
    os.symlink(tmp_path / "elsewhere", reg / "versions" / vb)  # the same files, reached through a link
    served = resolve_version(reg)
    assert served.version == va and served.degraded
    assert f"current version {vb} fails to load or verify (versions/{vb} is a symbolic link" in served.reason
    point(reg, va)
    result = rollback(reg, to=vb)
    assert not result.switched and f"version {vb} does not load (versions/{vb} is a symbolic link" in result.reason
    problems = {v.version: v.problem for v in status(reg).versions}
    assert "symbolic link" in problems[vb] and problems[va] == ""


def test_a_version_whose_bundle_is_linked_is_not_served(bundles, checks, reg, tmp_path):
    vb = _version(bundles["b"])
    vdir = install_by_hand(reg, vb, bundles["b"], forged_rubric(vb))
    shutil.move(vdir / "bundle", tmp_path / "b-bundle")
    os.symlink(tmp_path / "b-bundle", vdir / "bundle")
    point(reg, vb, [_version(bundles["a"])])
    served = resolve_version(reg)
    assert served.version == _version(bundles["a"]) and "holds a symbolic link" in served.reason


def test_a_version_directory_holding_another_version_is_not_served(bundles, checks, reg):
    va = _version(bundles["a"])
    vdir = install_by_hand(reg, OTHER, reg / "versions" / va / "bundle", dict(forged_rubric(va)))
    point(reg, OTHER, [va])
    served = resolve_version(reg)
    assert (
        served.version == va
        and f"rubric.json does not record a passed release rubric of version {OTHER}" in served.reason
    )
    (vdir / "rubric.json").write_text(json.dumps(forged_rubric(OTHER)))  # now the rubric agrees, the bundle does not
    served = resolve_version(reg)
    assert served.version == va and f"versions/{OTHER} holds a bundle of version {va}, not {OTHER}" in served.reason


def test_a_version_the_gate_refused_is_not_served_even_under_its_own_name(bundles, checks, reg):
    va, vleak = _version(bundles["a"]), _version(bundles["leak"])
    assert not checks["leak"].rubric.passed
    install_by_hand(reg, vleak, bundles["leak"], checks["leak"].rubric.to_dict())  # the rubric it failed
    point(reg, vleak, [va])
    served = resolve_version(reg)
    assert served.version == va and f"rubric of version {vleak}" in served.reason
    (reg / "versions" / vleak / "rubric.json").unlink()  # no rubric at all
    assert "rubric.json is missing or unreadable" in resolve_version(reg).reason
    point(reg, va)
    result = rollback(reg, to=vleak)
    assert not result.switched and f"version {vleak} does not load" in result.reason


def test_a_huge_architecture_as_current_falls_back_without_allocating_it(bundles, checks, reg, monkeypatch):
    va = _version(bundles["a"])
    built = []
    monkeypatch.setattr(core.model.bundle, "GPT", lambda config: built.append(config) or GPT(config))
    huge = shutil.copytree(reg / "versions" / va / "bundle", reg.parent / "huge")
    writable(huge)
    m = json.loads((huge / MANIFEST).read_text())
    m["architecture"].update(d_model=65536, context_length=1_000_000_000)
    m["version"] = manifest_version(m)
    write_manifest(huge, m)
    install_by_hand(reg, m["version"], huge, forged_rubric(m["version"]))
    point(reg, m["version"], [va])
    served = resolve_version(reg)  # never raises
    assert served.version == va and served.degraded and "MAX_CONTEXT_LENGTH" in served.reason
    assert built == [served.bundle.config]  # the only model built is the fallback's


def test_leftovers_of_a_killed_promotion_are_listed_then_removed(bundles, checks, reg, capsys):
    va = _version(bundles["a"])

    def leave_leftovers():
        tmp = reg / "versions" / f".{_version(bundles['b'])}.1a2b3c4d.tmp"  # what _install leaves on SIGKILL
        (tmp / "bundle").mkdir(parents=True)
        (tmp / "bundle" / "model.safetensors").write_bytes(b"\0" * 3000)
        (tmp / "bundle" / "model.safetensors").chmod(stat.S_IRUSR)
        (reg / ".current.k3j_x9.tmp").write_text("{")  # what write_json_atomic leaves
        (reg / "versions" / ".notes").mkdir()  # not ours: never listed, never removed
        return sorted([tmp.relative_to(reg).as_posix(), ".current.k3j_x9.tmp"])

    names = leave_leftovers()
    st = status(reg)
    assert sorted(v.path for v in st.leftovers) == names
    assert {v.path: v.bytes for v in st.leftovers}[names[1]] == 3000
    assert main(["release", "status", "--registry", str(reg), "--json"]) == 0
    assert sorted(v["path"] for v in json.loads(capsys.readouterr().out)["leftovers"]) == names
    assert main(["release", "status", "--registry", str(reg)]) == 0
    assert f"leftover of an interrupted promotion: {names[1]} (3,000 bytes)" in capsys.readouterr().out
    assert resolve_version(reg).version == va  # a leftover is never a candidate
    # A rollback, even a refused one (no earlier version), takes the lock: the leftovers go first.
    assert main(["release", "rollback", "--registry", str(reg)]) == 1
    out = capsys.readouterr().out
    assert all(f"removed the leftover of an interrupted promotion: {n}" in out for n in names), out
    assert status(reg).leftovers == () and not (reg / ".current.k3j_x9.tmp").exists()
    assert [e["event"] for e in read_log(reg)][-2:] == ["cleanup", "rollback-refused"]
    assert (reg / "versions" / ".notes").is_dir()
    shutil.rmtree(reg / "versions" / ".notes")
    names = leave_leftovers()
    result = promote(bundles["b"], reg, check=checks["b"])  # so does a promotion
    assert result.promoted and sorted(result.cleaned) == names and status(reg).leftovers == ()
    assert sorted(p.name for p in (reg / "versions").iterdir()) == sorted([".notes", va, _version(bundles["b"])])


def test_a_refusal_on_a_read_only_registry_keeps_its_reason(bundles, checks, reg, monkeypatch):
    """chmod makes the registry read-only for a normal user; the tests run as root, where chmod stops no
    write, so there the log writer is also made to fail as it would (PermissionError)."""
    real_log = registry._log

    def read_only_log(r, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(r / LOG))

    for p in [reg, *reg.rglob("*")]:
        if p.is_dir():
            p.chmod(0o555)
    try:
        if os.geteuid() == 0:
            monkeypatch.setattr(registry, "_log", read_only_log)
        result = promote(bundles["leak"], reg, check=checks["leak"])
        assert not result.promoted and result.current == _version(bundles["a"])
        assert result.reason.startswith("failed the release rubric: ") and "causality: " in result.reason
        assert "(this refusal could not be logged: PermissionError: [Errno 13] Permission denied" in result.reason
        result = rollback(reg)
        assert not result.switched and "has no earlier version (this refusal could not be logged" in result.reason
    finally:
        for p in [reg, *reg.rglob("*")]:
            if p.is_dir():
                p.chmod(0o755)
    monkeypatch.setattr(registry, "_log", real_log)
    assert [e["event"] for e in read_log(reg)] == ["promote"]  # nothing was written


def test_a_metric_of_1e400_in_the_current_manifest_falls_back_naming_the_file_and_the_field(bundles, checks, reg):
    """1e400 is valid JSON that json.loads makes inf: the version lookup raised "Out of range float values are not
    JSON compliant" on every page, and `release status` printed that without the file or the field."""
    va, vb = _version(bundles["a"]), _version(bundles["b"])
    assert promote(bundles["b"], reg, check=checks["b"]).promoted
    manifest = reg / "versions" / vb / "bundle" / MANIFEST
    writable(manifest)
    text = manifest.read_text()
    assert text.count('"metrics": {') == 1
    manifest.write_text(text.replace('"metrics": {', '"metrics": {"val_loss": 1e400, '))
    served = finishes(resolve_version, reg)
    assert (served.version, served.kind, served.degraded) == (va, "transformer", True), served
    assert f"current version {vb} fails to load or verify" in served.reason
    assert "manifest.json: field 'training.metrics.val_loss' holds 1e400" in served.reason
    st = finishes(status, reg)
    assert st.served.reason == served.reason
    assert "field 'training.metrics.val_loss' holds 1e400" in {v.version: v.problem for v in st.versions}[vb]


@pytest.mark.parametrize("folder", ["/proc", "/sys", "/dev"])
def test_a_system_folder_is_refused_as_a_registry_at_once(bundles, folder):
    """`release rollback --registry /proc` waited on a lock that can never be made there."""
    if not os.path.isdir(folder):
        pytest.skip(f"no {folder} here")
    before = set(os.listdir(folder)) if folder == "/dev" else None
    for call, args in ((rollback, (folder,)), (status, (folder,)), (promote, (bundles["a"], folder))):
        raised = finishes(call, *args)
        assert isinstance(raised, RegistryError), raised
        assert str(raised).startswith(f"{folder!r} is not a model registry (it holds none of versions, current")
    served = finishes(resolve_version, folder)
    assert served.bundle is None and "is not a model registry" in served.reason
    assert before is None or set(os.listdir(folder)) <= before  # nothing was made in /dev


def test_a_folder_of_other_files_is_refused_as_a_registry_and_left_alone(bundles, checks, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "notes.txt").write_text("mine")
    with pytest.raises(RegistryError, match="is not a model registry"):
        promote(bundles["a"], home, check=checks["a"])
    with pytest.raises(RegistryError, match="is not a model registry"):
        rollback(home)
    assert sorted(p.name for p in home.iterdir()) == ["notes.txt"]  # no lock, no log, no versions/


def test_a_log_that_is_a_fifo_neither_hangs_a_refusal_nor_its_reading(bundles, checks, reg):
    """Appending to a FIFO waits for a reader forever; reading one waits for a writer."""
    (reg / "log.jsonl").unlink()
    os.mkfifo(reg / "log.jsonl")
    result = finishes(rollback, reg)  # nothing earlier: a refusal, which is logged
    assert not result.switched and "could not be logged" in result.reason, result
    assert finishes(read_log, reg) == []
    assert finishes(status, reg).current == _version(bundles["a"])
