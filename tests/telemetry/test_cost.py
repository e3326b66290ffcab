"""python -m core cost: `--json` holds every field with its type, finite; the storage bytes equal file sizes summed
here (symbolic links not followed, the telemetry database with its -wal file); the FLOPs equal the PaLM formula
worked out by hand from the manifest; the largest class passes the latency target and one more learner does not,
re-simulated here from the report's own service times and seed; the serving queue's mean wait agrees with
Pollaczek-Khinchine computed by hand; the request rate measured from a hand-built telemetry database equals the
gaps counted here; bad arguments exit 2 with one line. Timings are checked for shape, never for speed."""

import json
import math
import os
import sqlite3
import subprocess
import sys
from contextlib import closing
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from cli.main import main
from core.model.bundle import load_bundle
from core.telemetry.class_queue import MAX_GAP_SECONDS, MIN_GAPS, measured_request_rate
from core.telemetry.queueing import simulate, simulate_waits

ROOT = Path(__file__).resolve().parents[2]
TOY = "\n\n".join(f"def add{i}(a, b):\n    return a + b * {i}\n" for i in range(60))  # tests/bundles.py's text
SAMPLES = 30

STORAGE = {"bundle_bytes": int, "registry_bytes": int, "telemetry_bytes": int, "registry_path": str,
           "telemetry_path": str}  # fmt: skip
PREPROCESSING = {"preprocessing_seconds": float, "load_seconds": float, "vocabulary_seconds": float,
                 "stream_seconds": float, "documents": int, "characters": int, "tokens": int}  # fmt: skip
TRAINING = {"parameters": int, "iters": int, "batch_size": int, "context_length": int, "tokens": int,
            "flops_per_token": int, "flops": int, "wall_seconds": float, "step_seconds": float, "threads": int,
            "cpu_seconds": float, "flops_per_second": float, "flops_formula": str,
            "cpu_seconds_basis": str}  # fmt: skip
SERVING = {"samples": int, "threads": int, "service_p50_ms": float, "service_p95_ms": float,
           "service_mean_ms": float, "cpu_seconds_per_1000": float, "wall_seconds_per_1000": float,
           "cpu_clock": str, "service_ms": list}  # fmt: skip
QUEUEING = {"learners": int, "requests_per_learner_per_second": float, "rate_source": str, "rate_note": str,
            "cores": int, "training_slots": int, "serving_workers": int, "latency_target_ms": float,
            "customers": int, "warmup": float, "seed": int, "arrival_rate_per_second": float,
            "offered_load": float, "stable": bool, "utilisation": float, "wait_mean_ms": float,
            "wait_p50_ms": float, "wait_p95_ms": float, "sojourn_p95_ms": float,
            "closed_form_wait_mean_ms": float, "training_requests_per_hour": float,
            "training_service_seconds": float, "training_offered_load": float, "training_stable": bool,
            "training_wait_mean_seconds": float, "training_wait_p50_seconds": float,
            "training_wait_p95_seconds": float, "training_closed_form_wait_mean_seconds": float,
            "largest_class": int, "largest_class_capped": bool, "curve": list}  # fmt: skip
CURVE = {"learners": int, "offered_load": float, "stable": bool, "wait_p95_ms": float, "sojourn_p95_ms": float}
TOP = {"bundle": str, "version": str, "storage": dict, "preprocessing": dict, "training": dict, "serving": dict,
       "queueing": dict, "notes": list}  # fmt: skip


def run(*args, env=None, timeout=180):
    return subprocess.run(
        [sys.executable, "-m", "core", *args],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def no_constants(name):
    raise AssertionError(f"{name} in the JSON")


def check_types(record: dict, expected: dict, where: str) -> None:
    assert set(record) == set(expected), (where, set(record) ^ set(expected))
    for key, kind in expected.items():
        value = record[key]
        if kind is float:
            assert isinstance(value, (int, float)) and not isinstance(value, bool), (where, key, value)
            assert math.isfinite(value), (where, key, value)
        else:
            assert isinstance(value, kind) and (kind is bool or not isinstance(value, bool)), (where, key, value)


@pytest.fixture(scope="module")
def setup(trained_bundle_path, tmp_path_factory):
    """The tiny bundle, its training text as a file (so its held-out split can be read back), a registry with
    nested files and a symbolic link, and a telemetry 'database' that is not one (plus its -wal file)."""
    tmp = tmp_path_factory.mktemp("cost")
    (tmp / "toy.py").write_text(TOY, encoding="utf-8")
    reg = tmp / "registry"
    (reg / "versions" / "a").mkdir(parents=True)
    (reg / "current").write_bytes(b"x" * 37)
    (reg / "versions" / "a" / "model.safetensors").write_bytes(b"y" * 1234)
    (tmp / "outside.bin").write_bytes(b"z" * 50_000)
    (reg / "versions" / "link").symlink_to(tmp / "outside.bin")  # a link: not counted, not followed
    db = tmp / "telemetry.db"
    db.write_bytes(b"not a database" * 10)
    Path(f"{db}-wal").write_bytes(b"w" * 99)
    slots = min(64, max(1, (os.cpu_count() or 1) - 1))  # one serving worker: Pollaczek-Khinchine applies
    args = ["cost", "--bundle", str(trained_bundle_path), "--corpus", str(tmp / "toy.py"), "--registry", str(reg)]
    args += ["--samples", str(SAMPLES), "--seed", "3", "--training-slots", str(slots)]
    return {"args": args, "env": {"LAB_TELEMETRY_DB": str(db)}, "reg": reg, "db": db, "bundle": trained_bundle_path}


@pytest.fixture(scope="module")
def report(setup):
    proc = run(*setup["args"], "--json", env=setup["env"])
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout, parse_constant=no_constants)


def test_json_has_every_field_with_its_type(report):
    check_types(report, TOP, "report")
    for name, expected in (("storage", STORAGE), ("preprocessing", PREPROCESSING), ("training", TRAINING),
                           ("serving", SERVING), ("queueing", QUEUEING)):  # fmt: skip
        check_types(report[name], expected, name)
    assert len(report["serving"]["service_ms"]) == SAMPLES == report["serving"]["samples"]
    assert all(isinstance(t, float) and math.isfinite(t) and t > 0 for t in report["serving"]["service_ms"])
    for point in report["queueing"]["curve"]:
        if point["stable"]:
            check_types(point, CURVE, "curve")
        else:  # no steady state: no wait figures, never a NaN
            assert set(point) == set(CURVE) and point["wait_p95_ms"] is None is point["sojourn_p95_ms"]
    assert report["queueing"]["stable"] and report["queueing"]["rate_source"] == "default"
    assert "cannot be read" in report["queueing"]["rate_note"]  # the damaged database is reported, not fatal
    assert not any("fingerprint" in n for n in report["notes"])  # the held-out text is the bundle's own


def test_storage_bytes_are_the_file_sizes(report, setup):
    bundle_files = [p for p in Path(setup["bundle"]).rglob("*") if p.is_file()]
    assert report["storage"]["bundle_bytes"] == sum(p.stat().st_size for p in bundle_files)
    assert report["storage"]["registry_bytes"] == 37 + 1234  # the link's 50,000 bytes are not the registry's
    assert report["storage"]["telemetry_bytes"] == len(b"not a database") * 10 + 99  # no -shm: counted as 0


def test_flops_follow_the_formula_by_hand(report, setup):
    manifest = json.loads((Path(setup["bundle"]) / "manifest.json").read_text())
    a, metrics, config = manifest["architecture"], manifest["training"]["metrics"], manifest["training"]["config"]
    V, C, L, R, T = a["vocab_size"], a["d_model"], a["n_layer"], a["mlp_ratio"], a["context_length"]
    # tied embedding; per block: two LayerNorms (weight and bias, 4C), q k v and the output projection (4 C^2),
    # the MLP (2 R C^2); the final LayerNorm (2C)
    n = V * C + L * (4 * C + (4 + 2 * R) * C * C) + 2 * C
    assert load_bundle(setup["bundle"]).model.num_parameters() == n == report["training"]["parameters"]
    tokens = metrics["iters"] * config["batch_size"] * T
    t = report["training"]
    assert t["tokens"] == tokens
    assert t["flops_per_token"] == 6 * n + 12 * L * C * T
    assert t["flops"] == (6 * n + 12 * L * C * T) * tokens
    assert t["wall_seconds"] == metrics["seconds"] and t["threads"] == config["num_threads"]
    assert t["cpu_seconds"] == pytest.approx(metrics["seconds"] * config["num_threads"], rel=1e-12)
    assert t["step_seconds"] == pytest.approx(tokens / metrics["tokens_per_second"], rel=1e-12)


def test_the_largest_class_passes_and_one_more_learner_does_not(report):
    q = report["queueing"]
    service_s = np.asarray(report["serving"]["service_ms"], dtype=np.float64) / 1000.0
    n, rate, target = q["largest_class"], q["requests_per_learner_per_second"], q["latency_target_ms"]
    assert 1 <= n and not q["largest_class_capped"]

    def p95_ms(learners):
        r = simulate(learners * rate, service_s, servers=q["serving_workers"], customers=q["customers"],
                     warmup=q["warmup"], seed=q["seed"])  # fmt: skip
        return None if r.sojourn_p95 is None else r.sojourn_p95 * 1000.0

    assert p95_ms(n) <= target
    assert p95_ms(n + 1) is None or p95_ms(n + 1) > target
    for point in q["curve"]:  # the curve is the same seeded simulation, figure for figure
        assert point["sojourn_p95_ms"] == p95_ms(point["learners"])
    assert any(p["learners"] == q["learners"] for p in q["curve"])


def test_the_serving_queue_agrees_with_pollaczek_khinchine(report):
    q = report["queueing"]
    assert q["serving_workers"] == 1
    s = np.asarray(report["serving"]["service_ms"], dtype=np.float64) / 1000.0
    lam = q["arrival_rate_per_second"]
    rho = lam * s.mean()
    assert q["offered_load"] == pytest.approx(rho, rel=1e-12)
    by_hand_ms = lam * (s**2).mean() / (2 * (1 - rho)) * 1000.0
    assert q["closed_form_wait_mean_ms"] == pytest.approx(by_hand_ms, rel=1e-9)
    _, waits, _, _ = simulate_waits(lam, s, servers=1, customers=q["customers"], seed=q["seed"])
    kept = waits[int(len(waits) * q["warmup"]) :] * 1000.0
    batches = np.array([b.mean() for b in np.array_split(kept, 20)])
    se = batches.std(ddof=1) / math.sqrt(20)
    assert q["wait_mean_ms"] == pytest.approx(kept.mean(), rel=1e-12)
    assert abs(q["wait_mean_ms"] - by_hand_ms) <= 4 * se + 1e-12, (q["wait_mean_ms"], by_hand_ms, se)


def test_human_output_is_one_table(setup):
    proc = run(*setup["args"], env=setup["env"])
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("cost of ") and lines[1].split() == ["figure", "value", "unit"]
    for figure in ("bundle", "training compute", "suggestion time p95", "wait p95", "largest class within the target"):
        assert any(line.startswith(figure + " ") for line in lines), figure
    assert "note: no telemetry" not in proc.stdout  # there is a file (not a database): its bytes are counted


def make_db(path: Path, sessions: dict[str, list[float]], surface="page") -> None:
    """A database with the telemetry schema's columns the rate reads: gaps (seconds) per session."""
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE IF NOT EXISTS events (id INTEGER PRIMARY KEY, at TEXT, surface TEXT, kind TEXT, "
                "session TEXT)")  # fmt: skip
    start = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
    for name, gaps in sessions.items():
        t = start
        for gap in [0.0, *gaps]:
            t += timedelta(seconds=gap)
            con.execute("INSERT INTO events (at, surface, kind, session) VALUES (?, ?, 'suggestion', ?)",
                        (t.isoformat(timespec="microseconds"), surface, name))  # fmt: skip
    con.commit()
    con.close()


def test_the_request_rate_is_measured_from_page_sessions(tmp_path):
    rng = np.random.default_rng(0)
    a, b = rng.exponential(2.0, 80).round(3).tolist(), rng.exponential(0.5, 60).round(3).tolist()
    db = tmp_path / "t.db"
    make_db(db, {"s1": a + [3600.0] + a[:10], "s2": b})  # an hour's break in s1: not typing
    make_db(db, {"synth": [0.001] * 500}, surface="synthetic")  # replayed traffic: not typing either
    rate, why = measured_request_rate(db)
    gaps = [g for g in a + a[:10] + b if 0 < g <= MAX_GAP_SECONDS]
    assert rate == pytest.approx(len(gaps) / sum(gaps), rel=1e-9), why
    assert f"{len(gaps):,} gaps" in why and "2 page sessions" in why
    few = tmp_path / "few.db"
    make_db(few, {"s1": [1.0] * (MIN_GAPS - 1)})
    assert measured_request_rate(few)[0] is None
    rate, why = measured_request_rate(tmp_path / "absent.db")
    assert rate is None and "no telemetry database" in why


@pytest.mark.parametrize(
    "extra, env, words",
    [
        (["--learners", "0"], {}, "--learners"),
        (["--learners", "100000"], {}, "--learners"),
        (["--learners", "9" * 5000], {}, "--learners"),  # past int()'s 4,300 digits
        (["--rate", "nan"], {}, "--rate"),
        (["--rate", "1000"], {}, "--rate"),
        (["--rate", "0"], {}, "rate must lie in (0, 100]"),  # the parser's range is closed; cost_report's is not
        (["--latency-target-ms", "-1"], {}, "--latency-target-ms"),
        (["--latency-target-ms", "inf"], {}, "--latency-target-ms"),
        (["--samples", "5"], {}, "--samples"),
        (["--seed", "-3"], {}, "--seed"),
        (["--seed", "1e999"], {}, "--seed"),
        (["--threads", "0"], {}, "--threads"),
        (["--threads", "100000"], {}, "--threads"),
        (["--training-slots", "99"], {}, "--training-slots"),
        (["--training-slots", "0"], {}, "argument --training-slots: must be an integer from 1 to 64, got '0'"),
        ([], {"LAB_MAX_TRAINING_RUNS": "many"}, "LAB_MAX_TRAINING_RUNS"),
        (["--learners", "x"], {}, "--learners"),
    ],
)
def test_bad_arguments_are_one_line(setup, capsys, monkeypatch, extra, env, words):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    args = setup["args"] + extra
    if "LAB_MAX_TRAINING_RUNS" in env:  # the flag would win over the variable
        i = args.index("--training-slots")
        del args[i : i + 2]
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and words in err[0], err


def test_no_training_slot_is_refused_by_the_report_too(setup):
    """With no slot training never runs: the report once said nobody waited for it (issue 35)."""
    from core.telemetry.cost import cost_report

    with pytest.raises(ValueError, match=r"training_slots must be an integer in 1\.\.64, got 0"):
        cost_report(setup["bundle"], registry=setup["reg"], telemetry=setup["db"], training_slots=0)


def test_a_database_url_without_a_scheme_is_never_read_as_a_file_nor_shown(setup, capsys, monkeypatch, tmp_path):
    """Issue 35: the stores' rule holds in the cost report too: LAB_DATABASE_URL is always a URL, and one that
    cannot be used is said (by the variable's name), its password never printed, no file looked for or made."""
    monkeypatch.setenv("LAB_DATABASE_URL", "lab:s3cretPW@db-host:5432/lab")
    monkeypatch.chdir(tmp_path)
    assert main([*setup["args"], "--json"]) == 0
    out, err = capsys.readouterr()
    assert "s3cretPW" not in out + err
    report = json.loads(out)
    notes = " ".join(report["notes"])
    assert "LAB_DATABASE_URL has no scheme" in notes and "no telemetry database at" not in notes, notes
    assert report["storage"]["telemetry_bytes"] == 0 and report["queueing"]["rate_source"] == "default"
    assert report["storage"]["telemetry_path"] == "LAB_DATABASE_URL"  # named by the setting, not by its value
    assert list(tmp_path.iterdir()) == []


def test_a_bundle_without_its_text_or_a_missing_bundle_is_one_line(setup, tmp_path, capsys):
    assert main(["cost", "--bundle", str(setup["bundle"]), "--registry", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--corpus" in err[0], err  # trained on an upload: pass the same text
    assert main(["cost", "--bundle", str(tmp_path / "nothing")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: "), err


def test_the_request_rate_and_the_storage_are_read_from_either_engine(engine):
    """LAB_DATABASE_URL's server gives the cost report the same rate as an SQLite file holding the same rows, and
    its telemetry tables' size; its password is never shown."""
    from core.telemetry.cost import telemetry_bytes
    from core.telemetry.schema import Event
    from core.telemetry.store import TelemetryStore

    where = engine.db("telemetry.db")
    store = TelemetryStore(where)  # one CLI event makes the tables; the rate counts only page sessions
    one = dict(surface="cli", kind="suggestion", version="v", text="x", prompt_chars=1, unseen_chars=0)
    assert store.record(Event(**one, truncated=False, latency_ms=1.0)) is not None
    store.close()
    gaps = np.random.default_rng(1).exponential(1.5, MIN_GAPS + 20).round(3).tolist()
    t, rows = datetime(2026, 1, 5, 9, 0, tzinfo=UTC), []
    for gap in [0.0, *gaps]:
        t += timedelta(seconds=gap)
        rows.append(f"('{t.isoformat(timespec='microseconds')}', 'page', 'suggestion', 'v', 's1', 1, 0, 0, 'h', 1.0)")
    columns = "at, surface, kind, version, session, prompt_chars, unseen_chars, truncated, prompt_hash, latency_ms"
    insert = f"INSERT INTO events ({columns}) VALUES {', '.join(rows)}"
    if engine.kind == "postgresql":
        import psycopg

        with psycopg.connect(where) as conn:  # committed when the block ends
            conn.execute(insert)
    else:
        with closing(sqlite3.connect(where)) as conn, conn:
            conn.execute(insert)
    rate, why = measured_request_rate(where if engine.kind == "postgresql" else Path(where))
    usable = [g for g in gaps if 0 < g <= MAX_GAP_SECONDS]
    assert rate == pytest.approx(len(usable) / sum(usable), rel=1e-9), why
    assert telemetry_bytes(where) > 0
    if engine.kind == "postgresql":
        secret = where.replace("postgres@", "postgres:s3cret@")
        rate, why = measured_request_rate(secret.replace("127.0.0.1:", "127.0.0.1:1"))  # a port nothing answers on
        assert rate is None and "cannot be read" in why and "s3cret" not in why
