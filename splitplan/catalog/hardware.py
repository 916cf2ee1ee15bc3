"""Layer 1: GPUs and machine types (what exists), validated, frozen, in SI units."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cache

from splitplan.catalog._load import entry_origin, load_table, register_cache, register_schema, unknown_name
from splitplan.catalog.precision import Precision, parse_precision
from splitplan.errors import CatalogError, InputError


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuSpec:
    name: str
    memory_bytes: float
    hbm_bytes_per_s: float
    fp16_flops: float
    tdp_w: float
    # Dense (non-sparse) fp8 tensor throughput; None: the GPU has no fp8 tensor cores (A100).
    fp8_flops: float | None = None
    source: str = ""

    def __post_init__(self) -> None:
        for attr in ("memory_bytes", "hbm_bytes_per_s", "fp16_flops", "tdp_w"):
            value = getattr(self, attr)
            if not _positive(value):
                raise CatalogError(f"GPU {self.name!r}: {attr} must be a positive number, got {value!r}")
        if self.fp8_flops is not None and not _positive(self.fp8_flops):
            raise CatalogError(f"GPU {self.name!r}: fp8_flops must be a positive number or absent")

    @property
    def supports_fp8(self) -> bool:
        return self.fp8_flops is not None

    def dense_flops(self, precision: Precision) -> float:
        """Dense tensor peak at the precision the matrix units run at (int4 weights → 16-bit)."""
        compute = Precision(precision).compute
        if compute is Precision.FP8:
            if self.fp8_flops is None:
                raise InputError(f"GPU {self.name} has no fp8 support: use fp16 or bf16 (or int4 weights)")
            return float(self.fp8_flops)
        return float(self.fp16_flops)


def _positive(value: object) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return math.isfinite(value) and value > 0


# Intra-node GPU-to-GPU link when a node type does not give one: NVLink-class, per GPU and direction.
DEFAULT_INTRA_NODE_BYTES_PER_S = 300e9
DEFAULT_INTRA_NODE_LATENCY_S = 10e-6


@dataclass(frozen=True, slots=True, kw_only=True)
class MachineType:
    """A node type: `gpus` GPUs of one kind, priced and provisioned as a whole.

    A node hosts one or more model instances (see `Machine`); the paper's machines are nodes running
    one tensor-parallel-8 instance each.
    """

    name: str
    gpu: GpuSpec
    gpus: int
    cost_usd_per_h: float
    interconnect_bytes_per_s: float
    # GPU-to-GPU link inside the node (NVLink, Infinity Fabric, PCIe), per GPU and per direction:
    # the tensor-parallel all-reduces of an instance run over it.
    intra_node_bytes_per_s: float = DEFAULT_INTRA_NODE_BYTES_PER_S
    intra_node_latency_s: float = DEFAULT_INTRA_NODE_LATENCY_S
    source: str = ""

    def __post_init__(self) -> None:
        if not (isinstance(self.gpus, int) and not isinstance(self.gpus, bool) and self.gpus > 0):
            raise CatalogError(f"machine {self.name!r}: gpus must be a positive integer")
        for attr in ("cost_usd_per_h", "interconnect_bytes_per_s", "intra_node_bytes_per_s"):
            if not _positive(getattr(self, attr)):
                raise CatalogError(f"machine {self.name!r}: {attr} must be a positive number")
        lat = self.intra_node_latency_s
        if not (isinstance(lat, int | float) and math.isfinite(lat) and lat >= 0):
            raise CatalogError(f"machine {self.name!r}: intra_node_latency_s must be a number ≥ 0")

    @property
    def tensor_parallel(self) -> int:
        """The largest instance a node can host (all its GPUs)."""
        return self.gpus

    @property
    def tp_choices(self) -> tuple[int, ...]:
        """Tensor-parallel sizes that tile the node exactly."""
        return tuple(t for t in range(1, self.gpus + 1) if self.gpus % t == 0)

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


def validate_tp(tp: object, node: MachineType) -> int:
    """A tensor-parallel size that tiles `node` exactly (never rounded)."""
    if isinstance(tp, bool) or not isinstance(tp, int) or tp < 1:
        raise InputError(f"tensor parallelism must be an integer ≥ 1, got {tp!r}")
    if tp > node.gpus or node.gpus % tp:
        choices = ", ".join(str(t) for t in node.tp_choices)
        raise InputError(
            f"tensor parallelism {tp} does not divide the {node.gpus} GPUs of {node.name} "
            f"(use one of {choices})"
        )
    return tp


@dataclass(frozen=True, slots=True, kw_only=True)
class Machine:
    """One model instance, the unit of a pool: `tp` GPUs of a node type at given precisions.

    Cost and power are the instance's share of its node (GPUs used ÷ GPUs per node × node $/h, and
    GPUs × TDP × power cap), so pools of instances of any size compare on one scale; memory is the
    instance's GPUs' HBM. `tp = None` takes the whole node, which with fp16 weights and KV is the
    paper's machine (SPLITWISE.md §2) and gives exactly its numbers.
    """

    type: MachineType
    power_cap: float = 1.0
    tp: int | None = None
    weight_precision: Precision = Precision.FP16
    kv_precision: Precision = Precision.FP16
    label: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "power_cap", validate_power_cap(self.power_cap))
        tp = self.type.gpus if self.tp is None else validate_tp(self.tp, self.type)
        object.__setattr__(self, "tp", tp)
        w = parse_precision(self.weight_precision, "weight precision")
        kv = parse_precision(self.kv_precision, "KV-cache precision", kv=True)
        object.__setattr__(self, "weight_precision", w)
        object.__setattr__(self, "kv_precision", kv)
        for p, what in ((w, "weights"), (kv, "KV cache")):
            if p.compute is Precision.FP8 and not self.type.gpu.supports_fp8:
                raise InputError(
                    f"{self.type.gpu.name} has no fp8 support ({what} at fp8 on {self.type.name}): "
                    "use fp16 or bf16"
                )

    @property
    def tensor_parallel(self) -> int:
        assert self.tp is not None  # set in __post_init__
        return self.tp

    @property
    def gpu(self) -> GpuSpec:
        return self.type.gpu

    @property
    def is_whole_node(self) -> bool:
        return self.tensor_parallel == self.type.gpus

    @property
    def node_share(self) -> float:
        """Fraction of a node this instance occupies."""
        return self.tensor_parallel / self.type.gpus

    @property
    def name(self) -> str:
        if self.label:
            return self.label
        cap = "" if self.power_cap == 1.0 else f"@{self.power_cap:g}"
        return self.instance_name + cap

    @property
    def instance_name(self) -> str:
        """Node type, TP (unless the whole node) and precisions (unless fp16): `dgx-h100/tp2/fp8`;
        a whole-node fp16 instance is named by its node type alone (the paper's machines)."""
        parts = [self.type.name]
        if not self.is_whole_node:
            parts.append(f"tp{self.tensor_parallel}")
        if self.weight_precision is not Precision.FP16 or self.kv_precision is not Precision.FP16:
            kv = "" if self.kv_precision == self.weight_precision else f"+kv{self.kv_precision.value}"
            parts.append(f"{self.weight_precision.value}{kv}")
        return "/".join(parts)

    @property
    def power_kw(self) -> float:
        """Provisioned power: GPUs × TDP × cap (the paper's convention, SPLITWISE.md §2)."""
        return self.type.gpu.tdp_w * self.tensor_parallel / 1000.0 * self.power_cap

    @property
    def cost_usd_per_h(self) -> float:
        return self.type.cost_usd_per_h * self.node_share

    @property
    def memory_bytes(self) -> float:
        return self.type.gpu.memory_bytes * self.tensor_parallel

    def nodes_for(self, instances: int) -> int:
        """Whole nodes needed to host `instances` instances (instances of one pool pack nodes)."""
        return -(-int(instances) * self.tensor_parallel // self.type.gpus)


register_schema("gpu", GpuSpec)
register_schema("machine", MachineType)


@register_cache
@cache
def get_gpu(name: str) -> GpuSpec:
    table = load_table("gpu")
    key = name.lower()
    if key not in table:
        raise unknown_name("GPU", name, sorted(table))
    try:
        return GpuSpec(name=key, **table[key])
    except CatalogError as exc:
        raise CatalogError(f"{entry_origin('gpu', key)} catalog: {exc}") from None


@register_cache
@cache
def get_machine_type(name: str) -> MachineType:
    """A machine type by machine name (dgx-h100) or by GPU name (h100-80gb → its 8-GPU machine)."""
    table = load_table("machine")
    key = _machine_key(name, table)
    entry = dict(table[key])
    load_table("gpu")  # a GPU file that cannot be read is its own error, not this machine's
    try:
        gpu = get_gpu(str(entry.pop("gpu")))
    except CatalogError as exc:
        raise CatalogError(f"machine {key!r} ({entry_origin('machine', key)}): {exc}") from None
    try:
        return MachineType(name=key, gpu=gpu, **entry)
    except CatalogError as exc:
        raise CatalogError(f"{entry_origin('machine', key)} catalog: {exc}") from None


def _machine_key(name: str, table: dict[str, dict[str, object]]) -> str:
    """The machine a name picks: a machine type's name; a GPU's (its machine); or a chip's short
    name, one hyphen-separated part of exactly one machine's name or its GPU's (`h200` is
    `hgx-h200` with `h200-141gb`), since people name hardware by its chip. A short name that several
    machines share (`80gb`, `dgx`) is refused with their names, never picked by order."""
    key = name.lower()
    if key in table:
        return key
    by_gpu = [m for m, entry in table.items() if str(entry["gpu"]).lower() == key]
    if by_gpu:
        return by_gpu[0]
    by_part = [
        m for m, e in table.items() if key and key in (*m.split("-"), *str(e["gpu"]).lower().split("-"))
    ]
    if len(by_part) == 1:
        return by_part[0]
    if by_part:
        several = ", ".join(sorted(by_part))
        raise CatalogError(f"{name!r} names several machine types ({several}): give one of them")
    raise unknown_name("machine or GPU", name, sorted(table) + sorted(load_table("gpu")))


def list_gpus() -> list[GpuSpec]:
    return [get_gpu(n) for n in sorted(load_table("gpu"))]


def list_machine_types() -> list[MachineType]:
    return [get_machine_type(n) for n in sorted(load_table("machine"))]
