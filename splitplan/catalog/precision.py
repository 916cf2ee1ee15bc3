"""Layer 1: numeric precisions of weights and KV caches, and what each costs in bytes.

Why an enum: precision decides memory (bytes per value), bandwidth (bytes moved per iteration) and
which tensor-core peak applies, so every layer must agree on one spelling. `fp16` and `bf16` are
the same size and speed on every catalog GPU; `fp8` needs hardware support (Hopper, Ada, Blackwell,
CDNA3); `int4` is weight-only quantization (W4A16): half a byte per weight, activations and compute
stay in 16-bit.
"""

from __future__ import annotations

from enum import StrEnum

from splitplan.errors import InputError


class Precision(StrEnum):
    FP16 = "fp16"
    BF16 = "bf16"
    FP8 = "fp8"
    INT4 = "int4"

    @property
    def bytes_per_value(self) -> float:
        return _BYTES[self]

    @property
    def compute(self) -> Precision:
        """The precision the tensor cores run at: int4 weights are dequantized to 16-bit."""
        return Precision.FP16 if self in (Precision.BF16, Precision.INT4) else self


_BYTES = {Precision.FP16: 2.0, Precision.BF16: 2.0, Precision.FP8: 1.0, Precision.INT4: 0.5}

WEIGHT_PRECISIONS = (Precision.FP16, Precision.BF16, Precision.FP8, Precision.INT4)
KV_PRECISIONS = (Precision.FP16, Precision.BF16, Precision.FP8)


def parse_precision(value: object, what: str = "precision", *, kv: bool = False) -> Precision:
    """A Precision from its name; one clear line naming the allowed values otherwise."""
    allowed = KV_PRECISIONS if kv else WEIGHT_PRECISIONS
    if isinstance(value, Precision) and value in allowed:
        return value
    key = str(value).strip().lower()
    for p in allowed:
        if p.value == key:
            return p
    names = ", ".join(p.value for p in allowed)
    raise InputError(f"{what} must be one of {names}, got {value!r}")
