"""Cases on which the frontier search (splitplan.search.frontier) must equal exhaustive DES.

Regenerate the expected answers (exhaustive DES over each case's automatic range; a few minutes on
2 cores) with

    python tests/golden/regen_frontier.py

and review the diff of tests/golden/frontier_exhaustive.json before committing it. Durations are
short so the test runs in CI time; short traces make the DES noisier, which is the harder test of
the guard.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FrontierCase:
    id: str
    design: str
    workload: str
    rate_rps: float
    duration_s: float
    objective: str = "cost"


CASES = (
    FrontierCase("hh-coding-20", "splitwise-hh", "coding", 20.0, 30.0),
    FrontierCase("aa-conversation-50", "splitwise-aa", "conversation", 50.0, 20.0),
    FrontierCase("bh100-coding-100", "baseline-h100", "coding", 100.0, 20.0),
    FrontierCase("ha-coding-150", "splitwise-ha", "coding", 150.0, 10.0),
    FrontierCase("ba100-conversation-200", "baseline-a100", "conversation", 200.0, 10.0),
    FrontierCase("hh-conversation-300", "splitwise-hh", "conversation", 300.0, 10.0),
    FrontierCase("hhcap-coding-300-power", "splitwise-hhcap", "coding", 300.0, 10.0, "power"),
)
