"""Layer 4: every simulator assumption as a parameter (TOML via `--config FILE`).

Defaults describe splitplan's model of the Splitwise design (SPLITWISE.md §3–§5);
`examples/splitwise-sim-compat.toml` sets them to the reference simulator's assumptions.
"""

from __future__ import annotations

import math
import os
import tomllib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Literal

from splitplan._numbers import is_number
from splitplan.errors import InputError

KvTransfer = Literal["serialized", "layerwise"]
KvBytesConvention = Literal["gqa", "no_gqa"]
PromptInterrupt = Literal["always", "never", "baseline"]
PromptCurves = Literal["by-count", "pooled"]


# The largest batch size or batch token count a config may set: the simulator tabulates iteration times
# over every batch and token count up to them (8 bytes each, per pool), so a typo such as 1e23
# would ask for more memory than any machine has; this is 100× any real engine's limit.
MAX_COUNT = 10_000_000
# The slowest KV-transfer link a config may set (1 MB/s, four orders of magnitude below any
# datacenter NIC): below it a KV cache takes days to cross, every latency overflows to infinity
# and no percentile is left to report.
MIN_LINK_BYTES_PER_S = 1e6
_TABULATED = ("max_batch_size", "max_batch_tokens", "chunk_tokens")  # the others are thresholds


@dataclass(frozen=True, slots=True, kw_only=True)
class SimConfig:
    # machine-level scheduler
    max_batch_size: int = 512  # decodes (and prompts) per iteration (sim)
    max_batch_tokens: int = 2048  # prompt tokens per iteration; a decode counts 1
    max_preemptions: int = 4  # a request preempted this often is no longer preempted
    # Does a prompt too large to share a batch with the running decodes cut their run at the next
    # iteration boundary (prompt priority)? "always", "never", or "baseline" (only on the machines of
    # baseline designs — what the reference simulator's results show; see docs/background.md).
    prompt_interrupts_decodes: PromptInterrupt = "always"
    # A prompt admitted on a machine that will also run its decode reserves the decode's KV too, so
    # an overloaded machine cannot fill its memory with prompts whose decodes then never start.
    prompt_reserves_decode_kv: bool = True
    # chunked prefill (designs with BatchPolicy.CHUNKED): tokens per iteration (prompt-chunk tokens
    # plus one per decode), and whether running decodes are admitted before prompt chunks
    chunk_tokens: int = 512
    chunk_decodes_first: bool = True
    # cluster-level scheduler
    prompt_full_tokens: int = 8192  # a prompt machine with a queue is full beyond this (sim)
    # KV cache
    kv_bytes: KvBytesConvention = "gqa"  # "no_gqa": 2·layers·hidden·dtype (the reference's)
    weight_bytes: dict[str, float] = field(default_factory=dict)  # per-model override of weights
    kv_transfer: KvTransfer = "layerwise"
    layerwise_min_prompt_tokens: int = 512  # shorter prompts are sent serialized
    layerwise_overhead_s: float | None = None  # non-hidden time; None → 8 ms below 300 GB/s, else 5 ms
    link_bytes_per_s: float | None = None  # None → the slower pool's interconnect
    memory_retry_s: float = 1.0  # a transfer waiting for token-machine memory retries
    # stability guard: a configuration whose backlog grows without bound is stopped and marked
    # unstable rather than simulated forever
    max_backlog_s: float = 300.0  # oldest waiting request older than this → unstable
    # profile performance model: a lone prompt and a batch of prompts on separate curves
    # ("by-count"), or every row on one curve as the reference simulator does ("pooled")
    profile_prompt_curves: PromptCurves = "by-count"
    # workload-level
    warmup_s: float = 0.0  # requests arriving earlier are excluded from percentiles

    def __post_init__(self) -> None:
        for name in (
            "max_batch_size",
            "max_batch_tokens",
            "prompt_full_tokens",
            "layerwise_min_prompt_tokens",
            "chunk_tokens",
        ):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise InputError(f"config: {name} must be an integer ≥ 1, got {v!r}")
            if v > MAX_COUNT and name in _TABULATED:
                raise InputError(f"config: {name} must be at most {MAX_COUNT:,}, got {v:,}")
        v = self.max_preemptions
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise InputError(f"config: max_preemptions must be an integer ≥ 0, got {v!r}")
        if not isinstance(self.prompt_reserves_decode_kv, bool):
            v = self.prompt_reserves_decode_kv
            raise InputError(f"config: prompt_reserves_decode_kv must be true or false, got {v!r}")
        if not isinstance(self.chunk_decodes_first, bool):
            raise InputError(
                f"config: chunk_decodes_first must be true or false, got {self.chunk_decodes_first!r}"
            )
        if self.kv_transfer not in ("serialized", "layerwise"):
            raise InputError(f"config: kv_transfer must be serialized or layerwise, got {self.kv_transfer!r}")
        if self.prompt_interrupts_decodes not in ("always", "never", "baseline"):
            raise InputError(
                "config: prompt_interrupts_decodes must be always, never or baseline, "
                f"got {self.prompt_interrupts_decodes!r}"
            )
        if self.profile_prompt_curves not in ("by-count", "pooled"):
            raise InputError(
                "config: profile_prompt_curves must be by-count or pooled, "
                f"got {self.profile_prompt_curves!r}"
            )
        if self.kv_bytes not in ("gqa", "no_gqa"):
            raise InputError(f"config: kv_bytes must be gqa or no_gqa, got {self.kv_bytes!r}")
        v = self.layerwise_overhead_s
        if v is not None and not (is_number(v) and math.isfinite(v) and v >= 0):
            raise InputError(f"config: layerwise_overhead_s must be a number ≥ 0, got {v!r}")
        # a zero link never delivers a KV cache; a zero backlog limit or retry interval stops (or
        # spins) every simulation at its first request
        v = self.link_bytes_per_s
        if v is not None and not (is_number(v) and math.isfinite(v) and v >= MIN_LINK_BYTES_PER_S):
            raise InputError(
                f"config: link_bytes_per_s must be a number ≥ {MIN_LINK_BYTES_PER_S:g}, got {v!r}"
            )
        for name in ("memory_retry_s", "max_backlog_s"):
            v = getattr(self, name)
            if not (is_number(v) and math.isfinite(v) and v > 0):
                raise InputError(f"config: {name} must be a number > 0, got {v!r}")
        v = self.warmup_s
        if not (is_number(v) and math.isfinite(v) and v >= 0):
            raise InputError(f"config: warmup_s must be a number ≥ 0, got {v!r}")
        if not isinstance(self.weight_bytes, dict):
            raise InputError(
                f"config: weight_bytes must be a table of model = bytes, got {self.weight_bytes!r}"
            )
        for k, v in self.weight_bytes.items():
            if not (is_number(v) and math.isfinite(v) and v > 0):
                raise InputError(f"config: weight_bytes.{k} must be a positive number, got {v!r}")
        from splitplan.catalog import get_model
        from splitplan.errors import CatalogError

        for k in self.weight_bytes:  # an override of a model no catalog knows is a typo, never read
            try:
                get_model(k)
            except CatalogError as exc:
                raise InputError(f"config: weight_bytes.{k}: {exc}") from None


def load_config(path: str | Path | None, **overrides: Any) -> SimConfig:
    """Read a SimConfig TOML (keys = field names; `[weight_bytes]` table); unknown keys are errors.

    A top-level `perf = "…"` key (a profile path, relative to the file) is returned via
    `config_perf(path)`, not stored here.
    """
    base = SimConfig()
    if path is None:
        return replace(base, **overrides) if overrides else base
    doc = read_config_doc(path)
    known = {f.name for f in fields(SimConfig)}
    values = {k: v for k, v in doc.items() if k not in ("perf", "model", "description")}
    unknown = set(values) - known
    if unknown:
        raise InputError(f"config {path}: unknown key(s) {', '.join(sorted(unknown))}")
    values.update(overrides)
    try:
        return SimConfig(**values)
    except TypeError as exc:
        raise InputError(f"config {path}: {exc}") from None


def read_config_doc(path: str | Path) -> dict[str, Any]:
    from splitplan._io import read_text_file

    p = Path(path)
    text = read_text_file(p, "config")
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"config {p} is not valid TOML: {exc}") from None


def config_perf(path: str | Path | None) -> str | None:
    """The `perf` entry of a config file resolved against the file's folder (None if absent).

    `"{shared}/…"` expands to the reference data folder beside the checkout (../shared).
    """
    if path is None:
        return None
    doc = read_config_doc(path)
    perf = doc.get("perf")
    if perf is None or perf == "analytic":
        return perf
    if not isinstance(perf, str):
        raise InputError(f"config {path}: perf must be a string")
    from splitplan.perf.stacks import find_stack

    if find_stack(perf) is not None:  # a stack name, not a path
        return perf
    if "{shared}" in perf:
        perf = perf.replace("{shared}", str(shared_dir()))
    return str((Path(path).parent / perf).resolve()) if not Path(perf).is_absolute() else perf


def shared_dir() -> Path:
    """The reference-data folder: $SPLITPLAN_SHARED, else ../shared beside the checkout or cwd."""
    env = os.environ.get("SPLITPLAN_SHARED")
    if env:
        return Path(env)
    for base in (Path(__file__).resolve().parents[2], Path.cwd()):
        candidate = base.parent / "shared"
        if candidate.is_dir():
            return candidate
    return Path.cwd().parent / "shared"
