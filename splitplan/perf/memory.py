"""Layer 2: does a model fit on a machine, and how much KV cache is left."""

from __future__ import annotations

from splitplan.catalog import Machine, ModelSpec
from splitplan.errors import ModelDoesNotFitError

# A machine must hold the weights plus at least this many tokens of KV cache to serve anything.
MIN_KV_TOKENS = 2048


def kv_capacity_bytes(model: ModelSpec, machine: Machine, weight_bytes: float | None = None) -> float:
    """Bytes left for the KV cache once the weights are loaded; raises if the model does not fit.

    Weights are sized at the instance's weight precision and the KV floor at its KV precision,
    unless `weight_bytes` overrides the weights (a config's per-model override).
    """
    weights = model.weight_bytes_at(machine.weight_precision) if weight_bytes is None else weight_bytes
    free = machine.memory_bytes - weights
    if free < MIN_KV_TOKENS * model.kv_bytes_per_token_at(machine.kv_precision):
        raise ModelDoesNotFitError(
            f"model {model.name} ({weights / 1e9:.0f} GB of weights at {machine.weight_precision}) does "
            f"not fit on {machine.name} ({machine.memory_bytes / 1e9:.0f} GB over {machine.tensor_parallel} "
            f"GPUs) with room for {MIN_KV_TOKENS} tokens of KV cache: use more GPUs per instance "
            "(tensor parallelism) or a smaller weight precision"
        )
    return free
