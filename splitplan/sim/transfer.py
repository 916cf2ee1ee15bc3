"""Layer 4: what a prompt-to-token KV-cache transfer moves and over which link (one home for both
simulators).

Convention (instances of different tensor parallelism or precision): the KV cache crosses the link
as the sender holds it — `prompt tokens × KV bytes per token at the prompt instance's KV
precision`; a token instance with another KV precision converts it on arrival, and one with another
tensor parallelism re-shards it by heads on arrival (the bytes do not change with TP). The link of
an instance is its share of the node's NICs (one NIC per GPU on every catalog node: TP ÷ GPUs per
node × the node's interconnect), and a transfer runs at the slower end's share. A whole-node
instance (the paper's machines) gets the node's whole interconnect, as before.
"""

from __future__ import annotations

from splitplan.catalog import Machine
from splitplan.design import Design
from splitplan.sim.scenario import Scenario


def instance_link_bytes_per_s(machine: Machine) -> float:
    """Inter-node bandwidth one instance can use for KV transfers (its GPUs' share of the NICs)."""
    link = machine.type.interconnect_bytes_per_s
    return float(link if machine.is_whole_node else link * machine.node_share)


def kv_link_bytes_per_s(scenario: Scenario, design: Design) -> float:
    """The config's link if set, else the slower end's share of its node's interconnect."""
    if scenario.sim.link_bytes_per_s is not None:
        return float(scenario.sim.link_bytes_per_s)
    return min(instance_link_bytes_per_s(design.prompt), instance_link_bytes_per_s(design.token))


def kv_transfer_bytes_per_token(scenario: Scenario, design: Design) -> float:
    """KV bytes sent per prompt token: the sender's (prompt instance's) KV precision."""
    return scenario.kv_bytes_per_token_on(design.prompt)
