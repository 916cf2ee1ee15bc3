"""Known optimal configurations that must not drift: the cases and how each is searched.

Regenerate the expected answers (exhaustive DES; a few minutes on 2 cores) with

    python tests/golden/regen_optima.py

and review the diff of tests/golden/optima.json before committing it.
"""

from __future__ import annotations

from dataclasses import dataclass

from splitplan.sim.config import shared_dir

PROFILE = "profile"  # stands for ../shared/reference/splitwise-sim/perf_model.csv


@dataclass(frozen=True)
class Case:
    id: str
    workload: str
    design: str
    objective: str
    perf: str = "analytic"
    budget: str | None = None
    rate_rps: float = 70.0
    duration_s: float = 60.0
    model: str = "llama2-70b"

    def request_kwargs(self) -> dict[str, object]:
        perf = (
            str(shared_dir() / "reference" / "splitwise-sim" / "perf_model.csv")
            if self.perf == PROFILE
            else self.perf
        )
        return {
            "designs": (self.design,),
            "objective": self.objective,
            "budget": self.budget,
            "perf": perf,
            "model": self.model,
            "seed": 0,
        }


# Every design, both presets, all three objectives, both budgets and both performance models appear.
CASES = (
    Case("hh-coding-cost-analytic", "coding", "splitwise-hh", "cost"),
    Case("ha-coding-cost-profile", "coding", "splitwise-ha", "cost", PROFILE),
    Case("aa-conversation-cost-analytic", "conversation", "splitwise-aa", "cost"),
    Case("hhcap-conversation-power-analytic", "conversation", "splitwise-hhcap", "power"),
    Case("aa-coding-power-profile", "coding", "splitwise-aa", "power", PROFILE),
    Case("bh100-coding-power-profile", "coding", "baseline-h100", "power", PROFILE),
    Case("ba100-conversation-cost-analytic", "conversation", "baseline-a100", "cost"),
    Case("bh100-conversation-cost-profile", "conversation", "baseline-h100", "cost", PROFILE),
    Case(
        "hh-coding-throughput-isopower-analytic", "coding", "splitwise-hh", "throughput", budget="iso-power"
    ),
    Case(
        "ha-conversation-throughput-isocost-analytic",
        "conversation",
        "splitwise-ha",
        "throughput",
        budget="iso-cost",
    ),
    Case(
        "hhcap-coding-throughput-isocost-profile",
        "coding",
        "splitwise-hhcap",
        "throughput",
        PROFILE,
        budget="iso-cost",
    ),
    Case(
        "ba100-conversation-throughput-isopower-profile",
        "conversation",
        "baseline-a100",
        "throughput",
        PROFILE,
        budget="iso-power",
    ),
)

# What must match: the optimum exactly; metrics within a relative tolerance (the DES is
# deterministic, the tolerance only absorbs floating-point differences between platforms).
EXACT = ("prompt_machines", "token_machines", "machines", "meets_slo")
RELATIVE = {"cost_usd_per_h": 1e-9, "power_kw": 1e-9, "rate_rps": 1e-6}
SLOWDOWN_RELATIVE = 0.01
