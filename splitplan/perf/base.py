"""Layer 2: the performance-model contract shared by every implementation.

A performance model answers "how long does one iteration take on one machine" for a fixed
(model, machine type, power cap). Every method broadcasts over numpy arrays of any shape and
returns float64 seconds. Implementations: `physical` (perf/physical.py: terms from the architecture
and the catalog, calibrated per serving stack), `analytic` (the paper-era calibrated roofline) and
`profile` (interpolates a measured table with the reference simulator's semantics).

Contract the simulators rely on:
- `prompt_time_s(tokens, prompts=1)`: an all-prompt iteration of `prompts` prompts totalling
  `tokens` tokens (a lone prompt by default). Models keyed on batch tokens alone ignore `prompts`.
- `token_time_s(batch, context)`: an all-decode iteration of `batch` decodes whose KV context totals
  `context` tokens. Must be affine in `context` (the DES tabulates f(batch) + g·context).
- `mixed_time_s(batch_tokens, context)`: an iteration mixing prompts and decodes, where
  `batch_tokens` = prompt tokens + number of decodes; affine in `context`.
- `decode_alone_time_s(context)`: one decode of one request with `context` tokens of KV, alone on
  the machine: the per-request TBT reference of the slowdown SLOs.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from splitplan.catalog import Machine, ModelSpec

FloatArray = npt.NDArray[np.float64]


@runtime_checkable
class PerfModel(Protocol):
    kind: str
    model: ModelSpec
    machine: Machine
    calibrated: bool

    def prompt_time_s(self, tokens: npt.ArrayLike, prompts: npt.ArrayLike = 1) -> FloatArray: ...

    def token_time_s(self, batch: npt.ArrayLike, context: npt.ArrayLike) -> FloatArray: ...

    def mixed_time_s(self, batch_tokens: npt.ArrayLike, context: npt.ArrayLike) -> FloatArray: ...

    def decode_alone_time_s(self, context: npt.ArrayLike) -> FloatArray: ...


# Power-cap response (SPLITWISE.md §2). The prompt phase is compute-bound, so its time grows as
# the cap cuts clocks; the capped-H100 profile rows give ×1.30 at a 0.70 machine cap. We use the
# power law (1/cap)^alpha through that point, alpha = ln 1.3 / ln(1/0.7) ≈ 0.736. The token phase is
# memory-bound and the paper measures almost no slowdown down to a 0.5 cap; below it we apply the
# same law relative to 0.5, i.e. max(1, (0.5/cap)^alpha).
PROMPT_CAP_ALPHA = float(np.log(1.3) / np.log(1 / 0.7))
TOKEN_CAP_KNEE = 0.5


def prompt_cap_factor(power_cap: float) -> float:
    return float((1.0 / power_cap) ** PROMPT_CAP_ALPHA)


def token_cap_factor(power_cap: float) -> float:
    return float(max(1.0, (TOKEN_CAP_KNEE / power_cap) ** PROMPT_CAP_ALPHA))
