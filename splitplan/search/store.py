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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from splitplan.errors import InputError
from splitplan.search.evaluate import Decision
from splitplan.sim.scenario import Scenario


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


def _rdb_with_retry(url: str, attempts: int = 8) -> Any:
    """Workers started together race to create the schema of a new database. For SQLite the first
    one creates it under an exclusive lock on a sidecar file while the others wait; any backend's
    losers of the race (duplicate table or version row, a locked database) retry."""
    import time

    import optuna

    kwargs: dict[str, Any] = {}
    lock_path = None
    if url.startswith("sqlite:///"):
        kwargs = {"engine_kwargs": {"connect_args": {"timeout": 60.0}}}
        lock_path = url[len("sqlite:///") :] + ".lock"
    for i in range(attempts):
        try:
            with _file_lock(lock_path):
                return optuna.storages.RDBStorage(url, **kwargs)
        except Exception as exc:
            text = type(exc).__name__ + str(exc)
            racy = any(k in text for k in ("IntegrityError", "already exists", "locked", "UNIQUE"))
            if i == attempts - 1 or not racy:
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
    }


def _decode(v: dict[str, Any]) -> Decision:
    def f(x: float | str) -> float:
        return float(x)

    return Decision(
        meets=bool(v["meets"]),
        margin=f(v["margin"]),
        binding=str(v["binding"]),
        slowdown={k: f(x) for k, x in v["slowdown"].items()},
    )
