"""The store tests' databases: a throwaway PostgreSQL 15 cluster for the session, a fresh database per test, and the
`engine` fixture that runs a store test once on SQLite and once on PostgreSQL (imported by tests/conftest.py).

    postgres_server     session: initdb + pg_ctl in a temp folder (trust auth, 127.0.0.1, a free port), stopped
                        with `pg_ctl -m fast stop` at the end, also when a test failed. As root, both run as the
                        `postgres` user (PostgreSQL refuses root). Missing binaries: skipped with how to install
                        them, or a failure when CI is set (CI must not pass by skipping the server)
    engine              "sqlite" or "postgresql": a `Where` whose .db(name) is a fresh SQLite path or a fresh
                        database's URL, and whose .sql(where, query) reads it through the driver itself
                        (sqlite3 or psycopg), not through the store under test

PG_BIN (default /usr/lib/postgresql/15/bin) says where initdb and pg_ctl are.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest

PG_BIN = Path(os.environ.get("PG_BIN", "/usr/lib/postgresql/15/bin"))
INSTALL = "apt-get install -y postgresql (Debian's PostgreSQL 15; or set PG_BIN to its bin folder)"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _as_postgres(args: list[str]) -> list[str]:
    """PostgreSQL refuses to run as root: as root, run it as the `postgres` user."""
    return ["runuser", "-u", "postgres", "--", *args] if os.geteuid() == 0 else args


def _run(args: list[str], log: Path | None = None) -> None:
    done = subprocess.run(_as_postgres(args), capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        tail = log.read_text(errors="replace")[-2000:] if log is not None and log.exists() else ""
        raise RuntimeError(f"{' '.join(args[:2])} failed ({done.returncode}): {done.stderr[-2000:]}\n{tail}")


@dataclass
class Server:
    port: int
    admin_url: str  # the `postgres` database, for CREATE DATABASE

    def url(self, database: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"


@pytest.fixture(scope="session")
def postgres_server():
    if not (PG_BIN / "initdb").is_file() or not (PG_BIN / "pg_ctl").is_file():
        message = f"PostgreSQL binaries not found in {PG_BIN}: {INSTALL}"
        if os.environ.get("CI"):
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    root = Path(tempfile.mkdtemp(prefix="lab-pg-"))  # not under pytest's root-only tmp: postgres must reach it
    data, log = root / "data", root / "server.log"
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
    _run([str(PG_BIN / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8"])
    port = _free_port()
    options = (
        f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off "
        "-c full_page_writes=off -c max_connections=300"
    )  # a throwaway cluster: durability off makes CREATE DATABASE per test cheap
    try:
        _run([str(PG_BIN / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(log), "-w", "-t", "60", "start"], log)
        yield Server(port, f"postgresql://postgres@127.0.0.1:{port}/postgres")
    finally:
        stopped = subprocess.run(
            _as_postgres([str(PG_BIN / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"]),
            capture_output=True, timeout=120, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        pid_file = data / "postmaster.pid"
        if stopped.returncode != 0 and pid_file.exists():  # the server we started, by its own pid: never left running
            with contextlib.suppress(OSError, ValueError):
                os.kill(int(pid_file.read_text().split()[0]), signal.SIGQUIT)
        shutil.rmtree(root, ignore_errors=True)


@dataclass
class Where:
    """Where a store test keeps its database on one engine."""

    kind: str  # "sqlite" or "postgresql"
    tmp: Path
    server: Server | None = None
    made: list[str] = field(default_factory=list)  # PostgreSQL databases made for this test

    def db(self, name: str = "lab.db"):
        """A fresh place for a store: a path under the test's tmp folder, or the URL of a new database."""
        if self.server is None:
            return self.tmp / name
        import psycopg

        database = f"t_{uuid.uuid4().hex[:16]}"
        with psycopg.connect(self.server.admin_url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{database}"')
        self.made.append(database)
        return self.server.url(database)

    def sql(self, where, query: str) -> list[tuple]:
        """`query` on the database at `where`, through the driver itself (an independent reading)."""
        if self.server is None:
            import sqlite3

            with sqlite3.connect(where) as conn:
                return conn.execute(query).fetchall()
        import psycopg

        with psycopg.connect(where) as conn:
            return [tuple(r) for r in conn.execute(query).fetchall()]

    def drop(self) -> None:
        if self.server is None:
            return
        import psycopg

        with psycopg.connect(self.server.admin_url, autocommit=True) as conn:
            for database in self.made:
                conn.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')


@pytest.fixture(params=["sqlite", "postgresql"])
def engine(request, tmp_path, monkeypatch):
    """Runs the test once per engine; the PostgreSQL server starts only when a test asks for it."""
    monkeypatch.delenv("LAB_DATABASE_URL", raising=False)
    server = request.getfixturevalue("postgres_server") if request.param == "postgresql" else None
    where = Where(request.param, tmp_path, server)
    yield where
    where.drop()
