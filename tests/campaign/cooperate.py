"""N identical `splitplan search` processes on one fresh --storage: total simulations and wall time.

    python tests/campaign/cooperate.py [N ...]        (default: 1 2 3)

Prints, per N, the wall time until every process has finished, the simulations each process ran
(from the storage's work board) and their total, which must equal the single-process count; every
process must print the same answer.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ARGS = ["search", "--design", "splitwise-hh", "--design", "splitwise-aa", "--engine", "des"]
ARGS += ["--prompt-range", "1:5", "--token-range", "1:5", "--rate", "20", "--duration", "30", "--json"]


def run(n: int) -> tuple[float, dict[str, int], list[str]]:
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "shared.db"
        env = dict(os.environ, PYTHONPATH=str(ROOT), NUMBA_NUM_THREADS="1")
        t0 = time.perf_counter()
        procs = [
            subprocess.Popen(
                [sys.executable, "-m", "splitplan", *ARGS, "--storage", str(db)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=env,
            )
            for _ in range(n)
        ]
        answers = []
        for p in procs:
            out, err = p.communicate(timeout=1800)
            if p.returncode != 0:
                raise SystemExit(f"a worker failed (exit {p.returncode}): {err.strip()[-300:]}")
            doc = json.loads(out)
            answers.append(
                json.dumps([(r["design"], r["prompt_machines"], r["token_machines"]) for r in doc["results"]])
            )
        wall = time.perf_counter() - t0
        with sqlite3.connect(db) as con:
            rows = con.execute(
                "select owner, count(*) from splitplan_claims where key like '%|point|%' "
                "and result is not null group by owner"
            ).fetchall()
    return wall, dict(rows), answers


def main() -> int:
    ns = [int(a) for a in sys.argv[1:]] or [1, 2, 3]
    single = None
    ok = True
    for n in ns:
        wall, per_owner, answers = run(n)
        total = sum(per_owner.values())
        single = total if single is None else single
        same = len(set(answers)) == 1
        ok &= same and total == single
        shares = ", ".join(str(c) for c in sorted(per_owner.values(), reverse=True))
        print(
            f"{n} process(es): wall {wall:.1f} s, simulations {total} (per process: {shares}), "
            f"same answer in every process: {same}"
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
