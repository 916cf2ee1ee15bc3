"""Layer 4: the KV-cache transfer from prompt to token machine — the one rule both engines use.

SPLITWISE.md §4: a serialized transfer costs KV bytes / link bandwidth after the prompt phase; a
layer-wise one overlaps all but a near-constant tail, measured at ~8 ms on DGX-A100 (200 GB/s
links) and ~5 ms on DGX-H100 (400 GB/s), and is used for prompts of at least
`layerwise_min_prompt_tokens`; shorter prompts are sent serialized. A link between the two
measured ones gets the tail of the nearer (below 300 GB/s: the A100's 8 ms), never better than
sending the whole cache serialized. Baselines move no KV (one machine runs both phases).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from splitplan.design import Design
from splitplan.sim.scenario import Scenario

FloatArray = npt.NDArray[np.float64]

LAYERWISE_SLOW_LINK_S = 0.008  # DGX-A100, 200 GB/s
LAYERWISE_FAST_LINK_S = 0.005  # DGX-H100, 400 GB/s
# Midway between the two measured links: a link below it is nearer the A100's.
FAST_LINK_BYTES_PER_S = 300e9


def link_bytes_per_s(scenario: Scenario, design: Design) -> float:
    """The transfer link: `link_bytes_per_s` of the config, else the slower pool's interconnect."""
    if scenario.sim.link_bytes_per_s is not None:
        return float(scenario.sim.link_bytes_per_s)
    return float(min(design.prompt.type.interconnect_bytes_per_s, design.token.type.interconnect_bytes_per_s))


def layerwise_tail_s(scenario: Scenario, link: float) -> float:
    """The non-hidden part of a layer-wise transfer (`layerwise_overhead_s` overrides it)."""
    tail = scenario.sim.layerwise_overhead_s
    if tail is not None:
        return float(tail)
    return LAYERWISE_FAST_LINK_S if link >= FAST_LINK_BYTES_PER_S else LAYERWISE_SLOW_LINK_S


def kv_transfer_s(scenario: Scenario, design: Design, prompt_tokens: npt.ArrayLike) -> FloatArray:
    """Per request, the time its second token waits for the KV cache to reach the token machine."""
    p = np.asarray(prompt_tokens, dtype=np.float64)
    if design.is_baseline:
        return np.zeros_like(p)
    link = link_bytes_per_s(scenario, design)
    serialized = p * scenario.kv_bytes_per_token / link
    if scenario.sim.kv_transfer == "serialized":
        return serialized
    layerwise = p >= scenario.sim.layerwise_min_prompt_tokens
    return np.where(layerwise, np.minimum(layerwise_tail_s(scenario, link), serialized), serialized)


__all__ = ["kv_transfer_s", "layerwise_tail_s", "link_bytes_per_s"]
