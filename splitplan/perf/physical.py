"""Layer 2: the physical performance model — iteration time from the architecture and the catalog.

One instance = TP GPUs of one type running one model shard each, with weights and KV cache at
their precisions. An iteration of n tokens (prompt tokens + decodes) costs, on the instance:

- **linear layers**: 2 · active parameters FLOPs per token, at the precision's dense tensor peak ×
  TP × an achievable efficiency η = compute_eff · s / (s + gemm_half_elements), s = n · hidden / TP
  the per-GPU shard of the iteration's activations — a GEMM with few rows (tokens) or a narrow
  shard reaches less of the peak than a large one;
- **weights read once** per iteration (experts hit, for a sparse model) at HBM bandwidth × TP ×
  weight_bw_eff; the linear layers take max(weight read, linear FLOPs) — a roofline per iteration;
- **attention**: prefill FLOPs 2 · layers · heads · head_dim · Σ prompt² (causal QKᵀ and AV) at
  attention_eff of the peak; decode reads each context token's K and V at kv_bw_eff of the HBM
  bandwidth (or its FLOPs, whichever is slower — a linear term, so time stays affine in context);
  the KV of the iteration's new tokens is written at weight_bw_eff;
- **tensor-parallel all-reduces**: two per layer, message = tokens × hidden × 2 bytes, ring
  all-reduce over the node's GPU links: 2 (TP − 1) / TP × message / (intra_node_bytes_per_s ×
  link_bw_eff) plus the catalog's small-message latency × allreduce_latency_scale × (TP − 1) /
  (node GPUs − 1) (a ring of TP GPUs has that share of the node ring's steps); none at TP 1. A
  stack may let the achieved link bandwidth fall once the ring's per-step chunk (message / TP =
  the per-GPU shard s above) passes `knee_elements`: bandwidth ÷ (1 + knee_gain · x / (1 + x)),
  x = (s / knee_elements)^knee_power. vLLM 2023 (the `splitwise-sim` stack) slows down on large
  prefills by about the same time per token at every TP, setting in at the same per-GPU shard
  size — a cost that scales as the all-reduce does, not as the sharded GEMMs; 0 gain for engines
  that do not;
- **host and launch overhead**: iteration_overhead_s + layers × layer_overhead_s per iteration,
  plus sequence_overhead_s per sequence in the batch (scheduling, sampling).

Every efficiency lies in (0, 1] and every fitted term within STACK_BOUNDS (physically allowed
values, enforced when a stack is built). Power cap as in perf/base.py: prompt-side time ×
prompt_cap_factor, decode-side time × token_cap_factor.

Not modelled: pipeline parallelism, speculative decoding, prefix caching, quantized-GEMM kernels
other than fp8, activation memory traffic, CPU–GPU overlap across iterations (overheads add).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

import numpy as np
import numpy.typing as npt

from splitplan.catalog import Machine, ModelSpec
from splitplan.errors import InputError
from splitplan.perf.analytic import PROMPT_SEQ_CAP, touched_weight_bytes
from splitplan.perf.base import FloatArray, prompt_cap_factor, token_cap_factor

# Bytes per activation value in the all-reduce messages: engines all-reduce in 16-bit even with
# fp8 weights.
ACTIVATION_BYTES = 2.0

# (lower, upper) of every stack parameter: what the physics allows. Efficiencies are fractions of a
# catalog peak, so in (0, 1]; overheads non-negative and below what any engine shows; the
# all-reduce latency scale within [0.2, 20] of the catalog's small-message estimate; the knee's
# slowdown at most 5× (bandwidth stays a fraction of the link's).
STACK_BOUNDS: dict[str, tuple[float, float]] = {
    "compute_eff": (0.05, 1.0),
    "gemm_half_elements": (1e3, 1e9),
    "attention_eff": (0.02, 1.0),
    "weight_bw_eff": (0.5, 1.0),
    "kv_bw_eff": (0.05, 1.0),
    "link_bw_eff": (0.05, 1.0),
    "allreduce_latency_scale": (0.2, 20.0),
    "iteration_overhead_s": (0.0, 0.2),
    "layer_overhead_s": (0.0, 1e-3),
    "sequence_overhead_s": (0.0, 1e-3),
    "knee_elements": (1e5, 1e10),
    "knee_gain": (0.0, 4.0),
    "knee_power": (0.5, 8.0),
}
EFFICIENCIES = (
    "compute_eff",
    "attention_eff",
    "weight_bw_eff",
    "kv_bw_eff",
    "link_bw_eff",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class StackParams:
    """The few parameters one serving stack is calibrated by (see the module docstring).

    The defaults are the `datasheet` stack: typical achieved fractions of datasheet peaks for a
    tuned engine (dense GEMMs ~70 % of peak, GEMV-like weight reads ~80 % of HBM bandwidth, paged
    attention ~60 %, NCCL ~70 % of link bandwidth), 2 ms of host time per iteration and 20 µs of
    kernel launches per layer — for a GPU or engine nobody has measured.
    """

    compute_eff: float = 0.7
    gemm_half_elements: float = 131072.0
    attention_eff: float = 0.4
    weight_bw_eff: float = 0.8
    kv_bw_eff: float = 0.6
    link_bw_eff: float = 0.7
    allreduce_latency_scale: float = 1.0
    iteration_overhead_s: float = 2e-3
    layer_overhead_s: float = 2e-5
    sequence_overhead_s: float = 0.0
    knee_elements: float = 67108864.0
    knee_gain: float = 0.0
    knee_power: float = 2.0

    def __post_init__(self) -> None:
        for name, (lo, hi) in STACK_BOUNDS.items():
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
                raise InputError(f"stack parameter {name} must be a finite number, got {v!r}")
            if name in EFFICIENCIES and not 0.0 < v <= 1.0:
                raise InputError(f"stack parameter {name} is an efficiency and must be in (0, 1], got {v}")
            if not lo <= v <= hi:
                raise InputError(f"stack parameter {name} must be within [{lo:g}, {hi:g}], got {v}")

    @staticmethod
    def names() -> tuple[str, ...]:
        return tuple(f.name for f in fields(StackParams))

    def to_dict(self) -> dict[str, float]:
        return {k: float(getattr(self, k)) for k in self.names()}


class PhysicalPerfModel:
    """Iteration times of one instance under one stack's parameters; see the module docstring."""

    kind = "physical"

    def __init__(
        self, model: ModelSpec, machine: Machine, params: StackParams, *, calibrated: bool = True
    ) -> None:
        self.model = model
        self.machine = machine
        self.params = params
        self.calibrated = calibrated
        p = params
        tp = machine.tensor_parallel
        gpu = machine.type.gpu
        peak = gpu.dense_flops(machine.weight_precision) * tp
        hbm = gpu.hbm_bytes_per_s * tp
        self._peak = peak
        self._shard_width = model.hidden / tp
        self._weight_bw = hbm * p.weight_bw_eff
        self._weight_b = machine.weight_precision.bytes_per_value
        kv_b = model.kv_bytes_per_token_at(machine.kv_precision)
        self._kv_write_s = kv_b / self._weight_bw
        # 2 FLOPs per MAC, QKᵀ and AV: 4 · layers · heads · head_dim per (query, key) pair.
        self._attn_flops_per_pair = 4.0 * model.layers * model.heads * model.head_dim
        self._attn_rate = peak * p.attention_eff
        # Per context token of a decode: read its K and V, or do its attention FLOPs if slower.
        self._g_s = max(kv_b / (hbm * p.kv_bw_eff), self._attn_flops_per_pair / self._attn_rate)
        self._fixed_s = p.iteration_overhead_s + model.layers * p.layer_overhead_s
        # Ring all-reduce of the activations, two per layer.
        if tp > 1:
            node_gpus = max(machine.type.gpus, tp)
            link = machine.type.intra_node_bytes_per_s * p.link_bw_eff
            self._ar_s_per_token = (
                2.0 * model.layers * 2.0 * (tp - 1) / tp * model.hidden * ACTIVATION_BYTES / link
            )
            steps = (tp - 1) / (node_gpus - 1)
            self._ar_fixed_s = (
                2.0 * model.layers * machine.type.intra_node_latency_s * p.allreduce_latency_scale * steps
            )
        else:
            self._ar_s_per_token = 0.0
            self._ar_fixed_s = 0.0
        self._pcap = prompt_cap_factor(machine.power_cap)
        self._tcap = token_cap_factor(machine.power_cap)

    # -- terms ---------------------------------------------------------------------------------------
    def compute_efficiency(self, tokens: npt.ArrayLike) -> FloatArray:
        """η(n): achieved fraction of the dense peak by the linear layers of an n-token iteration."""
        p = self.params
        size = self.shard_elements(tokens)
        return np.asarray(p.compute_eff * size / (size + p.gemm_half_elements), dtype=np.float64)

    def shard_elements(self, tokens: npt.ArrayLike) -> FloatArray:
        """Per-GPU shard of an n-token iteration's activations: tokens × hidden / TP values — the
        size the GEMMs' efficiency and the ring all-reduce's chunk depend on."""
        n = np.maximum(np.asarray(tokens, dtype=np.float64), 1.0)
        return np.asarray(n * self._shard_width, dtype=np.float64)

    def link_slowdown(self, tokens: npt.ArrayLike) -> FloatArray:
        """Factor ≥ 1 by which the achieved all-reduce bandwidth falls past the stack's knee."""
        p = self.params
        if p.knee_gain <= 0:
            return np.ones_like(np.asarray(tokens, dtype=np.float64))
        x = (self.shard_elements(tokens) / p.knee_elements) ** p.knee_power
        return np.asarray(1.0 + p.knee_gain * x / (1.0 + x), dtype=np.float64)

    def _core(self, n: FloatArray, sequences: FloatArray, attn_pairs: FloatArray) -> FloatArray:
        """Everything but the decode context term, without power cap."""
        m = self.model
        linear_s = 2.0 * m.active_params * n / (self._peak * self.compute_efficiency(n))
        weights_s = touched_weight_bytes(m, n, self._weight_b) / self._weight_bw
        attn_s = self._attn_flops_per_pair * attn_pairs / self._attn_rate
        comm_s = self.allreduce_time_s(n)
        return (
            self._fixed_s
            + self.params.sequence_overhead_s * sequences
            + np.maximum(linear_s, weights_s)
            + attn_s
            + n * self._kv_write_s
            + comm_s
        )

    def allreduce_time_s(self, tokens: npt.ArrayLike) -> FloatArray:
        """The iteration's tensor-parallel communication: two all-reduces per layer (0 at TP 1)."""
        n = np.asarray(tokens, dtype=np.float64)
        if self._ar_s_per_token == 0.0:
            return np.asarray(self._ar_fixed_s + 0.0 * n, dtype=np.float64)
        return np.asarray(
            self._ar_fixed_s + self._ar_s_per_token * n * self.link_slowdown(n), dtype=np.float64
        )

    # -- the PerfModel protocol ----------------------------------------------------------------------
    def prompt_time_s(self, tokens: npt.ArrayLike, prompts: npt.ArrayLike = 1) -> FloatArray:
        """`prompts` prompts of tokens / prompts tokens each (causal attention within each)."""
        n = np.maximum(np.asarray(tokens, dtype=np.float64), 1.0)
        b = np.maximum(np.asarray(prompts, dtype=np.float64), 1.0)
        pairs = n * (n / b) / 2.0
        return np.asarray(self._core(n, b, pairs) * self._pcap, dtype=np.float64)

    def token_time_s(self, batch: npt.ArrayLike, context: npt.ArrayLike) -> FloatArray:
        f, g = self.token_affine(batch)
        return np.asarray(f + g * np.asarray(context, dtype=np.float64), dtype=np.float64)

    def mixed_time_s(self, batch_tokens: npt.ArrayLike, context: npt.ArrayLike) -> FloatArray:
        """Prompt-like pass over `batch_tokens` (prompt tokens as one sequence of at most
        PROMPT_SEQ_CAP, one sequence's overhead) plus reading the decodes' KV context."""
        n = np.maximum(np.asarray(batch_tokens, dtype=np.float64), 1.0)
        ctx = np.asarray(context, dtype=np.float64)
        pairs = n * np.minimum(n, PROMPT_SEQ_CAP) / 2.0
        core = self._core(n, np.ones_like(n), pairs)
        return np.asarray(core * self._pcap + self._g_s * ctx * self._tcap, dtype=np.float64)

    def decode_alone_time_s(self, context: npt.ArrayLike) -> FloatArray:
        return self.token_time_s(1.0, context)

    def token_affine(self, batch: npt.ArrayLike) -> tuple[FloatArray, float]:
        """(f(batch), g) with token_time_s(batch, context) = f(batch) + g · context."""
        b = np.maximum(np.asarray(batch, dtype=np.float64), 1.0)
        f = self._core(b, b, np.zeros_like(b)) * self._tcap
        return np.asarray(f, dtype=np.float64), float(self._g_s * self._tcap)
