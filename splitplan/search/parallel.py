"""Layer 5: running independent search tasks — in-process, on local processes (joblib/loky) or on a
Dask cluster (joblib's dask backend). Tasks are chunks (a design's column block, a batch of points),
never single points, and workers are top-level functions, so everything pickles.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from splitplan.errors import InputError, redact


class ProgressSink(Protocol):
    """Receives a search's DES runs: `add` schedules runs (the forecast at the start, then any run
    beyond it; at the end a negative count withdraws forecast runs that were not needed),
    `advance` counts runs as they finish (cached verdicts are no runs). An Optuna space adds its
    trials too (analytic, each a step of the same bar)."""

    def add(self, total: int) -> None: ...

    def advance(self, n: int = 1) -> None: ...


class Backend(StrEnum):
    """Where a search's tasks run: local processes (joblib's loky) or a Dask cluster."""

    LOKY = "loky"
    DASK = "dask"


BACKENDS = tuple(b.value for b in Backend)


def check_execution(jobs: object, backend: object, scheduler: object) -> None:
    """The rule for where tasks may run, checked wherever a request names it (search requests
    validate it before any work; a Runner checks it again when built directly)."""
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs == 0 or jobs < -1:
        raise InputError(f"`jobs` must be a positive integer (or -1 for all cores), got {jobs!r}")
    if backend not in BACKENDS:
        raise InputError(f"`backend` must be one of {', '.join(BACKENDS)}, got {backend!r}")
    if backend == "dask" and not scheduler:
        raise InputError("`backend` dask needs `scheduler` (an address such as tcp://host:8786)")
    if scheduler is not None:
        check_scheduler(scheduler)


# the protocols a Dask scheduler listens on; a bare HOST:PORT is tcp, as Dask reads it
SCHEDULER_PROTOCOLS = ("tcp", "tls", "ws", "wss", "ucx", "inproc")
_HOST_PORT = re.compile(r"(?:\[[0-9A-Fa-f:.%]+\]|[A-Za-z0-9_.-]+):(?P<port>[0-9]{1,5})")


def check_scheduler(address: object) -> None:
    """A Dask scheduler address, checked before any work: Dask itself only parses it when the
    first DES task is sent, minutes into a search, and then fails with a traceback.

    An address with user info (tcp://user:password@host:port) is refused without repeating it:
    Dask addresses take no credentials (a secured cluster uses tls:// and certificates), so the
    password could only end up in messages and saved requests."""
    example = "an address such as tcp://HOST:PORT (e.g. tcp://127.0.0.1:8786)"
    if not isinstance(address, str) or not address.strip():
        raise InputError(f"`scheduler` must be a Dask scheduler address: {example}, got {address!r}")
    if "@" in address:
        raise InputError(
            "`scheduler`: a Dask scheduler address takes no user name or password "
            f"(user@ or user:password@); give {example}"
        )
    protocol, sep, location = address.partition("://")
    if not sep:
        protocol, location = "tcp", address
    if protocol not in SCHEDULER_PROTOCOLS:
        raise InputError(
            f"`scheduler` {address!r}: unknown protocol {protocol!r} "
            f"(one of {', '.join(SCHEDULER_PROTOCOLS)}); give {example}"
        )
    if protocol == "inproc":  # in-process clusters (tests): inproc://HOST/PID/N, no port
        return
    m = _HOST_PORT.fullmatch(location)
    if m is None or not 1 <= int(m["port"]) <= 65535:
        raise InputError(f"`scheduler` {address!r} is not a Dask scheduler address: give {example}")


@dataclass(frozen=True, slots=True, kw_only=True)
class Runner:
    """Where tasks run. `jobs` = 1 with the loky backend runs in-process (no pickling, no start-up)."""

    jobs: int = 1
    backend: str = "loky"
    scheduler: str | None = None
    # processes sharing a storage share this board (splitplan.search.store.WorkBoard): each task is
    # claimed by one of them, so they spread over the tasks instead of all running the first one
    board: Any = field(default=None, compare=False)
    _calls: list[int] = field(default_factory=lambda: [0], compare=False, repr=False)

    def __post_init__(self) -> None:
        check_execution(self.jobs, self.backend, self.scheduler)

    @property
    def workers(self) -> int:
        if self.backend == "dask":
            return max(self.jobs, 2)
        if self.jobs == -1:
            import os

            return os.cpu_count() or 1
        return self.jobs

    @property
    def in_process(self) -> bool:
        return self.backend == "loky" and self.jobs == 1

    def map(
        self,
        fn: Callable[..., Any],
        tasks: Sequence[tuple[Any, ...]],
        on_result: Callable[[int, Any], None] | None = None,
    ) -> list[Any]:
        """`[fn(*task) for task in tasks]`, in order, possibly in parallel.

        `on_result(i, result)` runs in the caller's process as each task finishes (to persist
        finished work, and count it, before the rest is done).
        """
        if not tasks:
            return []
        if self.board is not None and self.in_process:
            return self._cooperative_map(fn, tasks, on_result)
        if self.in_process or (len(tasks) == 1 and self.backend == "loky"):
            out = []
            for i, task in enumerate(tasks):
                out.append(fn(*task))
                if on_result:
                    on_result(i, out[-1])
            return out
        from joblib import Parallel, delayed

        with self._backend():
            par = Parallel(n_jobs=self.jobs if self.backend == "loky" else -1, return_as="generator")
            out = []
            for i, res in enumerate(par(delayed(fn)(*task) for task in tasks)):
                out.append(res)
                if on_result:
                    on_result(i, res)
            return out

    def _cooperative_map(
        self,
        fn: Callable[..., Any],
        tasks: Sequence[tuple[Any, ...]],
        on_result: Callable[[int, Any], None] | None,
    ) -> list[Any]:
        """In-process map shared with other processes: tasks another process has claimed are run
        last, when their points are (mostly) on the board already and cost nothing to read."""
        call = self._calls[0]
        self._calls[0] += 1
        out: list[Any] = [None] * len(tasks)

        def run(i: int) -> None:
            out[i] = fn(*tasks[i])
            if on_result:
                on_result(i, out[i])

        deferred = []
        for i in range(len(tasks)):
            key = f"task|{call}|{i}"
            if not self.board.claim(key):
                deferred.append(i)
                continue
            try:
                run(i)
            except BaseException:
                self.board.release(key)
                raise
            self.board.post(key, "done")
        for i in deferred:
            run(i)
        return out

    @contextlib.contextmanager
    def _backend(self) -> Iterator[None]:
        if self.backend == "loky":
            yield
            return
        try:
            from distributed import Client
        except ImportError:
            raise InputError(
                "`backend` dask needs the 'distributed' package (pip install splitplan[dask])"
            ) from None
        import joblib

        try:
            client = Client(self.scheduler, timeout=30)
        except (OSError, ValueError, TypeError) as exc:  # unreachable, refused, or an address Dask rejects
            first = (str(exc).splitlines() or [type(exc).__name__])[0]
            msg = f"cannot reach the Dask scheduler at {self.scheduler}: {first}"
            raise InputError(redact(msg)) from None
        try:
            with joblib.parallel_config(backend="dask"):
                yield
        finally:
            client.close()


def chunks(items: Sequence[Any], n_chunks: int) -> list[list[Any]]:
    """Split `items` into at most `n_chunks` contiguous, nearly equal, non-empty chunks."""
    n = len(items)
    k = max(1, min(n_chunks, n))
    bounds = [round(i * n / k) for i in range(k + 1)]
    return [list(items[bounds[i] : bounds[i + 1]]) for i in range(k) if bounds[i + 1] > bounds[i]]
