"""The run record: a run's record round-trips; damaged, foreign or escaping records are skipped, never
raised; the cap removes the oldest unreleased runs first and never a released one, a run being written, or
anything outside the runs directory; owned_by lists only the token's runs; the corpus copy gives back the
training corpus with the same held-out split."""

import dataclasses
import hashlib
import json
import os

import pytest
import torch

from core.model.bundle import load_bundle, save_bundle
from core.model.corpus import corpus_from_text, split_documents
from core.model.gpt import GPT, PRESETS
from core.model.tokenizer import CharTokenizer
from core.release.evaluation.held_out import held_out
from core.runs import run_record
from core.runs.run_record import CORPUS_COPY, RECORD

TOKEN_A, TOKEN_B = "a" * 32, "b" * 32


def notes(lines: int = 200) -> str:
    return "".join(f"note {i}: the value is {i * 7 % 13}\n" + ("\n" if i % 5 == 4 else "") for i in range(lines))


def make_run(runs, name, *, token=TOKEN_A, text=None, corpus_name="notes.txt", tag=None):
    """A run directory runs/<name> holding bundle/ (an untrained tiny model: only its files matter here) and its
    record; the corpus is `text` uploaded as `corpus_name`, and `tag` changes the metrics, so the version."""
    text = notes() if text is None else text
    corpus = corpus_from_text(corpus_name, text)
    tok = CharTokenizer.from_text(corpus.text)
    torch.manual_seed(0)
    model = GPT(dataclasses.replace(PRESETS["tiny"], vocab_size=tok.vocab_size)).eval()
    bundle = save_bundle(
        runs / name / run_record.BUNDLE,
        model,
        tok,
        metrics={"iters": 3, "tag": tag or name},
        command=["tests"],
        corpus=corpus,
    )
    record = run_record.write_record(
        runs / name,
        bundle_path=bundle,
        version=load_bundle(bundle).version,
        label=f"run {name}",
        owner_token=token,
        corpus_text=corpus.text,
    )
    return record, corpus


def test_a_record_round_trips_and_stores_the_tokens_hash_never_the_token(tmp_path):
    runs = tmp_path / "runs"
    record, _ = make_run(runs, "r1")
    assert run_record.read_records(runs) == [record]
    assert run_record.find(runs, record.version) == record
    assert record.bundle_path == runs / "r1" / "bundle" and record.version == load_bundle(record.bundle_path).version
    assert record.owner == hashlib.sha256(TOKEN_A.encode()).hexdigest() == run_record.owner_hash(TOKEN_A)
    stored = (runs / "r1" / RECORD).read_text()
    assert TOKEN_A not in stored and json.loads(stored)["bundle"] == "bundle"
    assert record.bytes >= sum(p.stat().st_size for p in record.bundle_path.iterdir())
    assert load_bundle(record.bundle_path)  # the record beside the bundle leaves the bundle loadable
    assert run_record.for_bundle(runs, record.bundle_path) == record
    assert run_record.for_bundle(tmp_path, record.bundle_path) is None  # not a run of that directory


def test_find_checks_the_version_before_it_looks(tmp_path):
    runs = tmp_path / "runs"
    record, _ = make_run(runs, "r1")
    for bad in ("", "../r1", "a/b", "x" * 65, None, 7, record.version + "\n"):
        assert run_record.find(runs, bad) is None
    assert run_record.find(runs, "0" * 16) is None
    assert run_record.find(tmp_path / "absent", record.version) is None
    assert run_record.read_records(tmp_path / "absent") == []


@pytest.mark.parametrize(
    "content",
    [
        b"{not json",
        b"\xff\xfe garbage",
        b"[]",
        b'{"format": 1}',
        b"[" * 100_000,  # nesting: past the size bound (and the parser's depth) either way
        b" " * (65 * 1024) + b"{}",  # past the 64 KiB bound
    ],
)
def test_a_damaged_record_is_skipped_and_the_others_still_listed(tmp_path, content):
    runs = tmp_path / "runs"
    good, _ = make_run(runs, "r1")
    bad, _ = make_run(runs, "r2")
    (runs / "r2" / RECORD).write_bytes(content)
    assert run_record.read_records(runs) == [good]
    assert run_record.find(runs, bad.version) is None and run_record.corpus_of(bad) is None


@pytest.mark.parametrize(
    "field, value",
    [
        ("version", 7),
        ("version", "../../etc"),
        ("label", ""),
        ("label", ["x"]),
        ("owner", TOKEN_A),  # a token where its hash belongs
        ("created", "yesterday"),
        ("created", True),
        ("bytes", -1),
        ("bytes", 1.5),
        ("format", 2),
    ],
)
def test_a_field_of_the_wrong_type_skips_the_record(tmp_path, field, value):
    runs = tmp_path / "runs"
    make_run(runs, "r1")
    raw = json.loads((runs / "r1" / RECORD).read_text())
    (runs / "r1" / RECORD).write_text(json.dumps({**raw, field: value}))
    assert run_record.read_records(runs) == []


def test_a_record_that_is_not_a_regular_file_is_skipped_without_blocking(tmp_path):
    runs = tmp_path / "runs"
    record, _ = make_run(runs, "r1")
    target = tmp_path / "elsewhere.json"
    target.write_text((runs / "r1" / RECORD).read_text())
    (runs / "r1" / RECORD).unlink()
    (runs / "r1" / RECORD).symlink_to(target)  # a valid record, but not the run's own file
    assert run_record.read_records(runs) == []
    (runs / "r1" / RECORD).unlink()
    os.mkfifo(runs / "r1" / RECORD)  # opening a FIFO for reading would wait for a writer
    assert run_record.read_records(runs) == []


@pytest.mark.parametrize("bundle", ["..", "../r2/bundle", "/tmp", ".", "outside"])
def test_a_bundle_path_escaping_its_run_directory_is_refused(tmp_path, bundle):
    runs = tmp_path / "runs"
    make_run(runs, "r1")
    make_run(runs, "r2")
    (tmp_path / "elsewhere").mkdir()
    (runs / "r1" / "outside").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    raw = json.loads((runs / "r1" / RECORD).read_text())
    (runs / "r1" / RECORD).write_text(json.dumps({**raw, "bundle": bundle}))
    assert [r.run_dir.name for r in run_record.read_records(runs)] == ["r2"]
    with pytest.raises(ValueError, match="not inside its run directory"):
        run_record.write_record(
            runs / "r1",
            bundle_path=runs / "r1" / bundle,
            version="0" * 16,
            label="x",
            owner_token=TOKEN_A,
            corpus_text=None,
        )


def test_a_record_naming_a_staged_save_is_never_listed(tmp_path):
    """A `.bundle.*.tmp` folder is a save being written (or left by a killed run): never offered as a bundle, even
    when a record names it and it holds a whole bundle."""
    runs = tmp_path / "runs"
    make_run(runs, "r1")
    make_run(runs, "r2")
    (runs / "r1" / run_record.BUNDLE).rename(runs / "r1" / ".bundle.k1lled.tmp")
    raw = json.loads((runs / "r1" / RECORD).read_text())
    (runs / "r1" / RECORD).write_text(json.dumps({**raw, "bundle": ".bundle.k1lled.tmp"}))
    assert [r.run_dir.name for r in run_record.read_records(runs)] == ["r2"]


def test_a_symlinked_run_directory_is_neither_listed_nor_removed(tmp_path):
    runs = tmp_path / "runs"
    make_run(tmp_path / "foreign", "r9")  # a valid run somewhere else, linked into the runs directory
    runs.mkdir()
    (runs / "r9").symlink_to(tmp_path / "foreign" / "r9", target_is_directory=True)
    assert run_record.read_records(runs) == []
    assert run_record.enforce_cap(runs, 0, set()) == []
    assert (tmp_path / "foreign" / "r9" / RECORD).is_file()


def test_owned_by_lists_only_the_tokens_runs(tmp_path):
    runs = tmp_path / "runs"
    a1, _ = make_run(runs, "r1", token=TOKEN_A)
    make_run(runs, "r2", token=TOKEN_B)
    a3, _ = make_run(runs, "r3", token=TOKEN_A)
    assert run_record.owned_by(runs, TOKEN_A) == [a1, a3]
    assert [r.run_dir.name for r in run_record.owned_by(runs, TOKEN_B)] == ["r2"]
    assert run_record.owned_by(runs, "c" * 32) == [] and run_record.owned_by(runs, "") == []
    assert run_record.owned_by(runs, run_record.owner_hash(TOKEN_A)) == []  # the stored hash is no token


def test_the_cap_removes_the_oldest_unreleased_runs_first_and_keeps_released_ones(tmp_path):
    runs = tmp_path / "runs"
    r1, _ = make_run(runs, "r1")  # oldest, released
    r2, _ = make_run(runs, "r2")
    r3, _ = make_run(runs, "r3")
    r4, _ = make_run(runs, "r4")  # newest
    (runs / "training").mkdir()  # a run still training: no record yet
    (runs / "training" / "partial.bin").write_bytes(b"\0" * 1000)
    busy, _ = make_run(runs, "r0")  # a run being written: a staged file in its bundle
    (busy.bundle_path / ".manifest.json.x1.tmp").write_text("{}")
    total = run_record._dir_bytes(runs)
    one = run_record._dir_bytes(runs / "r2")
    assert total > one > 0

    assert run_record.enforce_cap(runs, total, {r1.version}) == []  # not over the cap: nothing goes
    removed = run_record.enforce_cap(runs, total - 1, {r1.version})
    assert removed == [r2]  # one run is enough, and the oldest unreleased one goes
    assert not (runs / "r2").exists() and (runs / "r3").is_dir()

    removed = run_record.enforce_cap(runs, 0, {r1.version})
    assert removed == [r3, r4]  # oldest first; the released, the busy and the unrecorded runs stay
    assert [r.run_dir.name for r in run_record.read_records(runs)] == ["r1", "r0"]
    assert (runs / "training" / "partial.bin").is_file()
    with pytest.raises(ValueError, match="max_bytes"):
        run_record.enforce_cap(runs, -1, set())


def test_the_cap_from_the_environment_is_validated():
    assert run_record.max_bytes_from_env({}) == 500 * 2**20
    assert run_record.max_bytes_from_env({"LAB_RUNS_MAX_BYTES": "1000"}) == 1000
    assert run_record.max_bytes_from_env({"LAB_RUNS_MAX_BYTES": " 200M "}) == 200 * 2**20
    assert run_record.max_bytes_from_env({"LAB_RUNS_MAX_BYTES": "2GB"}) == 2 * 2**30
    for bad in ("lots", "-5", "0", "1.5G", "10T", "1e9"):
        with pytest.raises(ValueError, match="LAB_RUNS_MAX_BYTES"):
            run_record.max_bytes_from_env({"LAB_RUNS_MAX_BYTES": bad})


@pytest.mark.parametrize(
    "raw",
    [
        notes(),
        "\ufeff" + notes().replace("\n", "\r\n"),  # a BOM and CRLF line ends, as an editor on Windows saves it
        "\ufeff\ufeff" + notes(),  # a second BOM survives normalising once: the copy keeps it
    ],
)
def test_corpus_of_gives_back_the_training_corpus_and_its_held_out_split(tmp_path, raw):
    runs = tmp_path / "runs"
    record, corpus = make_run(runs, "r1", text=raw)
    kept = run_record.corpus_of(record)
    assert kept is not None
    assert (kept.fingerprint, kept.source, kept.documents) == (corpus.fingerprint, corpus.source, corpus.documents)
    for val_fraction, seed in ((0.1, 0), (0.3, 7)):
        assert split_documents(kept, val_fraction, seed) == split_documents(corpus, val_fraction, seed)
    manifest = load_bundle(record.bundle_path).manifest
    split = held_out(manifest, kept)
    assert split.warnings == (("the manifest records no training split; assumed val_fraction=0.1, seed=0"),)
    assert split.val == split_documents(corpus, 0.1, 0)[1]


def test_a_corpus_copy_that_was_changed_or_removed_gives_none(tmp_path):
    runs = tmp_path / "runs"
    record, _ = make_run(runs, "r1")
    copy = runs / "r1" / CORPUS_COPY
    copy.write_text(copy.read_text() + "one more line\n")
    assert run_record.corpus_of(record) is None  # its fingerprint no longer matches the bundle's
    copy.unlink()
    assert run_record.corpus_of(record) is None
    no_copy, _ = make_run(runs, "r2")
    run_record.write_record(
        runs / "r2",
        bundle_path=no_copy.bundle_path,
        version=no_copy.version,
        label="no copy",
        owner_token=TOKEN_A,
        corpus_text=None,
    )
    (runs / "r2" / CORPUS_COPY).unlink()
    assert run_record.corpus_of(run_record.find(runs, no_copy.version)) is None


def test_write_record_refuses_a_version_the_bundle_does_not_have(tmp_path):
    runs = tmp_path / "runs"
    record, _ = make_run(runs, "r1")
    with pytest.raises(ValueError, match="is not version"):
        run_record.write_record(
            runs / "r1",
            bundle_path=record.bundle_path,
            version="0" * 16,
            label="x",
            owner_token=TOKEN_A,
            corpus_text=None,
        )
