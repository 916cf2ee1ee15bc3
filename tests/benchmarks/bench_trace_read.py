"""Trace reading speed (not collected by pytest): `python tests/benchmarks/bench_trace_read.py`.

Reports the median of several reads of the Azure conversation trace (../shared) and of a synthetic
one-million-row Azure-format file, plus a million-row reference-format file.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from splitplan.workload import Workload, read_trace, write_trace
from splitplan.workload.readers import AZURE_COLUMNS

REPO = Path(__file__).resolve().parents[2]
AZURE = REPO.parent / "shared" / "data" / "azure-llm-2023"


def timed(path: Path, runs: int) -> tuple[float, int]:
    read_trace(path)  # warm-up (imports, page cache)
    times = []
    n = 0
    for _ in range(runs):
        t0 = time.perf_counter()
        n = read_trace(path).n
        times.append(time.perf_counter() - t0)
    return statistics.median(times), n


def million_rows(d: Path, n: int = 1_000_000) -> tuple[Path, Path]:
    rng = np.random.default_rng(0)
    t = np.cumsum(rng.exponential(1 / 300, n))
    p = rng.integers(1, 8000, n)
    o = rng.integers(1, 2000, n)
    start = np.datetime64("2023-11-16T18:00:00", "ns")
    stamps = np.datetime_as_string(start + (t * 1e9).astype("timedelta64[ns]"), unit="us")
    az = d / "azure_1m.csv"
    with open(az, "w") as fh:
        fh.write(",".join(AZURE_COLUMNS) + "\n")
        fh.writelines(f"{s.replace('T', ' ')},{a},{b}\n" for s, a, b in zip(stamps, p, o, strict=True))
    ref = d / "reference_1m.csv"
    write_trace(Workload(arrival_s=t, prompt_tokens=p, output_tokens=o), ref)
    return az, ref


def main() -> int:
    conv = AZURE / "AzureLLMInferenceTrace_conv.csv"
    if conv.is_file():
        med, n = timed(conv, 15)
        print(f"conversation trace ({n:,} rows): median {med * 1e3:.1f} ms over 15 reads")
    with tempfile.TemporaryDirectory() as d:
        az, ref = million_rows(Path(d))
        for label, path in (("Azure format", az), ("reference format", ref)):
            med, n = timed(path, 5)
            size_mb = path.stat().st_size / 1e6
            print(f"{label} ({n:,} rows, {size_mb:.0f} MB): median {med:.3f} s over 5 reads")
    return 0


if __name__ == "__main__":
    sys.exit(main())
