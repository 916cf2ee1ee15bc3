"""Layer 4: the KV-cache transfer from prompt to token instance — the one rule both engines use.

SPLITWISE.md §4: a serialized transfer costs KV bytes / link bandwidth after the prompt phase; a
layer-wise one overlaps all but a near-constant tail, measured at ~8 ms on DGX-A100 (200 GB/s
links) and ~5 ms on DGX-H100 (400 GB/s), and is used for prompts of at least
`layerwise_min_prompt_tokens`; shorter prompts are sent serialized. A link between the two
measured ones gets the tail of the nearer (below 300 GB/s: the A100's 8 ms), never better than
sending the whole cache serialized. Baselines move no KV (one machine runs both phases).

Instances of different tensor parallelism or precision: the KV cache crosses the link as the
sender holds it — `prompt tokens × KV bytes per token at the prompt instance's KV precision`; a
token instance with another KV precision converts it on arrival, and one with another tensor
parallelism re-shards it by heads on arrival (the bytes do not change with TP). The link of an
instance is its share of the node's NICs (one NIC per GPU on every catalog node: TP ÷ GPUs per
node × the node's interconnect), and a transfer runs at the slower end's share. A whole-node
instance (the paper's machines) gets the node's whole interconnect, as before.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from splitplan.catalog import Machine
from splitplan.design import Design
from splitplan.sim.scenario import Scenario

FloatArray = npt.NDArray[np.float64]

LAYERWISE_SLOW_LINK_S = 0.008  # DGX-A100, 200 GB/s
LAYERWISE_FAST_LINK_S = 0.005  # DGX-H100, 400 GB/s
# Midway between the two measured links: a link below it is nearer the A100's.
FAST_LINK_BYTES_PER_S = 300e9


def instance_link_bytes_per_s(machine: Machine) -> float:
    """Inter-node bandwidth one instance can use for KV transfers (its GPUs' share of the NICs)."""
    link = machine.type.interconnect_bytes_per_s
    return float(link if machine.is_whole_node else link * machine.node_share)


def link_bytes_per_s(scenario: Scenario, design: Design) -> float:
    """The transfer link: `link_bytes_per_s` of the config, else the slower end's share of its
    node's interconnect."""
    if scenario.sim.link_bytes_per_s is not None:
        return float(scenario.sim.link_bytes_per_s)
    return min(instance_link_bytes_per_s(design.prompt), instance_link_bytes_per_s(design.token))


def kv_transfer_bytes_per_token(scenario: Scenario, design: Design) -> float:
    """KV bytes sent per prompt token: the sender's (prompt instance's) KV precision."""
    return float(scenario.kv_bytes_per_token_on(design.prompt))


def layerwise_tail_s(scenario: Scenario, link: float) -> float:
    """The non-hidden part of a layer-wise transfer (`layerwise_overhead_s` overrides it)."""
    tail = scenario.sim.layerwise_overhead_s
    if tail is not None:
        return float(tail)
    return LAYERWISE_FAST_LINK_S if link >= FAST_LINK_BYTES_PER_S else LAYERWISE_SLOW_LINK_S


def kv_transfer_s(scenario: Scenario, design: Design, prompt_tokens: npt.ArrayLike) -> FloatArray:
    """Per request, the time its second token waits for the KV cache to reach the token instance."""
    p = np.asarray(prompt_tokens, dtype=np.float64)
    if design.is_baseline:
        return np.zeros_like(p)
    link = link_bytes_per_s(scenario, design)
    serialized = p * kv_transfer_bytes_per_token(scenario, design) / link
    if scenario.sim.kv_transfer == "serialized":
        return serialized
    layerwise = p >= scenario.sim.layerwise_min_prompt_tokens
    return np.where(layerwise, np.minimum(layerwise_tail_s(scenario, link), serialized), serialized)


__all__ = [
    "instance_link_bytes_per_s",
    "kv_transfer_bytes_per_token",
    "kv_transfer_s",
    "layerwise_tail_s",
    "link_bytes_per_s",
]
