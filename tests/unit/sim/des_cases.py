"""Configurations whose per-request DES results are pinned by digests (des_digests.json).

The cases cover what the scheduler's tie-breaks decide: idle fleets where every machine has the
same pending work, borrowing in both directions (mixed pool), baselines' join-the-shortest-queue,
preemptions under a small batch, serialized and layer-wise transfers, transfers that wait for
memory, an unstable and a deadlocked run, and a fleet of hundreds of machines.

Regenerate (only when a change is *meant* to move DES results; say so in the commit):

    PYTHONPATH=. python tests/unit/sim/des_cases.py > tests/unit/sim/des_digests.json
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

from splitplan.catalog import get_model
from splitplan.design import ClusterConfig, get_design
from splitplan.sim.config import SimConfig, load_config, shared_dir
from splitplan.sim.result import SimResult
from splitplan.sim.scenario import Scenario
from splitplan.workload import Workload, make_workload, read_trace

REPO = Path(__file__).resolve().parents[3]
COMPAT = REPO / "examples" / "splitwise-sim-compat.toml"
REFERENCE = shared_dir() / "reference" / "splitwise-sim"


def _split(name: str, n_p: int, n_t: int) -> ClusterConfig:
    return ClusterConfig(design=get_design(name), prompt_machines=n_p, token_machines=n_t)


def _base(name: str, n: int) -> ClusterConfig:
    return ClusterConfig.baseline(get_design(name), n)


def _sc(wl: Workload, model: str = "llama2-70b", **sim) -> Scenario:
    return Scenario(workload=wl, model=get_model(model), sim=SimConfig(**sim))


def _compat() -> Scenario:
    wl = read_trace(REFERENCE / "traces" / "rr_code_70_2min.csv")
    return Scenario(
        workload=wl,
        model=get_model("llama2-70b"),
        perf=str(REFERENCE / "perf_model.csv"),
        sim=load_config(COMPAT),
    )


def _deadlock(reserve: bool) -> Scenario:
    wl0 = make_workload("conversation", rate_rps=70, duration_s=30, seed=2)
    wl = Workload(arrival_s=np.zeros(wl0.n), prompt_tokens=wl0.prompt_tokens, output_tokens=wl0.output_tokens)
    return Scenario(
        workload=wl,
        model=get_model("bloom-176b"),
        sim=SimConfig(
            prompt_reserves_decode_kv=reserve,
            kv_bytes="no_gqa",
            max_backlog_s=1e9,
            weight_bytes={"bloom-176b": 329e9},
        ),
    )


def cases() -> dict[str, tuple[Callable[[], ClusterConfig], Callable[[], Scenario], bool]]:
    """name → (config, scenario, needs ../shared)."""
    coding = lambda: make_workload("coding", rate_rps=40, duration_s=30, seed=7)  # noqa: E731
    conv = lambda: make_workload("conversation", rate_rps=30, duration_s=30, seed=3)  # noqa: E731
    big = lambda: make_workload("coding", rate_rps=700, duration_s=10, seed=1)  # noqa: E731
    return {
        "compat-hh-20p10t": (lambda: _split("splitwise-hh", 20, 10), _compat, True),
        "compat-ha-25p15t": (lambda: _split("splitwise-ha", 25, 15), _compat, True),
        "compat-baseline-h100-30": (lambda: _base("baseline-h100", 30), _compat, True),
        "coding-hh-6p3t": (lambda: _split("splitwise-hh", 6, 3), lambda: _sc(coding()), False),
        "coding-ha-5p4t": (lambda: _split("splitwise-ha", 5, 4), lambda: _sc(coding()), False),
        "coding-baseline-a100-8": (lambda: _base("baseline-a100", 8), lambda: _sc(coding()), False),
        "coding-hh-2p8t-borrow-token": (lambda: _split("splitwise-hh", 2, 8), lambda: _sc(coding()), False),
        "coding-hh-8p1t-borrow-prompt": (lambda: _split("splitwise-hh", 8, 1), lambda: _sc(coding()), False),
        "coding-hh-3p3t-small-batch": (
            lambda: _split("splitwise-hh", 3, 3),
            lambda: _sc(coding(), max_batch_size=8, max_batch_tokens=1024),
            False,
        ),
        "coding-aa-4p4t-serialized-no-reserve": (
            lambda: _split("splitwise-aa", 4, 4),
            lambda: _sc(
                coding(),
                kv_transfer="serialized",
                prompt_reserves_decode_kv=False,
                prompt_interrupts_decodes="baseline",
            ),
            False,
        ),
        "coding-baseline-a100-6-no-interrupt": (
            lambda: _base("baseline-a100", 6),
            lambda: _sc(coding(), prompt_interrupts_decodes="never", max_batch_size=16),
            False,
        ),
        "conversation-hh-4p4t": (lambda: _split("splitwise-hh", 4, 4), lambda: _sc(conv()), False),
        "conversation-aa-3p2t-memory-waits": (
            lambda: _split("splitwise-aa", 3, 2),
            lambda: _sc(conv(), memory_retry_s=0.05),
            False,
        ),
        "conversation-baseline-h100-6": (lambda: _base("baseline-h100", 6), lambda: _sc(conv()), False),
        "unstable-baseline-a100-2": (
            lambda: _base("baseline-a100", 2),
            lambda: _sc(make_workload("coding", rate_rps=200, duration_s=60, seed=1), max_backlog_s=10),
            False,
        ),
        "deadlock-baseline-a100-4": (lambda: _base("baseline-a100", 4), lambda: _deadlock(False), False),
        "reserve-baseline-a100-4": (lambda: _base("baseline-a100", 4), lambda: _deadlock(True), False),
        "fleet-hh-140p60t": (lambda: _split("splitwise-hh", 140, 60), lambda: _sc(big()), False),
        "fleet-hh-100p100t": (lambda: _split("splitwise-hh", 100, 100), lambda: _sc(big()), False),
        "fleet-baseline-h100-200": (lambda: _base("baseline-h100", 200), lambda: _sc(big()), False),
    }


def digest(res: SimResult) -> dict[str, object]:
    """A hash of every per-request output and the run's counters, plus the counters in clear.

    Times are hashed to the microsecond: their last bits differ between CPUs (the compiled
    kernel's and numpy's floating point), while a machine or event chosen differently moves a
    request by far more."""
    pr = res.per_request
    h = hashlib.sha256()
    for arr in (pr.ttft_s, pr.e2e_s, pr.queue_s):
        h.update(np.round(np.ascontiguousarray(arr, dtype=np.float64), 6).tobytes())
    for arr in (pr.prompt_machine, pr.token_machine, pr.preemptions):
        h.update(np.ascontiguousarray(arr).tobytes())
    counters = {k: res.extra[k] for k in ("events", "pool_moves", "iterations")}
    counters |= {k: round(float(res.extra[k]), 6) for k in ("end_s", "mean_batch_size")}
    h.update(json.dumps(counters, sort_keys=True).encode())
    h.update(json.dumps([res.stable, res.completed, list(res.notes)]).encode())
    return {
        "sha256": h.hexdigest(),
        "completed": res.completed,
        "stable": res.stable,
        "events": int(res.extra["events"]),
        "pool_moves": int(res.extra["pool_moves"]),
    }


def main() -> None:
    from splitplan.sim.des import simulate_des

    out = {}
    for name, (cfg, sc, _) in cases().items():
        out[name] = digest(simulate_des(cfg(), sc()))
        print(name, out[name]["events"], out[name]["pool_moves"], file=sys.stderr)
    print(json.dumps(out, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
