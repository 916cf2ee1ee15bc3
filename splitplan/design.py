"""Layer 3: cluster designs (pool machine types and caps) and configurations (pool sizes).

A *design* fixes what kind of machine each pool uses; a *configuration* adds how many. Baselines
have one pool whose machines run both phases (mixed batching); Splitwise designs have a prompt pool
and a token pool (the mixed pool is formed at run time by borrowing from them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from splitplan.catalog import Machine, get_machine_type
from splitplan.errors import CatalogError, InputError

DesignKind = Literal["baseline", "splitwise"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Design:
    name: str
    kind: DesignKind
    prompt: Machine
    token: Machine

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


def _machine(gpu_or_machine: str, power_cap: float = 1.0) -> Machine:
    return Machine(type=get_machine_type(gpu_or_machine), power_cap=power_cap)


def _paper_designs() -> dict[str, Design]:
    a100, h100 = _machine("dgx-a100"), _machine("dgx-h100")
    h100cap = _machine("dgx-h100", 0.7)
    return {
        "baseline-a100": Design(name="baseline-a100", kind="baseline", prompt=a100, token=a100),
        "baseline-h100": Design(name="baseline-h100", kind="baseline", prompt=h100, token=h100),
        "splitwise-aa": Design(name="splitwise-aa", kind="splitwise", prompt=a100, token=a100),
        "splitwise-hh": Design(name="splitwise-hh", kind="splitwise", prompt=h100, token=h100),
        "splitwise-ha": Design(name="splitwise-ha", kind="splitwise", prompt=h100, token=a100),
        "splitwise-hhcap": Design(name="splitwise-hhcap", kind="splitwise", prompt=h100, token=h100cap),
    }


PAPER_DESIGNS = tuple(_paper_designs())


def get_design(name: str) -> Design:
    designs = _paper_designs()
    key = name.lower()
    if key not in designs:
        raise CatalogError(f"unknown design {name!r} (known: {', '.join(designs)}; or custom pools)")
    return designs[key]


def custom_design(
    prompt_gpu: str,
    token_gpu: str | None = None,
    prompt_power_cap: float = 1.0,
    token_power_cap: float = 1.0,
    *,
    baseline: bool = False,
    name: str | None = None,
) -> Design:
    """A design from any catalog GPU/machine per pool; `baseline` makes one mixed pool."""
    token_gpu = prompt_gpu if token_gpu is None else token_gpu
    prompt = _machine(prompt_gpu, prompt_power_cap)
    token = prompt if baseline else _machine(token_gpu, token_power_cap)
    label = name or (f"baseline-{prompt.name}" if baseline else f"split-{prompt.name}-{token.name}")
    return Design(name=label, kind="baseline" if baseline else "splitwise", prompt=prompt, token=token)


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterConfig:
    """A design with pool sizes. Baselines: `prompt_machines` = N and `token_machines` = 0."""

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
