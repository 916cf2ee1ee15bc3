"""Layer 6: the serving metrics people compare across planners and engines, from one place.

Definitions (all at the rate a configuration serves while meeting the SLOs it was judged under):

- `tokens_per_s`: prompt plus generated tokens per second (rate × mean prompt + output tokens);
- `output_tokens_per_s`: generated tokens per second (rate × mean output tokens);
- `output_tokens_per_s_per_gpu`: the same per GPU in use (instances × tensor parallelism);
- `usd_per_million_tokens` / `usd_per_million_output_tokens`: the cluster's $/h spread over the
  tokens (all, or generated only) it serves in that hour;
- `energy_j_per_request`: provisioned power × time ÷ requests, i.e. joules per request at the
  provisioned (capped TDP) power — the paper's power convention, an upper bound on what a
  meter would read.

Token means are the workload's, so the analytic engine and the DES report on one basis.
"""

from __future__ import annotations

import math

import numpy as np

from splitplan.design import ClusterConfig
from splitplan.workload.base import Workload

METRIC_KEYS: tuple[str, ...] = (
    "tokens_per_s",
    "output_tokens_per_s",
    "output_tokens_per_s_per_gpu",
    "usd_per_million_tokens",
    "usd_per_million_output_tokens",
    "energy_j_per_request",
)


def _sig(x: float) -> float:
    """Nine significant digits: stable JSON without losing small per-GPU values."""
    return float(f"{x:.9g}")


def gpus_of(config: ClusterConfig) -> int:
    """GPUs in use: instances × tensor-parallel size, per pool."""
    d = config.design
    return config.prompt_machines * d.prompt.tensor_parallel + config.token_machines * d.token.tensor_parallel


def served_metrics(
    *,
    rate_rps: float | None,
    mean_prompt_tokens: float,
    mean_output_tokens: float,
    cost_usd_per_h: float,
    power_kw: float,
    gpus: int,
) -> dict[str, float | None]:
    """The six METRIC_KEYS; all None when the rate is unknown, zero or not finite."""
    if rate_rps is None or not (math.isfinite(rate_rps) and rate_rps > 0):
        return dict.fromkeys(METRIC_KEYS)
    tokens = rate_rps * (mean_prompt_tokens + mean_output_tokens)
    output = rate_rps * mean_output_tokens
    return {
        "tokens_per_s": _sig(tokens),
        "output_tokens_per_s": _sig(output),
        "output_tokens_per_s_per_gpu": _sig(output / gpus) if gpus > 0 else None,
        "usd_per_million_tokens": _sig(cost_usd_per_h / (tokens * 3600.0) * 1e6),
        "usd_per_million_output_tokens": _sig(cost_usd_per_h / (output * 3600.0) * 1e6),
        "energy_j_per_request": _sig(power_kw * 1000.0 / rate_rps),
    }


def config_metrics(
    config: ClusterConfig, workload: Workload, rate_rps: float | None
) -> dict[str, float | None]:
    """METRIC_KEYS of `config` serving `workload`'s request mix at `rate_rps`."""
    return served_metrics(
        rate_rps=rate_rps,
        mean_prompt_tokens=float(np.mean(workload.prompt_tokens)),
        mean_output_tokens=float(np.mean(workload.output_tokens)),
        cost_usd_per_h=config.cost_usd_per_h,
        power_kw=config.power_kw,
        gpus=gpus_of(config),
    )


def metrics_line(m: dict[str, float | None]) -> str:
    """One line (under 80 columns) for a terminal: tok/s, generated tok/s/GPU, $/M tokens, J/request
    ($/M generated tokens is in the JSON)."""
    if m.get("tokens_per_s") is None:
        return "no served-token metrics (no sustained rate)"
    return (
        f"{m['tokens_per_s']:,.0f} tok/s ({m['output_tokens_per_s']:,.0f} generated, "
        f"{m['output_tokens_per_s_per_gpu']:,.1f}/GPU), ${m['usd_per_million_tokens']:,.3f}/M tok, "
        f"{m['energy_j_per_request']:,.0f} J/req"
    )
