"""Layer 1: model architectures and the memory facts derived from them."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from splitplan.catalog._load import load_table
from splitplan.errors import CatalogError


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelSpec:
    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn_hidden: int
    vocab: int
    params: float
    active_params: float
    dtype_bytes: int = 2
    source: str = ""

    def __post_init__(self) -> None:
        for attr in ("layers", "hidden", "heads", "kv_heads", "head_dim", "params", "dtype_bytes"):
            value = getattr(self, attr)
            if not (isinstance(value, int | float) and value > 0):
                raise CatalogError(f"model {self.name!r}: {attr} must be positive, got {value!r}")
        if self.active_params > self.params:
            raise CatalogError(f"model {self.name!r}: active_params exceeds params")

    @property
    def weight_bytes(self) -> float:
        return self.params * self.dtype_bytes

    @property
    def kv_bytes_per_token(self) -> float:
        """K and V for every layer and KV head (grouped-query attention counted)."""
        return 2.0 * self.layers * self.kv_heads * self.head_dim * self.dtype_bytes

    @property
    def kv_bytes_per_token_no_gqa(self) -> float:
        """The reference simulator's convention: 2 · layers · hidden · dtype bytes."""
        return 2.0 * self.layers * self.hidden * self.dtype_bytes

    @property
    def is_sparse(self) -> bool:
        return self.active_params < self.params


@cache
def get_model(name: str) -> ModelSpec:
    table = load_table("model")
    key = name.lower()
    if key not in table:
        raise CatalogError(f"unknown model {name!r} (known: {', '.join(sorted(table))})")
    return ModelSpec(name=key, **table[key])


def list_models() -> list[ModelSpec]:
    return [get_model(n) for n in sorted(load_table("model"))]
