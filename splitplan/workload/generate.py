"""Workloads from a source (a preset name or a trace file) and an arrival process.

Choices, documented because simulators' results depend on them:
- A preset's sizes are drawn from its joint distribution (quantile tables + Gaussian copula).
- A trace file with no rate (and arrival "poisson", the default, or "replay") replays its own
  timestamps, optionally truncated by duration_s / requests. With arrival "replay" and a rate, the
  recorded gaps are rescaled to that mean rate.
- A trace file with a rate and arrival "poisson" or "gamma" gets new arrival times and sizes drawn
  with replacement from its rows as (prompt, output) pairs, which keeps the observed joint
  distribution. (The reference simulator's recipe draws the two columns independently; that recipe
  is `splitwise_sim_trace`.)
- Arrival times and sizes use two independent streams spawned from the seed, so changing the
  duration does not change the sizes of the requests that remain.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt

from splitplan.errors import InputError
from splitplan.workload.arrivals import (
    ARRIVALS,
    _check_positive,
    gamma_arrivals,
    poisson_arrivals,
    replay_arrivals,
)
from splitplan.workload.base import Workload
from splitplan.workload.presets import PRESETS, get_preset
from splitplan.workload.readers import read_trace


def _fmt(x: float) -> str:
    return f"{x:g}"


def _streams(seed: int) -> tuple[np.random.Generator, np.random.Generator]:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise InputError(f"seed must be an integer ≥ 0, got {seed!r}")
    a, b = np.random.SeedSequence(int(seed)).spawn(2)
    return np.random.default_rng(a), np.random.default_rng(b)


def _label(source: str) -> str:
    return source if source in PRESETS else Path(source).stem


def make_workload(
    source: str,
    *,
    rate_rps: float | None = None,
    duration_s: float | None = None,
    requests: int | None = None,
    arrival: str = "poisson",
    cv: float = 1.0,
    seed: int = 0,
) -> Workload:
    """A workload from a preset ("coding", "conversation") or a trace path; see the module doc."""
    if not isinstance(source, (str, Path)) or not str(source):
        raise InputError("workload source must be a preset name or a trace file path")
    source = str(source)
    if arrival not in ARRIVALS:
        raise InputError(f"unknown arrival process {arrival!r}; choose from {', '.join(ARRIVALS)}")
    _check_positive("rate_rps", rate_rps)
    _check_positive("duration_s", duration_s)
    _check_positive("cv", cv, required=True)
    if requests is not None and (
        isinstance(requests, bool) or not isinstance(requests, (int, np.integer)) or requests < 1
    ):
        raise InputError(f"requests must be an integer ≥ 1, got {requests!r}")
    if arrival != "gamma" and cv != 1.0:
        raise InputError("cv applies only to arrival 'gamma'")
    rng_t, rng_s = _streams(seed)
    is_preset = source in PRESETS
    trace: Workload | None = None
    if not is_preset:
        if not Path(source).exists():
            raise InputError(
                f"unknown workload {source!r}: not a preset ({', '.join(sorted(PRESETS))}) "
                "nor an existing trace file"
            )
        trace = read_trace(source)
    limit = (f"{_fmt(duration_s)}s" if duration_s is not None else "") + (
        f"{'/' if duration_s is not None else ''}{requests}req" if requests is not None else ""
    )
    meta = {"source": source, "arrival": arrival, "seed": str(seed)}

    if trace is not None and (arrival == "replay" or (rate_rps is None and arrival == "poisson")):
        t = replay_arrivals(trace.arrival_s, rate_rps=rate_rps, duration_s=duration_s, requests=requests)
        if len(t) == 0:
            raise InputError(f"no requests of {source} arrive within {duration_s} s")
        n = len(t)
        name = (
            _label(source)
            + (f"@{_fmt(rate_rps)}rps" if rate_rps is not None else "")
            + (f"/{limit}" if limit else "")
        )
        meta["arrival"] = "replay"
        return Workload(
            arrival_s=t,
            prompt_tokens=trace.prompt_tokens[:n].copy(),
            output_tokens=trace.output_tokens[:n].copy(),
            name=name,
            meta=meta,
        )
    if is_preset and arrival == "replay":
        raise InputError(f"preset {source!r} has no timestamps to replay; use arrival poisson or gamma")
    if rate_rps is None:
        if trace is None:
            raise InputError(f"a rate (rate_rps) is required to generate arrivals for preset {source!r}")
        rate_rps = trace.rate_rps  # gamma on a trace without a rate: keep the trace's mean rate
        if not np.isfinite(rate_rps):
            raise InputError(f"cannot infer a rate from {source}: all requests arrive at the same time")
    if duration_s is None and requests is None:
        raise InputError("give a duration (duration_s) or a request count (requests)")
    if arrival == "gamma":
        t = gamma_arrivals(rate_rps, cv, rng_t, duration_s=duration_s, requests=requests)
        meta["cv"] = _fmt(cv)
    else:
        t = poisson_arrivals(rate_rps, rng_t, duration_s=duration_s, requests=requests)
    if len(t) == 0:
        raise InputError(
            f"no request arrives within {duration_s} s at {rate_rps} req/s; raise the rate or the duration"
        )
    prompt, output = sample_requests(trace if trace is not None else source, len(t), rng_s)
    name = f"{_label(source)}@{_fmt(rate_rps)}rps/{limit}" + (
        f"+gamma(cv={_fmt(cv)})" if arrival == "gamma" else ""
    )
    meta["rate_rps"] = _fmt(rate_rps)
    return Workload(
        arrival_s=t,
        prompt_tokens=prompt,
        output_tokens=output,
        name=name,
        meta=meta,
        target_rate_rps=float(rate_rps),
    )


def sample_requests(
    source: str | Path | Workload,
    n: int,
    rng: np.random.Generator,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """`n` (prompt, output) size pairs from a preset's joint distribution or a trace's rows.

    A trace (path or Workload) is sampled by rows with replacement, keeping each pair together.
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise InputError(f"sample count must be an integer ≥ 0, got {n!r}")
    if isinstance(source, Workload):
        trace = source
    elif str(source) in PRESETS:
        return get_preset(str(source)).sample_sizes(int(n), rng)
    else:
        if not Path(source).exists():
            raise InputError(
                f"unknown workload {source!r}: not a preset ({', '.join(sorted(PRESETS))}) "
                "nor an existing trace file"
            )
        trace = read_trace(source)
    idx = rng.integers(0, trace.n, size=int(n))
    return trace.prompt_tokens[idx], trace.output_tokens[idx]


def splitwise_sim_trace(
    rate_rps: float, duration_s: float, sizes_csv: str | Path, *, draws: int = 1_000_000, seed: int = 0
) -> Workload:
    """The reference simulator's evaluation-trace recipe, reproduced draw for draw.

    numpy's legacy generator seeded with 0: `draws` exponential gaps of mean 1/rate, cumulated; then
    `draws` uniform row indices for prompt sizes and another `draws` for output sizes (drawn
    independently) from an Azure-format CSV; only arrivals below duration_s are kept.
    """
    _check_positive("rate_rps", rate_rps, required=True)
    _check_positive("duration_s", duration_s, required=True)
    sizes = read_trace(sizes_csv)
    rs = np.random.RandomState(seed)  # the recipe's legacy stream; never the global one
    t = np.cumsum(rs.exponential(1.0 / rate_rps, size=draws))
    pi = rs.randint(0, sizes.n, size=draws)
    oi = rs.randint(0, sizes.n, size=draws)
    keep = t < duration_s
    if keep.all():
        raise InputError(f"{draws} draws at {rate_rps} req/s do not cover {duration_s} s")
    n = int(np.count_nonzero(keep))
    if n == 0:
        raise InputError(f"no request arrives within {duration_s} s at {rate_rps} req/s")
    return Workload(
        arrival_s=t[:n],
        prompt_tokens=sizes.prompt_tokens[pi[:n]],
        output_tokens=sizes.output_tokens[oi[:n]],
        name=f"splitwise-sim-{Path(sizes_csv).stem}@{_fmt(rate_rps)}rps/{_fmt(duration_s)}s",
        meta={"source": str(sizes_csv), "arrival": "splitwise-sim", "seed": str(seed)},
        target_rate_rps=float(rate_rps),
    )
