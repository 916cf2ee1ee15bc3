"""Layer 2: does a model fit on a machine, and how much KV cache is left."""

from __future__ import annotations

from splitplan.catalog import Machine, ModelSpec
from splitplan.errors import ModelDoesNotFitError

# A machine must hold the weights plus at least this many tokens of KV cache to serve anything.
MIN_KV_TOKENS = 2048


def kv_capacity_bytes(model: ModelSpec, machine: Machine, weight_bytes: float | None = None) -> float:
    """Bytes left for the KV cache once the weights are loaded; raises if the model does not fit."""
    weights = model.weight_bytes if weight_bytes is None else weight_bytes
    free = machine.memory_bytes - weights
    if free < MIN_KV_TOKENS * model.kv_bytes_per_token:
        raise ModelDoesNotFitError(
            f"model {model.name} ({weights / 1e9:.0f} GB of weights) does not fit on "
            f"{machine.name} ({machine.memory_bytes / 1e9:.0f} GB) with room for "
            f"{MIN_KV_TOKENS} tokens of KV cache"
        )
    return free
