"""The cheapest token-pool TP depends on the workload (DES-verified, exact small grids).

llama3.1-70b on DGX-H100, prompts at TP8 fp16, tokens at fp8 with TP 1, 2, 4 or 8, 4 req/s:
- coding (long prompts, short outputs): little decode work per request, so one TP-1 instance
  (an eighth of a node) carries the token pool; TP 1 is cheapest.
- conversation (short prompts, long outputs): the token pool decodes large batches, and a TP-1
  fp8 instance's iteration (≈45 ms at batch 1 in the analytic model) is already close to the
  TBT P50 limit (1.25 × the DGX-A100 reference's ≈41 ms), so TP 1 needs three instances where one
  TP-2 instance meets the SLOs; TP 2 is cheapest.
"""

from __future__ import annotations

from splitplan import api
from splitplan.api._simulate import WorkloadRequest


def _search(workload: str):
    req = api.SearchRequest(
        designs=("splitwise-hh",),
        token_tp=(1, 2, 4, 8),
        token_precision="fp8",
        prompt_range=(1, 10),
        token_range=(1, 24),
        model="llama3.1-70b",
        perf="analytic",  # the iteration times the reasoning above is about
        workload=WorkloadRequest(workload=workload, rate_rps=4.0, duration_s=60.0),
    )
    out = api.search(req)
    (res,) = out.results
    cheapest: dict[int, float] = {}
    for p in out.points:
        if p.meets_slo and p.decided_by in ("des", "dominance") and p.token_tp is not None:
            cheapest[p.token_tp] = min(cheapest.get(p.token_tp, float("inf")), p.cost_usd_per_h or 0.0)
    return res, cheapest


def test_token_pool_tp_changes_between_coding_and_conversation() -> None:
    coding, coding_costs = _search("coding")
    conv, conv_costs = _search("conversation")
    for res, costs in ((coding, coding_costs), (conv, conv_costs)):
        assert res.meets_slo
        assert res.verified_by == "des"
        assert res.prompt_tp == 8
        assert res.token_precision == "fp8"
        # the winner is strictly cheaper than the best of every other token TP (no tie decides it)
        assert all(res.cost_usd_per_h < c for tp, c in costs.items() if tp != res.token_tp), costs
    assert coding.token_tp == 1
    assert conv.token_tp == 2
