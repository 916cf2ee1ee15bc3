"""`splitplan trace generate|stats|convert` as library functions."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from splitplan.errors import InputError
from splitplan.workload import (
    BadRow,
    Workload,
    make_workload,
    scan_trace,
    splitwise_sim_trace,
    write_trace,
)

QUANTILES = (50, 90, 99)
RECIPES = ("splitwise-sim",)


@dataclass(frozen=True, slots=True)
class ColumnStats:
    """Summary of one size column (tokens)."""

    mean: float
    min: int
    max: int
    quantiles: dict[str, float]  # "p50", "p90", "p99"

    def to_json(self) -> dict[str, object]:
        return {"mean": self.mean, "min": self.min, "max": self.max, **self.quantiles}


@dataclass(frozen=True, slots=True)
class TraceStats:
    """What a trace holds: request count, span, mean rate, burstiness and size quantiles."""

    name: str
    requests: int
    duration_s: float
    rate_rps: float
    interarrival_cv: float | None
    prompt_tokens: ColumnStats
    output_tokens: ColumnStats
    prompt_output_spearman: float | None
    skipped_rows: int = 0
    bad_rows: tuple[BadRow, ...] = ()

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "requests": self.requests,
            "duration_s": self.duration_s,
            "rate_rps": self.rate_rps if np.isfinite(self.rate_rps) else None,
            "interarrival_cv": self.interarrival_cv,
            "prompt_tokens": self.prompt_tokens.to_json(),
            "output_tokens": self.output_tokens.to_json(),
            "prompt_output_spearman": self.prompt_output_spearman,
            "skipped_rows": self.skipped_rows,
        }


@dataclass(frozen=True, slots=True)
class TraceWritten:
    """A trace written to `path` (generate or convert) and its statistics."""

    path: str
    stats: TraceStats

    def to_json(self) -> dict[str, object]:
        return {"path": self.path, **self.stats.to_json()}


def _column(x: np.ndarray) -> ColumnStats:
    q = np.percentile(x, QUANTILES)
    return ColumnStats(
        mean=float(np.mean(x)),
        min=int(np.min(x)),
        max=int(np.max(x)),
        quantiles={f"p{p}": float(v) for p, v in zip(QUANTILES, q, strict=True)},
    )


def workload_stats(wl: Workload, *, bad_rows: tuple[BadRow, ...] = ()) -> TraceStats:
    """Statistics of an in-memory workload."""
    gaps = np.diff(wl.arrival_s)
    cv = float(np.std(gaps) / np.mean(gaps)) if len(gaps) > 1 and np.mean(gaps) > 0 else None
    rho = None
    if wl.n > 2 and np.ptp(wl.prompt_tokens) > 0 and np.ptp(wl.output_tokens) > 0:
        from scipy.stats import spearmanr

        rho = float(spearmanr(wl.prompt_tokens, wl.output_tokens)[0])
    return TraceStats(
        name=wl.name,
        requests=wl.n,
        duration_s=wl.duration_s,
        rate_rps=wl.rate_rps,
        interarrival_cv=cv,
        prompt_tokens=_column(wl.prompt_tokens),
        output_tokens=_column(wl.output_tokens),
        prompt_output_spearman=rho,
        skipped_rows=len(bad_rows),
        bad_rows=bad_rows,
    )


def trace_stats(path: str | Path, *, skip_bad_rows: bool = False) -> TraceStats:
    """Statistics of a trace file (Azure, BurstGPT, Mooncake or reference format)."""
    read = scan_trace(path, skip_bad_rows=skip_bad_rows)
    return workload_stats(read.workload, bad_rows=read.bad_rows)


def trace_convert(src: str | Path, out: str | Path, *, skip_bad_rows: bool = False) -> TraceWritten:
    """Any readable trace rewritten in the reference simulator's format."""
    _check_out(out, "OUT")
    _refuse_same_file(src, out, "IN", "OUT")
    read = scan_trace(src, skip_bad_rows=skip_bad_rows)
    write_trace(read.workload, out)
    return TraceWritten(path=str(out), stats=workload_stats(read.workload, bad_rows=read.bad_rows))


def _refuse_same_file(src: str | Path, out: str | Path, src_option: str, out_option: str) -> None:
    """A trace read from one file and written to the same one would be overwritten as it is
    read: refused (a preset name is no file)."""
    if Path(src).is_file() and Path(src).resolve() == Path(out).resolve():
        raise InputError(f"{src_option} and {out_option} are the same file {out}; write the trace elsewhere")


def _check_out(out: str | Path, option: str) -> None:
    from splitplan._io import check_output_path

    check_output_path(out, option, (".csv",))


def trace_generate(
    workload: str,
    out: str | Path,
    *,
    rate_rps: float | None = None,
    duration_s: float | None = None,
    requests: int | None = None,
    arrival: str = "poisson",
    cv: float = 1.0,
    seed: int = 0,
    recipe: str | None = None,
) -> TraceWritten:
    """Generate a trace (see splitplan.workload.make_workload) and write it in the reference format.

    recipe="splitwise-sim" reproduces the reference simulator's own generator instead: `workload` must
    then be an Azure-format CSV path (sizes drawn from its columns); seed and arrival do not apply.
    """
    _check_out(out, "`out`")
    _refuse_same_file(workload, out, "`workload`", "`out`")
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise InputError(f"`seed` must be a whole number ≥ 0, got {seed!r}")
    if recipe is not None:
        if recipe not in RECIPES:
            raise InputError(f"unknown recipe {recipe!r}; choose from {', '.join(RECIPES)}")
        if rate_rps is None or duration_s is None:
            raise InputError("recipe splitwise-sim needs `rate` and `duration`")
        if requests is not None or arrival != "poisson" or cv != 1.0 or seed != 0:
            raise InputError("recipe splitwise-sim takes only `rate`, `duration` and a sizes CSV")
        if not Path(workload).is_file():
            raise InputError(f"recipe splitwise-sim needs an Azure-format CSV path, got {workload!r}")
        wl = splitwise_sim_trace(rate_rps, duration_s, workload)
    else:
        wl = make_workload(
            workload,
            rate_rps=rate_rps,
            duration_s=duration_s,
            requests=requests,
            arrival=arrival,
            cv=cv,
            seed=seed,
        )
    if seed != 0 and wl.meta.get("arrival") == "replay":
        raise InputError(
            "`seed` has no effect: the trace's own timestamps and sizes are replayed as they are"
        )
    write_trace(wl, out)
    return TraceWritten(path=str(out), stats=workload_stats(wl))
