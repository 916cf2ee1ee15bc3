"""Workers that open one fresh storage together: the schema-creation race is retried, not fatal."""

from __future__ import annotations

import multiprocessing as mp
from pathlib import Path

import pytest

pytest.importorskip("optuna")

from sqlalchemy.exc import IntegrityError, OperationalError, ProgrammingError

from splitplan.search.store import _schema_race


def test_schema_race_matches_both_losers_of_create_all() -> None:
    already = OperationalError("CREATE TABLE", {}, Exception("table trial_values already exists"))
    locked = OperationalError("INSERT", {}, Exception("database is locked"))
    dup = IntegrityError("INSERT INTO version_info", {}, Exception("UNIQUE constraint failed"))
    assert _schema_race(already)
    assert _schema_race(locked)
    assert _schema_race(dup)


def test_schema_race_does_not_hide_real_errors() -> None:
    assert not _schema_race(OperationalError("connect", {}, Exception("unable to open database file")))
    assert not _schema_race(ProgrammingError("SELECT", {}, Exception("syntax error")))
    assert not _schema_race(ValueError("bad url"))


def _open(url: str, barrier: object, out: object) -> None:
    from splitplan.search.store import _rdb_with_retry

    barrier.wait()  # type: ignore[attr-defined]
    try:
        st = _rdb_with_retry(url)
        st.engine.dispose()
        out.put("ok")  # type: ignore[attr-defined]
    except Exception as exc:  # reported to the parent, which fails the test
        out.put(f"{type(exc).__name__}: {exc}")  # type: ignore[attr-defined]


def test_workers_open_one_new_database_together(tmp_path: Path) -> None:
    ctx = mp.get_context("spawn")
    n = 4
    for round_ in range(2):
        url = f"sqlite:///{tmp_path / f'race{round_}.db'}"
        barrier, out = ctx.Barrier(n), ctx.Queue()
        procs = [ctx.Process(target=_open, args=(url, barrier, out)) for _ in range(n)]
        for p in procs:
            p.start()
        got = [out.get(timeout=120) for _ in procs]
        for p in procs:
            p.join(timeout=60)
        assert got == ["ok"] * n
