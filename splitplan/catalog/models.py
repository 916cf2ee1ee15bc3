"""Layer 1: model architectures and the memory facts derived from them."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from splitplan.catalog._load import entry_origin, load_table, register_cache, register_schema, unknown_name
from splitplan.catalog.precision import Precision
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
    # Mixture of experts: routed experts per MoE layer and how many each token uses. A dense model
    # has experts = experts_per_token = 1. The weights a token does not touch are the routed
    # experts it skips: params − active_params = routed expert weights × (1 − experts_per_token /
    # experts), which fixes how much of them a batch reads (perf models).
    experts: int = 1
    experts_per_token: int = 1
    # Multi-head latent attention (DeepSeek-V2/V3): values cached per token per layer (compressed
    # KV + decoupled RoPE key); 0 = standard attention, 2 · kv_heads · head_dim values.
    mla_kv_dim: int = 0
    source: str = ""

    def __post_init__(self) -> None:
        for attr in (
            "layers", "hidden", "heads", "kv_heads", "head_dim", "params", "dtype_bytes", "experts",
            "experts_per_token",
        ):  # fmt: skip
            value = getattr(self, attr)
            if isinstance(value, bool) or not (isinstance(value, int | float) and value > 0):
                raise CatalogError(f"model {self.name!r}: {attr} must be positive, got {value!r}")
        if isinstance(self.mla_kv_dim, bool) or not isinstance(self.mla_kv_dim, int) or self.mla_kv_dim < 0:
            raise CatalogError(f"model {self.name!r}: mla_kv_dim must be an integer ≥ 0")
        if not 0 < self.active_params <= self.params:
            raise CatalogError(f"model {self.name!r}: active_params must be in (0, params]")
        if self.experts_per_token > self.experts:
            raise CatalogError(f"model {self.name!r}: experts_per_token exceeds experts")
        if (self.active_params < self.params) != (self.experts_per_token < self.experts):
            raise CatalogError(
                f"model {self.name!r}: a mixture of experts needs active_params < params and "
                "experts_per_token < experts (a dense model: equal params, experts = 1)"
            )

    @property
    def weight_bytes(self) -> float:
        """Weight bytes at the model's native dtype (`dtype_bytes`)."""
        return self.params * self.dtype_bytes

    def weight_bytes_at(self, precision: Precision) -> float:
        return self.params * Precision(precision).bytes_per_value

    @property
    def kv_values_per_token(self) -> float:
        """Cached values per token over all layers (grouped-query attention or MLA counted)."""
        per_layer = self.mla_kv_dim if self.mla_kv_dim else 2 * self.kv_heads * self.head_dim
        return float(self.layers * per_layer)

    @property
    def kv_bytes_per_token(self) -> float:
        """K and V for every layer and KV head (grouped-query attention counted), native dtype."""
        return self.kv_values_per_token * self.dtype_bytes

    def kv_bytes_per_token_at(self, precision: Precision) -> float:
        return self.kv_values_per_token * Precision(precision).bytes_per_value

    @property
    def expert_fraction(self) -> float:
        """Fraction of the routed expert weights one token touches (1 for a dense model)."""
        return self.experts_per_token / self.experts

    @property
    def routed_expert_params(self) -> float:
        """Weights of all routed experts (0 for a dense model)."""
        if not self.is_sparse:
            return 0.0
        return (self.params - self.active_params) / (1.0 - self.expert_fraction)

    @property
    def kv_bytes_per_token_no_gqa(self) -> float:
        """The reference simulator's convention: 2 · layers · hidden · dtype bytes."""
        return 2.0 * self.layers * self.hidden * self.dtype_bytes

    @property
    def is_sparse(self) -> bool:
        return self.active_params < self.params


register_schema("model", ModelSpec)


@register_cache
@cache
def get_model(name: str) -> ModelSpec:
    if not isinstance(name, str):  # a number from a request file or a caller: no `.lower` to call
        raise CatalogError(f"a model name must be a string, got {name!r}")
    table = load_table("model")
    key = name.lower()
    if key not in table:
        raise unknown_name("model", name, sorted(table))
    try:
        return ModelSpec(name=key, **table[key])
    except CatalogError as exc:
        raise CatalogError(f"{entry_origin('model', key)} catalog: {exc}") from None


def list_models() -> list[ModelSpec]:
    return [get_model(n) for n in sorted(load_table("model"))]
