"""Layer 4: run the discrete-event simulator on one configuration — tables in, SimResult out."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from typing import NamedTuple

import numpy as np

from splitplan.design import BatchPolicy, ClusterConfig
from splitplan.errors import InputError
from splitplan.perf import kv_capacity_bytes
from splitplan.sim.des.signature import (
    STATUS_DEADLOCK,
    STATUS_FAILED,
    STATUS_INTERRUPTED,
    STATUS_OK,
    STATUS_UNSTABLE,
    KernelArgs,
    KernelResult,
    work_arrays,
)
from splitplan.sim.kv_transfer import kv_transfer_s, link_bytes_per_s  # noqa: F401 (sim.des exports them)
from splitplan.sim.result import RequestMetrics, SimResult
from splitplan.sim.scenario import Scenario
from splitplan.slo import (
    METRICS,
    SLO_KEYS,
    SloSpec,
    SloVerdict,
    limit_names,
    percentiles,
    reference_latencies,
    verdict,
)

MIN_ITERATION_S = 1e-6  # extrapolated profile curves must never yield a non-positive time
WAIT_CAPACITY = 4096  # waiting tasks per machine before the run is declared unstable
transfer_times_s = kv_transfer_s  # the name sim.des has exported (the rule: sim/kv_transfer.py)


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


def memory_tables(scenario: Scenario, config: ClusterConfig) -> tuple[np.ndarray, np.ndarray, float]:
    """(capacity, weights) per pool class and the KV bytes per token the kernel counts in.

    The kernel keeps one KV size per request, so memory is counted in KV bytes at the prompt
    pool's KV precision (class 0): the token class's capacity and weights are scaled by
    kv(prompt) / kv(token), which makes `weights + Σ KV ≤ capacity` on a token instance exactly its
    own test at its own precision. Equal precisions scale by 1 (the paper's numbers, unchanged).
    """
    design = config.design
    machines = (design.prompt, design.token)
    for machine in machines:
        kv_capacity_bytes(scenario.model, machine, scenario.weight_bytes_on(machine))
    kv = [scenario.kv_bytes_per_token_on(m) for m in machines]
    caps = np.array([m.memory_bytes for m in machines], dtype=np.float64)
    weights = np.array([scenario.weight_bytes_on(m) for m in machines], dtype=np.float64)
    scale = kv[0] / kv[1]
    if scale != 1.0:
        caps[1] *= scale
        weights[1] *= scale
    return caps, weights, kv[0]


def _gb(value_gb: float) -> str:
    return f"{value_gb:,.0f}" if value_gb >= 100 else f"{value_gb:.3g}"


class FailureChecks(NamedTuple):
    """The kernel's failure checks (signature.KernelArgs) for one run, and what each certifies."""

    metric: np.ndarray  # per check: 0 TTFT, 1 TBT, 2 E2E
    slowdown: np.ndarray  # 1: the bound is a slowdown (× the request's reference), 0: seconds
    scale: np.ndarray
    need: np.ndarray  # requests over the bound that make the percentile certain to exceed it
    next: np.ndarray  # the first check of the next group (one metric and kind, scales ascending)
    names: tuple[str, ...]  # the limit each check bounds (slo.limit_names spelling)


# (prompt tokens, output tokens, reference model) → per-request (TTFT_ref, TBT_ref, E2E_ref) as an
# (n, 3) array: a search simulates one workload many times, and the references cost 20 ms at 360k
# requests. Keyed by identity and kept only for read-only arrays (a workload's are), a few at once.
_REFERENCES: dict[tuple[int, int, int], tuple[object, object, object, np.ndarray]] = {}
_REFERENCES_MAX = 4


def request_references(scenario: Scenario) -> np.ndarray:
    """(n, 3): each request's TTFT, TBT and E2E alone on the reference machine (slo.reference_latencies)."""
    wl = scenario.workload
    perf = scenario.reference_perf()
    pt, ot = wl.prompt_tokens, wl.output_tokens
    key = (id(pt), id(ot), id(perf))
    hit = _REFERENCES.get(key)
    if hit is not None and hit[0] is pt and hit[1] is ot and hit[2] is perf:
        return hit[3]
    out = np.stack(reference_latencies(perf, pt, ot), axis=1)
    out.flags.writeable = False
    if not (np.asarray(pt).flags.writeable or np.asarray(ot).flags.writeable):
        if len(_REFERENCES) >= _REFERENCES_MAX:
            _REFERENCES.pop(next(iter(_REFERENCES)))
        _REFERENCES[key] = (pt, ot, perf, out)
    return out


def failure_checks(spec: SloSpec, n_counted: int, below_headroom: float | None) -> FailureChecks:
    """Checks that stop a run once some SLO's headroom is certain to end below `below_headroom`
    (None: no checks, the run goes to the end).

    Headroom h = limit / value − 1 < below_headroom ⟺ value > limit / (1 + below_headroom) =: B.
    A percentile q of N values by numpy's linear method lies between the sorted values x[i] and
    x[i + 1], i = ⌊q (N − 1)⌋; once N − i + 1 values are known to exceed B, x[i − 1] > B, so the
    percentile does too whatever the values still to come (unfinished requests count as infinitely
    slow, which only adds to them). The one-value slack covers a floating-point ⌊⌋ that lands one
    below; the bound carries a relative 10⁻⁹ so the certified headroom is strictly below. Checks
    are grouped by metric and kind with bounds ascending, so the kernel reads one bound per group
    for a request under them all.
    """
    empty_i, empty_f = np.zeros(0, np.int64), np.zeros(0, np.float64)
    if below_headroom is None or n_counted < 1:
        return FailureChecks(empty_i, empty_i, empty_f, empty_i, empty_i, ())
    if not -1.0 < below_headroom <= 0.0:
        raise ValueError(f"below_headroom must lie in (-1, 0], got {below_headroom}")
    factor = (1.0 + 1e-9) / (1.0 + below_headroom)
    metric, slow, scale, need, names = [], [], [], [], []
    limits = [(k, lim, 1) for k, lim in spec.slowdown.items()]
    limits += [(k, lim, 0) for k, lim in spec.latency_s.items()]
    for (key, lim, is_slow), name in zip(limits, limit_names(spec), strict=True):
        m, _, q = key.partition("_p")
        i = int(np.floor(float(q) / 100.0 * (n_counted - 1)))
        k_need = n_counted - i + 1
        if k_need > n_counted:
            continue  # too few requests for the slack: this percentile is only known at the end
        metric.append(METRICS.index(m))
        slow.append(is_slow)
        scale.append(lim * factor)
        need.append(k_need)
        names.append(name)
    order = sorted(range(len(metric)), key=lambda k: (metric[k], -slow[k], scale[k]))
    group = [(metric[k], slow[k]) for k in order]
    nxt = [
        next((j for j in range(i + 1, len(group)) if group[j] != group[i]), len(group))
        for i in range(len(group))
    ]
    return FailureChecks(
        np.asarray([metric[k] for k in order], np.int64),
        np.asarray([slow[k] for k in order], np.int64),
        np.asarray([scale[k] for k in order], np.float64),
        np.asarray([need[k] for k in order], np.int64),
        np.asarray(nxt, np.int64),
        tuple(names[k] for k in order),
    )


def check_requests_fit(config: ClusterConfig, scenario: Scenario, caps=None, weights=None, kv_tok=None):
    """Refuse a workload with a request whose KV cache, at its last output token, does not fit
    one instance of a pool beside the weights (InputError naming it); returns per request its
    prompt tokens, decode iterations and the KV bytes of both. No pool size changes this, so a
    caller that runs many configurations of one design and workload can check it once up front."""
    if caps is None:
        caps, weights, kv_tok = memory_tables(scenario, config)
    design = config.design
    wl = scenario.workload
    p = wl.prompt_tokens.astype(np.int64)
    otok = wl.output_tokens.astype(np.int64) - 1  # the prompt phase makes the first token
    kvp = np.asarray((p + 1) * kv_tok, dtype=np.float64)
    kvt = np.asarray(otok * kv_tok, dtype=np.float64)
    worst = int(np.argmax(kvp + kvt))
    for c, machine in enumerate((design.prompt, design.token)[: 1 if design.is_baseline else 2]):
        if float(weights[c] + kvp[worst] + kvt[worst]) > caps[c]:
            # Name what outgrows the memory: the prompt itself, or the context the request reaches
            # at its last output token.
            left_gb = max(0.0, float(caps[c] - weights[c])) / 1e9
            need_gb = float(kvp[worst] + kvt[worst]) / 1e9
            what = (
                f"a request of {int(p[worst]):,} prompt tokens"
                if float(weights[c] + kvp[worst]) > caps[c]
                else f"a request of {int(p[worst]):,} prompt and {int(otok[worst]) + 1:,} output tokens"
            )
            raise InputError(
                f"{what} needs {_gb(need_gb)} GB of KV cache, more than the {_gb(left_gb)} GB an "
                f"instance of {machine.name} has left after the weights of {scenario.model.name}: use "
                "a larger tensor parallelism, an fp8 KV cache or a GPU with more memory"
            )
    return p, otok, kvp, kvt


def simulate_des(
    config: ClusterConfig, scenario: Scenario, *, stop_below_headroom: float | None = None
) -> SimResult:
    """Simulate one configuration on the scenario's workload, request by request.

    `stop_below_headroom` (a headroom in (−1, 0]): stop as soon as some SLO is certain to end with
    a headroom below it (`failure_checks`) — a search that only needs the verdict of a clear failure
    saves the rest of the run. Such a result fails its SLOs, its `verdict.headroom` is that bound
    (the true headroom is lower), its percentiles are NaN and `extra["stopped_failing"]` is 1.
    None (the default): every run goes to the end.

    Ctrl-C (or SIGTERM under `sigterm_raises_keyboard_interrupt`) during the simulation stops the
    compiled loop within about a millisecond and raises a clean KeyboardInterrupt (`run_kernel`).
    """
    sim = scenario.sim
    design = config.design
    wl = scenario.workload
    caps, weights, kv_tok = memory_tables(scenario, config)
    p, otok, kvp, kvt = check_requests_fit(config, scenario, caps, weights, kv_tok)
    chunked = design.policy is BatchPolicy.CHUNKED
    n_tokens = int(max(p.max(), sim.max_batch_tokens, sim.chunk_tokens if chunked else 0))
    n_tokens += sim.max_batch_size + 1
    ptab, ttab, tctx, mtab, mctx = _tables(scenario, config, n_tokens, sim.max_batch_size)

    arrivals = np.asarray(wl.arrival_s, dtype=np.float64)
    first_counted = int(np.searchsorted(arrivals, sim.warmup_s, side="left"))
    # the checks count requests from `first_counted` on: only for arrivals in order (always, for a
    # generated or replayed workload; a run without checks does not depend on it)
    ordered = bool(np.all(np.diff(arrivals) >= 0.0))
    checks = failure_checks(scenario.slo, len(p) - first_counted, stop_below_headroom if ordered else None)
    # one row per request: a request's three references share a cache line
    ref = request_references(scenario) if len(checks.metric) else np.zeros((1, 3))
    if design.is_baseline:
        n_machines = config.machines
        cls = np.zeros(n_machines, np.int64)
        tag = np.full(n_machines, 2, np.int64)
        xfer = np.zeros(len(p))
    else:
        n_machines = config.prompt_machines + config.token_machines
        cls = np.r_[np.zeros(config.prompt_machines, np.int64), np.ones(config.token_machines, np.int64)]
        tag = cls.copy()
        xfer = kv_transfer_s(scenario, design, p)

    wait_cap = min(WAIT_CAPACITY, len(p)) + 1
    args = KernelArgs(
        arr=wl.arrival_s,
        p=p,
        otok=otok,
        kvp=kvp,
        kvt=kvt,
        xfer_s=xfer,
        cls=cls,
        tag=tag,
        baseline=design.is_baseline,
        cap=caps,
        weights=weights,
        ptab=ptab,
        ttab=ttab,
        tctx=tctx,
        mtab=mtab,
        mctx=mctx,
        max_batch=sim.max_batch_size,
        max_tokens=sim.max_batch_tokens,
        max_preempt=sim.max_preemptions,
        prompt_full=sim.prompt_full_tokens,
        retry_s=sim.memory_retry_s,
        max_backlog_s=sim.max_backlog_s,
        wait_cap=wait_cap,
        # under chunked prefill a prompt always joins at the next iteration boundary
        prompt_interrupts=chunked
        or sim.prompt_interrupts_decodes == "always"
        or (sim.prompt_interrupts_decodes == "baseline" and design.is_baseline),
        reserve_decode=sim.prompt_reserves_decode_kv,
        chunked=chunked,
        chunk_budget=sim.chunk_tokens,
        decode_first=sim.chunk_decodes_first,
        ref=ref,
        chk_metric=checks.metric,
        chk_slow=checks.slowdown,
        chk_scale=checks.scale,
        chk_need=checks.need,
        chk_next=checks.next,
        first_counted=first_counted,
        **work_arrays(len(p), n_machines, wait_cap, checks=bool(len(checks.metric))),
        stop=np.zeros(1, np.int64),
    ).frozen()
    run = run_kernel(args)
    if run.result.status == STATUS_FAILED and stop_below_headroom is not None:
        return _stopped_result(config, scenario, run, checks, stop_below_headroom)
    result = _result(config, scenario, run, cls)
    if chunked:
        stats = run.result.policy_stats
        result.extra.update(
            {
                "max_chunk_tokens": float(stats[0]),
                "max_chunk_iteration_s": float(stats[1]),
                "chunk_iterations": float(stats[2]),
            }
        )
    return result


class KernelRun(NamedTuple):
    result: KernelResult
    wall_s: float  # the kernel's wall time (no compile, load or thread start)
    cpu_s: float  # CPU time of the thread that ran it (benchmarks on shared machines)


def run_kernel(args: KernelArgs) -> KernelRun:
    """Run the compiled event loop on `args`: its result, wall time and CPU time.

    Interruptible: called from the main thread, the kernel (which releases the GIL) runs in a
    worker thread while the main thread waits, so Ctrl-C — or any exception a signal handler
    raises, e.g. one installed by `sigterm_raises_keyboard_interrupt` — reaches Python at once.
    The waiting thread then sets `args.stop`, waits until the kernel has returned (within
    `STOP_POLL_EVENTS` events, about a millisecond) and re-raises: a clean KeyboardInterrupt, no
    half-finished result and no kernel left running. From other threads (signals only reach the
    main thread) the kernel runs in the calling thread; setting `args.stop` from elsewhere stops
    it too (KeyboardInterrupt). The wall time excludes loading or compiling the kernel (done once
    per process by `_kernel`).

    Why an event and a blocked mask rather than `Thread.join`: a process-directed signal goes to
    any thread that does not block it, and a Python handler only runs once the main thread wakes;
    if the kernel thread took the signal, a main thread blocked in `join` slept until the whole
    run ended. The kernel thread is started with SIGINT and SIGTERM blocked (it inherits the mask
    the main thread holds while starting it), and the main thread waits in slices of
    `_WAIT_SLICE_S`, so a signal taken by any other thread (a library's) is handled within one
    slice. And an interrupted `join` marks the thread finished while it still runs (CPython's
    tstate-lock handling), so completion is an event the worker sets as its last act.
    """
    kernel = _kernel()
    box: dict[str, object] = {}
    done = threading.Event()

    def work() -> None:
        try:
            start, cpu = time.perf_counter(), time.thread_time()
            box["raw"] = kernel(*args)
            box["wall"] = time.perf_counter() - start
            box["cpu"] = time.thread_time() - cpu
        except BaseException as exc:  # pragma: no cover - the kernel raises nothing by design
            box["error"] = exc
        finally:
            done.set()

    if threading.current_thread() is threading.main_thread():
        worker = threading.Thread(target=work, name="splitplan-des-kernel")
        with _signals_blocked():  # the worker inherits the mask; a pending signal waits for us
            worker.start()
        try:
            while not done.wait(_WAIT_SLICE_S):
                pass
        except BaseException:
            args.stop[0] = 1
            while not done.is_set():
                try:
                    done.wait(_WAIT_SLICE_S)
                except BaseException:  # a second Ctrl-C while the kernel stops (≤ ~1 ms): wait
                    continue
            raise
        worker.join()
    else:
        work()
    if "error" in box:  # pragma: no cover
        raise box["error"]  # type: ignore[misc]
    raw = KernelResult._make(box["raw"])  # type: ignore[arg-type]
    if raw.status == STATUS_INTERRUPTED:
        raise KeyboardInterrupt("simulation stopped")
    return KernelRun(raw, float(box["wall"]), float(box["cpu"]))  # type: ignore[arg-type]


# how long the main thread sleeps at a time while the kernel runs: the latency of a signal some
# other thread took (see run_kernel)
_WAIT_SLICE_S = 0.05
_STOP_SIGNALS = frozenset({signal.SIGINT, signal.SIGTERM})


@contextmanager
def _signals_blocked() -> Iterator[None]:
    """SIGINT and SIGTERM held pending in the calling thread within the block (where the platform
    has per-thread signal masks); threads started inside inherit the mask."""
    if not hasattr(signal, "pthread_sigmask"):  # pragma: no cover - Windows
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


@contextmanager
def sigterm_raises_keyboard_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM raises KeyboardInterrupt in the main thread (as Ctrl-C does), so
    a terminated run stops a simulation cleanly like an interrupted one; the previous handler is
    restored on exit. Outside the main thread it does nothing (Python only sets handlers there)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@cache
def _kernel():
    """The compiled event loop, loaded (or compiled, first time only) and warmed once per process.

    The warm-up goes through `KernelArgs.frozen()` like every real call, so it loads the one
    specialization real calls use: `sim_wall_s` never includes compiling or loading.
    """
    from splitplan.sim.des.engine import simulate_kernel

    one = np.ones(1)
    ione = np.ones(1, np.int64)
    tab = np.ones((2, 8))
    warm = KernelArgs(
        arr=np.zeros(1),
        p=ione * 2,
        otok=ione,
        kvp=one,
        kvt=one,
        xfer_s=one,
        cls=np.zeros(1, np.int64),
        tag=np.full(1, 2, np.int64),
        baseline=True,
        cap=np.full(2, 10.0),
        weights=np.zeros(2),
        ptab=np.ones((2, 2, 8)),
        ttab=tab,
        tctx=np.zeros(2),
        mtab=tab,
        mctx=np.zeros(2),
        max_batch=4,
        max_tokens=4,
        max_preempt=4,
        prompt_full=8.0,
        retry_s=1.0,
        max_backlog_s=10.0,
        wait_cap=2,
        prompt_interrupts=True,
        reserve_decode=True,
        chunked=False,
        chunk_budget=512,
        decode_first=True,
        ref=np.ones((1, 3)),
        chk_metric=np.zeros(1, np.int64),
        chk_slow=ione,
        chk_scale=one,
        chk_need=ione,
        chk_next=ione,
        first_counted=0,
        **work_arrays(1, 1, 2, checks=True),
        stop=np.zeros(1, np.int64),
    ).frozen()
    simulate_kernel(*warm)
    return simulate_kernel


def _stopped_result(config, scenario, run: KernelRun, checks: FailureChecks, below: float) -> SimResult:
    """The result of a run the failure checks stopped: a verdict, no percentiles."""
    raw = run.result
    name = checks.names[int(raw.failed_check)]
    nan = {k: float("nan") for k in SLO_KEYS}
    headroom = float(np.nextafter(below, -np.inf))
    completed = int(np.isfinite(raw.e2e_s).sum())
    return SimResult(
        config=config,
        engine="des",
        requests=scenario.workload.n,
        completed=completed,
        slowdown=dict(nan),
        latency_s=dict(nan),
        verdict=SloVerdict(meets=False, binding=name, headroom=headroom),
        stable=True,
        throughput_rps=float("nan"),
        utilization={},
        sim_wall_s=run.wall_s,
        per_request=None,
        extra={
            "events": float(raw.events),
            "end_s": float(raw.end_s),
            "sim_cpu_s": run.cpu_s,
            "stopped_failing": 1.0,
        },
        notes=(
            f"stopped at {float(raw.end_s):.1f} s of simulated time: {name} was certain to end with "
            f"a headroom below {below:+.2f}",
        ),
    )


def _result(config, scenario, run: KernelRun, cls) -> SimResult:
    """The kernel's result as a SimResult."""
    raw = run.result
    status, ttft, e2e, pstart = raw.status, raw.ttft_s, raw.e2e_s, raw.prompt_start_s
    pm, tm, preempt = raw.prompt_machine, raw.token_machine, raw.preemptions
    busy, iters, batch_time = raw.busy_s, raw.iterations, raw.batch_time
    pool_moves, events, t_end = raw.pool_moves, raw.events, raw.end_s
    wl = scenario.workload
    o = wl.output_tokens.astype(np.float64)
    tbt = (e2e - ttft) / o
    refs = request_references(scenario)
    ref_ttft, ref_tbt, ref_e2e = refs[:, 0], refs[:, 1], refs[:, 2]
    sd_ttft, sd_tbt, sd_e2e = ttft / ref_ttft, tbt / ref_tbt, e2e / ref_e2e
    counted = wl.arrival_s >= scenario.sim.warmup_s
    completed = np.isfinite(e2e)
    stable = status == STATUS_OK

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
        STATUS_OK: (),
        STATUS_UNSTABLE: ("unstable: the backlog grew without bound; the run was stopped",),
        STATUS_DEADLOCK: ("deadlock: admitted prompts hold all KV memory and their decodes cannot start",),
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
        sim_wall_s=run.wall_s,
        per_request=per_request,
        extra={
            "events": float(events),
            "pool_moves": float(pool_moves),
            "mean_batch_size": float(batch_time.sum() / max(busy.sum(), 1e-12)),
            "iterations": float(total_iters),
            "end_s": float(t_end),
            "sim_cpu_s": run.cpu_s,
        },
        notes=notes,
    )
