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

import hashlib
import math
from typing import TYPE_CHECKING, Any

import numpy as np

from splitplan.design import Design
from splitplan.search.grid import decide_points
from splitplan.search.problem import DesignSpace
from splitplan.search.result import DesignResult, empty_result, point_record, result_from_record
from splitplan.search.throughput import analytic_rates, bisect_many

if TYPE_CHECKING:
    from splitplan.search.run import _Ctx

BATCH = 16


def _study_name(ctx: _Ctx, space: DesignSpace) -> str:
    pb = ctx.problem
    h = hashlib.sha256(repr((space, pb.objective, pb.power_budget_kw, pb.cost_budget_usd_per_h,
                             pb.engine, pb.seed, pb.rate_tol)).encode()).hexdigest()[:12]
    return f"splitplan-{ctx.store.fingerprint}-{space.name}-{h}"


def _suggest(trial: Any, space: DesignSpace) -> tuple[Design, int, int]:
    pg = (trial.suggest_categorical("prompt_gpu", list(space.prompt.gpus)) if len(space.prompt.gpus) > 1
          else space.prompt.gpus[0])
    lo, hi = space.prompt.power_cap
    pc = trial.suggest_float("prompt_power_cap", lo, hi) if lo < hi else lo
    p = (trial.suggest_int("prompt_machines", *space.prompt_range)
         if space.prompt_range[0] < space.prompt_range[1] else space.prompt_range[0])
    if space.baseline:
        return space.design(pg, pg, pc, pc), p, 0
    tg = (trial.suggest_categorical("token_gpu", list(space.token.gpus)) if len(space.token.gpus) > 1
          else space.token.gpus[0])
    lo, hi = space.token.power_cap
    tc = trial.suggest_float("token_power_cap", lo, hi) if lo < hi else lo
    t = (trial.suggest_int("token_machines", *space.token_range)
         if space.token_range[0] < space.token_range[1] else space.token_range[0])
    return space.design(pg, tg, pc, tc), p, t


def _constraints(frozen: Any) -> list[float]:
    return list(frozen.user_attrs.get("constraints", [1.0]))


def _set_constraints(trial: Any, cons: list[float]) -> None:
    """Report constraints to the sampler (Optuna ≥ 5: set_constraint) and keep a copy we read back."""
    trial.set_user_attr("constraints", cons)
    if hasattr(trial, "set_constraint"):
        for i, c in enumerate(cons):
            trial.set_constraint(f"c{i}", float(c))


def _evaluate(ctx: _Ctx, space: DesignSpace, trial: Any) -> tuple[float, list[float]]:
    """Analytic value and constraints (≤ 0 satisfied) of one asked trial."""
    pb = ctx.problem
    design, p, t = _suggest(trial, space)
    cost = p * design.prompt.cost_usd_per_h + t * design.token.cost_usd_per_h
    power = p * design.prompt.power_kw + t * design.token.power_kw
    cons = []
    if pb.power_budget_kw is not None:
        cons.append(power / pb.power_budget_kw - 1.0)
    if pb.cost_budget_usd_per_h is not None:
        cons.append(cost / pb.cost_budget_usd_per_h - 1.0)
    if pb.objective == "throughput":
        rate = float(analytic_rates(ctx.evaluator, design, [(p, t)], pb.rate_tol)[0])
        cons.append(0.0 if rate > 0 else 1.0)
        value = rate
    else:
        m = float(ctx.evaluator.screen(design, np.array([p]), np.array([t]), 1.0).margin[0])
        cons.append(-m if math.isfinite(m) else 1e6)
        value = power if pb.objective == "power" else cost
    return value, cons


def _run_trials(ctx: _Ctx, space: DesignSpace) -> Any:
    import optuna
    from optuna.trial import TrialState

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    pb = ctx.problem
    direction = "maximize" if pb.objective == "throughput" else "minimize"
    storage = ctx.store.optuna_storage
    study = optuna.create_study(storage=storage, study_name=_study_name(ctx, space), direction=direction,
                                load_if_exists=True)
    trials = study.get_trials(deepcopy=False)
    # finish a batch that was fully asked but partly told; abandon one whose asking was cut short
    running = [tr for tr in trials if tr.state == TrialState.RUNNING]
    live = [tr for tr in trials if tr.state != TrialState.FAIL]
    if running:
        if len(live) % BATCH == 0:
            for fr in running:
                trial = optuna.trial.Trial(study, fr._trial_id)
                value, cons = _evaluate(ctx, space, trial)
                _set_constraints(trial, cons)
                study.tell(trial, value)
        else:
            for fr in running:
                study.tell(fr.number, state=TrialState.FAIL)
    if ctx.progress:
        ctx.progress.add(pb.trials)
    while True:
        done = [tr for tr in study.get_trials(deepcopy=False) if tr.state == TrialState.COMPLETE]
        if ctx.progress:
            ctx.progress.advance(0)
        if len(done) >= pb.trials:
            break
        k = len(done) // BATCH
        seed = int.from_bytes(hashlib.sha256(f"{pb.seed}:{k}".encode()).digest()[:4], "little")
        study.sampler = optuna.samplers.TPESampler(seed=seed,
                                                   n_startup_trials=min(20, max(pb.trials // 4, 4)))
        batch = [study.ask() for _ in range(min(BATCH, pb.trials - len(done)) if len(done) % BATCH == 0
                                            else BATCH - len(done) % BATCH)]
        results = [_evaluate(ctx, space, tr) for tr in batch]
        for tr, (value, cons) in zip(batch, results, strict=True):
            _set_constraints(tr, cons)
            study.tell(tr, value)
        if ctx.progress:
            ctx.progress.advance(len(batch))
    return study


def _config_of(space: DesignSpace, params: dict[str, Any]) -> tuple[Design, int, int]:
    class _Fixed:
        def suggest_categorical(self, name: str, *_args: Any) -> Any:
            return params[name]

        suggest_float = suggest_int = suggest_categorical

    return _suggest(_Fixed(), space)


def optuna_space(ctx: _Ctx, space: DesignSpace) -> tuple[DesignResult, list[dict[str, object]]]:
    """Optuna trials (analytic), then DES confirmation of the best, in objective order."""
    from optuna.trial import TrialState

    pb = ctx.problem
    study = _run_trials(ctx, space)
    trials = [tr for tr in study.get_trials(deepcopy=False) if tr.state == TrialState.COMPLETE]
    feasible = [tr for tr in trials if all(c <= 0 for c in _constraints(tr))]
    sign = -1.0 if pb.objective == "throughput" else 1.0
    feasible.sort(key=lambda tr: (sign * tr.value, tr.number))
    seen: set[tuple[Any, ...]] = set()
    cands: list[tuple[Design, int, int, float]] = []
    for tr in feasible:
        design, p, t = _config_of(space, tr.params)
        key = (design.prompt, design.token, p, t)
        if key not in seen:
            seen.add(key)
            cands.append((design, p, t, float(tr.value)))
    records: list[dict[str, object]] = []
    for tr in trials:
        design, p, t = _config_of(space, tr.params)
        c = _constraints(tr)
        rate = tr.value if pb.objective == "throughput" else 1.0
        records.append(point_record(space=space.name, design=design, prompt=p, token=t,
                                    rate_rps=float(rate) * pb.rate_rps,
                                    within_budget=all(x <= 0 for x in c[:-1]),
                                    analytic_margin=-c[-1] if pb.objective != "throughput" else math.nan,
                                    meets=all(x <= 0 for x in c), decided_by="analytic"))
    if pb.engine == "analytic" or not cands:
        if not cands:
            return empty_result(space.name, space.design(), des_evaluations=0, method="optuna"), records
        best = min(range(len(records)), key=lambda i: _rank(records[i], pb.objective))
        return result_from_record(records[best], baseline=space.baseline, des_evaluations=0,
                                  method="optuna"), records
    cands = cands[:pb.confirm_top]
    n_des0 = ctx.des_evaluations
    step = max(1, ctx.runner.workers)
    chosen: dict[str, object] | None = None
    if pb.objective == "throughput":
        tasks = [(bisect_many, ctx.cached(space.name), d, [(p, t)], [v], pb.rate_tol) for d, p, t, v in cands]
        outs = ctx.map(_call, tasks, lambda res: res[1])
        best_key = (0.0, 0.0)
        for (d, p, t, _v), (per, _fresh) in zip(cands, outs, strict=True):
            f, dec, probes = per[0]
            for fp, dp in sorted(probes.items()):
                rec = point_record(space=space.name, design=d, prompt=p, token=t, rate_rps=fp * pb.rate_rps,
                                   within_budget=True, des_margin=dp.margin, meets=dp.meets,
                                   decided_by="des", binding=dp.binding, slowdown=dp.slowdown)
                records.append(rec)
                if f > 0 and fp == f and dec is not None:
                    key = (f, -float(rec["cost_usd_per_h"]))  # type: ignore[arg-type]
                    if key > best_key:
                        best_key, chosen = key, rec
    else:
        for i in range(0, len(cands), step):
            group = cands[i:i + step]
            tasks = [(decide_points, ctx.cached(space.name), d, [(p, t)], 1.0) for d, p, t, _v in group]
            outs = ctx.map(_call, tasks, lambda res: res[1])
            for (d, p, t, _v), (seen_pts, _fresh) in zip(group, outs, strict=True):
                dec = seen_pts[(p, t)]
                rec = point_record(space=space.name, design=d, prompt=p, token=t, rate_rps=pb.rate_rps,
                                   within_budget=True, des_margin=dec.margin, meets=dec.meets,
                                   decided_by="des", binding=dec.binding, slowdown=dec.slowdown)
                records.append(rec)
                if dec.meets and chosen is None:
                    chosen = rec
            if chosen is not None:
                break
    n_des = ctx.des_evaluations - n_des0
    if chosen is None:
        return empty_result(space.name, space.design(), des_evaluations=n_des, method="optuna"), records
    return result_from_record(chosen, baseline=space.baseline, des_evaluations=n_des,
                              method="optuna"), records


def _rank(rec: dict[str, object], objective: str) -> tuple[float, ...]:
    if not rec["meets_slo"]:
        return (math.inf,)
    if objective == "throughput":
        return (-float(rec["rate_rps"]),)  # type: ignore[arg-type]
    key = "power_kw" if objective == "power" else "cost_usd_per_h"
    return (float(rec[key]), float(rec["cost_usd_per_h"]))  # type: ignore[arg-type]


def _call(fn: Any, *args: Any) -> Any:
    return fn(*args)
