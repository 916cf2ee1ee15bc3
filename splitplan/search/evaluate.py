"""Layer 5: the two evaluators a search consults — the analytic screen and the DES decision.

`Evaluator` is the contract the search strategies rely on, so tests can substitute closed-form
fakes. `SimEvaluator` wires it to `splitplan.sim.analytic.evaluate_grid` (vectorized over points)
and `splitplan.sim.des.simulate_des` (one configuration at a time). Rate scaling rescales arrival
times (arrival_s / k gives k× the rate) so a throughput search reuses one sampled workload.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Protocol

import numpy as np
import numpy.typing as npt

from splitplan.design import ClusterConfig, Design
from splitplan.errors import InputError
from splitplan.sim.scenario import Scenario
from splitplan.slo import SLO_KEYS, slo_margins
from splitplan.workload.base import Workload

if TYPE_CHECKING:
    from splitplan.sim.analytic import AnalyticBatch

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def scale_rate(workload: Workload, factor: float) -> Workload:
    """The same requests arriving `factor` times as fast (arrival_s / factor)."""
    if not (math.isfinite(factor) and factor > 0):
        raise InputError(f"rate factor must be a positive number, got {factor!r}")
    if factor == 1.0:
        return workload
    return Workload(
        arrival_s=workload.arrival_s / factor,
        prompt_tokens=workload.prompt_tokens,
        output_tokens=workload.output_tokens,
        name=workload.name,
        meta=dict(workload.meta),
        target_rate_rps=None if workload.target_rate_rps is None else workload.target_rate_rps * factor,
    )


@dataclass(frozen=True, slots=True)
class Screen:
    """Analytic screen of n points: margin = min over SLOs of limit/value − 1 (negative fails)."""

    margin: FloatArray  # (n,)
    slowdown: dict[str, FloatArray]  # SLO key → (n,)
    binding: npt.NDArray[np.str_] | None = None  # (n,) the SLO with least headroom, when known
    latency_s: dict[str, FloatArray] = field(default_factory=dict)  # SLO key → (n,) seconds, when known

    @property
    def meets(self) -> npt.NDArray[np.bool_]:
        return self.margin >= 0.0


@dataclass(frozen=True, slots=True)
class Decision:
    """A DES verdict on one configuration at one rate factor."""

    meets: bool
    margin: float  # −inf when unstable; an upper bound when not `complete`
    binding: str
    slowdown: dict[str, float] = field(default_factory=dict)
    latency_s: dict[str, float] = field(default_factory=dict)  # SLO key → seconds (when simulated)
    # False: the run stopped once `binding` was certain to fail with a headroom below `margin`
    # (`decide(stop_below_headroom=…)`); its percentiles are NaN
    complete: bool = True

    def answers(self, stop_below_headroom: float | None) -> bool:
        """Whether this verdict tells all a run stopping below `stop_below_headroom` would (None:
        a run to the end): a whole run answers anyone; a stopped one, whose margin lies just under
        the bound it stopped at, a caller whose bound is no lower."""
        return self.complete or (stop_below_headroom is not None and self.margin < stop_below_headroom)

    def refines(self, other: Decision) -> bool:
        """Whether this verdict of the same point tells more than `other`: that one stopped, and
        this one ran to the end or stopped at a lower bound (the verdict the store keeps)."""
        return not other.complete and self.answers(other.margin)

    @property
    def measured_margin(self) -> float:
        """The margin as measured: NaN for a run stopped early (only a bound is known)."""
        return self.margin if self.complete else math.nan


class Evaluator(Protocol):
    """What a search needs. Implementations must be picklable (they travel to joblib workers).

    - `screen` is cheap and vectorized: `prompt`, `token` are (n,) machine counts (token = 0 for
      baselines), `rate_scale` a float or an (n,) array of rate factors.
    - `decide` is the expensive exact check of one configuration (the DES). With
      `stop_below_headroom` h it may stop once some SLO is certain to end with a headroom below h
      (sim.des.simulate_des): a failing Decision that is not `complete`, its margin h.
    """

    def screen(
        self, design: Design, prompt: IntArray, token: IntArray, rate_scale: float | FloatArray = 1.0
    ) -> Screen: ...

    def decide(
        self,
        design: Design,
        prompt: int,
        token: int,
        rate_scale: float = 1.0,
        *,
        stop_below_headroom: float | None = None,
    ) -> Decision: ...


def config_for(design: Design, prompt: int, token: int) -> ClusterConfig:
    if design.is_baseline:
        return ClusterConfig.baseline(design, int(prompt))
    return ClusterConfig(design=design, prompt_machines=int(prompt), token_machines=int(token))


@dataclass(slots=True)
class SimEvaluator:
    """The real evaluators over one Scenario (the workload at the target rate)."""

    scenario: Scenario
    sample_size: int | None = None  # requests the analytic screen samples (None: its default)
    _scaled: dict[float, Scenario] = field(default_factory=dict, repr=False)

    def _at(self, factor: float) -> Scenario:
        if factor == 1.0:
            return self.scenario
        if factor not in self._scaled:
            wl = scale_rate(self.scenario.workload, factor)
            self._scaled[factor] = replace(self.scenario, workload=wl)
        return self._scaled[factor]

    def screen(
        self, design: Design, prompt: IntArray, token: IntArray, rate_scale: float | FloatArray = 1.0
    ) -> Screen:
        from splitplan.sim.analytic import evaluate_grid

        batch = evaluate_grid(
            design,
            np.asarray(prompt, dtype=np.int64),
            np.asarray(token, dtype=np.int64),
            self.scenario,
            rate_scale=rate_scale,
            sample_size=self.sample_size,
        )
        return self.screen_of(batch)

    def screen_of(self, batch: AnalyticBatch) -> Screen:
        """The screen of an analytic evaluation on this scenario (a heatmap's own grid hands its
        evaluation to the searches it runs, `run_search`'s `screens`)."""
        # the margin over every limit (slowdown and absolute latency), −inf where unstable
        slo = slo_margins(self.scenario.slo, batch.slowdown, batch.latency_s, stable=batch.stable)
        margin, binding = slo.margin, slo.binding
        slowdown = {k: np.asarray(batch.slowdown[k], dtype=np.float64) for k in SLO_KEYS}
        latency = {k: np.asarray(batch.latency_s[k], dtype=np.float64) for k in SLO_KEYS}
        return Screen(margin=margin, slowdown=slowdown, binding=binding, latency_s=latency)

    def decide(
        self,
        design: Design,
        prompt: int,
        token: int,
        rate_scale: float = 1.0,
        *,
        stop_below_headroom: float | None = None,
    ) -> Decision:
        from splitplan.sim.des import simulate_des

        res = simulate_des(
            config_for(design, prompt, token),
            self._at(float(rate_scale)),
            stop_below_headroom=stop_below_headroom,
        )
        margin = float(res.verdict.headroom) if res.stable else -math.inf
        return Decision(
            meets=bool(res.meets_slo),
            margin=margin,
            binding=res.verdict.binding,
            slowdown={k: float(res.slowdown[k]) for k in SLO_KEYS},
            latency_s={k: float(res.latency_s[k]) for k in SLO_KEYS},
            complete=not res.extra.get("stopped_failing", 0.0),
        )


# a whole-grid screen up to this many points is kept point by point for `ScreenVerdicts.decide`
_MEMO_MAX_POINTS = 200_000
# screens kept for the real run to replay, in points over all calls (memory stays bounded)
_REPLAY_MAX_POINTS = 2_000_000


def screen_call_key(
    design: Design, prompt: np.ndarray, token: np.ndarray, rate_scale: float | FloatArray
) -> tuple[object, ...]:
    """Identifies one `screen` call: the design, the points and the rate factors, by value."""
    rate = np.asarray(rate_scale, dtype=np.float64)
    return (
        design,
        np.asarray(prompt, dtype=np.int64).tobytes(),
        np.asarray(token, dtype=np.int64).tobytes(),
        rate.shape,
        rate.tobytes(),
    )


@dataclass(slots=True)
class ScreenVerdicts:
    """An evaluator whose `decide` is the analytic screen's verdict instead of a DES run.

    A search run against it makes exactly the DES runs the real search would make if the DES agreed
    with the screen everywhere: that is how a search forecasts its DES work (a progress total that
    holds from the start) at the cost of the screens alone. `calls` counts the stand-in runs.
    Screens are memoized point by point, so the strategies' whole-grid screens answer `decide`,
    and call by call (`replayed`), so the real run that follows does not screen the same points
    again. With `verdicts=False` every stand-in run passes without a screen: enough to count an exhaustive
    sweep, whose runs do not depend on the verdicts (the DES engine screens no grid to read from).
    """

    inner: Evaluator
    verdicts: bool = True
    calls: int = 0
    _memo: dict[tuple[object, float], dict[tuple[int, int], tuple[int, Screen]]] = field(
        default_factory=dict, repr=False
    )
    _screens: dict[tuple[object, ...], Screen] = field(default_factory=dict, repr=False)
    _screened_points: int = 0

    def screen(
        self, design: Design, prompt: IntArray, token: IntArray, rate_scale: float | FloatArray = 1.0
    ) -> Screen:
        scr = self.inner.screen(design, prompt, token, rate_scale)
        p, t = np.asarray(prompt), np.asarray(token)
        if self._screened_points + p.size <= _REPLAY_MAX_POINTS:
            self._screens[screen_call_key(design, p, t, rate_scale)] = scr
            self._screened_points += p.size
        if np.ndim(rate_scale) == 0 and p.size <= _MEMO_MAX_POINTS:
            memo = self._memo.setdefault((design, float(rate_scale)), {})  # type: ignore[arg-type]
            for i, pt in enumerate(zip(p.tolist(), t.tolist(), strict=True)):
                memo[pt] = (i, scr)
        return scr

    def decide(
        self,
        design: Design,
        prompt: int,
        token: int,
        rate_scale: float = 1.0,
        *,
        stop_below_headroom: float | None = None,
    ) -> Decision:
        # a forecast counts the runs whatever they stop at: the screen's verdict, run to the end
        self.calls += 1
        if not self.verdicts:
            return Decision(meets=True, margin=math.inf, binding="")
        hit = self._memo.get((design, float(rate_scale)), {}).get((int(prompt), int(token)))
        if hit is None:
            one = np.array([int(prompt)], dtype=np.int64)
            hit = (0, self.screen(design, one, np.array([int(token)], dtype=np.int64), rate_scale))
        i, scr = hit
        margin = float(scr.margin[i])
        return Decision(
            meets=bool(margin >= 0.0),
            margin=margin,
            binding="" if scr.binding is None else str(scr.binding[i]),
            slowdown={k: float(v[i]) for k, v in scr.slowdown.items()},
            latency_s={k: float(v[i]) for k, v in scr.latency_s.items()},
        )

    def replayed(self) -> ReplayedScreens:
        """The inner evaluator, answering the screen calls made here from what they returned."""
        return ReplayedScreens(inner=self.inner, screens=self._screens)


@dataclass(slots=True)
class ReplayedScreens:
    """An evaluator that answers a screen call it has seen (same design, points and rates) with the
    screen that call returned, and everything else from `inner`. Screens are deterministic, so a
    replay returns what a fresh screen would; a worker process gets `inner` without the screens."""

    inner: Evaluator
    screens: dict[tuple[object, ...], Screen] = field(default_factory=dict, repr=False)

    def screen(
        self, design: Design, prompt: IntArray, token: IntArray, rate_scale: float | FloatArray = 1.0
    ) -> Screen:
        hit = self.screens.get(screen_call_key(design, np.asarray(prompt), np.asarray(token), rate_scale))
        return hit if hit is not None else self.inner.screen(design, prompt, token, rate_scale)

    def decide(
        self,
        design: Design,
        prompt: int,
        token: int,
        rate_scale: float = 1.0,
        *,
        stop_below_headroom: float | None = None,
    ) -> Decision:
        return self.inner.decide(design, prompt, token, rate_scale, stop_below_headroom=stop_below_headroom)

    def __reduce__(self) -> tuple[object, ...]:
        return (ReplayedScreens, (self.inner,))
