"""Layer 1: GPUs and machine types (what exists), validated, frozen, in SI units."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cache

from splitplan.catalog._load import load_table
from splitplan.errors import CatalogError, InputError


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuSpec:
    name: str
    memory_bytes: float
    hbm_bytes_per_s: float
    fp16_flops: float
    tdp_w: float
    source: str = ""

    def __post_init__(self) -> None:
        for attr in ("memory_bytes", "hbm_bytes_per_s", "fp16_flops", "tdp_w"):
            value = getattr(self, attr)
            if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
                raise CatalogError(f"GPU {self.name!r}: {attr} must be a positive number, got {value!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class MachineType:
    """An n-GPU server running one model instance with tensor parallelism = gpus."""

    name: str
    gpu: GpuSpec
    gpus: int
    cost_usd_per_h: float
    interconnect_bytes_per_s: float
    source: str = ""

    def __post_init__(self) -> None:
        if not (isinstance(self.gpus, int) and self.gpus > 0):
            raise CatalogError(f"machine {self.name!r}: gpus must be a positive integer")
        if not self.cost_usd_per_h > 0 or not self.interconnect_bytes_per_s > 0:
            raise CatalogError(f"machine {self.name!r}: cost and interconnect must be positive")

    @property
    def tensor_parallel(self) -> int:
        return self.gpus

    @property
    def memory_bytes(self) -> float:
        return self.gpu.memory_bytes * self.gpus

    @property
    def rated_power_kw(self) -> float:
        return self.gpu.tdp_w * self.gpus / 1000.0


def validate_power_cap(power_cap: float, what: str = "power cap") -> float:
    try:
        cap = float(power_cap)
    except (TypeError, ValueError):
        raise InputError(f"{what} must be a number in (0, 1], got {power_cap!r}") from None
    if not (0.0 < cap <= 1.0):
        raise InputError(f"{what} must be in (0, 1], got {power_cap!r}")
    return cap


@dataclass(frozen=True, slots=True, kw_only=True)
class Machine:
    """A machine type in a pool, with the fraction of rated power it is provisioned for."""

    type: MachineType
    power_cap: float = 1.0
    label: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "power_cap", validate_power_cap(self.power_cap))

    @property
    def name(self) -> str:
        cap = "" if self.power_cap == 1.0 else f"@{self.power_cap:g}"
        return self.label or f"{self.type.name}{cap}"

    @property
    def power_kw(self) -> float:
        """Provisioned power: GPUs × TDP × cap (the paper's convention, SPLITWISE.md §2)."""
        return self.type.rated_power_kw * self.power_cap

    @property
    def cost_usd_per_h(self) -> float:
        return self.type.cost_usd_per_h

    @property
    def memory_bytes(self) -> float:
        return self.type.memory_bytes


@cache
def get_gpu(name: str) -> GpuSpec:
    table = load_table("gpu")
    key = name.lower()
    if key not in table:
        raise CatalogError(f"unknown GPU {name!r} (known: {', '.join(sorted(table))})")
    return GpuSpec(name=key, **table[key])


@cache
def get_machine_type(name: str) -> MachineType:
    """A machine type by machine name (dgx-h100) or by GPU name (h100-80gb → its 8-GPU machine)."""
    table = load_table("machine")
    key = name.lower()
    if key not in table:
        by_gpu = [m for m, entry in table.items() if entry["gpu"] == key]
        if not by_gpu:
            known = sorted(table) + sorted(load_table("gpu"))
            raise CatalogError(f"unknown machine or GPU {name!r} (known: {', '.join(known)})")
        key = by_gpu[0]
    entry = dict(table[key])
    gpu = get_gpu(entry.pop("gpu"))
    return MachineType(name=key, gpu=gpu, **entry)


def list_gpus() -> list[GpuSpec]:
    return [get_gpu(n) for n in sorted(load_table("gpu"))]


def list_machine_types() -> list[MachineType]:
    return [get_machine_type(n) for n in sorted(load_table("machine"))]
