"""Where a store keeps its rows: an SQLite file (the default, no server) or a PostgreSQL server (LAB_DATABASE_URL),
one SQLAlchemy Engine each, with one schema version table and one migration path for both.

The class results and the telemetry share this engine rule so that both behave the same under a class of writers:
on SQLite WAL, a busy timeout and BEGIN IMMEDIATE for writes; on PostgreSQL pre-ping, connect and lock timeouts,
and a server that cannot be reached is not tried again for a few seconds. A failure is a StoreError whose message
says which store, why and what to do.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import Column, Integer, MetaData, String, Table, create_engine, event, func, select, text, update
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import URL, Connection, Engine, make_url

from core.files import prepare_sqlite

URL_ENV = "LAB_DATABASE_URL"
MAX_URL_CHARS = 1024  # bounds what is read from the environment; a real URL is far shorter
# Why RETRY_S: a page or a served suggestion then fails at once instead of waiting on every rerun.
RETRY_S = 5.0  # an unreachable server is not tried again for this long
WAL_LIMIT = 4 * 2**20  # bytes the write-ahead log is cut back to after a checkpoint
_WRITE = "lab_write"  # the execution option that makes a SQLite transaction BEGIN IMMEDIATE
_MIGRATION_LOCK = 0x1AB5C4E3  # a PostgreSQL advisory lock: one migration at a time per database
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
_POSTGRES = ("postgresql", "postgres", "postgresql+psycopg")

Step = Callable[[Connection], None]  # one migration: schema i -> i + 1, inside the migration's transaction

# Schema versions live in this table on both engines (not only in SQLite's PRAGMA user_version), so the class and
# telemetry stores can share one PostgreSQL database.
VERSIONS = Table(
    "lab_schema",
    MetaData(),
    Column("component", String(32), primary_key=True),  # "class", "telemetry"
    Column("version", Integer, nullable=False),
)


def location(path_env: str, default: str, environ: Mapping[str, str] | None = None) -> str:
    """Where a store lives: LAB_DATABASE_URL when set, else the SQLite path in `path_env`, else `default`."""
    env = os.environ if environ is None else environ
    return env.get(URL_ENV, "").strip() or env.get(path_env) or default


def _where(where: str | os.PathLike | None, path_env: str, default: str) -> str | Path:
    """A URL (a str with a scheme) or a path; None means the environment's choice (`location`). LAB_DATABASE_URL's
    value is a URL also when `location` handed it back without a scheme: parse_url then refuses it at the first use.
    Taken for a path, `lab:pw@host/lab` became an SQLite file named after it (its password in a folder name), and
    every message quoted it."""
    if where is None:
        where = location(path_env, default)
    if isinstance(where, str):
        url = os.environ.get(URL_ENV, "").strip()
        if _SCHEME.match(where.strip()) or (url and where.strip() == url):
            return where.strip()
    return Path(where)


def parse_url(raw: str, error: Callable[[str], Exception]) -> URL:
    """A PostgreSQL URL for psycopg 3; error(message) for anything else. The message never repeats the value: it
    may hold a password."""
    if len(raw) > MAX_URL_CHARS:
        raise error(f"{URL_ENV} is {len(raw)} characters long, more than {MAX_URL_CHARS}; set a shorter URL")
    if not _SCHEME.match(raw):
        raise error(
            f"{URL_ENV} has no scheme: it is always a URL, like postgresql://user@host:5432/lab, never a file name "
            f"(unset it to keep SQLite files, whose paths come from their own settings)"
        )
    try:
        url = make_url(raw)
    except (sa_exc.ArgumentError, ValueError):
        raise error(f"{URL_ENV} is not a database URL; set one like postgresql://user@host:5432/lab") from None
    if url.drivername not in _POSTGRES:
        raise error(
            f"{URL_ENV} names the database kind {url.drivername[:40]!r}; only postgresql://user@host:5432/lab is "
            "supported (unset it to keep SQLite files)"
        )
    return url.set(drivername="postgresql+psycopg")


class StoreError(Exception):
    """A store's database (the class or the telemetry database) cannot be read or written; the message names it,
    says why and what to do. Both stores give it to their Database as `error`, so a page catches one class."""


def server_name(url: URL) -> str:
    """The host, port and database of `url`, as an error message names them (never the password)."""
    return f"{url.host or 'the local socket'}:{url.port or 5432}, database {url.database or url.username or '?'}"


class Database:
    """One store's database: an SQLite file or a PostgreSQL URL (see the module docstring). Never raises when
    made: an unusable URL is reported by the first use, as any other failure of the store is."""

    def __init__(
        self,
        where: str | os.PathLike | None,
        *,
        path_env: str,
        default: str,
        what: str,
        timeout_ms: int,
        error: Callable[[str], Exception],
        fast_writes: bool = False,
    ):
        self.what, self.timeout_ms, self.error, self.fast_writes = what, timeout_ms, error, fast_writes
        self.path_env = path_env  # the setting that moves an SQLite file: a message about its folder names it
        found = _where(where, path_env, default)
        self.path: Path | None = found if isinstance(found, Path) else None
        self.url: URL | None = None
        self._problem: str | None = None
        if isinstance(found, str):
            try:
                self.url = parse_url(found, error)
            except Exception as e:  # noqa: BLE001 - raised again at the first use
                self._problem = str(e)
        self.name = (
            str(self.path) if self.path is not None
            else self.url.set(query={}).render_as_string(hide_password=True) if self.url is not None
            else URL_ENV
        )  # fmt: skip
        self._engine: Engine | None = None
        self._lock = threading.Lock()
        self._down: tuple[float, str] | None = None  # (until when, why) after a server could not be reached

    @property
    def problem(self) -> str | None:
        """Why the URL cannot be used (what its first use raises), or None."""
        return self._problem

    # ---- the engine -----------------------------------------------------------------------------------------

    @property
    def engine(self) -> Engine:
        if self._problem is not None:
            raise self.error(self._problem)
        with self._lock:
            if self._engine is None:
                self._engine = self._sqlite_engine() if self.path is not None else self._server_engine()
            return self._engine

    def _sqlite_engine(self) -> Engine:
        assert self.path is not None
        engine = create_engine(
            URL.create("sqlite", database=str(self.path)),
            connect_args={"timeout": self.timeout_ms / 1000, "check_same_thread": False},
        )
        # WAL: readers never block the writer. busy_timeout: a writer waits for another's lock instead of failing.
        pragmas = (
            f"PRAGMA busy_timeout = {self.timeout_ms}",
            "PRAGMA journal_mode = WAL",
            "PRAGMA foreign_keys = ON",
            f"PRAGMA synchronous = {'NORMAL' if self.fast_writes else 'FULL'}",  # NORMAL: no fsync per write in WAL
            f"PRAGMA journal_size_limit = {WAL_LIMIT}",
        )

        @event.listens_for(engine, "connect")
        def _connected(dbapi_connection, _record) -> None:
            dbapi_connection.isolation_level = None  # the driver's own BEGIN off: SQLAlchemy's "begin" below
            cursor = dbapi_connection.cursor()
            for pragma in pragmas:
                cursor.execute(pragma)
            cursor.close()

        # SQLAlchemy emits BEGIN itself (its documented recipe for pysqlite): a write is BEGIN IMMEDIATE, so it takes
        # the write lock first and waits for it under the busy timeout, instead of reading and then failing at once
        # to upgrade.
        @event.listens_for(engine, "begin")
        def _begin(conn: Connection) -> None:
            conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.get_execution_options().get(_WRITE) else "BEGIN")

        return engine

    def _server_engine(self) -> Engine:
        assert self.url is not None
        return create_engine(
            self.url,
            # a server restarted between two writes costs a reconnect, not an error
            pool_pre_ping=True,
            pool_timeout=max(1.0, self.timeout_ms / 1000),
            connect_args={
                "connect_timeout": max(2, math.ceil(self.timeout_ms / 1000)),  # libpq's least is 2 s
                "options": f"-c lock_timeout={self.timeout_ms}",
                "application_name": "attention-lab",
            },
        )

    def dispose(self) -> None:
        """Close the pooled connections (before a damaged file is set aside, or when the store is closed)."""
        with self._lock:
            if self._engine is not None:
                self._engine.dispose()

    # ---- using it -------------------------------------------------------------------------------------------

    @contextmanager
    def transaction(self, *, write: bool = False) -> Iterator[Connection]:
        """A Connection in one transaction, committed when the block ends, rolled back if it raises; a failure of
        the database raises error(message) saying what to do."""
        try:
            with self._begin(write) as conn:
                yield conn
        except sa_exc.DBAPIError as e:
            raise self.failure(e) from None

    @contextmanager
    def _begin(self, write: bool) -> Iterator[Connection]:
        engine = self.engine
        if self._down is not None and time.monotonic() < self._down[0]:
            raise self.error(self._down[1])
        try:
            conn = engine.connect()
        except sa_exc.DBAPIError as e:
            if self.url is not None:
                why = self._unreachable(e)
                self._down = (time.monotonic() + RETRY_S, why)
                raise self.error(why) from None
            raise
        self._down = None
        with conn:
            if write:
                conn.execution_options(**{_WRITE: True})
            with conn.begin():
                yield conn

    def _reason(self, e: BaseException) -> str:
        """The driver's own words, first line, without the password (psycopg does not echo it, but be sure)."""
        reason = str(getattr(e, "orig", None) or e).strip().splitlines()
        said = reason[0] if reason else type(e).__name__
        password = self.url.password if self.url is not None else None
        return said.replace(password, "***") if password else said

    def _unreachable(self, e: BaseException) -> str:
        assert self.url is not None
        return (
            f"cannot connect to the {self.what} server at {server_name(self.url)} ({self._reason(e)}); check "
            f"{URL_ENV} and that the server is running"
        )

    def failure(self, e: BaseException) -> Exception:
        """error(message) for a failure of the database, naming where it is."""
        if self.url is not None and isinstance(e, (sa_exc.OperationalError, sa_exc.InterfaceError)):
            return self.error(self._unreachable(e) if e.connection_invalidated else self._server_said(e))
        if self.url is not None:
            return self.error(self._server_said(e))
        return self.error(f"the {self.what} {self.name!r} cannot be used: {self._reason(e)}")

    def _server_said(self, e: BaseException) -> str:
        assert self.url is not None
        return f"the {self.what} at {server_name(self.url)} cannot be used: {self._reason(e)}"

    # ---- the schema -----------------------------------------------------------------------------------------

    def prepare(self, component: str, steps: Sequence[Step], after: Step) -> str | None:
        """The first use: the schema brought to len(steps) (migrate), then `after` in the same transaction (a
        read that fails on a damaged table). On SQLite through prepare_sqlite: returns its notice when a damaged
        file was set aside."""
        if self.path is not None:

            def create() -> None:
                self.dispose()  # pooled connections may hold a file that is about to be set aside
                self.migrate(component, steps, after)

            self._check_folder()
            return prepare_sqlite(
                self.path, create, what=self.what, timeout_s=max(10.0, self.timeout_ms / 1000), error=self.error
            )
        try:
            self.migrate(component, steps, after)
        except sa_exc.DBAPIError as e:
            raise self.failure(e) from None
        return None

    def _check_folder(self) -> None:
        """Refuse at once an existing folder that cannot hold a file (`/proc`): the first use's lock file could not
        be made there, which the lock took for another session holding it, and waited 10 s to say so."""
        assert self.path is not None
        folder = self.path.parent
        if not folder.is_dir():
            return  # prepare_sqlite makes it, or says why it cannot
        try:
            fd, probe = tempfile.mkstemp(prefix=f".{self.path.name[:40]}.", suffix=".probe", dir=folder)
        except OSError as e:
            setting = f"; set {self.path_env} to a file in a folder the lab can write" if self.path_env else ""
            raise self.error(
                f"the {self.what} {self.name!r} cannot be made: its folder {str(folder)!r} cannot hold files "
                f"({e.strerror or e}){setting}"
            ) from None
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(probe)

    def migrate(self, component: str, steps: Sequence[Step], after: Step) -> None:
        """Bring `component`'s tables to schema len(steps) in one transaction, or refuse a newer one untouched.

        steps[i] brings schema i to i + 1. A fresh database (version 0) runs steps[0] alone, which makes the
        tables as the store defines them now (its sqlalchemy Table objects), and is stamped len(steps); a
        database at version 0 < n < len(steps) runs steps[n:], each written for the tables as they were."""
        target = len(steps)
        with self._begin(write=True) as conn:
            if self.url is not None:
                conn.execute(select(func.pg_advisory_xact_lock(_MIGRATION_LOCK)))  # workers starting together
            version, stored = self._version(conn, component)
            if version > target:
                raise self.error(
                    f"the {self.what} {self.name!r} was written by a newer lab (schema {version}, this lab reads "
                    f"{target}); point it at another database or update the lab"
                )
            if version < target or not stored:  # not stored: a SQLite file from before lab_schema is adopted
                try:
                    for step in steps[:1] if version == 0 else steps[version:]:
                        step(conn)
                except sa_exc.DBAPIError as e:  # a step's own failure: not a damaged file, so never set aside
                    raise self.error(
                        f"the {self.what} {self.name!r} could not be brought from schema {version} to {target} "
                        f"({self._reason(e)}); it was left at schema {version}"
                    ) from None
                VERSIONS.create(conn, checkfirst=True)
                values = {"component": component, "version": target}
                if stored:
                    conn.execute(update(VERSIONS).where(VERSIONS.c.component == component).values(values))
                else:
                    conn.execute(VERSIONS.insert().values(values))
                if self.path is not None:
                    conn.exec_driver_sql(f"PRAGMA user_version = {int(target)}")  # for labs older than lab_schema
            after(conn)

    def _version(self, conn: Connection, component: str) -> tuple[int, bool]:
        """(the schema version, whether lab_schema has its row). A SQLite file from before lab_schema is at its
        user_version."""
        if conn.dialect.has_table(conn, VERSIONS.name):
            found = conn.execute(select(VERSIONS.c.version).where(VERSIONS.c.component == component)).scalar()
            return (0, False) if found is None else (int(found), True)
        if self.path is not None:
            return int(conn.exec_driver_sql("PRAGMA user_version").scalar() or 0), False
        return 0, False

    # ---- what a store reports -------------------------------------------------------------------------------

    def size(self, tables: Sequence[str]) -> int:
        """Bytes the store takes: its SQLite file and WAL, or on a server its tables with their indexes."""
        if self.path is not None:
            size = 0
            for suffix in ("", "-wal"):
                try:
                    size += os.stat(str(self.path) + suffix).st_size
                except OSError:
                    pass
            return size
        with self.transaction() as conn:
            total = sum(
                int(conn.execute(text("SELECT coalesce(pg_total_relation_size(to_regclass(:t)), 0)"), {"t": t})
                    .scalar() or 0)
                for t in tables
            )  # fmt: skip
        return total

    def identity(self, conn: Connection, table: str) -> int:
        """What changes when the store's tables are made anew: the SQLite file's inode (a damaged file set aside
        starts a new one), on a server the table's oid."""
        if self.path is not None:
            try:
                return os.stat(self.path).st_ino
            except OSError:
                return 0
        return int(conn.execute(text("SELECT coalesce(to_regclass(:t)::oid::bigint, 0)"), {"t": table}).scalar() or 0)
