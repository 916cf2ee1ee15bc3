"""The highest request rate each design sustains, with all nine SLOs, under a power budget.

    python examples/budgeted_throughput.py

The throughput objective turns the question around: instead of "how few machines serve this
rate", it asks "which configuration within the budget serves the most". The budget here is 60 kW
of provisioned power (about ten DGX-H100, or eighteen DGX-A100); the paper's iso-power budget is the
power of 40 DGX-H100 (`budget="iso-power"`), which takes longer to search.
"""

from __future__ import annotations

from splitplan import api

BUDGET_KW = 60.0


def main() -> None:
    req = api.SearchRequest(
        designs=("baseline-a100", "baseline-h100", "splitwise-aa", "splitwise-hh"),
        objective="throughput",
        power_budget_kw=BUDGET_KW,
        # under the throughput objective the rate is what is searched; this one seeds the sample
        workload=api.WorkloadRequest(workload="coding", rate_rps=20.0, duration_s=30.0),
    )
    outcome = api.search(req)
    print(f"power budget {BUDGET_KW:g} kW")
    print(f"{'design':16s} {'configuration':>14s} {'req/s':>7s} {'kW':>7s} {'$/h':>8s} {'verified':>9s}")
    for r in outcome.results:
        if not r.meets_slo:
            print(f"{r.design:16s} nothing within the budget meets the SLOs")
            continue
        conf = f"{r.machines} machines" if r.baseline else f"{r.prompt_machines}P+{r.token_machines}T"
        print(
            f"{r.design:16s} {conf:>14s} {r.rate_rps:7.1f} {r.power_kw:7.1f} {r.cost_usd_per_h:8.1f} "
            f"{r.verified_by:>9s}"
        )
    best, gain = outcome.best, outcome.savings_vs_baseline()
    if best is not None:
        line = f"most throughput: {best.design} at {best.rate_rps:.1f} req/s"
        if gain is not None:
            line += f" ({gain:+.0%} vs the best baseline)"
        print(line)


if __name__ == "__main__":
    main()
