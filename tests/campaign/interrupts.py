"""Interrupts at random moments of DES-heavy runs (SIGINT and SIGTERM): exit codes, tracebacks, and
whether the partial table lies beside an intact destination.

    python tests/campaign/interrupts.py [N]     (default 30; SHOW_FAILURES=1 prints their stderr)

A DES search writes to --out over an existing complete file and keeps its work in --storage; it
is interrupted after a random 2–12 s. Pass: exit 130, no traceback, one stderr line, the
destination unchanged, and X.partial.parquet readable whenever the line says it was written.
Interrupts that land before any DES run finished end as exit 130 with "nothing was written".
"""

from __future__ import annotations

import hashlib
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[2]


def one(seed: int, tmp: Path) -> str:
    rnd = random.Random(seed)
    out = tmp / f"points{seed}.parquet"
    pq.write_table(pa.table({"complete": [1, 2, 3]}), out)
    before = hashlib.sha256(out.read_bytes()).hexdigest()
    args = [sys.executable, "-m", "splitplan", "search", "--design", "splitwise-hh", "--engine", "des"]
    # long enough (about 30 s of DES runs) that every signal at 2–12 s lands inside the run
    args += ["--prompt-range", "1:12", "--token-range", "1:12", "--rate", "30", "--duration", "120"]
    args += ["--out", str(out), "--storage", str(tmp / f"s{seed}.db")]
    env = dict(os.environ, PYTHONPATH=str(ROOT), NUMBA_NUM_THREADS="1")
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    time.sleep(rnd.uniform(2.0, 12.0))
    sig = signal.SIGINT if seed % 2 == 0 else signal.SIGTERM
    p.send_signal(sig)
    try:
        _out, err = p.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        p.kill()
        return "hang"
    lines = [ln for ln in err.splitlines() if ln.strip()]
    if os.environ.get("SHOW_FAILURES") and ("Traceback" in err or p.returncode != 130 or len(lines) != 1):
        print(f"--- seed {seed} ({sig.name}) exit {p.returncode}:\n{err}", file=sys.stderr)
    if "Traceback" in err:
        return "traceback"
    if p.returncode == 0:
        return "finished before the signal"
    if p.returncode != 130:
        return f"exit {p.returncode}"
    if len(lines) != 1:
        return "multi-line"
    if hashlib.sha256(out.read_bytes()).hexdigest() != before:
        return "destination changed"
    partial = out.with_name(out.stem + ".partial.parquet")
    if "partial" in lines[0]:
        if pq.read_table(partial).num_rows < 1:
            return "empty partial"
        return "pass: partial written"
    return "pass: nothing written" if "no output file" in lines[0] else f"pass: {lines[0][:60]}"


def main() -> int:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    with tempfile.TemporaryDirectory() as tmp:
        tally = Counter(one(i, Path(tmp)) for i in range(n))
    for k, v in sorted(tally.items()):
        print(f"{k}: {v}")
    return 0 if all(k.startswith("pass") or k.startswith("finished") for k in tally) else 1


if __name__ == "__main__":
    sys.exit(main())
