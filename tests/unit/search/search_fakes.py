"""Closed-form stand-ins for the analytic screen and the DES, so search logic is tested exactly.

A configuration passes when both pools have capacity for the load: prompt capacity p·a·speed and
token capacity t·b·speed must exceed the rate factor (baselines: N·speed·c). The "DES" is the exact
function; the "analytic" one is biased and noisy, as a real screen is.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from splitplan.search.evaluate import Decision, Screen
from splitplan.slo import SLO_KEYS


def _speed(machine) -> float:
    # faster GPUs and higher caps serve more; an A100 machine = 1
    base = 2.0 if "h100" in machine.type.name else 1.0
    return base * machine.power_cap**0.5


@dataclass
class FakeEvaluator:
    prompt_need: float = 26.5  # prompt capacity units needed at factor 1
    token_need: float = 2.5
    bias: float = 0.0  # analytic margin = true margin · (1 + bias) + offset + noise
    noise: float = 0.0
    offset: float = 0.0
    notch: tuple[int, int] | None = None  # a DES-infeasible point inside the feasible region
    notch_margin: float = -0.01  # the DES margin there (−0.01: a near miss; −0.6: a cliff)
    calls: list[tuple[str, int, int, float]] = field(default_factory=list)
    screens: int = 0
    fail_after: int | None = None  # raise KeyboardInterrupt at this DES call (Ctrl-C simulation)

    def true_margin(self, design, p, t, f):
        p = np.asarray(p, dtype=float)
        t = np.asarray(t, dtype=float)
        f = np.asarray(f, dtype=float)
        if design.is_baseline:
            cap = p * _speed(design.prompt) / (self.prompt_need + self.token_need) * 1.2
            return cap / f - 1.0
        mp = p * _speed(design.prompt) / self.prompt_need / f - 1.0
        mt = t * _speed(design.token) / self.token_need / f - 1.0
        return np.minimum(mp, mt)

    def screen(self, design, prompt, token, rate_scale=1.0):
        self.screens += 1
        m = self.true_margin(design, prompt, token, rate_scale) * (1 + self.bias) + self.offset
        if self.noise:
            rng = np.random.default_rng(len(np.atleast_1d(prompt)))
            m = m + rng.normal(0, self.noise, size=np.shape(m))
        m = np.atleast_1d(np.asarray(m, dtype=float))
        sd = {k: np.full(m.shape, 1.0) for k in SLO_KEYS}
        return Screen(margin=m, slowdown=sd, binding=np.full(m.shape, "ttft_p90"))

    def decide(self, design, prompt, token, rate_scale=1.0, *, stop_below_headroom=None):
        if self.fail_after is not None and len(self.calls) >= self.fail_after:
            raise KeyboardInterrupt
        self.calls.append((design.name, int(prompt), int(token), float(rate_scale)))
        m = float(self.true_margin(design, prompt, token, rate_scale))
        if self.notch is not None and (prompt, token) == self.notch:
            m = self.notch_margin
        m = round(m, 12)
        return Decision(
            meets=m >= 0,
            margin=m if math.isfinite(m) else -math.inf,
            binding="ttft_p90",
            slowdown={k: 1.0 + max(0.0, -m) for k in SLO_KEYS},
        )


def exhaustive_optimum(ev, design, p_range, t_range, objective="cost"):
    """Brute force over the exact function: (objective, machines, p, t) of the best point."""
    best = None
    for p in range(p_range[0], p_range[1] + 1):
        for t in [0] if design.is_baseline else range(t_range[0], t_range[1] + 1):
            m = float(ev.true_margin(design, p, t, 1.0))
            if ev.notch is not None and (p, t) == ev.notch:
                m = ev.notch_margin
            if m < 0:
                continue
            cost = p * design.prompt.cost_usd_per_h + t * design.token.cost_usd_per_h
            power = p * design.prompt.power_kw + t * design.token.power_kw
            key = (round(power if objective == "power" else cost, 9), p + t, p, t)
            best = key if best is None or key < best else best
    return best
