"""Layer 4: the analytic-plus-sampled evaluator — thousands of configurations per second.

Instead of simulating events, it solves the cluster's queueing structure per configuration point
and applies it to a fixed sample of requests drawn from the workload, so the nine slowdown
percentiles come from per-request latencies just as in the discrete-event simulator (DES):

- Prompt pool: join-the-shortest-queue by pending work is modelled as an M/G/c FCFS queue (c =
  prompt machines, service = the prompt iteration of the request), with the Allen–Cunneen mean
  wait and an exponential tail behind the Erlang-C probability of waiting. Each sampled request
  gets a wait quantile from a stratified uniform, so TTFT = wait + prompt time.
- Token pool: the steady-state decode batch per machine N solves Little's law
  N = (λ/T)·E[o − 1]·τ(N) with τ the decode iteration time at batch N (a vectorized bisection);
  memory (KV of prompt + output tokens per resident request) and the batch cap bound N. Decode
  time of a request = KV transfer + a join delay + (o − 1)·τ(N), with a fluctuation term for the
  variability of the batch it shares.
- Baselines (mixed batching): the same machine alternates prompt-priority mixed iterations and
  decode-only ones; the decode batch is the fixed point of token throughput = iteration rate ×
  batch, and each request's decode phase is inflated by the prompt iterations that land in it
  (a Poisson count, normal-approximated per request quantile).
- Overload (utilization ≥ 1) is not an error: the point is marked unstable and its latencies use
  the fluid backlog of a finite trace (wait grows as (ρ − 1)·t), so every number stays finite.

Everything is vectorized over (points × sampled requests) in bounded chunks; the same sample and
the same stratified quantiles are used for every point (common random numbers), so the landscape
is smooth and a point's verdict does not flicker with its neighbours.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from splitplan.design import ClusterConfig, Design
from splitplan.errors import InputError
from splitplan.perf import kv_capacity_bytes
from splitplan.sim._queueing import bisect_increasing, mgc_wait, row_percentiles
from splitplan.sim.result import SimResult
from splitplan.sim.scenario import Scenario
from splitplan.slo import PERCENTILES, SLO_KEYS, reference_latencies, verdict

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]

DEFAULT_SAMPLE_SIZE = 512
CHUNK_ELEMENTS = 1 << 17        # points × requests per chunk: bounds memory at a few MB per array
_SAMPLE_SALT = 0x5A11A          # separates the evaluator's sample stream from the DES's streams
_BASELINE_GRID = 96             # decode-batch grid on which baseline mixed-iteration means are tabulated


@dataclass(frozen=True, slots=True)
class Calibration:
    """Corrections of the queueing approximation, fitted against the DES (see docs in module).

    prompt_wait_scale multiplies the Allen–Cunneen mean wait; token_cv scales the coefficient of
    variation of the decode batch a request sees (0 = a deterministic steady-state batch).
    """

    prompt_wait_scale: float = 1.0
    token_cv: float = 0.0
    join_fraction: float = 0.5
    prompt_full_utilization: float = 0.9


CALIBRATION = Calibration()


@dataclass(frozen=True, slots=True, kw_only=True)
class AnalyticBatch:
    """Per-point results of `evaluate_grid`; every array has one entry per configuration point."""

    design: Design
    scenario: Scenario
    prompt_machines: IntArray
    token_machines: IntArray
    rate_rps: FloatArray
    slowdown: dict[str, FloatArray]
    latency_s: dict[str, FloatArray]
    meets_slo: BoolArray
    stable: BoolArray
    utilization_prompt: FloatArray
    utilization_token: FloatArray
    margin: FloatArray
    cost_usd_per_h: FloatArray
    power_kw: FloatArray
    decode_batch: FloatArray
    sample_size: int
    wall_s: float
    extra: dict[str, FloatArray] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.prompt_machines)

    def result(self, i: int) -> SimResult:
        """Point `i` as a SimResult (engine "analytic"), like the DES returns."""
        if not 0 <= i < len(self):
            raise IndexError(f"point {i} out of range (0..{len(self) - 1})")
        if self.design.is_baseline:
            cfg = ClusterConfig.baseline(self.design, int(self.prompt_machines[i]))
        else:
            cfg = ClusterConfig(design=self.design, prompt_machines=int(self.prompt_machines[i]),
                                token_machines=int(self.token_machines[i]))
        slowdown = {k: float(self.slowdown[k][i]) for k in SLO_KEYS}
        latency = {k: float(self.latency_s[k][i]) for k in SLO_KEYS}
        stable = bool(self.stable[i])
        util = {"prompt": float(self.utilization_prompt[i]), "token": float(self.utilization_token[i])}
        peak = max(util.values())
        rate = float(self.rate_rps[i])
        notes = [f"analytic estimate over {self.sample_size} sampled requests"]
        if not stable:
            notes.append("unstable: utilization ≥ 1, the backlog grows for the whole trace")
        return SimResult(
            config=cfg,
            engine="analytic",
            requests=self.sample_size,
            completed=self.sample_size,
            slowdown=slowdown,
            latency_s=latency,
            verdict=verdict(self.scenario.slo, slowdown, latency),
            stable=stable,
            throughput_rps=rate if stable else rate / max(peak, 1.0),
            utilization=util,
            sim_wall_s=self.wall_s / max(len(self), 1),
            extra={"decode_batch": float(self.decode_batch[i]), "rate_rps": rate,
                   **{k: float(v[i]) for k, v in self.extra.items()}},
            notes=tuple(notes),
        )


# ---------------------------------------------------------------------------------------------
# the request sample and per-request constants


@dataclass(frozen=True, slots=True)
class _Sample:
    p: FloatArray             # prompt tokens
    o: FloatArray             # output tokens
    t_s: FloatArray           # arrival offset within the trace (for the fluid backlog)
    log1mu: FloatArray        # log(1 − u), u stratified uniform for the wait quantile
    z: FloatArray             # stratified standard normal, independent of u
    zcdf: FloatArray          # Φ(z)
    v: FloatArray             # a third stratified uniform (which requests overflow)
    ref_ttft: FloatArray
    ref_tbt: FloatArray
    ref_e2e: FloatArray
    duration_s: float
    base_rate_rps: float


def _draw_sample(scenario: Scenario, n: int | None) -> _Sample:
    from scipy.special import ndtri

    wl = scenario.workload
    size = DEFAULT_SAMPLE_SIZE if n is None else n
    if not isinstance(size, int | np.integer) or isinstance(size, bool) or size < 10:
        raise InputError(f"sample_size must be an integer ≥ 10, got {n!r}")
    rng = np.random.default_rng(np.random.SeedSequence([int(scenario.seed), _SAMPLE_SALT]))
    full = wl.n <= size
    idx = np.arange(wl.n) if full else np.sort(rng.choice(wl.n, size=int(size), replace=False))
    m = len(idx)
    if m < 2:
        raise InputError(f"workload {wl.name!r} needs at least 2 requests for the analytic evaluator")
    p = wl.prompt_tokens[idx].astype(np.float64)
    o = wl.output_tokens[idx].astype(np.float64)
    t = wl.arrival_s[idx] - wl.arrival_s[0]
    u = (rng.permutation(m) + 0.5) / m
    zcdf = (rng.permutation(m) + 0.5) / m
    z = ndtri(zcdf)
    v = (rng.permutation(m) + 0.5) / m
    ref = scenario.reference_perf()
    r_ttft, r_tbt, r_e2e = reference_latencies(ref, p, o)
    duration = max(float(wl.arrival_s[-1] - wl.arrival_s[0]), 1e-9)
    rate = (wl.n - 1) / duration if wl.n > 1 else 1.0
    return _Sample(p, o, t, np.log1p(-u), z, zcdf, v, np.asarray(r_ttft), np.asarray(r_tbt),
                   np.asarray(r_e2e), duration, rate)


def _link_bytes_per_s(scenario: Scenario, design: Design) -> float:
    link = scenario.sim.link_bytes_per_s
    if link is None:
        link = min(design.prompt.type.interconnect_bytes_per_s, design.token.type.interconnect_bytes_per_s)
    return float(link)


def kv_transfer_s(scenario: Scenario, design: Design, prompt_tokens: FloatArray) -> FloatArray:
    """KV-cache transfer time per request from prompt to token machine (SPLITWISE.md §4)."""
    sim = scenario.sim
    link = _link_bytes_per_s(scenario, design)
    serial = prompt_tokens * scenario.kv_bytes_per_token / link
    if sim.kv_transfer == "serialized":
        return serial
    overhead = sim.layerwise_overhead_s
    if overhead is None:
        overhead = 0.008 if link <= 200e9 else 0.005
    return np.where(prompt_tokens >= sim.layerwise_min_prompt_tokens, np.minimum(overhead, serial), serial)


# ---------------------------------------------------------------------------------------------
# public entry points


def evaluate_grid(
    design: Design,
    prompt_machines: npt.ArrayLike,
    token_machines: npt.ArrayLike,
    scenario: Scenario,
    rate_scale: float | npt.ArrayLike = 1.0,
    *,
    sample_size: int | None = None,
    calibration: Calibration | None = None,
) -> AnalyticBatch:
    """Evaluate many configurations of one design at once (baselines: token_machines all 0)."""
    t0 = time.perf_counter()
    cal = CALIBRATION if calibration is None else calibration
    pm = np.atleast_1d(np.asarray(prompt_machines))
    tm = np.atleast_1d(np.asarray(token_machines))
    rs = np.atleast_1d(np.asarray(rate_scale, dtype=np.float64))
    try:
        pm, tm, rs = np.broadcast_arrays(pm, tm, rs)
    except ValueError:
        raise InputError("prompt_machines, token_machines and rate_scale must have matching shapes") from None
    if pm.ndim != 1:
        raise InputError("prompt_machines and token_machines must be 1-D arrays of pool sizes")
    for name, arr in (("prompt_machines", pm), ("token_machines", tm)):
        if arr.size and (not np.all(np.isfinite(arr.astype(np.float64)))
                         or np.any(arr.astype(np.float64) != np.round(arr.astype(np.float64)))):
            raise InputError(f"{name} must be integers")
    pm = pm.astype(np.int64)
    tm = tm.astype(np.int64)
    if not np.all(np.isfinite(rs)) or np.any(rs <= 0):
        raise InputError("rate_scale must be positive and finite")
    if design.is_baseline:
        if np.any(tm != 0) or np.any(pm < 1):
            raise InputError("a baseline design takes machines ≥ 1 as prompt_machines and 0 token machines")
    elif np.any(pm < 1) or np.any(tm < 1):
        raise InputError(f"{design.name} needs ≥ 1 prompt and ≥ 1 token machine at every point")

    # A model that does not fit must fail up front (ModelDoesNotFitError), not yield NaNs.
    cap_prompt = kv_capacity_bytes(scenario.model, design.prompt, scenario.weight_bytes)
    cap_token = kv_capacity_bytes(scenario.model, design.token, scenario.weight_bytes)

    sample = _draw_sample(scenario, sample_size)
    npts = len(pm)
    lam = sample.base_rate_rps * rs
    n = len(sample.p)
    chunk = max(1, CHUNK_ELEMENTS // n)

    out_sd = {k: np.empty(npts) for k in SLO_KEYS}
    out_lat = {k: np.empty(npts) for k in SLO_KEYS}
    stable = np.empty(npts, dtype=bool)
    up = np.empty(npts)
    ut = np.empty(npts)
    nb = np.empty(npts)

    if design.is_baseline:
        ctx = _BaselineContext(scenario, design, sample, cap_prompt)
        run = ctx.evaluate
    else:
        sctx = _SplitContext(scenario, design, sample, cap_token, cal)
        run = sctx.evaluate
    for s in range(0, npts, chunk):
        e = min(npts, s + chunk)
        ttft, tbt, e2e, st, rho_p, rho_t, nbat = run(pm[s:e], tm[s:e], lam[s:e])
        stable[s:e], up[s:e], ut[s:e], nb[s:e] = st, rho_p, rho_t, nbat
        for name, lat, ref in (("ttft", ttft, sample.ref_ttft), ("tbt", tbt, sample.ref_tbt),
                               ("e2e", e2e, sample.ref_e2e)):
            q_lat = row_percentiles(lat, PERCENTILES)
            q_sd = row_percentiles(lat / ref, PERCENTILES)
            for j, pct in enumerate(PERCENTILES):
                out_lat[f"{name}_p{pct}"][s:e] = q_lat[j]
                out_sd[f"{name}_p{pct}"][s:e] = q_sd[j]

    margin = np.full(npts, np.inf)
    for kind, limits in (("slowdown", scenario.slo.slowdown), ("latency", scenario.slo.latency_s)):
        values = out_sd if kind == "slowdown" else out_lat
        for key, limit in limits.items():
            v = values[key]
            h = np.where(v > 0, limit / np.maximum(v, 1e-300) - 1.0, np.inf)
            margin = np.minimum(margin, h)
    meets = stable & (margin >= 0.0)
    d = design
    cost = pm * d.prompt.cost_usd_per_h + tm * d.token.cost_usd_per_h
    power = pm * d.prompt.power_kw + tm * d.token.power_kw
    return AnalyticBatch(
        design=design, scenario=scenario, prompt_machines=pm, token_machines=tm, rate_rps=lam,
        slowdown=out_sd, latency_s=out_lat, meets_slo=meets, stable=stable,
        utilization_prompt=up, utilization_token=ut, margin=margin,
        cost_usd_per_h=cost.astype(np.float64), power_kw=power.astype(np.float64),
        decode_batch=nb, sample_size=n, wall_s=time.perf_counter() - t0,
    )


def simulate_analytic(
    config: ClusterConfig, scenario: Scenario, *, sample_size: int | None = None
) -> SimResult:
    """One configuration through the analytic evaluator, as a SimResult."""
    batch = evaluate_grid(config.design, np.array([config.prompt_machines]),
                          np.array([config.token_machines]), scenario, sample_size=sample_size)
    return batch.result(0)


# ---------------------------------------------------------------------------------------------
# Splitwise: prompt pool → KV transfer → token pool


class _SplitContext:
    """Per-design constants of a Splitwise evaluation (computed once, shared by every chunk)."""

    def __init__(self, scenario: Scenario, design: Design, sample: _Sample, cap_token: float,
                 cal: Calibration) -> None:
        self.s = sample
        self.cal = cal
        sim = scenario.sim
        self.prompt_perf = scenario.perf_model(design.prompt)
        self.token_perf = scenario.perf_model(design.token)
        p = sample.p
        # Prompt service: one prompt iteration of p tokens (prompts above the batch-token cap
        # still run alone in one iteration).
        self.service = np.asarray(self.prompt_perf.prompt_time_s(p))
        es = float(self.service.mean())
        self.es = es
        self.scv = float(self.service.var() / es**2) if es > 0 else 0.0
        self.xfer = kv_transfer_s(scenario, design, p)
        self.dec, self.mean_dec, self.ctx_per_req, self.nmax = _decode_constants(
            scenario, sample, cap_token)
        # Overflow prompts run on borrowed token machines as mixed iterations co-batched with
        # their decodes: tabulate the mean mixed-iteration time over decode batches N.
        self.grid = np.linspace(0.0, 1.0, _BASELINE_GRID) ** 2 * self.nmax
        self.mix_mean = _mixed_means(self.token_perf, p, self.grid, self.ctx_per_req)
        self.mix_solo = np.asarray(self.token_perf.mixed_time_s(p, 0.0))
        self.es_token = float(self.mix_solo.mean())
        self.tau_grid = _tau(self.token_perf, self.grid, self.ctx_per_req)

    def evaluate(self, pm: IntArray, tm: IntArray, lam: FloatArray):
        s, cal = self.s, self.cal
        P = pm.astype(np.float64)
        T = tm.astype(np.float64)
        # --- prompt pool: M/G/c up to the load at which prompt machines turn "full"; the excess
        # overflows to token machines borrowed into the mixed pool.
        offered = lam * self.es
        served = np.minimum(offered, cal.prompt_full_utilization * P)
        excess = offered - served
        overflow = np.divide(excess, offered, out=np.zeros_like(offered), where=offered > 0)
        lam_p = served / self.es
        pw, cond, _ = mgc_wait(lam_p, self.es, self.scv, pm)
        cond = cond * cal.prompt_wait_scale
        logpw = np.log(np.maximum(pw, 1e-300))
        wait = np.maximum(0.0, (logpw[:, None] - s.log1mu[None, :]) * cond[:, None])
        # --- token pool: per machine, lam_x overflow prompts/s as mixed iterations, and a decode
        # batch N with N × iteration rate = decode demand (Little's law, as a fixed point).
        lam_x = excess / self.es / T
        demand = lam * self.mean_dec / T
        decode_rate = _solve_mixed(lam_x, demand, self.grid, self.mix_mean, self.tau_grid, self.nmax)
        nbat, tau, mix_mean, prompt_share, rho_t = decode_rate
        ok = rho_t < 1.0
        rho_p = served / P
        # per-request TTFT: overflowed requests (chosen by a stratified uniform) run on a mixed
        # machine right away, the others queue in the prompt pool
        over_i = s.v[None, :] < overflow[:, None]
        ttft_pool = wait + self.service[None, :]
        ttft_mixed = (0.5 * tau)[:, None] + self.mix_solo[None, :]
        ttft = np.where(over_i, ttft_mixed, ttft_pool)
        # decode phase: o − 1 iterations, K of them mixed (overflow prompts during the phase)
        rate = lam_x + np.maximum(1.0 - prompt_share, 1e-9) / tau
        m = lam_x[:, None] * self.dec[None, :] / rate[:, None]
        k = _poisson_quantile(m, s.z[None, :], s.zcdf[None, :], self.dec[None, :])
        tau_i = tau[:, None] * (1.0 + cal.token_cv / np.sqrt(np.maximum(nbat, 1.0))[:, None] * s.z[None, :])
        join = cal.join_fraction * tau * np.minimum(nbat, 1.0)
        backlog = np.maximum(rho_t - 1.0, 0.0)[:, None] * s.t_s[None, :]
        decode = (self.xfer[None, :] + join[:, None] + (self.dec[None, :] - k) * tau_i
                  + k * mix_mean[:, None] + backlog)
        e2e = ttft + decode
        tbt = decode / s.o[None, :]
        return ttft, tbt, e2e, ok, rho_p, rho_t, nbat


def _decode_constants(
    scenario: Scenario, sample: _Sample, cap: float
) -> tuple[FloatArray, float, float, float]:
    """Decode lengths and the time-weighted context / KV of the requests resident in a batch."""
    p, o = sample.p, sample.o
    dec = np.maximum(o - 1.0, 0.0)
    w = dec / dec.sum() if dec.sum() > 0 else np.full(len(dec), 1.0 / len(dec))
    ctx_per_req = float(np.sum(w * (p + 0.5 * o)))
    kv_per_req = float(np.sum(w * (p + o))) * scenario.kv_bytes_per_token
    nmax = float(max(1.0, min(scenario.sim.max_batch_size, cap / max(kv_per_req, 1.0))))
    return dec, float(dec.mean()), ctx_per_req, nmax


def _mixed_means(perf, p: FloatArray, grid: FloatArray, ctx_per_req: float) -> FloatArray:
    mix = np.asarray(perf.mixed_time_s(p[None, :] + grid[:, None], (grid * ctx_per_req)[:, None]))
    return mix.mean(axis=1)


def _tau(perf, grid: FloatArray, ctx_per_req: float) -> FloatArray:
    b = np.maximum(grid, 1.0)
    return np.asarray(perf.token_time_s(b, b * ctx_per_req))


def _solve_mixed(lam_x: FloatArray, demand: FloatArray, grid: FloatArray, mix_tab: FloatArray,
                 tau_tab: FloatArray, nmax: float):
    """Decode batch N on a machine that also runs lam_x prompt iterations per second.

    Iterations per second R(N) = lam_x + (1 − lam_x·mix(N)) / τ(N); every resident decode gains
    one token per iteration, so N·R(N) = decode demand. Returns (N, τ, mix, prompt share, ρ) with
    ρ = demand / the largest decode throughput the machine sustains (≥ 1: overloaded).
    """

    def throughput(nb: FloatArray) -> FloatArray:
        share = np.minimum(lam_x * np.interp(nb, grid, mix_tab), 1.0)
        return nb * (lam_x + (1.0 - share) / np.interp(nb, grid, tau_tab))

    hi = np.full(len(demand), nmax)
    cap = throughput(hi)
    nbat = bisect_increasing(lambda x: throughput(x) - demand, np.zeros(len(demand)), hi)
    share_hi = lam_x * np.interp(hi, grid, mix_tab)
    rho = np.where((cap > 0) & (share_hi < 1.0), demand / np.maximum(cap, 1e-300), np.inf)
    rho = np.where(demand > 0, rho, np.minimum(share_hi, np.inf))
    tau = np.interp(nbat, grid, tau_tab)
    mix = np.interp(nbat, grid, mix_tab)
    share = np.minimum(lam_x * mix, 1.0)
    return nbat, tau, mix, share, rho


def _poisson_quantile(mean: FloatArray, z: FloatArray, zcdf: FloatArray, upper: FloatArray) -> FloatArray:
    """Per-request quantile of a Poisson count (prompt iterations landing in a decode phase).

    Exact at zero (P(K = 0) = e^−m, which dominates short decodes), a continuous normal
    approximation above; clipped to [0, upper].
    """
    k = np.where(zcdf < np.exp(-mean), 0.0, np.maximum(1.0, mean + np.sqrt(mean) * z))
    return np.minimum(k, upper)


# ---------------------------------------------------------------------------------------------
# Baselines: mixed continuous batching, prompts first


class _BaselineContext:
    def __init__(self, scenario: Scenario, design: Design, sample: _Sample, cap: float) -> None:
        self.s = sample
        self.perf = scenario.perf_model(design.prompt)
        p = sample.p
        self.dec, self.mean_dec, self.ctx_per_req, self.nmax = _decode_constants(scenario, sample, cap)
        # Mean mixed-iteration time (a prompt co-batched with N decodes) and decode-only
        # iteration time, tabulated on a grid of decode batches N.
        self.grid = np.linspace(0.0, 1.0, _BASELINE_GRID) ** 2 * self.nmax
        self.mix_mean = _mixed_means(self.perf, p, self.grid, self.ctx_per_req)
        solo = np.asarray(self.perf.mixed_time_s(p, 0.0))
        self.mix_scv = float(solo.var() / solo.mean() ** 2)
        self.tau_grid = _tau(self.perf, self.grid, self.ctx_per_req)

    def evaluate(self, pm: IntArray, tm: IntArray, lam: FloatArray):
        s = self.s
        N = pm.astype(np.float64)
        lam_m = lam / N
        demand = lam_m * self.mean_dec                      # decode tokens per second per machine
        nbat, tau, mix_mean, rho_p, rho_t = _solve_mixed(lam_m, demand, self.grid, self.mix_mean,
                                                         self.tau_grid, self.nmax)
        ok_p = rho_p < 1.0
        pw, cond, _ = mgc_wait(lam, mix_mean, self.mix_scv, pm)
        logpw = np.log(np.maximum(pw, 1e-300))
        cond_f = np.where(ok_p, cond, 0.0)
        wait = np.maximum(0.0, (logpw[:, None] - s.log1mu[None, :]) * cond_f[:, None])
        fluid = np.maximum(rho_p - 1.0, 0.0)[:, None] * s.t_s[None, :]
        wait = np.where(ok_p[:, None], wait, fluid)
        # a prompt waits for the running decode iteration, then runs co-batched with the decodes
        service = np.asarray(self.perf.mixed_time_s(s.p[None, :] + nbat[:, None],
                                                    (nbat * self.ctx_per_req)[:, None]))
        ttft = wait + 0.5 * tau[:, None] * (nbat > 0)[:, None] + service
        # decode phase: o − 1 iterations, K of them mixed (prompt arrivals during the phase)
        rate = lam_m + np.maximum(1.0 - rho_p, 1e-9) / tau
        m = lam_m[:, None] * self.dec[None, :] / rate[:, None]
        k = _poisson_quantile(m, s.z[None, :], s.zcdf[None, :], self.dec[None, :])
        backlog = np.maximum(rho_t - 1.0, 0.0)[:, None] * s.t_s[None, :]
        decode = (self.dec[None, :] - k) * tau[:, None] + k * mix_mean[:, None] + backlog
        e2e = ttft + decode
        tbt = decode / s.o[None, :]
        return ttft, tbt, e2e, ok_p & (rho_t < 1.0), rho_p, rho_t, nbat


__all__ = ["DEFAULT_SAMPLE_SIZE", "AnalyticBatch", "Calibration", "evaluate_grid", "kv_transfer_s",
           "simulate_analytic"]
