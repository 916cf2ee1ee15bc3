"""Layer 2: the analytic performance model — a calibrated roofline built from the catalog.

Per iteration on one machine (gpus × per-GPU peaks from the catalog):

- bytes moved: the weights touched (all of them for a dense model; for a sparse mixture-of-experts
  model the shared part plus the experts the batch's tokens are expected to hit), the KV cache read
  (every context token, grouped-query attention counted) and written (one token per decode);
- FLOPs: 2 · active_params per token in the linear layers, plus attention FLOPs that grow with the
  context (4 · layers · heads · head_dim per token of context per decode; causal self-attention for
  a prompt, with the prompt tokens taken as one sequence of at most PROMPT_SEQ_CAP tokens);
- time = overhead + max(bytes / achievable bandwidth, FLOPs / achievable compute) + context terms,
  achievable = efficiency coefficient × catalog peak. A prompt iteration's compute time is scaled
  by a knee factor 1 + gain · x^power / (1 + x^power), x = tokens / knee_tokens: measured prompt
  throughput peaks near 2k batched tokens and falls beyond (SPLITWISE.md §1), which a pure roofline
  cannot express.

Token and mixed iterations are affine in `context` (f(batch) + g · context) as the simulators need;
the context terms sit outside the max so that holds exactly.

Power cap: prompt-side time (compute-bound) × `prompt_cap_factor(cap)`, token-side time
(memory-bound) × `token_cap_factor(cap)`; both curves are defined in perf/base.py. A mixed iteration
applies the prompt factor to its batch part and the token factor to its context part.

Coefficients are fitted per GPU type to a profile table (perf/fit.py) and shipped in
data/perf/analytic_coeffs.toml, with per-(GPU type, model) refinements for the models the profile
covers (other models on a calibrated GPU use the GPU's shared fit). GPU types without a
calibration use the documented defaults of that file (`calibrated = False`, so results can say so).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, fields
from functools import cache
from pathlib import Path

import numpy as np
import numpy.typing as npt

from splitplan._paths import data_dir
from splitplan.catalog import Machine, ModelSpec
from splitplan.errors import InputError
from splitplan.perf.base import FloatArray, prompt_cap_factor, token_cap_factor

# Prompt attention convention: the tokens of a prompt iteration form one sequence of up to this many
# tokens (the machine-level scheduler batches at most 2048 prompt tokens per iteration).
PROMPT_SEQ_CAP = 2048


@dataclass(frozen=True, slots=True, kw_only=True)
class AnalyticCoefficients:
    """Efficiencies (fractions of catalog peaks) and overheads (seconds) of one GPU type."""

    bw_eff: float = 0.6
    prompt_flops_eff: float = 0.4
    token_flops_eff: float = 0.1
    prompt_overhead_s: float = 0.02
    token_overhead_s: float = 0.02
    token_seq_s: float = 1e-4
    knee_tokens: float = 4096.0
    knee_gain: float = 0.5
    knee_power: float = 2.0
    calibrated: bool = False
    source: str = ""

    def __post_init__(self) -> None:
        for f in ("bw_eff", "prompt_flops_eff", "token_flops_eff", "knee_tokens", "knee_power"):
            v = getattr(self, f)
            if not (np.isfinite(v) and v > 0):
                raise InputError(f"analytic coefficient {f} must be positive, got {v!r}")
        for f in ("prompt_overhead_s", "token_overhead_s", "token_seq_s", "knee_gain"):
            v = getattr(self, f)
            if not (np.isfinite(v) and v >= 0):
                raise InputError(f"analytic coefficient {f} must be non-negative, got {v!r}")

    @staticmethod
    def numeric_fields() -> tuple[str, ...]:
        return (
            "bw_eff",
            "prompt_flops_eff",
            "token_flops_eff",
            "prompt_overhead_s",
            "token_overhead_s",
            "token_seq_s",
            "knee_tokens",
            "knee_gain",
            "knee_power",
        )


@dataclass(frozen=True, slots=True)
class CoefficientSet:
    """Per-GPU coefficients, optional per-(GPU, model) refinements, and the defaults used for GPU
    types without a calibration."""

    gpus: dict[str, AnalyticCoefficients]
    default: AnalyticCoefficients
    models: dict[tuple[str, str], AnalyticCoefficients] = field(default_factory=dict)
    path: str = ""

    def lookup(self, gpu: str, model: str) -> AnalyticCoefficients:
        if (gpu, model) in self.models:
            return self.models[gpu, model]
        return self.gpus.get(gpu, self.default)


def _coeffs_from_dict(d: dict[str, object], where: str, calibrated: bool) -> AnalyticCoefficients:
    known = {f.name for f in fields(AnalyticCoefficients)} | {"model"}
    unknown = set(d) - known
    if unknown:
        raise InputError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
    kw: dict[str, object] = {}
    for k in AnalyticCoefficients.numeric_fields():
        if k in d:
            v = d[k]
            if isinstance(v, bool) or not isinstance(v, int | float):
                raise InputError(f"{where}: {k} must be a number, got {v!r}")
            kw[k] = float(v)
    kw["source"] = str(d.get("source", ""))
    kw["calibrated"] = calibrated
    return AnalyticCoefficients(**kw)  # type: ignore[arg-type]


def load_coefficients(path: str | Path | None = None) -> CoefficientSet:
    """Read a coefficient TOML file (the shipped one when `path` is None)."""
    if path is None:
        return _shipped()
    return _load(str(path))


@cache
def _shipped() -> CoefficientSet:
    return _load(str(data_dir() / "perf" / "analytic_coeffs.toml"))


@cache
def _load(path: str) -> CoefficientSet:
    p = Path(path)
    from splitplan._io import read_text_file

    text = read_text_file(p, "coefficient file")
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"coefficient file {p} is not valid TOML: {exc}") from None
    gpus_doc = doc.get("gpu", {})
    if not isinstance(gpus_doc, dict):
        raise InputError(f"{p}: [gpu] must be a table")
    gpus: dict[str, AnalyticCoefficients] = {}
    models: dict[tuple[str, str], AnalyticCoefficients] = {}
    for name, entry in gpus_doc.items():
        if not isinstance(entry, dict):
            raise InputError(f"{p}: [gpu.{name}] must be a table")
        gpu = str(name).lower()
        gpus[gpu] = _coeffs_from_dict(entry, f"{p} [gpu.{name}]", True)
        refinements = entry.get("model", {})
        if not isinstance(refinements, dict):
            raise InputError(f"{p}: [gpu.{name}.model] must be a table")
        for mname, mentry in refinements.items():
            if not isinstance(mentry, dict):
                raise InputError(f"{p}: [gpu.{name}.model.{mname}] must be a table")
            # A refinement overrides some or all of the GPU's coefficients for one model.
            merged = {k: getattr(gpus[gpu], k) for k in AnalyticCoefficients.numeric_fields()}
            merged.update(mentry)
            models[gpu, str(mname).lower()] = _coeffs_from_dict(
                merged, f"{p} [gpu.{name}.model.{mname}]", True
            )
    default_doc = doc.get("default", {})
    if not isinstance(default_doc, dict):
        raise InputError(f"{p}: [default] must be a table")
    default = _coeffs_from_dict(default_doc, f"{p} [default]", False)
    return CoefficientSet(gpus=gpus, default=default, models=models, path=str(p))


def touched_weight_bytes(model: ModelSpec, tokens: FloatArray, bytes_per_weight: float) -> FloatArray:
    """Weight bytes read by an iteration of `tokens` tokens (experts hit, for sparse models).

    Each token routes to `experts_per_token` of `experts` experts; with independent routing an
    expert is hit by at least one of n tokens with probability 1 − (1 − k/E)^n.
    """
    if not model.is_sparse:
        return np.full(np.shape(tokens), model.params * bytes_per_weight)
    r = model.expert_fraction
    expert = model.routed_expert_params
    shared = max(model.params - expert, 0.0)
    hit = 1.0 - (1.0 - r) ** np.maximum(tokens, 1.0)
    return (shared + expert * hit) * bytes_per_weight


class AnalyticPerfModel:
    """Roofline iteration times for one (model, machine, power cap); see the module docstring."""

    kind = "analytic"

    def __init__(
        self,
        model: ModelSpec,
        machine: Machine,
        coefficients: AnalyticCoefficients | CoefficientSet | None = None,
    ) -> None:
        self.model = model
        self.machine = machine
        if coefficients is None:
            coefficients = load_coefficients()
        if isinstance(coefficients, CoefficientSet):
            coefficients = coefficients.lookup(machine.type.gpu.name, model.name)
        self.coefficients = coefficients
        self.calibrated = bool(coefficients.calibrated)
        c = coefficients
        gpus = machine.tensor_parallel
        bw = c.bw_eff * machine.type.gpu.hbm_bytes_per_s * gpus
        peak = machine.type.gpu.dense_flops(machine.weight_precision)
        self._prompt_flops = c.prompt_flops_eff * peak * gpus
        self._token_flops = c.token_flops_eff * peak * gpus
        self._bw = bw
        self._weight_b = machine.weight_precision.bytes_per_value
        self._kv_bytes_per_token = model.kv_bytes_per_token_at(machine.kv_precision)
        self._pcap = prompt_cap_factor(machine.power_cap)
        self._tcap = token_cap_factor(machine.power_cap)
        # Attention FLOPs per (query token × context token): QKᵀ and AV, 2 FLOPs per MAC.
        self._attn_flops = 4.0 * model.layers * model.heads * model.head_dim
        # Per context token of a decode: read its K and V, and the attention FLOPs over it.
        self._g_s = self._kv_bytes_per_token / bw + self._attn_flops / self._token_flops

    # -- building blocks (no power cap) ------------------------------------------------------------
    def _prompt_core(self, n: FloatArray) -> FloatArray:
        c = self.coefficients
        m = self.model
        seq = np.minimum(n, PROMPT_SEQ_CAP)
        flops = 2.0 * m.active_params * n + 0.5 * self._attn_flops * n * seq
        x = (n / c.knee_tokens) ** c.knee_power
        knee = 1.0 + c.knee_gain * x / (1.0 + x)
        mem = (touched_weight_bytes(m, n, self._weight_b) + n * self._kv_bytes_per_token) / self._bw
        return c.prompt_overhead_s + np.maximum(mem, flops * knee / self._prompt_flops)

    def _token_core(self, b: FloatArray) -> FloatArray:
        c = self.coefficients
        m = self.model
        mem = (touched_weight_bytes(m, b, self._weight_b) + b * self._kv_bytes_per_token) / self._bw
        comp = 2.0 * m.active_params * b / self._token_flops
        return c.token_overhead_s + c.token_seq_s * b + np.maximum(mem, comp)

    # -- the PerfModel protocol --------------------------------------------------------------------
    def prompt_time_s(self, tokens: npt.ArrayLike, prompts: npt.ArrayLike = 1) -> FloatArray:
        # `prompts` is not used: the calibration keys prompt time on batch tokens (PROMPT_SEQ_CAP)
        n = np.asarray(tokens, dtype=np.float64)
        return np.asarray(self._prompt_core(n) * self._pcap, dtype=np.float64)

    def token_time_s(self, batch: npt.ArrayLike, context: npt.ArrayLike) -> FloatArray:
        b = np.asarray(batch, dtype=np.float64)
        ctx = np.asarray(context, dtype=np.float64)
        return np.asarray((self._token_core(b) + self._g_s * ctx) * self._tcap, dtype=np.float64)

    def mixed_time_s(self, batch_tokens: npt.ArrayLike, context: npt.ArrayLike) -> FloatArray:
        """Prompt-like pass over `batch_tokens` tokens plus reading the decodes' KV context."""
        n = np.asarray(batch_tokens, dtype=np.float64)
        ctx = np.asarray(context, dtype=np.float64)
        return np.asarray(self._prompt_core(n) * self._pcap + self._g_s * ctx * self._tcap, dtype=np.float64)

    def decode_alone_time_s(self, context: npt.ArrayLike) -> FloatArray:
        return self.token_time_s(1.0, context)

    def token_affine(self, batch: npt.ArrayLike) -> tuple[FloatArray, float]:
        """(f(batch), g) with token_time_s(batch, context) = f(batch) + g · context."""
        b = np.asarray(batch, dtype=np.float64)
        return self._token_core(b) * self._tcap, float(self._g_s * self._tcap)
