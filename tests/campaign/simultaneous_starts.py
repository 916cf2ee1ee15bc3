"""N processes open one fresh SQLite storage at the same instant; counts the ones that fail.

python tests/campaign/simultaneous_starts.py [N]     (default 50; prints "failures: K of N")
"""

from __future__ import annotations

import multiprocessing as mp
import sys
import tempfile
from pathlib import Path


def _open(db: str, i: int, barrier) -> str:
    barrier.wait()
    try:
        from splitplan.search.evaluate import Decision
        from splitplan.search.store import PointStore

        with PointStore(db, "campaign") as store:
            store.put(f"k{i}", Decision(meets=True, margin=0.1, binding="ttft_p50", slowdown={}))
        return ""
    except BaseException as exc:
        return f"{type(exc).__name__}: {exc}"


def main(n: int) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        db = str(Path(tmp) / "fresh.db")
        ctx = mp.get_context("spawn")
        with ctx.Manager() as mgr:
            barrier = mgr.Barrier(n)
            with ctx.Pool(n) as pool:
                errors = pool.starmap(_open, [(db, i, barrier) for i in range(n)])
        from splitplan.search.store import PointStore

        with PointStore(db, "campaign") as store:
            kept = len(store)
    failed = [e for e in errors if e]
    for e in sorted(set(failed)):
        print(e.splitlines()[0][:200])
    print(f"failures: {len(failed)} of {n}; points stored: {kept} of {n}")
    return 1 if failed or kept != n else 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 50))
