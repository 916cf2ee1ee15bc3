"""Fleet-scale search: `splitplan search --design splitwise-hh --design baseline-h100 --rate R`.

    python tests/benchmarks/bench_search_scale.py [--rates 700,3000] [--repeat 3] [--jobs 1]
        [--design splitwise-hh --design baseline-h100]

Each run is a fresh `python -m splitplan search ... --json` process under `/usr/bin/time -v` (numba
loads its kernel from the cache and Python the package's bytecode, as a user's run would; see
_bytecode.py), with the default (automatic) ranges. Per rate and design it prints the answer, the
DES runs and what limited the range (none expected), and per command the medians over the repeats
of the process CPU time (user + system: the steadier figure on a shared machine), the wall time
and the peak resident memory (max RSS).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _bytecode import compile_package

REPO = Path(__file__).resolve().parents[2]
TIME = "/usr/bin/time"


def run_once(rate: float, designs: list[str], jobs: int) -> tuple[dict, float, float, float]:
    """(search JSON, CPU s, wall s, max RSS MB) of one search process."""
    args = [sys.executable, "-m", "splitplan", "search", "--rate", str(rate), "--jobs", str(jobs), "--json"]
    for d in designs:
        args += ["--design", d]
    with tempfile.NamedTemporaryFile("r", suffix=".time") as tf:
        out = subprocess.run(
            [TIME, "-v", "-o", tf.name, *args],
            cwd=REPO,
            check=True,
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        ).stdout
        stats = tf.read()

    def field(name: str) -> str:
        m = re.search(rf"{re.escape(name)}: (.+)", stats)
        if m is None:
            raise RuntimeError(f"no {name!r} in the output of {TIME} -v")
        return m.group(1).strip()

    cpu = float(field("User time (seconds)")) + float(field("System time (seconds)"))
    parts = [float(x) for x in field("Elapsed (wall clock) time (h:mm:ss or m:ss)").split(":")]
    wall = sum(v * 60 ** (len(parts) - 1 - i) for i, v in enumerate(parts))
    rss_mb = float(field("Maximum resident set size (kbytes)")) / 1024
    return json.loads(out), cpu, wall, rss_mb


def answer(r: dict) -> str:
    if not r["meets_slo"]:
        return "none"
    if r.get("machines") is not None and r.get("prompt_machines") is None:
        body = f"{r['machines']} machines"
    else:
        body = f"{r['prompt_machines']}P+{r['token_machines']}T"
    return f"{body} ${r['cost_usd_per_h']:,.2f}/h"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rates", default="700,3000", help="comma-separated request rates (req/s)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--design", action="append", default=None)
    args = ap.parse_args()
    designs = args.design or ["splitwise-hh", "baseline-h100"]
    if not Path(TIME).exists():
        raise SystemExit(f"{TIME} is needed (GNU time) for the CPU time and peak memory")
    compile_package(REPO)
    print(f"splitplan search --design {' --design '.join(designs)} --rate R --jobs {args.jobs}")
    print(f"medians of {args.repeat} fresh processes; CPU, wall and RSS are per command (all designs)")
    print(
        f"{'R req/s':>8s} {'design':14s} {'answer':>26s} {'DES runs':>8s} {'limited':>8s} "
        f"{'CPU s':>7s} {'wall s':>7s} {'RSS MB':>7s}"
    )
    for rate in (float(r) for r in args.rates.split(",")):
        runs = [run_once(rate, designs, args.jobs) for _ in range(args.repeat)]
        doc = runs[0][0]
        cpu = statistics.median(r[1] for r in runs)
        wall = statistics.median(r[2] for r in runs)
        rss = statistics.median(r[3] for r in runs)
        for res in doc["results"]:
            print(
                f"{rate:8.0f} {res['design']:14s} {answer(res):>26s} {res['des_evaluations']:8d} "
                f"{res.get('limited_by') or '-':>8s} {cpu:7.1f} {wall:7.1f} {rss:7.0f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
