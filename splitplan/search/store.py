"""Layer 5: persistence of finished work in an Optuna storage, so an interrupted search resumes,
written so that Optuna's own tools (`optuna studies`, optuna-dashboard) read it truthfully.

Storage locations are spelled as Optuna spells them: an RDB URL (`sqlite:///PATH`, `postgresql://…`,
`mysql://…`) or the path of a journal file (Optuna's `JournalFileBackend`). A bare path is a SQLite
file, or a journal file when it is one already or its name ends in `.log`, `.jsonl` or `.journal`
(`journal:PATH`, an older spelling, still works). `optuna_spelling` gives the form to hand to
`optuna-dashboard` or `optuna … --storage`.

What is stored, per scenario fingerprint (so different problems never share results):

- `splitplan-FP-points`: the DES verdict cache, keyed by (design, pools, counts, rate factor), kept
  in the study's *system* attributes (Optuna's CLI and dashboard list user attributes; thousands
  of verdicts there made `optuna studies` print tens of kilobytes). It has no trials.
- `splitplan-FP-answer-OBJECTIVE-H` (one per search problem): every point the search decided, one
  COMPLETE trial each, written when the search finishes. Its value is the objective ($/h, kW or
  req/s) of the point where it met the SLOs and the budget, and the worst value (±inf) where it did
  not; its constraints say which failed, by the verdict that decided it (the system attribute
  `splitplan:decided_by` is `des`, or `analytic` where the screen alone decided). So the study's
  best trial — Optuna's `best_trial`, and optuna-dashboard's, which ranks by value alone — is the
  search's answer.
- `splitplan-FP-DESIGN-H`: the Optuna sampler's own trials of a design searched by Optuna; their
  values are the analytic screen's (penalized where a constraint fails), which the study's system
  attribute `splitplan:values` says, and they lead to the DES-verified answer study.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from splitplan.errors import InputError, redact
from splitplan.search.evaluate import Decision
from splitplan.sim.scenario import Scenario

if TYPE_CHECKING:
    from splitplan.search.problem import SearchProblem
    from splitplan.search.result import PointRecord

T = TypeVar("T")
JOURNAL_SUFFIXES = (".log", ".jsonl", ".journal")
_SQLITE_MAGIC = b"SQLite format 3\x00"
VERDICT_PREFIX = "verdict:"  # system attributes of the points study holding one DES verdict each


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


class StorageKind(StrEnum):
    RDB = "rdb"  # a SQLAlchemy URL: SQLite, PostgreSQL, MySQL
    JOURNAL = "journal"  # Optuna's journal file


@dataclass(frozen=True, slots=True)
class StorageLocation:
    """Where a storage is: an RDB URL, or a journal file's absolute path."""

    kind: StorageKind
    target: str

    @property
    def optuna_spelling(self) -> str:
        """What Optuna's CLI and optuna-dashboard take for it (the URL, or the journal's path)."""
        return self.target


def _is_journal_file(path: Path) -> bool:
    if path.is_file() and path.stat().st_size > 0:
        with path.open("rb") as fh:
            return fh.read(len(_SQLITE_MAGIC)) != _SQLITE_MAGIC
    return path.suffix.lower() in JOURNAL_SUFFIXES


def locate_storage(storage: str) -> StorageLocation:
    """Where `storage` (a URL, a path, or the older `journal:PATH`) is; a missing folder is an error."""
    if "://" in storage:
        return StorageLocation(StorageKind.RDB, storage)
    journal = storage.startswith("journal:")
    path = Path(storage.removeprefix("journal:")).expanduser().resolve()
    if not path.parent.is_dir():
        raise InputError(f"storage folder {path.parent} does not exist")
    if journal or _is_journal_file(path):
        return StorageLocation(StorageKind.JOURNAL, str(path))
    return StorageLocation(StorageKind.RDB, f"sqlite:///{path}")


def storage_url(storage: str) -> str:
    """The storage in Optuna's spelling (an RDB URL, or a journal file's path)."""
    return locate_storage(storage).optuna_spelling


def open_storage(storage: str) -> Any:
    """An Optuna storage object for a path or URL (a journal file → Optuna's JournalFileBackend)."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    loc = locate_storage(storage)
    try:
        if loc.kind is StorageKind.JOURNAL:
            from optuna.storages import JournalStorage
            from optuna.storages.journal import JournalFileBackend

            return JournalStorage(JournalFileBackend(loc.target))
        return _rdb_with_retry(loc.target)
    except Exception as exc:  # optuna raises many kinds for bad URLs; all are input problems here
        raise InputError(_cannot_open(storage, exc)) from None


def _cannot_open(storage: str, exc: BaseException) -> str:
    """The one line for a storage that cannot be opened; a URL's password (which the driver's
    error may repeat too) is masked."""
    first = (str(exc).splitlines() or [type(exc).__name__])[0]
    return redact(f"cannot open storage {storage!r}: {first}")


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
    """DES verdicts by point key; a dict when no storage is given, an Optuna storage otherwise (the
    system attributes of the `…-points` study; verdicts older stores kept as user attributes are
    read too)."""

    def __init__(self, storage: str | None = None, fingerprint: str = "") -> None:
        self._mem: dict[str, Decision] = {}
        self._study: Any = None
        self.storage = storage
        self.fingerprint = fingerprint
        self.location = None if storage is None else locate_storage(storage)
        if storage is not None:
            import optuna

            self._storage = open_storage(storage)
            self._study = optuna.create_study(
                storage=self._storage, study_name=f"splitplan-{fingerprint}-points", load_if_exists=True
            )
            sid = self._study._study_id
            for key, val in self._study.user_attrs.items():  # stores written before the system attrs
                self._mem[key] = _decode(val)
            for key, val in self._storage.get_study_system_attrs(sid).items():
                if key.startswith(VERDICT_PREFIX):
                    self._mem[key[len(VERDICT_PREFIX) :]] = _decode(val)

    def __len__(self) -> int:
        return len(self._mem)

    def get(self, key: str) -> Decision | None:
        return self._mem.get(key)

    def put(self, key: str, decision: Decision) -> None:
        """Keep a verdict; one already kept is replaced only by one that refines it (a stopped run
        simulated again to the end or to a lower bound), so a resumed search needs neither again."""
        old = self._mem.get(key)
        if old is not None and not decision.refines(old):
            return
        self._mem[key] = decision
        if self._study is not None:
            self._storage.set_study_system_attr(
                self._study._study_id, VERDICT_PREFIX + key, _encode(decision)
            )

    def snapshot(self, prefix: str) -> dict[str, Decision]:
        return {k: v for k, v in self._mem.items() if k.startswith(prefix)}

    def record_answer(
        self, problem: SearchProblem, points: list[PointRecord], board: Any = None
    ) -> str | None:
        """Write the decided points of a finished search as the trials of its answer study (see the
        module docstring) and return the study's name; None without storage, or when the study is
        already written (or another process sharing `board` writes it)."""
        if self._study is None:
            return None
        return write_answer_study(self._storage, self.fingerprint, problem, points, board)

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


def answer_study_name(fingerprint: str, problem: SearchProblem) -> str:
    """The answer study of one search problem (the scenario's fingerprint and everything of the
    problem that can change its answer)."""
    h = hashlib.sha256(
        repr(
            (
                problem.spaces,
                problem.objective,
                problem.power_budget_kw,
                problem.cost_budget_usd_per_h,
                problem.engine,
                problem.method,
                problem.trials,
                problem.seed,
                problem.band,
                problem.rate_tol,
                problem.confirm_top,
                problem.rate_rps,
            )
        ).encode()
    ).hexdigest()[:12]
    return f"splitplan-{fingerprint}-answer-{problem.objective.value}-{h}"


DECIDED_BY_ATTR = "splitplan:decided_by"
POINT_ATTR = "splitplan:point"
COMPLETE_ATTR = "splitplan:complete"


def _decided(problem: SearchProblem, points: list[PointRecord]) -> list[PointRecord]:
    """The points a verdict decided, best first by the one tie-break rule (feasible before not).

    DES-decided points always; screen-decided ones only when the screen is the search's engine
    (elsewhere the DES overrules the screen, and a dominance verdict only repeats a DES verdict).
    """
    from splitplan.search.objective import Engine
    from splitplan.search.result import DecidedBy

    ok = {DecidedBy.DES} | ({DecidedBy.ANALYTIC} if problem.engine is Engine.ANALYTIC else set())
    kept = [p for p in points if p.decided_by in ok and p.cost_usd_per_h is not None]
    return sorted(kept, key=lambda p: (not _feasible(p), p.rank_key(problem.objective)))


def _feasible(p: PointRecord) -> bool:
    return bool(p.meets_slo and p.within_budget)


def _trial_key(p: PointRecord) -> str:
    return "|".join(
        str(x)
        for x in (
            p.design,
            p.prompt_gpu,
            p.token_gpu,
            f"{p.prompt_power_cap:.6g}",
            f"{p.token_power_cap:.6g}",
            p.prompt_tp,
            p.token_tp,
            p.prompt_precision,
            p.token_precision,
            p.prompt_kv_precision,
            p.token_kv_precision,
            p.prompt_instances,
            p.token_instances,
            p.instances,
            f"{p.rate_rps:.9g}",
        )
    )


def write_answer_study(
    storage: Any, fingerprint: str, problem: SearchProblem, points: list[PointRecord], board: Any = None
) -> str | None:
    """The answer study of a finished search (see the module docstring); trials are added best
    first, so where values tie the first trial — the one Optuna's `best_trial` returns — is the one
    the search's tie-break chose."""
    import optuna
    from optuna.distributions import CategoricalDistribution, IntDistribution

    name = answer_study_name(fingerprint, problem)
    if board is not None and not board.claim(f"answer|{name}"):
        return name  # another process sharing this storage writes it
    study = optuna.create_study(
        storage=storage, study_name=name, direction=problem.objective.direction, load_if_exists=True
    )
    sid = study._study_id
    if storage.get_study_system_attrs(sid).get(COMPLETE_ATTR):
        return name
    have = {t.system_attrs.get(POINT_ATTR) for t in study.get_trials(deepcopy=False)}
    decided = _decided(problem, points)
    designs = sorted({s.name for s in problem.spaces})
    gpus = sorted(
        {g for s in problem.spaces for pool in (s.prompt, s.token) for g in pool.gpus}
        | {g for p in decided for g in (p.prompt_gpu, p.token_gpu)}
    )
    # counts range over the largest count searched (ranges of larger TPs are scaled up: instances.py)
    top = max(
        [hi for sp in problem.spaces for _lo, hi in (sp.prompt_range, sp.token_range)]
        + [int(p.prompt_instances or p.instances or 0) for p in decided]
        + [int(p.token_instances or 0) for p in decided]
    )
    dists = {
        "design": CategoricalDistribution(designs),
        "prompt_gpu": CategoricalDistribution(gpus),
        "token_gpu": CategoricalDistribution(gpus),
        "prompt_instances": IntDistribution(0, top),
        "token_instances": IntDistribution(0, top),
    }
    trials = []
    for p in decided:
        key = _trial_key(p)
        if key in have:
            continue
        margin = p.margin
        slo = (-margin if math.isfinite(margin) else 1.0) if not p.meets_slo else min(-margin, 0.0)
        if p.des_stopped:  # a run stopped once certain to fail by at least the stop's bound
            from splitplan.search.frontier import STOP_BELOW_HEADROOM

            slo = -STOP_BELOW_HEADROOM
        slo = max(slo, 1e-9) if not p.meets_slo else slo
        # a point that fails a constraint is no answer: its value is the worst there is (optuna-
        # dashboard ranks trials by value alone), what it would have scored is in its user attrs
        value = float(problem.objective.score(p.cost_usd_per_h or 0.0, p.power_kw or 0.0, p.rate_rps))
        if not _feasible(p):
            value = -math.inf if problem.objective.maximize else math.inf
        trials.append(
            optuna.trial.create_trial(
                value=value,
                params={
                    "design": p.design if p.design in designs else designs[0],
                    "prompt_gpu": p.prompt_gpu,
                    "token_gpu": p.token_gpu,
                    "prompt_instances": int(p.prompt_instances or p.instances or 0),
                    "token_instances": int(p.token_instances or 0),
                },
                distributions=dists,
                user_attrs=_trial_user_attrs(p),
                system_attrs={DECIDED_BY_ATTR: p.decided_by.value, POINT_ATTR: key},
                constraints={"slo": float(slo), "budget": 0.0 if p.within_budget else 1.0},
            )
        )
    study.add_trials(trials)
    storage.set_study_system_attr(sid, COMPLETE_ATTR, True)
    if board is not None:
        board.post(f"answer|{name}", "written")
    storage.set_study_system_attr(
        sid,
        "splitplan:values",
        f"{problem.objective.value} of each decided point ({_UNIT[problem.objective.value]}); "
        "constraints: slo (minus the SLO headroom; a DES run stopped early, user attr des_stopped: "
        "its bound, the least it can be) and budget; feasible where both are ≤ 0",
    )
    return name


_UNIT = {"cost": "USD/h", "power": "kW", "throughput": "requests/s"}


def _trial_user_attrs(p: PointRecord) -> dict[str, Any]:
    """What a dashboard shows beside a trial: the point's machines, cost, power, rate and verdict."""

    def f(x: float | None) -> float | None:
        return None if x is None or not math.isfinite(x) else round(float(x), 9)

    return {
        "machines": p.machines,
        "prompt_machines": p.prompt_machines,
        "token_machines": p.token_machines,
        "prompt_tp": p.prompt_tp,
        "token_tp": p.token_tp,
        "prompt_precision": p.prompt_precision,
        "token_precision": p.token_precision,
        "prompt_power_cap": p.prompt_power_cap,
        "token_power_cap": p.token_power_cap,
        "cost_usd_per_h": f(p.cost_usd_per_h),
        "power_kw": f(p.power_kw),
        "rate_rps": f(p.rate_rps),
        "meets_slo": p.meets_slo,
        "binding_slo": p.binding_slo,
        "slo_headroom": f(p.margin),
        "des_stopped": p.des_stopped,
    }


def _encode(d: Decision) -> dict[str, Any]:
    def f(x: float) -> float | str:
        return x if math.isfinite(x) else repr(x)

    return {
        "meets": d.meets,
        "margin": f(d.margin),
        "binding": d.binding,
        "slowdown": {k: f(v) for k, v in d.slowdown.items()},
        "latency_s": {k: f(v) for k, v in d.latency_s.items()},
        "complete": d.complete,
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
        complete=bool(v.get("complete", True)),  # older stores: every run went to the end
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
    loc = locate_storage(storage)
    if loc.kind is StorageKind.JOURNAL:
        return None
    try:
        return WorkBoard(loc.target, f"splitplan-{fingerprint}")
    except Exception as exc:  # any driver error opening a URL is an input problem
        raise InputError(_cannot_open(storage, exc)) from None


@dataclass(slots=True)
class CooperativeEvaluator:
    """Wraps an Evaluator so that processes sharing a WorkBoard simulate each point once: the first
    to claim a point simulates it and posts the verdict; the others wait for it."""

    inner: Any
    board: WorkBoard

    def screen(self, design: Any, prompt: Any, token: Any, rate_scale: Any = 1.0) -> Any:
        return self.inner.screen(design, prompt, token, rate_scale)

    def decide(
        self,
        design: Any,
        prompt: int,
        token: int,
        rate_scale: float = 1.0,
        *,
        stop_below_headroom: float | None = None,
    ) -> Decision:
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
                d = _decode(json.loads(posted))
                if d.answers(stop_below_headroom):
                    return d
                # a run stopped earlier than this caller needs: simulated here, not shared
                return self.inner.decide(
                    design, prompt, token, rate_scale, stop_below_headroom=stop_below_headroom
                )
            if self.board.claim(key):
                try:
                    d = self.inner.decide(
                        design, prompt, token, rate_scale, stop_below_headroom=stop_below_headroom
                    )
                except BaseException:
                    self.board.release(key)
                    raise
                self.board.post(key, json.dumps(_encode(d)))
                return d
            time.sleep(POLL_S)
