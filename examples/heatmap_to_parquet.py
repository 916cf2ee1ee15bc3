"""A (prompt, token) heatmap of one design written to parquet, read back with pyarrow.

    python examples/heatmap_to_parquet.py [OUT.parquet]

Evaluates every configuration of Splitwise-HH with 1–10 prompt and 1–10 token machines with the
default engine "hybrid" (the search's own: the DES decides every point that could change the
optimum, directly or by dominance, so the starred optimum is `splitplan search`'s answer, 4P+3T at
$266/h), writes one row per point, then works from the file alone: the feasible frontier (per
prompt-pool size, the fewest token machines meeting all nine SLOs) and the cheapest feasible cost,
as any downstream tool would.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq

from splitplan import api


def main() -> None:
    if len(sys.argv) > 1:
        run(Path(sys.argv[1]))
        return
    with tempfile.TemporaryDirectory() as tmp:
        run(Path(tmp) / "splitwise-hh.parquet")


def run(out: Path) -> None:
    scenario = api.build_scenario(
        workload=api.WorkloadRequest(workload="coding", rate_rps=20.0, duration_s=30.0), seed=0
    )
    result = api.heatmap(api.get_design("splitwise-hh"), scenario, (1, 10), (1, 10))
    result.write_parquet(out)
    print(f"wrote {out}: {len(result.prompt_machines)} points, {result.des_points} simulated by the DES")
    star = result.cost_optimal
    if star is not None:
        at = f"{star.prompt_machines}P+{star.token_machines}T at ${star.cost_usd_per_h:.0f}/h"
        print(f"cost-optimal (the search's answer): {at}")

    table = pq.read_table(out)
    meta = {k.decode(): v.decode() for k, v in (table.schema.metadata or {}).items()}
    print(f"design {meta.get('design')}, workload {meta.get('workload')}, model {meta.get('model')}")
    feasible = table.filter(pc.field("meets_slo"))
    print(f"{feasible.num_rows} of {table.num_rows} configurations meet all nine SLOs")

    # The frontier from the file: per prompt count, the minimum feasible token count.
    frontier = feasible.group_by("prompt_machines").aggregate([("token_machines", "min")])
    frontier = frontier.sort_by("prompt_machines")
    print("feasible frontier (prompt machines → fewest token machines):")
    for p, t in zip(
        frontier["prompt_machines"].to_pylist(), frontier["token_machines_min"].to_pylist(), strict=True
    ):
        print(f"  {p:2d} → {t}")
    if feasible.num_rows:
        cheapest = feasible.sort_by([("cost_usd_per_h", "ascending"), ("power_kw", "ascending")]).slice(0, 1)
        row = cheapest.to_pylist()[0]
        print(
            f"cheapest feasible: {row['prompt_machines']}P+{row['token_machines']}T at "
            f"${row['cost_usd_per_h']:.2f}/h, {row['power_kw']:.1f} kW (decided by {row['engine']})"
        )
    # The file and the in-memory result agree: the same frontier, the star's cost is the cheapest.
    if star is not None:
        assert min(feasible["cost_usd_per_h"].to_pylist()) == star.cost_usd_per_h
    expected = {p: t for p, t in result.frontier().items() if t is not None}
    got = dict(
        zip(frontier["prompt_machines"].to_pylist(), frontier["token_machines_min"].to_pylist(), strict=True)
    )
    assert got == expected, (got, expected)


if __name__ == "__main__":
    main()
