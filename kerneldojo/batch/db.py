"""The database result store: SQLAlchemy 2 over SQLite (embedded, WAL mode) or PostgreSQL (psycopg 3).

One row per record in `results`: the headline figures as columns (task, its version, the protocol, GPU model,
status, times, speedups, software versions) for queries, and the whole record as JSON in `record`, so that
`records()` gives back exactly the dict that was appended. The schema is versioned by the Alembic migrations
in `batch/migrations/` (package data); opening a store upgrades it to the newest.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

from sqlalchemy import JSON, Boolean, Float, Integer, String, Text, create_engine, event, select
from sqlalchemy.engine import URL, Engine, make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError, OperationalError
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from .store import DATABASE_SUFFIXES, ResultStore, flat_row, stamped

MIGRATIONS = Path(__file__).with_name("migrations")


class Base(DeclarativeBase):
    pass


class Result(Base):
    """Mirrors the newest migration (tests/test_store.py checks that they agree)."""

    __tablename__ = "results"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    recorded_at: Mapped[str] = mapped_column(String(40))  # ISO-8601 UTC: sorts as text
    label: Mapped[str | None] = mapped_column(Text)
    submitter: Mapped[str | None] = mapped_column(Text)
    hash: Mapped[str | None] = mapped_column(String(64))
    task: Mapped[str] = mapped_column(String(200))
    task_hash: Mapped[str | None] = mapped_column(String(64))
    protocol: Mapped[int | None] = mapped_column(Integer)
    language: Mapped[str] = mapped_column(String(20))
    device: Mapped[str] = mapped_column(String(200))
    mode: Mapped[str] = mapped_column(String(10))
    status: Mapped[str] = mapped_column(String(20))
    timed: Mapped[bool] = mapped_column(Boolean)
    median_ms: Mapped[float | None] = mapped_column(Float)
    speedup: Mapped[float | None] = mapped_column(Float)
    speedup_vs_compile: Mapped[float | None] = mapped_column(Float)
    roofline_fraction: Mapped[float | None] = mapped_column(Float)
    kerneldojo_version: Mapped[str | None] = mapped_column(String(40))
    torch_version: Mapped[str | None] = mapped_column(String(80))
    triton_version: Mapped[str | None] = mapped_column(String(80))
    nvcc_version: Mapped[str | None] = mapped_column(String(80))
    cuda_driver: Mapped[str | None] = mapped_column(String(80))
    slot: Mapped[str | None] = mapped_column(String(80))
    source: Mapped[str | None] = mapped_column(Text)
    record: Mapped[dict] = mapped_column(JSON)


def database_url(target: Path | str) -> URL:
    """A path ending .db/.sqlite/.sqlite3 is SQLite; `postgresql://` gets the psycopg 3 driver."""
    text = str(target)
    if "://" not in text and Path(text).suffix in DATABASE_SUFFIXES:
        return URL.create("sqlite", database=str(Path(text).resolve()))
    try:
        url = make_url(text)
    except ArgumentError:
        raise ValueError(f"{text}: not a database URL (e.g. sqlite:///results.db, postgresql://user@host/db)") from None
    if url.drivername in ("postgresql", "postgres"):
        url = url.set(drivername="postgresql+psycopg")
    if url.get_backend_name() not in ("sqlite", "postgresql"):
        backend = url.get_backend_name()
        raise ValueError(f"{url.render_as_string()}: the store takes SQLite or PostgreSQL, not {backend}")
    return url


def _sqlite_pragmas(dbapi_connection, _record) -> None:
    cursor = dbapi_connection.cursor()
    # WAL: readers (a leaderboard, the service) never block the writer; NORMAL sync keeps every committed
    # record through a killed process (only a power cut may lose the last ones).
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.close()


def migrate(engine: Engine, revision: str = "head") -> None:
    """Alembic `upgrade` to `revision` on this engine (the migrations ship inside the package)."""
    from alembic import command
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, revision)


class SqlStore(ResultStore):
    """A result store in SQLite or PostgreSQL; see `kerneldojo.batch.store` for the API."""

    kind = "database"

    def __init__(self, target: Path | str):
        self.url = database_url(target)
        self.unreadable = 0
        if self.url.get_backend_name() == "sqlite" and self.url.database not in (None, "", ":memory:"):
            Path(self.url.database).parent.mkdir(parents=True, exist_ok=True)
        try:
            self.engine = create_engine(self.url, pool_pre_ping=True)
        except NoSuchModuleError as e:
            raise ValueError(f"{self}: {e}") from None
        if self.url.get_backend_name() == "sqlite":
            event.listen(self.engine, "connect", _sqlite_pragmas)
        try:
            migrate(self.engine)
        except OperationalError as e:
            self.engine.dispose()
            raise ValueError(f"cannot open the store {self}: {str(e.orig).strip().splitlines()[0]}") from None

    def __str__(self) -> str:
        return self.url.render_as_string(hide_password=True)

    def records(self) -> Iterator[dict]:
        with Session(self.engine) as session:
            yield from session.scalars(select(Result.record).order_by(Result.id)).yield_per(500)

    def finished(self) -> set[tuple[str, str]]:
        with Session(self.engine) as session:
            return {(label, h) for label, h in session.execute(select(Result.label, Result.hash))}

    @contextlib.contextmanager
    def writer(self) -> Iterator[Callable[[dict], None]]:
        """Yields `append(record)`: each record committed on its own, so a killed writer keeps all before it."""
        with Session(self.engine) as session:

            def append(record: dict) -> None:
                record = stamped(record)
                row = flat_row(record)
                versions = {f"{k}_version": row[k] for k in ("kerneldojo", "torch", "triton")}
                session.add(Result(
                    **{k: row[k] for k in ("recorded_at", "label", "submitter", "hash", "task", "task_hash",
                                           "protocol", "language", "device", "mode", "status", "median_ms",
                                           "speedup", "speedup_vs_compile", "roofline_fraction", "cuda_driver")},
                    **versions, nvcc_version=row["nvcc"], timed=bool(row["timed"]), slot=record.get("slot"),
                    source=record.get("source"), record=record,
                ))  # fmt: skip
                try:
                    session.commit()
                except Exception:  # the session would refuse every later record (red team round 23): this one only
                    session.rollback()
                    raise

            yield append

    def close(self) -> None:
        self.engine.dispose()
