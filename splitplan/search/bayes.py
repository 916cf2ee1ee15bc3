"""Layer 5: Optuna search for spaces beyond two dimensions (GPU types, continuous power caps, counts).

Trials are asked and told in this process, in batches evaluated by the analytic screen (the cheap
first pass); SLO and budget violations are reported to a constrained TPE sampler. The best
analytically feasible configurations are then confirmed with the DES in order of objective.

Resume: every batch uses a sampler seeded by (seed, batch index), and a batch's trials are all
asked before any is told, so the sampler only ever sees whole batches of history. A rerun with the
same storage finishes an incomplete batch (evaluating only its untold trials, or re-asking a batch
whose asking was cut short) and continues; the answer equals an uninterrupted run's.
"""

from __future__ import annotations

import datetime
import hashlib
import math
import os
import socket
import uuid
from typing import Any

import numpy as np

from splitplan.catalog import get_machine_type
from splitplan.design import Design
from splitplan.search.context import SearchContext, call
from splitplan.search.grid import decide_points
from splitplan.search.objective import Engine, Objective, rank_key
from splitplan.search.problem import DesignSpace, PoolSpace
from splitplan.search.ranges import explain_limits
from splitplan.search.rates import analytic_rates, bisect_many
from splitplan.search.result import (
    DecidedBy,
    DesignResult,
    PointRecord,
    des_record,
    empty_result,
    point_record,
    result_from_record,
)

BATCH = 16
STALE_S = 600.0  # a RUNNING trial of another host older than this is taken over
OWNERLESS_GRACE_S = 30.0
CONFIRM_GROUP = 2  # DES confirmations per round; fixed so results do not depend on --jobs


def _study_name(ctx: SearchContext, space: DesignSpace) -> str:
    pb = ctx.problem
    h = hashlib.sha256(
        repr(
            (
                space,
                pb.objective,
                pb.power_budget_kw,
                pb.cost_budget_usd_per_h,
                pb.engine,
                pb.seed,
                pb.rate_tol,
            )
        ).encode()
    ).hexdigest()[:12]
    return f"splitplan-{ctx.store.fingerprint}-{space.name}-{h}"


def _suggest_pool(
    trial: Any, which: str, pool: PoolSpace, machines: tuple[int, int]
) -> tuple[str, float, int, tuple[Any, ...]]:
    """One pool's GPU, power cap, machine count and instance (TP, weight and KV precision); a
    fixed dimension is not asked of the trial."""
    gpu = trial.suggest_categorical(f"{which}_gpu", list(pool.gpus)) if len(pool.gpus) > 1 else pool.gpus[0]
    lo, hi = pool.power_cap
    cap = trial.suggest_float(f"{which}_power_cap", lo, hi) if lo < hi else lo
    n = trial.suggest_int(f"{which}_machines", *machines) if machines[0] < machines[1] else machines[0]
    instance = tuple(
        trial.suggest_categorical(f"{which}_{dim}", list(values)) if len(values) > 1 else values[0]
        for dim, values in _instance_dims(pool)
    )
    return gpu, cap, n, instance


def _instance_dims(pool: PoolSpace) -> tuple[tuple[str, tuple[Any, ...]], ...]:
    return (("tp", pool.tps), ("precision", pool.precisions), ("kv_precision", pool.kv_precisions))


def _suggest(trial: Any, space: DesignSpace) -> tuple[Design, int, int]:
    pg, pc, p, pi = _suggest_pool(trial, "prompt", space.prompt, space.prompt_range)
    if space.baseline:
        d = space.design(pg, pg, pc, pc, prompt_instance=pi)  # type: ignore[arg-type]
        return d, _on_node_budget(p, space.prompt, d.prompt.tensor_parallel, space.prompt_range), 0
    tg, tc, t, ti = _suggest_pool(trial, "token", space.token, space.token_range)
    d = space.design(pg, tg, pc, tc, prompt_instance=pi, token_instance=ti)  # type: ignore[arg-type]
    p = _on_node_budget(p, space.prompt, d.prompt.tensor_parallel, space.prompt_range)
    return d, p, _on_node_budget(t, space.token, d.token.tensor_parallel, space.token_range)


def _on_node_budget(n: int, pool: PoolSpace, tp: int, rng: tuple[int, int]) -> int:
    """A trial's count is in instances of the pool's smallest TP; a larger TP gets the instances of
    the same GPUs (rounded up), so the sampler compares TPs on one scale (instances/instances.py)."""
    if len(pool.tps) < 2:
        return n
    smallest = min(t or get_machine_type(g).gpus for g in pool.gpus for t in pool.tps)
    return max(rng[0], -(-n * smallest // tp))


def _distributions(space: DesignSpace) -> dict[str, Any]:
    """The search dimensions, given to `ask` so a trial's parameters are drawn when it is asked
    (not lazily when evaluated): an interrupted batch then resumes with the same parameters."""
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    out: dict[str, Any] = {}
    pools = [("prompt", space.prompt, space.prompt_range)]
    if not space.baseline:
        pools.append(("token", space.token, space.token_range))
    for name, pool, rng in pools:
        if len(pool.gpus) > 1:
            out[f"{name}_gpu"] = CategoricalDistribution(list(pool.gpus))
        if pool.power_cap[0] < pool.power_cap[1]:
            out[f"{name}_power_cap"] = FloatDistribution(*pool.power_cap)
        if rng[0] < rng[1]:
            out[f"{name}_machines"] = IntDistribution(*rng)
        for dim, values in _instance_dims(pool):
            if len(values) > 1:
                out[f"{name}_{dim}"] = CategoricalDistribution(list(values))
    return out


def _constraints(frozen: Any) -> list[float]:
    return list(frozen.user_attrs.get("constraints", [1.0]))


PENALTY = 1e6


def _penalized(value: float, cons: list[float], objective: Objective) -> float:
    """The value told to the sampler: violations rank below every feasible point, graded by size
    (the constraints are reported too; the penalty keeps TPE's good/bad split meaningful)."""
    viol = sum(max(0.0, c) for c in cons)
    if viol <= 0:
        return value
    viol = min(viol, 1e3)
    return -viol if objective.maximize else PENALTY * (1.0 + viol)


def _set_constraints(trial: Any, cons: list[float]) -> None:
    """Report constraints to the sampler (Optuna ≥ 5: set_constraint) and keep a copy we read back."""
    if "constraints" in trial.user_attrs:
        return  # set before an interruption; Optuna refuses to overwrite constraints
    trial.set_user_attr("constraints", cons)
    if hasattr(trial, "set_constraint"):
        for i, c in enumerate(cons):
            trial.set_constraint(f"c{i}", float(c))


def _evaluate(ctx: SearchContext, space: DesignSpace, trial: Any) -> tuple[float, list[float]]:
    """Analytic value and constraints (≤ 0 satisfied) of one asked trial."""
    pb = ctx.problem
    design, p, t = _suggest(trial, space)
    cost = float(design.cost_usd_per_h(p, t))
    power = float(design.power_kw(p, t))
    cons = []
    if pb.power_budget_kw is not None:
        cons.append(power / pb.power_budget_kw - 1.0)
    if pb.cost_budget_usd_per_h is not None:
        cons.append(cost / pb.cost_budget_usd_per_h - 1.0)
    if pb.objective is Objective.THROUGHPUT:
        rate = float(analytic_rates(ctx.evaluator, design, [(p, t)], pb.rate_tol)[0])
        cons.append(0.0 if rate > 0 else 1.0)
    else:
        rate = 1.0
        m = float(ctx.evaluator.screen(design, np.array([p]), np.array([t]), 1.0).margin[0])
        cons.append(-m if math.isfinite(m) else 1e6)
    return float(pb.objective.score(cost, power, rate)), cons


def _owner_token() -> str:
    """Who is running a trial: host, process id and a per-run nonce (an in-process rerun after
    Ctrl-C has the same pid but a new nonce)."""
    return f"{socket.gethostname()}|{os.getpid()}|{uuid.uuid4().hex}"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _is_stale(frozen: Any, me: str) -> bool:
    """A RUNNING trial nobody is working on: its owner's process is gone (same host), it belongs to
    an earlier run of this process, or (another host) it has been running for over STALE_S."""
    owner = str(frozen.user_attrs.get("owner", ""))
    host, pid, nonce = [*owner.split("|"), "", "", ""][:3]
    my_host, my_pid, my_nonce = me.split("|")
    started = frozen.datetime_start
    age_s = math.inf if started is None else (datetime.datetime.now() - started).total_seconds()
    if not owner:
        # its asker sets the owner right after asking; give it that moment before taking over
        return age_s > OWNERLESS_GRACE_S
    if host == my_host:
        if pid == my_pid:
            return nonce != my_nonce
        return not _pid_alive(int(pid))
    return age_s > STALE_S


def _sampler(pb: Any, number: int) -> Any:
    """A sampler seeded by (seed, trial number): a trial's parameters depend only on the seed, its
    number and the history told before its batch — so a resumed batch draws what the uninterrupted
    run drew, and workers sharing a study draw different trials."""
    import optuna

    seed = int.from_bytes(hashlib.sha256(f"{pb.seed}:{number}".encode()).digest()[:4], "little")
    return optuna.samplers.TPESampler(
        seed=seed, multivariate=True, n_startup_trials=min(20, max(pb.trials // 4, 4))
    )


def _run_trials(ctx: SearchContext, space: DesignSpace) -> Any:
    """Ask/tell in batches of BATCH: all trials of a batch are asked (parameters drawn at ask time)
    before any is evaluated and told, so the sampler's history only ever grows by whole batches."""
    import optuna
    from optuna.trial import TrialState

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    pb = ctx.problem
    me = _owner_token()
    direction = pb.objective.direction
    study = optuna.create_study(
        storage=ctx.store.optuna_storage,
        study_name=_study_name(ctx, space),
        direction=direction,
        load_if_exists=True,
    )
    if ctx.store.optuna_storage is not None:
        ctx.store.optuna_storage.set_study_system_attr(
            study._study_id,
            "splitplan:values",
            "analytic screen (penalized where a constraint fails), not DES-verified: the search's "
            "answer is its study splitplan-…-answer-…",
        )
    # trials asked by an interrupted run: their parameters are known; finish their batch
    pending = [
        optuna.trial.Trial(study, fr._trial_id)
        for fr in study.get_trials(deepcopy=False)
        if fr.state == TrialState.RUNNING and _is_stale(fr, me)
    ]
    for tr in pending:
        tr.set_user_attr("owner", me)
    dists = _distributions(space)
    if ctx.progress:
        ctx.progress.add(pb.trials)
    while True:
        n_done = sum(tr.state == TrialState.COMPLETE for tr in study.get_trials(deepcopy=False))
        if n_done >= pb.trials and not pending:
            break
        batch = list(pending)
        pending = []
        want = min(BATCH, max(0, pb.trials - n_done)) - len(batch)
        for _ in range(max(0, want)):
            study.sampler = _sampler(pb, len(study.get_trials(deepcopy=False)))
            tr = study.ask(dists)
            tr.set_user_attr("owner", me)
            batch.append(tr)
        for tr in batch:
            if "value" in tr.user_attrs:
                continue  # evaluated before an interruption, only the tell was missing
            value, cons = _evaluate(ctx, space, tr)
            _set_constraints(tr, cons)
            tr.set_user_attr("value", value)
        for tr in batch:
            value = float(tr.user_attrs["value"])
            study.tell(tr, _penalized(value, _constraints(tr), pb.objective))
        if ctx.progress:
            ctx.progress.advance(len(batch))
        if not batch:
            break
    return study


def _config_of(space: DesignSpace, params: dict[str, Any]) -> tuple[Design, int, int]:
    class _Fixed:
        def suggest_categorical(self, name: str, *_args: Any) -> Any:
            return params[name]

        suggest_float = suggest_int = suggest_categorical

    return _suggest(_Fixed(), space)


def optuna_space(ctx: SearchContext, space: DesignSpace) -> tuple[DesignResult, list[PointRecord]]:
    """Optuna trials (analytic), then DES confirmation of the best, in objective order."""
    from optuna.trial import TrialState

    pb = ctx.problem
    study = _run_trials(ctx, space)
    trials = [tr for tr in study.get_trials(deepcopy=False) if tr.state == TrialState.COMPLETE]
    feasible = [tr for tr in trials if all(c <= 0 for c in _constraints(tr))]
    throughput = pb.objective is Objective.THROUGHPUT
    seen: set[tuple[Any, ...]] = set()
    cands: list[tuple[Design, int, int, float]] = []
    for tr in feasible:
        design, p, t = _config_of(space, tr.params)
        cfg_key = (design.prompt, design.token, p, t)
        if cfg_key not in seen:
            seen.add(cfg_key)
            cands.append((design, p, t, _value(tr)))
    # the one tie-break rule (search.objective), as the grid ranks its points
    cands.sort(key=lambda c: _point_rank(pb.objective, c[0], c[1], c[2], c[3] if throughput else 1.0))
    records: list[PointRecord] = []
    for tr in trials:
        design, p, t = _config_of(space, tr.params)
        c = _constraints(tr)
        rate = _value(tr) if throughput else 1.0
        records.append(
            point_record(
                space=space.name,
                design=design,
                prompt=p,
                token=t,
                rate_rps=float(rate) * pb.rate_rps,
                within_budget=all(x <= 0 for x in c[:-1]),
                analytic_margin=math.nan if throughput else -c[-1],
                meets=all(x <= 0 for x in c),
                decided_by=DecidedBy.ANALYTIC,
            )
        )
    if pb.engine is Engine.ANALYTIC or not cands:
        if not cands:  # nothing passed the screen: the closest point it saw says why
            empty = empty_result(space.name, space.design(), des_evaluations=0, method="optuna")
            return explain_limits(pb, space, empty, records), records
        best = min(range(len(records)), key=lambda i: _rank(records[i], pb.objective))  # first of ties
        return result_from_record(
            records[best], baseline=space.baseline, des_evaluations=0, method="optuna"
        ), records
    cands = cands[: pb.confirm_top]
    n_des0 = ctx.des_evaluations
    step = CONFIRM_GROUP
    chosen: PointRecord | None = None
    chosen_cfg: tuple[Design, int, int] | None = None
    tasks: list[tuple[Any, ...]]
    if throughput:
        tasks = [(bisect_many, ctx.cached(space.name), d, [(p, t)], [v], pb.rate_tol) for d, p, t, v in cands]
        outs = ctx.map(call, tasks, lambda res: res[1])
        best_key: tuple[float, ...] | None = None
        for (d, p, t, _v), (per, _fresh) in zip(cands, outs, strict=True):
            f, dec, probes = per[0]
            for fp, dp in sorted(probes.items()):
                rec = des_record(space.name, d, p, t, fp * pb.rate_rps, dp)
                records.append(rec)
                if f > 0 and fp == f and dec is not None:
                    key = _point_rank(pb.objective, d, p, t, f)
                    if best_key is None or key < best_key:
                        best_key, chosen = key, rec
    else:
        for i in range(0, len(cands), step):
            group = cands[i : i + step]
            tasks = [(decide_points, ctx.cached(space.name), d, [(p, t)], 1.0) for d, p, t, _v in group]
            outs = ctx.map(call, tasks, lambda res: res[1])
            for (d, p, t, _v), (seen_pts, _fresh) in zip(group, outs, strict=True):
                dec = seen_pts[(p, t)]
                rec = des_record(space.name, d, p, t, pb.rate_rps, dec)
                records.append(rec)
                if dec.meets and chosen is None:
                    chosen, chosen_cfg = rec, (d, p, t)
            if chosen is not None:
                break
        if chosen is None:
            # every analytic candidate failed in the DES (the screen was optimistic): climb from the
            # cheapest one towards more machines, in objective order, until the DES passes
            found = _escalate(ctx, space, *cands[0][:3], records)
            if found is not None:
                chosen, chosen_cfg = found
        if chosen_cfg is not None and chosen is not None:
            chosen = _polish(ctx, space, *chosen_cfg, chosen, records)
    n_des = ctx.des_evaluations - n_des0
    if chosen is None:
        empty = empty_result(space.name, space.design(), des_evaluations=n_des, method="optuna")
        return explain_limits(pb, space, empty, records), records
    return result_from_record(
        chosen, baseline=space.baseline, des_evaluations=n_des, method="optuna"
    ), records


POLISH_STEPS = ((-1, 0), (0, -1), (-1, 1), (1, -1), (-2, 1), (1, -2), (-1, -1))
POLISH_MAX = 30
ESCALATE_MAX = 40  # DES runs spent climbing from a failed candidate before giving up


def _escalate(
    ctx: SearchContext, space: DesignSpace, design: Design, p: int, t: int, records: list[PointRecord]
) -> tuple[PointRecord, tuple[Design, int, int]] | None:
    """Cheapest DES-feasible point among those with at least (p, t) machines (same pools), tried in
    objective order; bounded by ESCALATE_MAX DES runs."""
    pb = ctx.problem
    pr, tr = space.prompt_range, space.token_range
    t_lo = 0 if space.baseline else t
    t_hi = 0 if space.baseline else tr[1]

    def cost(pp: int, tt: int) -> float:
        return float(design.cost_usd_per_h(pp, tt))

    def power(pp: int, tt: int) -> float:
        return float(design.power_kw(pp, tt))

    pts = sorted(
        (
            (pp, tt)
            for pp in range(p, pr[1] + 1)
            for tt in range(t_lo, t_hi + 1)
            if (pp, tt) != (p, t) and pb.within_budget(cost(pp, tt), power(pp, tt))
        ),
        key=lambda x: _point_rank(pb.objective, design, x[0], x[1], 1.0),
    )
    for pp, tt in pts[:ESCALATE_MAX]:
        seen_pts, fresh = decide_points(ctx.cached(space.name), design, [(pp, tt)], 1.0)
        ctx.absorb(fresh)
        dec = seen_pts[(pp, tt)]
        rec = des_record(space.name, design, pp, tt, pb.rate_rps, dec)
        records.append(rec)
        if dec.meets:
            return rec, (design, pp, tt)
    return None


def _polish(
    ctx: SearchContext,
    space: DesignSpace,
    design: Design,
    p: int,
    t: int,
    rec: PointRecord,
    records: list[PointRecord],
) -> PointRecord:
    """Local DES descent from the confirmed best over cheaper neighbouring counts (same pools).

    The analytic first pass can misjudge points next to the SLO frontier; a few DES runs on the
    cheaper neighbours recover the exact local optimum (what the grid finds in 2-D).
    """
    pb = ctx.problem
    pr, tr = space.prompt_range, space.token_range

    def obj_cost(pp: int, tt: int) -> float:
        return float(design.cost_usd_per_h(pp, tt))

    def obj_power(pp: int, tt: int) -> float:
        return float(design.power_kw(pp, tt))

    def key(pp: int, tt: int) -> tuple[float, ...]:
        return _point_rank(pb.objective, design, pp, tt, 1.0)

    for _ in range(POLISH_MAX):
        steps = ((-1, 0),) if space.baseline else POLISH_STEPS
        nbrs = sorted(
            {
                (p + dp, t + dt)
                for dp, dt in steps
                if pr[0] <= p + dp <= pr[1]
                and (space.baseline or tr[0] <= t + dt <= tr[1])
                and key(p + dp, t + dt) < key(p, t)
            },
            key=lambda x: key(*x),
        )
        moved = False
        for pp, tt in nbrs:
            seen_pts, fresh = decide_points(ctx.cached(space.name), design, [(pp, tt)], 1.0)
            ctx.absorb(fresh)
            dec = seen_pts[(pp, tt)]
            ok = pb.within_budget(obj_cost(pp, tt), obj_power(pp, tt))
            r = des_record(space.name, design, pp, tt, pb.rate_rps, dec, within_budget=ok)
            records.append(r)
            if dec.meets and ok:
                p, t, rec, moved = pp, tt, r, True
                break
        if not moved:
            break
    return rec


def _value(frozen: Any) -> float:
    return float(frozen.user_attrs.get("value", frozen.value))


def _point_rank(objective: Objective, design: Design, p: int, t: int, rate: float) -> tuple[float, ...]:
    """`rank_key` of a configuration of `design` (a baseline's count is its prompt count)."""
    tt = 0 if design.is_baseline else t
    return rank_key(
        objective,
        cost=float(design.cost_usd_per_h(p, tt)),
        power=float(design.power_kw(p, tt)),
        rate=rate,
        machines=p + tt,
        prompt=p,
    )


def _rank(rec: PointRecord, objective: Objective) -> tuple[float, ...]:
    """A record's rank (the one tie-break rule); points failing the SLOs rank last."""
    if not rec.meets_slo:
        return (math.inf,)
    return rec.rank_key(objective)
