"""Layer 3: cluster designs (pool machine types and caps) and configurations (pool sizes).

A *design* fixes what kind of machine each pool uses; a *configuration* adds how many. Baselines
have one pool whose machines run both phases (mixed batching); Splitwise designs have a prompt pool
and a token pool (the mixed pool is formed at run time by borrowing from them).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from splitplan.catalog import Machine, get_machine_type, unknown_name
from splitplan.catalog.precision import Precision, parse_precision
from splitplan.errors import CatalogError, InputError

DesignKind = Literal["baseline", "splitwise"]


class BatchPolicy(enum.Enum):
    """How a machine that runs both phases (a baseline's, or a split design's mixed pool) forms
    its iterations.

    MIXED: 2023-style mixed continuous batching — whole prompts first, up to max_batch_tokens, the
    paper's baselines. CHUNKED: chunked prefill (Sarathi-Serve; vLLM's and SGLang's default) — a
    budget of `SimConfig.chunk_tokens` tokens per iteration, running decodes first, the rest filled
    with chunks of the oldest waiting prompts.
    """

    MIXED = "mixed"
    CHUNKED = "chunked"


@dataclass(frozen=True, slots=True, kw_only=True)
class Design:
    name: str
    kind: DesignKind
    prompt: Machine
    token: Machine
    policy: BatchPolicy = BatchPolicy.MIXED

    @property
    def is_baseline(self) -> bool:
        return self.kind == "baseline"

    def _counts(
        self, prompt_machines: npt.ArrayLike, token_machines: npt.ArrayLike
    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        p = np.asarray(prompt_machines, dtype=np.float64)
        t = np.asarray(token_machines, dtype=np.float64)
        # the one baseline convention: its single pool is counted as `prompt_machines`; a token
        # count, if any, is ignored (search grids carry t = 0 for baselines)
        return np.broadcast_arrays(p, np.zeros_like(t) if self.is_baseline else t)  # type: ignore[return-value]

    def cost_usd_per_h(
        self, prompt_machines: npt.ArrayLike, token_machines: npt.ArrayLike = 0
    ) -> npt.NDArray[np.float64]:
        """Cost of pool counts (scalars or arrays, broadcast): Σ count × the pool machine's $/h."""
        p, t = self._counts(prompt_machines, token_machines)
        return p * self.prompt.cost_usd_per_h + t * self.token.cost_usd_per_h

    def power_kw(
        self, prompt_machines: npt.ArrayLike, token_machines: npt.ArrayLike = 0
    ) -> npt.NDArray[np.float64]:
        """Provisioned power of pool counts (scalars or arrays, broadcast), kW."""
        p, t = self._counts(prompt_machines, token_machines)
        return p * self.prompt.power_kw + t * self.token.power_kw


def make_instance(
    gpu_or_machine: str,
    power_cap: float = 1.0,
    tp: int | None = None,
    precision: str | Precision = Precision.FP16,
    kv_precision: str | Precision | None = None,
) -> Machine:
    weights = parse_precision(precision, "weight precision")
    kv = default_kv_precision(weights) if kv_precision is None else kv_precision
    return Machine(
        type=get_machine_type(gpu_or_machine),
        power_cap=power_cap,
        tp=tp,
        weight_precision=weights,
        kv_precision=parse_precision(kv, "KV-cache precision", kv=True),
    )


def default_kv_precision(weights: Precision) -> Precision:
    """The KV cache follows the weights (fp16, bf16, fp8); int4 weights keep a 16-bit cache."""
    return Precision.FP16 if weights is Precision.INT4 else weights


def _paper_designs() -> dict[str, Design]:
    a100, h100 = make_instance("dgx-a100"), make_instance("dgx-h100")
    h100cap = make_instance("dgx-h100", 0.7)
    return {
        "baseline-a100": Design(name="baseline-a100", kind="baseline", prompt=a100, token=a100),
        "baseline-h100": Design(name="baseline-h100", kind="baseline", prompt=h100, token=h100),
        "splitwise-aa": Design(name="splitwise-aa", kind="splitwise", prompt=a100, token=a100),
        "splitwise-hh": Design(name="splitwise-hh", kind="splitwise", prompt=h100, token=h100),
        "splitwise-ha": Design(name="splitwise-ha", kind="splitwise", prompt=h100, token=a100),
        "splitwise-hhcap": Design(name="splitwise-hhcap", kind="splitwise", prompt=h100, token=h100cap),
    }


# The names only, written out: building the designs reads the catalog, and a user catalog's error
# ($SPLITPLAN_CATALOG) must surface inside a command as one line, not at import as a traceback.
PAPER_DESIGNS = (
    "baseline-a100",
    "baseline-h100",
    "splitwise-aa",
    "splitwise-hh",
    "splitwise-ha",
    "splitwise-hhcap",
)


def _chunked_designs() -> dict[str, Design]:
    a100, h100 = make_instance("dgx-a100"), make_instance("dgx-h100")
    chunked = BatchPolicy.CHUNKED
    return {
        "chunked-a100": Design(name="chunked-a100", kind="baseline", prompt=a100, token=a100, policy=chunked),
        "chunked-h100": Design(name="chunked-h100", kind="baseline", prompt=h100, token=h100, policy=chunked),
    }


CHUNKED_DESIGNS = ("chunked-a100", "chunked-h100")  # names only, as PAPER_DESIGNS
# what the default `splitplan search` compares: the paper's designs and the chunked-prefill baselines
SEARCH_DESIGNS = PAPER_DESIGNS + CHUNKED_DESIGNS


def get_design(name: str) -> Design:
    if not isinstance(name, str):  # a number from a request file or a caller: no `.lower` to call
        raise CatalogError(f"a design name must be a string, got {name!r}")
    designs = {**_paper_designs(), **_chunked_designs()}
    key = name.lower()
    if key not in designs:
        raise unknown_name("design", name, list(designs), "; or custom pools")
    return designs[key]


def custom_design(
    prompt_gpu: str,
    token_gpu: str | None = None,
    prompt_power_cap: float = 1.0,
    token_power_cap: float = 1.0,
    *,
    baseline: bool = False,
    name: str | None = None,
    prompt_tp: int | None = None,
    token_tp: int | None = None,
    prompt_precision: str | Precision = Precision.FP16,
    token_precision: str | Precision = Precision.FP16,
    prompt_kv_precision: str | Precision | None = None,
    token_kv_precision: str | Precision | None = None,
    policy: BatchPolicy = BatchPolicy.MIXED,
) -> Design:
    """A design from any catalog GPU/machine per pool; `baseline` makes one mixed pool (the
    prompt pool's options). Per pool: tensor parallelism (`None`: the whole node), weight precision
    and KV precision (`None`: the weights' for fp16/bf16/fp8, fp16 for int4 weights). `policy` is
    the batch formation of the machines that run both phases (baseline machines, a split design's
    mixed pool)."""
    token_gpu = prompt_gpu if token_gpu is None else token_gpu
    for what, gpu in (("prompt_gpu", prompt_gpu), ("token_gpu", token_gpu)):
        if not isinstance(gpu, str):  # the catalog lookup would fail on `.lower` of it
            raise CatalogError(f"`{what}` must be a GPU or machine type name, got {gpu!r}")
    prompt = make_instance(prompt_gpu, prompt_power_cap, prompt_tp, prompt_precision, prompt_kv_precision)
    token = (
        prompt
        if baseline
        else make_instance(token_gpu, token_power_cap, token_tp, token_precision, token_kv_precision)
    )
    label = name or (f"baseline-{prompt.name}" if baseline else f"split-{prompt.name}-{token.name}")
    kind: DesignKind = "baseline" if baseline else "splitwise"
    return Design(name=label, kind=kind, prompt=prompt, token=token, policy=policy)


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterConfig:
    """A design with pool sizes. Baselines: `prompt_machines` = N and `token_machines` = 0.

    Sizes count instances of the pool's `Machine` (a whole node for the paper's designs); `nodes`
    gives the whole nodes they occupy.
    """

    design: Design
    prompt_machines: int
    token_machines: int = 0

    def __post_init__(self) -> None:
        for attr in ("prompt_machines", "token_machines"):
            v = getattr(self, attr)
            if not isinstance(v, int) or v < 0:
                raise InputError(f"{attr} must be an integer ≥ 0, got {v!r}")
        if self.design.is_baseline:
            if self.token_machines != 0:
                raise InputError("a baseline design has one pool: give its size as `machines`")
            if self.prompt_machines < 1:
                raise InputError("a baseline needs at least 1 machine")
        elif self.prompt_machines < 1 or self.token_machines < 1:
            raise InputError(
                f"{self.design.name} needs ≥ 1 prompt and ≥ 1 token machine, got "
                f"{self.prompt_machines} + {self.token_machines}"
            )

    @classmethod
    def baseline(cls, design: Design, machines: int) -> ClusterConfig:
        return cls(design=design, prompt_machines=machines, token_machines=0)

    @property
    def machines(self) -> int:
        return self.prompt_machines + self.token_machines

    @property
    def prompt_nodes(self) -> int:
        """Whole nodes the prompt pool's instances occupy (the baseline's one pool)."""
        return self.design.prompt.nodes_for(self.prompt_machines)

    @property
    def token_nodes(self) -> int:
        return 0 if self.design.is_baseline else self.design.token.nodes_for(self.token_machines)

    @property
    def nodes(self) -> int:
        """Whole nodes of the cluster (pools do not share nodes); = machines for whole-node instances."""
        return self.prompt_nodes + self.token_nodes

    @property
    def cost_usd_per_h(self) -> float:
        return float(self.design.cost_usd_per_h(self.prompt_machines, self.token_machines))

    @property
    def power_kw(self) -> float:
        return float(self.design.power_kw(self.prompt_machines, self.token_machines))

    @property
    def label(self) -> str:
        if self.design.is_baseline:
            return f"{self.design.name} ×{self.machines}"
        return f"{self.design.name} {self.prompt_machines}P+{self.token_machines}T"


def pool_fields(machine: Machine, which: str) -> dict[str, object]:
    """The columns that describe one pool's instances in JSON results and parquet records."""
    return {
        f"{which}_tp": machine.tensor_parallel,
        f"{which}_precision": machine.weight_precision.value,
        f"{which}_kv_precision": machine.kv_precision.value,
    }
