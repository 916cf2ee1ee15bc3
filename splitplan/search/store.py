"""Layer 5: persistence of finished work in an Optuna storage, so an interrupted search resumes.

`--storage PATH` means a SQLite file; any other Optuna storage URL (postgresql://, mysql://, a
journal file via `journal:PATH`) is passed through. DES verdicts are kept as user attributes of a
`…-points` study keyed by (design, pools, counts, rate factor); Optuna trials live in per-design
studies. Names carry a fingerprint of the scenario so different problems never share results.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from splitplan.errors import InputError
from splitplan.search.evaluate import Decision
from splitplan.sim.scenario import Scenario

T = TypeVar("T")


def scenario_fingerprint(scenario: Scenario) -> str:
    """Short stable hash of everything that changes a simulation's answer."""
    h = hashlib.sha256()
    wl = scenario.workload
    for arr in (wl.arrival_s, wl.prompt_tokens, wl.output_tokens):
        h.update(arr.tobytes())
    h.update(
        repr(
            (
                scenario.model.name,
                str(scenario.perf),
                sorted(scenario.slo.slowdown.items()),
                sorted(scenario.slo.latency_s.items()),
                repr(scenario.sim),
                scenario.seed,
            )
        ).encode()
    )
    return h.hexdigest()[:16]


def storage_url(storage: str) -> str:
    if "://" in storage:
        return storage
    if storage.startswith("journal:"):
        return storage
    path = Path(storage).expanduser().resolve()
    if not path.parent.is_dir():
        raise InputError(f"storage folder {path.parent} does not exist")
    return f"sqlite:///{path}"


def open_storage(storage: str) -> Any:
    """An Optuna storage object for a path or URL (journal:PATH → journal file storage)."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    url = storage_url(storage)
    try:
        if url.startswith("journal:"):
            from optuna.storages import JournalStorage
            from optuna.storages.journal import JournalFileBackend

            return JournalStorage(JournalFileBackend(url[len("journal:") :]))
        return _rdb_with_retry(url)
    except Exception as exc:  # optuna raises many kinds for bad URLs; all are input problems here
        raise InputError(f"cannot open storage {storage!r}: {str(exc).splitlines()[0]}") from None


def _schema_race(exc: BaseException) -> bool:
    """True for the errors a worker gets when another one is creating the same schema right now.

    SQLAlchemy's `create_all` checks for each table and then creates it, so two processes on a
    fresh database can both decide to create it: the loser sees an IntegrityError (a row of the
    version table) or an OperationalError ("table … already exists", "database is locked").
    This is the one retry rule for opening a relational storage.
    """
    from sqlalchemy.exc import IntegrityError, OperationalError

    seen: BaseException | None = exc
    for _ in range(4):  # optuna may wrap the driver's error (StorageInternalError from ...)
        if seen is None:
            break
        if isinstance(seen, IntegrityError):
            return True
        if isinstance(seen, OperationalError):
            text = str(seen).lower()
            return "already exists" in text or "is locked" in text
        seen = seen.__cause__ or seen.__context__
    return False


def _rdb_with_retry(url: str, attempts: int = 8) -> Any:
    """Workers started together race to create the schema of a new database. For SQLite the first
    one creates it under an exclusive lock on a sidecar file while the others wait; any backend's
    losers of the race (see `_schema_race`) retry."""
    import optuna

    kwargs: dict[str, Any] = {}
    lock_path = None
    if url.startswith("sqlite:///"):
        kwargs = {"engine_kwargs": {"connect_args": {"timeout": 60.0}}}
        lock_path = url[len("sqlite:///") :] + ".lock"

    def create() -> Any:
        with _file_lock(lock_path):
            return optuna.storages.RDBStorage(url, **kwargs)

    return _retry_schema_race(create, attempts)


def _retry_schema_race(create: Callable[[], T], attempts: int = 8) -> T:
    """`create()`, retried with a growing pause while it loses a schema race (`_schema_race`)."""
    import time

    for i in range(attempts):
        try:
            return create()
        except Exception as exc:
            if i == attempts - 1 or not _schema_race(exc):
                raise
            time.sleep(0.1 * (i + 1))
    raise AssertionError("unreachable")


@contextlib.contextmanager
def _file_lock(path: str | None) -> Iterator[None]:
    """An exclusive advisory lock on `path` (created if needed); a no-op for None or where locks
    are unavailable."""
    if path is None:
        yield
        return
    try:
        import fcntl
    except ImportError:  # pragma: no cover - non-POSIX
        yield
        return
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError:
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def point_key(
    space: str,
    prompt_gpu: str,
    token_gpu: str,
    prompt_cap: float,
    token_cap: float,
    prompt: int,
    token: int,
    factor: float,
) -> str:
    return f"{space}|{prompt_gpu}|{token_gpu}|{prompt_cap:.6g}|{token_cap:.6g}|{prompt}|{token}|{factor:.9g}"


class PointStore:
    """DES verdicts by point key; a dict when no storage is given, an Optuna study otherwise."""

    def __init__(self, storage: str | None = None, fingerprint: str = "") -> None:
        self._mem: dict[str, Decision] = {}
        self._study: Any = None
        self.storage = storage
        self.fingerprint = fingerprint
        if storage is not None:
            import optuna

            self._storage = open_storage(storage)
            self._study = optuna.create_study(
                storage=self._storage, study_name=f"splitplan-{fingerprint}-points", load_if_exists=True
            )
            for key, val in self._study.user_attrs.items():
                self._mem[key] = _decode(val)

    def __len__(self) -> int:
        return len(self._mem)

    def get(self, key: str) -> Decision | None:
        return self._mem.get(key)

    def put(self, key: str, decision: Decision) -> None:
        if key in self._mem:
            return
        self._mem[key] = decision
        if self._study is not None:
            self._study.set_user_attr(key, _encode(decision))

    def snapshot(self, prefix: str) -> dict[str, Decision]:
        return {k: v for k, v in self._mem.items() if k.startswith(prefix)}

    def close(self) -> None:
        """Release database connections (an RDB storage keeps a pool open otherwise)."""
        if self._study is None:
            return
        st = self._storage
        if hasattr(st, "remove_session"):
            st.remove_session()
        engine = getattr(st, "engine", None)
        if engine is not None:
            engine.dispose()

    def __enter__(self) -> PointStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def optuna_storage(self) -> Any:
        return self._storage if self._study is not None else None


def _encode(d: Decision) -> dict[str, Any]:
    def f(x: float) -> float | str:
        return x if math.isfinite(x) else repr(x)

    return {
        "meets": d.meets,
        "margin": f(d.margin),
        "binding": d.binding,
        "slowdown": {k: f(v) for k, v in d.slowdown.items()},
        "latency_s": {k: f(v) for k, v in d.latency_s.items()},
    }


def _decode(v: dict[str, Any]) -> Decision:
    def f(x: float | str) -> float:
        return float(x)

    return Decision(
        meets=bool(v["meets"]),
        margin=f(v["margin"]),
        binding=str(v["binding"]),
        slowdown={k: f(x) for k, x in v["slowdown"].items()},
        latency_s={k: f(x) for k, x in v.get("latency_s", {}).items()},  # absent in older stores
    )


# ---------------------------------------------------------------- cooperating processes

CLAIM_LEASE_S = 900.0  # a claim on another host older than this is taken over (its owner is gone)
POLL_S = 0.1


class WorkBoard:
    """Claims and results shared by every process given the same RDB storage URL (SQLite,
    PostgreSQL, MySQL): a point or task is claimed by an atomic insert, so exactly one process
    works on it; the others read its result when it is posted. A claim whose owner died (same host:
    its pid is gone; another host: older than CLAIM_LEASE_S) is taken over.

    Journal storages have no atomic insert here: `open_board` returns None and processes sharing
    one only resume from each other's finished work.
    """

    TABLE = "splitplan_claims"

    def __init__(self, url: str, scope: str) -> None:
        import socket

        import sqlalchemy as sa

        self.url = url
        self.scope = scope
        self.owner = f"{socket.gethostname()}:{os.getpid()}"
        kwargs: dict[str, Any] = {}
        if url.startswith("sqlite:///"):
            kwargs = {"connect_args": {"timeout": 60.0}}
        self._engine = sa.create_engine(url, **kwargs)
        meta = sa.MetaData()
        self._t = sa.Table(
            self.TABLE,
            meta,
            sa.Column("key", sa.String(512), primary_key=True),
            sa.Column("owner", sa.String(300), nullable=False),
            sa.Column("claimed_at", sa.Float, nullable=False),
            sa.Column("result", sa.Text, nullable=True),
        )
        lock = url[len("sqlite:///") :] + ".lock" if url.startswith("sqlite:///") else None

        def create() -> None:
            with _file_lock(lock):
                meta.create_all(self._engine, checkfirst=True)

        _retry_schema_race(create)

    def __getstate__(self) -> dict[str, Any]:
        return {"url": self.url, "scope": self.scope}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["url"], state["scope"])  # type: ignore[misc]

    def _k(self, key: str) -> str:
        return f"{self.scope}|{key}"

    def claim(self, key: str) -> bool:
        """True if this process now owns `key` (it was unclaimed, or its owner is gone)."""
        import sqlalchemy as sa

        k, now = self._k(key), time.time()
        try:
            with self._engine.begin() as con:
                con.execute(sa.insert(self._t).values(key=k, owner=self.owner, claimed_at=now, result=None))
            return True
        except sa.exc.IntegrityError:
            pass
        except sa.exc.OperationalError:
            return False
        with self._engine.begin() as con:
            row = con.execute(
                sa.select(self._t.c.owner, self._t.c.claimed_at, self._t.c.result).where(self._t.c.key == k)
            ).first()
            if row is None or row.result is not None or not self._gone(row.owner, row.claimed_at):
                return False
            res = con.execute(
                sa.update(self._t)
                .where(self._t.c.key == k, self._t.c.owner == row.owner, self._t.c.result.is_(None))
                .values(owner=self.owner, claimed_at=now)
            )
            return res.rowcount == 1

    def _gone(self, owner: str, claimed_at: float) -> bool:
        import socket

        host, _, pid = owner.rpartition(":")
        if owner == self.owner:
            return True
        if host == socket.gethostname() and pid.isdigit():
            try:
                os.kill(int(pid), 0)
            except ProcessLookupError:
                return True
            except PermissionError:
                return False
            return False
        return time.time() - claimed_at > CLAIM_LEASE_S

    def post(self, key: str, value: str) -> None:
        import sqlalchemy as sa

        with self._engine.begin() as con:
            con.execute(sa.update(self._t).where(self._t.c.key == self._k(key)).values(result=value))

    def release(self, key: str) -> None:
        """Give up an unfinished claim (an interrupted simulation) so another process takes it."""
        import sqlalchemy as sa

        with contextlib.suppress(Exception), self._engine.begin() as con:
            con.execute(
                sa.delete(self._t).where(
                    self._t.c.key == self._k(key), self._t.c.owner == self.owner, self._t.c.result.is_(None)
                )
            )

    def result(self, key: str) -> str | None:
        import sqlalchemy as sa

        with self._engine.connect() as con:
            row = con.execute(sa.select(self._t.c.result).where(self._t.c.key == self._k(key))).first()
        return None if row is None else row.result

    def done(self, key: str) -> bool:
        return self.result(key) is not None

    def counts(self) -> dict[str, int]:
        """Finished points per owner (how the work was shared)."""
        import sqlalchemy as sa

        with self._engine.connect() as con:
            rows = con.execute(
                sa.select(self._t.c.owner, sa.func.count())
                .where(self._t.c.key.like(f"{self.scope}|point|%"), self._t.c.result.is_not(None))
                .group_by(self._t.c.owner)
            ).all()
        return {r[0]: int(r[1]) for r in rows}

    def close(self) -> None:
        self._engine.dispose()


def open_board(storage: str | None, fingerprint: str) -> WorkBoard | None:
    """The shared work board of an RDB storage (None without storage, or for a journal file)."""
    if storage is None:
        return None
    url = storage_url(storage)
    if url.startswith("journal:"):
        return None
    try:
        return WorkBoard(url, f"splitplan-{fingerprint}")
    except Exception as exc:  # any driver error opening a URL is an input problem
        raise InputError(f"cannot open storage {storage!r}: {str(exc).splitlines()[0]}") from None


@dataclass(slots=True)
class CooperativeEvaluator:
    """Wraps an Evaluator so that processes sharing a WorkBoard simulate each point once: the first
    to claim a point simulates it and posts the verdict; the others wait for it."""

    inner: Any
    board: WorkBoard

    def screen(self, design: Any, prompt: Any, token: Any, rate_scale: Any = 1.0) -> Any:
        return self.inner.screen(design, prompt, token, rate_scale)

    def decide(self, design: Any, prompt: int, token: int, rate_scale: float = 1.0) -> Decision:
        import json

        key = "point|" + point_key(
            design.name,
            design.prompt.type.name,
            design.token.type.name,
            design.prompt.power_cap,
            design.token.power_cap,
            int(prompt),
            int(token),
            float(rate_scale),
        )
        while True:
            posted = self.board.result(key)
            if posted is not None:
                return _decode(json.loads(posted))
            if self.board.claim(key):
                try:
                    d = self.inner.decide(design, prompt, token, rate_scale)
                except BaseException:
                    self.board.release(key)
                    raise
                self.board.post(key, json.dumps(_encode(d)))
                return d
            time.sleep(POLL_S)
