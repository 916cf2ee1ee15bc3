"""Layer 4: run the discrete-event simulator on one configuration — tables in, SimResult out."""

from __future__ import annotations

import time
from functools import cache

import numpy as np

from splitplan.design import BatchPolicy, ClusterConfig
from splitplan.errors import InputError
from splitplan.perf import kv_capacity_bytes
from splitplan.sim.result import RequestMetrics, SimResult
from splitplan.sim.scenario import Scenario
from splitplan.slo import percentiles, reference_latencies, verdict

MIN_ITERATION_S = 1e-6  # extrapolated profile curves must never yield a non-positive time
WAIT_CAPACITY = 4096  # waiting tasks per machine before the run is declared unstable

# Layer-wise transfer hides all but a near-constant tail (SPLITWISE.md §4): ~8 ms on 200 GB/s links
# (A100 machines), ~5 ms on faster ones (H100).
LAYERWISE_SLOW_LINK_S = 0.008
LAYERWISE_FAST_LINK_S = 0.005
FAST_LINK_BYTES_PER_S = 300e9


def _tables(scenario: Scenario, config: ClusterConfig, n_tokens: int, max_batch: int):
    design = config.design
    machines = (design.prompt, design.token)
    ptab = np.empty((2, 2, n_tokens + 1))  # [pool, lone prompt | several prompts, tokens]
    ttab = np.empty((2, max_batch + 1))
    mtab = np.empty((2, n_tokens + 1))
    tctx = np.empty(2)
    mctx = np.empty(2)
    tokens = np.arange(n_tokens + 1, dtype=np.float64)
    batch = np.arange(max_batch + 1, dtype=np.float64)
    probe = 1024.0
    for c, machine in enumerate(machines):
        perf = scenario.perf_model(machine)
        ptab[c, 0] = perf.prompt_time_s(tokens, 1)
        ptab[c, 1] = perf.prompt_time_s(tokens, 2)
        ttab[c] = perf.token_time_s(batch, 0.0)
        mtab[c] = perf.mixed_time_s(tokens, 0.0)
        tctx[c] = float((perf.token_time_s(1.0, probe) - perf.token_time_s(1.0, 0.0)) / probe)
        mctx[c] = float((perf.mixed_time_s(1.0, probe) - perf.mixed_time_s(1.0, 0.0)) / probe)
    np.maximum(ptab, MIN_ITERATION_S, out=ptab)
    np.maximum(ttab, MIN_ITERATION_S, out=ttab)
    np.maximum(mtab, MIN_ITERATION_S, out=mtab)
    return ptab, ttab, tctx, mtab, mctx


def link_bytes_per_s(scenario: Scenario, config: ClusterConfig) -> float:
    if scenario.sim.link_bytes_per_s is not None:
        return float(scenario.sim.link_bytes_per_s)
    d = config.design
    return float(min(d.prompt.type.interconnect_bytes_per_s, d.token.type.interconnect_bytes_per_s))


def transfer_times_s(scenario: Scenario, config: ClusterConfig, prompt_tokens: np.ndarray) -> np.ndarray:
    """KV-cache transfer time per request once its prompt is done (what is not overlapped)."""
    link = link_bytes_per_s(scenario, config)
    serialized = prompt_tokens * scenario.kv_bytes_per_token / link
    if scenario.sim.kv_transfer == "serialized":
        return serialized
    tail = scenario.sim.layerwise_overhead_s
    if tail is None:
        tail = LAYERWISE_FAST_LINK_S if link >= FAST_LINK_BYTES_PER_S else LAYERWISE_SLOW_LINK_S
    layerwise = prompt_tokens >= scenario.sim.layerwise_min_prompt_tokens
    return np.where(layerwise, np.minimum(tail, serialized), serialized)


def simulate_des(config: ClusterConfig, scenario: Scenario) -> SimResult:
    """Simulate one configuration on the scenario's workload, request by request."""
    sim = scenario.sim
    design = config.design
    wl = scenario.workload
    kv_tok = scenario.kv_bytes_per_token
    caps = np.array([design.prompt.memory_bytes, design.token.memory_bytes], dtype=np.float64)
    weights = np.full(2, scenario.weight_bytes)
    for machine in (design.prompt, design.token):
        kv_capacity_bytes(scenario.model, machine, scenario.weight_bytes)

    p = wl.prompt_tokens.astype(np.int64)
    otok = wl.output_tokens.astype(np.int64) - 1  # the prompt phase makes the first token
    kvp = (p + 1) * kv_tok
    kvt = otok * kv_tok
    largest = float(weights[0] + (kvp + kvt).max())
    if largest > caps.min():
        raise InputError(
            f"a request of {int(p[np.argmax(kvp + kvt)])} prompt tokens needs more KV memory than "
            f"a machine has left after the weights of {scenario.model.name}"
        )
    chunked = design.policy is BatchPolicy.CHUNKED
    n_tokens = int(max(p.max(), sim.max_batch_tokens, sim.chunk_tokens if chunked else 0))
    n_tokens += sim.max_batch_size + 1
    ptab, ttab, tctx, mtab, mctx = _tables(scenario, config, n_tokens, sim.max_batch_size)

    if design.is_baseline:
        n_machines = config.machines
        cls = np.zeros(n_machines, np.int64)
        tag = np.full(n_machines, 2, np.int64)
        xfer = np.zeros(len(p))
    else:
        n_machines = config.prompt_machines + config.token_machines
        cls = np.r_[np.zeros(config.prompt_machines, np.int64), np.ones(config.token_machines, np.int64)]
        tag = cls.copy()
        xfer = transfer_times_s(scenario, config, p.astype(np.float64))

    kernel = _kernel()
    policy_stats = np.zeros(3)
    start = time.perf_counter()
    raw = kernel(
        wl.arrival_s,
        p,
        otok,
        kvp,
        kvt,
        xfer,
        cls,
        tag,
        design.is_baseline,
        caps,
        weights,
        ptab,
        ttab,
        tctx,
        mtab,
        mctx,
        sim.max_batch_size,
        sim.max_batch_tokens,
        sim.max_preemptions,
        float(sim.prompt_full_tokens),
        float(sim.memory_retry_s),
        float(sim.max_backlog_s),
        min(WAIT_CAPACITY, len(p)) + 1,
        # under chunked prefill a prompt always joins at the next iteration boundary
        chunked
        or sim.prompt_interrupts_decodes == "always"
        or (sim.prompt_interrupts_decodes == "baseline" and design.is_baseline),
        bool(sim.prompt_reserves_decode_kv),
        chunked,
        int(sim.chunk_tokens),
        bool(sim.chunk_decodes_first),
        policy_stats,
    )
    wall = time.perf_counter() - start
    result = _result(config, scenario, raw, cls, wall)
    if chunked:
        result.extra.update(
            {
                "max_chunk_tokens": float(policy_stats[0]),
                "max_chunk_iteration_s": float(policy_stats[1]),
                "chunk_iterations": float(policy_stats[2]),
            }
        )
    return result


@cache
def _kernel():
    """The compiled event loop, loaded (or compiled, first time only) and warmed once per process.

    Loading numba's cached machine code is process start-up, not simulation: `sim_wall_s` excludes it.
    """
    from splitplan.sim.des.engine import simulate_kernel

    one = np.ones(1)
    ione = np.ones(1, np.int64)
    tab = np.ones((2, 8))
    simulate_kernel(
        np.zeros(1),
        ione * 2,
        ione,
        one,
        one,
        one,
        np.zeros(1, np.int64),
        np.full(1, 2, np.int64),
        True,
        np.full(2, 10.0),
        np.zeros(2),
        np.ones((2, 2, 8)),
        tab,
        np.zeros(2),
        tab,
        np.zeros(2),
        4,
        4,
        4,
        8.0,
        1.0,
        10.0,
        2,
        True,
        True,
        False,
        512,
        True,
        np.zeros(3),
    )
    return simulate_kernel


def _result(config, scenario, raw, cls, wall) -> SimResult:
    """The kernel's raw output (`raw`, in the order simulate_kernel returns it) as a SimResult."""
    (status, ttft, e2e, pstart, pm, tm, preempt, busy, iters, batch_time, pool_moves, events, t_end) = raw
    wl = scenario.workload
    o = wl.output_tokens.astype(np.float64)
    tbt = (e2e - ttft) / o
    ref_ttft, ref_tbt, ref_e2e = reference_latencies(
        scenario.reference_perf(), wl.prompt_tokens, wl.output_tokens
    )
    sd_ttft, sd_tbt, sd_e2e = ttft / ref_ttft, tbt / ref_tbt, e2e / ref_e2e
    counted = wl.arrival_s >= scenario.sim.warmup_s
    completed = np.isfinite(e2e)
    stable = status == 0

    def pct(x: np.ndarray) -> np.ndarray:
        # unfinished requests count as infinitely slow, so they push the tail past any limit
        return np.where(np.isfinite(x), x, np.inf)[counted]

    with np.errstate(invalid="ignore"):
        slow = percentiles(pct(sd_ttft), pct(sd_tbt), pct(sd_e2e))
        lat = percentiles(pct(ttft), pct(tbt), pct(e2e))
    slow = {k: float(v) for k, v in slow.items()}
    lat = {k: float(v) for k, v in lat.items()}
    v = verdict(scenario.slo, slow, lat)
    horizon = max(float(t_end), float(wl.arrival_s[-1]), 1e-9)
    n_prompt_pool = int((cls == 0).sum())
    util = {
        "prompt": float(busy[cls == 0].sum() / (horizon * max(n_prompt_pool, 1))),
        "token": float(busy[cls == 1].sum() / (horizon * max(int((cls == 1).sum()), 1)))
        if not config.design.is_baseline
        else float("nan"),
    }
    if config.design.is_baseline:
        util = {"machines": util["prompt"]}
    notes = {
        0: (),
        1: ("unstable: the backlog grew without bound; the run was stopped",),
        2: ("deadlock: admitted prompts hold all KV memory and their decodes cannot start",),
    }[status]
    per_request = RequestMetrics(
        arrival_s=wl.arrival_s,
        prompt_tokens=wl.prompt_tokens,
        output_tokens=wl.output_tokens,
        ttft_s=ttft,
        tbt_s=tbt,
        e2e_s=e2e,
        queue_s=pstart - wl.arrival_s,
        ttft_slowdown=sd_ttft,
        tbt_slowdown=sd_tbt,
        e2e_slowdown=sd_e2e,
        prompt_machine=pm,
        token_machine=tm,
        preemptions=preempt,
    )
    total_iters = max(int(iters.sum()), 1)
    span = max(float(wl.arrival_s[-1] - wl.arrival_s[0]), 1e-9)
    return SimResult(
        config=config,
        engine="des",
        requests=wl.n,
        completed=int(completed.sum()),
        slowdown=slow,
        latency_s=lat,
        verdict=v,
        stable=stable,
        throughput_rps=float(completed.sum() / span),
        utilization=util,
        sim_wall_s=wall,
        per_request=per_request,
        extra={
            "events": float(events),
            "pool_moves": float(pool_moves),
            "mean_batch_size": float(batch_time.sum() / max(busy.sum(), 1e-12)),
            "iterations": float(total_iters),
            "end_s": float(t_end),
        },
        notes=notes,
    )
