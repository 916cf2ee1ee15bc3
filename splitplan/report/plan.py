"""Layer 6: a neutral deployment plan — what a planner's answer hands on to whoever deploys it.

A plan names, per pool, the node type, GPU, instances, tensor parallelism, precisions and power cap;
the routing and batching parameters the answer was simulated under; the SLOs and workload it was
sized for; what splitplan predicted for it; and the splitplan version. It is engine-neutral on
purpose: docs/howto/export-a-deployment-plan.md maps every field to vLLM's and SGLang's
disaggregated-serving settings, so a plan outlives any one engine's flag spelling.

Written as YAML by a small emitter for this fixed structure (mappings, lists, scalars) rather than a
YAML library: the output is a few dozen lines of known shape, and splitplan keeps no dependency for
it. `PLAN_SCHEMA` (JSON Schema) is the contract; tests validate every emitted plan against it after
parsing the YAML with a real YAML parser.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from splitplan._io import write_text_atomic
from splitplan._version import __version__
from splitplan.catalog import Machine
from splitplan.design import ClusterConfig
from splitplan.errors import InputError
from splitplan.report.metrics import METRIC_KEYS, config_metrics
from splitplan.sim.scenario import REFERENCE_MACHINE, Scenario
from splitplan.slo import SLO_KEYS

PLAN_KIND = "splitplan/deployment-plan"
PLAN_VERSION = 1


def _num(x: float | None, ndigits: int = 6) -> float | None:
    if x is None:
        return None
    x = float(x)
    return round(x, ndigits) if math.isfinite(x) else None


def _pool(role: str, machine: Machine, instances: int) -> dict[str, Any]:
    tp = machine.tensor_parallel
    return {
        "role": role,
        "node_type": machine.type.name,
        "gpu": machine.gpu.name,
        "gpus_per_node": machine.type.gpus,
        "instances": int(instances),
        "tensor_parallel": tp,
        "instances_per_node": machine.type.gpus // tp,
        "nodes": machine.nodes_for(instances),
        "gpus": int(instances) * tp,
        "weight_precision": machine.weight_precision.value,
        "kv_precision": machine.kv_precision.value,
        "power_cap": float(machine.power_cap),
        "gpu_power_limit_w": _num(machine.gpu.tdp_w * machine.power_cap, 1),
        "memory_gib_per_instance": _num(machine.memory_bytes / 2**30, 1),
        "cost_usd_per_h": _num(machine.cost_usd_per_h * instances),
        "power_kw": _num(machine.power_kw * instances),
    }


def _pools(config: ClusterConfig) -> list[dict[str, Any]]:
    d = config.design
    if d.is_baseline:
        return [_pool("mixed", d.prompt, config.prompt_machines)]
    return [_pool("prompt", d.prompt, config.prompt_machines), _pool("token", d.token, config.token_machines)]


def _routing(config: ClusterConfig, scenario: Scenario) -> dict[str, Any]:
    sim = scenario.sim
    if config.design.is_baseline:
        routing: dict[str, Any] = {
            "policy": "join-shortest-queue",
            "prompt_instance": "fewest pending tokens",
            "token_instance": "same instance as the prompt",
            "prompt_full_tokens": None,
            "mixed_pool_borrowing": False,
            "kv_transfer": None,
            "layerwise_min_prompt_tokens": None,
            "link_gbytes_per_s": None,
        }
    else:
        link = sim.link_bytes_per_s
        if link is None:
            link = min(
                config.design.prompt.type.interconnect_bytes_per_s,
                config.design.token.type.interconnect_bytes_per_s,
            )
        routing = {
            "policy": "splitwise",
            "prompt_instance": "fewest pending tokens",
            "token_instance": "least committed KV memory",
            "prompt_full_tokens": sim.prompt_full_tokens,
            "mixed_pool_borrowing": True,
            "kv_transfer": sim.kv_transfer,
            "layerwise_min_prompt_tokens": sim.layerwise_min_prompt_tokens
            if sim.kv_transfer == "layerwise"
            else None,
            "link_gbytes_per_s": _num(link / 1e9, 3),
        }
    return routing


def _batching(scenario: Scenario) -> dict[str, Any]:
    sim = scenario.sim
    return {
        "max_batch_size": sim.max_batch_size,
        "max_batch_tokens": sim.max_batch_tokens,
        "max_preemptions": sim.max_preemptions,
        "prompt_interrupts_decodes": sim.prompt_interrupts_decodes,
    }


def _tokens_stats(values: np.ndarray) -> dict[str, Any]:
    v = np.asarray(values, dtype=np.float64)
    return {
        "mean": _num(float(v.mean()), 2),
        "p50": _num(float(np.percentile(v, 50)), 2),
        "p99": _num(float(np.percentile(v, 99)), 2),
    }


def _workload(scenario: Scenario, rate_rps: float | None) -> dict[str, Any]:
    wl = scenario.workload
    if rate_rps is None:  # the generator's target rate, else the trace's observed one
        rate_rps = wl.offered_rate_rps
    return {
        "name": wl.name,
        "source": wl.meta.get("source", wl.name),
        "arrival": wl.meta.get("arrival", "replay"),
        "requests": wl.n,
        "duration_s": _num(wl.duration_s, 3),
        "rate_rps": _num(rate_rps, 4),
        "prompt_tokens": _tokens_stats(wl.prompt_tokens),
        "output_tokens": _tokens_stats(wl.output_tokens),
        "seed": scenario.seed,
    }


def _slos(scenario: Scenario) -> dict[str, Any]:
    slo = scenario.slo
    return {
        "reference_machine": REFERENCE_MACHINE,
        "slowdown": {k: float(slo.slowdown[k]) for k in SLO_KEYS},
        "latency_s": {k: float(v) for k, v in sorted(slo.latency_s.items())},
    }


def _predicted(
    *,
    meets_slo: bool,
    binding_slo: str | None,
    headroom: float | None,
    cost_usd_per_h: float,
    power_kw: float,
    rate_rps: float | None,
    slowdown: Mapping[str, float | None],
    latency_s: Mapping[str, float | None] | None,
    metrics: Mapping[str, float | None],
) -> dict[str, Any]:
    return {
        "meets_slo": bool(meets_slo),
        "binding_slo": binding_slo or None,
        "slo_headroom": _num(headroom),
        "cost_usd_per_h": _num(cost_usd_per_h),
        "power_kw": _num(power_kw),
        "rate_rps": _num(rate_rps, 4),
        "slowdown": {k: _num(slowdown.get(k)) for k in SLO_KEYS},
        "latency_s": {k: _num((latency_s or {}).get(k)) for k in SLO_KEYS},
        "metrics": {k: _num(metrics.get(k)) for k in METRIC_KEYS},
    }


def deployment_plan(
    config: ClusterConfig,
    scenario: Scenario,
    *,
    command: str,
    engine: str,
    objective: str | None,
    meets_slo: bool,
    binding_slo: str | None,
    headroom: float | None,
    rate_rps: float | None,
    slowdown: Mapping[str, float | None],
    latency_s: Mapping[str, float | None] | None = None,
    sized_for_rate_rps: float | None = None,
    verified_by: str | None = None,
    design_label: str | None = None,
) -> dict[str, Any]:
    """The plan document of one configuration (plain dict, keys in the order they are written).

    `rate_rps` is the rate the configuration was judged at (a search's sustained rate, a
    simulation's measured throughput); `sized_for_rate_rps` the workload's target rate (default: the
    scenario's).
    """
    if command not in ("search", "simulate"):
        raise InputError(f"a plan comes from search or simulate, got {command!r}")
    return {
        "kind": PLAN_KIND,
        "plan_version": PLAN_VERSION,
        "splitplan_version": __version__,
        "source": {
            "command": command,
            "engine": engine,
            "verified_by": verified_by or engine,
            "objective": objective,
        },
        "design": {
            "name": design_label or config.design.name,
            "kind": config.design.kind,
            "configuration": config.label,
        },
        "model": {"name": scenario.model.name, "perf": Path(scenario.perf).name},
        "pools": _pools(config),
        "routing": _routing(config, scenario),
        "batching": _batching(scenario),
        "slo": _slos(scenario),
        "workload": _workload(scenario, sized_for_rate_rps),
        "predicted": _predicted(
            meets_slo=meets_slo,
            binding_slo=binding_slo,
            headroom=headroom,
            cost_usd_per_h=config.cost_usd_per_h,
            power_kw=config.power_kw,
            rate_rps=rate_rps,
            slowdown=slowdown,
            latency_s=latency_s,
            metrics=config_metrics(config, scenario.workload, rate_rps),
        ),
    }


# --- YAML ----------------------------------------------------------------------------------------

_PLAIN = re.compile(r"^[A-Za-z][A-Za-z0-9_.\-/+@]*$")
# words a YAML 1.1 or 1.2 parser reads as something other than a string
_RESERVED = {"y", "n", "yes", "no", "on", "off", "true", "false", "null", "none", "nan", "inf"}


def _scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            return "null"
        text = repr(value)
        if "e" in text and "." not in text.split("e")[0]:
            mantissa, exp = text.split("e")
            text = f"{mantissa}.0e{exp}"  # YAML 1.1 floats need a dot in the mantissa
        return text
    if isinstance(value, str):
        if _PLAIN.match(value) and value.lower() not in _RESERVED:
            return value
        return json.dumps(value, ensure_ascii=False)  # a JSON string is a YAML double-quoted scalar
    raise TypeError(f"cannot write {type(value).__name__} as YAML")


def _emit(value: Any, indent: int, out: list[str]) -> None:
    pad = " " * indent
    if isinstance(value, Mapping):
        for key, item in value.items():
            k = _scalar(str(key))
            if isinstance(item, Mapping) and item:
                out.append(f"{pad}{k}:")
                _emit(item, indent + 2, out)
            elif isinstance(item, list) and item:
                out.append(f"{pad}{k}:")
                _emit(item, indent, out)
            else:
                out.append(f"{pad}{k}: {_inline(item)}")
        return
    for item in value:  # a non-empty list
        if isinstance(item, Mapping) and item:
            lines: list[str] = []
            _emit(item, indent + 2, lines)
            lines[0] = f"{pad}- " + lines[0][indent + 2 :]
            out.extend(lines)
        else:
            out.append(f"{pad}- {_inline(item)}")


def _inline(value: Any) -> str:
    if isinstance(value, Mapping):
        return "{}"
    if isinstance(value, list):
        return "[]"
    return _scalar(value)


def to_yaml(doc: Mapping[str, Any], header: str = "") -> str:
    """YAML for a document of mappings, lists and scalars (str, int, float, bool, None)."""
    out = [f"# {line}" if line else "#" for line in header.splitlines()]
    _emit(doc, 0, out)
    return "\n".join(out) + "\n"


def write_plan(doc: Mapping[str, Any], path: str | Path) -> Path:
    """Write the plan as YAML atomically; the file name must end in .yaml or .yml."""
    target = Path(path)
    if target.suffix.lower() not in (".yaml", ".yml"):
        raise InputError(f"`export_plan` must end in .yaml or .yml, got {target.name}")
    header = (
        f"splitplan {__version__} deployment plan for {doc['design']['configuration']}\n"
        "Engine settings for each field: docs/howto/export-a-deployment-plan.md"
    )
    write_text_atomic(target, to_yaml(doc, header))
    return target


# --- schema --------------------------------------------------------------------------------------


def _obj(props: dict[str, Any], *, extra: bool = False) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": props,
        "required": list(props),
        "additionalProperties": extra,
    }


_STR = {"type": "string"}
_INT1 = {"type": "integer", "minimum": 1}
_NUM = {"type": "number"}
_NUM_OR_NULL = {"type": ["number", "null"]}
_NINE = _obj(dict.fromkeys(SLO_KEYS, _NUM_OR_NULL))
_PREC = {"enum": ["fp16", "bf16", "fp8", "int4"]}
_TOKENS = _obj({"mean": _NUM, "p50": _NUM, "p99": _NUM})

PLAN_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "splitplan deployment plan",
    **_obj(
        {
            "kind": {"const": PLAN_KIND},
            "plan_version": {"const": PLAN_VERSION},
            "splitplan_version": _STR,
            "source": _obj(
                {
                    "command": {"enum": ["search", "simulate"]},
                    "engine": _STR,
                    "verified_by": _STR,
                    "objective": {"enum": ["cost", "power", "throughput", None]},
                }
            ),
            "design": _obj(
                {"name": _STR, "kind": {"enum": ["baseline", "splitwise"]}, "configuration": _STR}
            ),
            "model": _obj({"name": _STR, "perf": _STR}),
            "pools": {
                "type": "array",
                "minItems": 1,
                "maxItems": 2,
                "items": _obj(
                    {
                        "role": {"enum": ["prompt", "token", "mixed"]},
                        "node_type": _STR,
                        "gpu": _STR,
                        "gpus_per_node": _INT1,
                        "instances": _INT1,
                        "tensor_parallel": _INT1,
                        "instances_per_node": _INT1,
                        "nodes": _INT1,
                        "gpus": _INT1,
                        "weight_precision": _PREC,
                        "kv_precision": {"enum": ["fp16", "bf16", "fp8"]},
                        "power_cap": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
                        "gpu_power_limit_w": {"type": "number", "exclusiveMinimum": 0},
                        "memory_gib_per_instance": {"type": "number", "exclusiveMinimum": 0},
                        "cost_usd_per_h": _NUM,
                        "power_kw": _NUM,
                    }
                ),
            },
            "routing": _obj(
                {
                    "policy": {"enum": ["splitwise", "join-shortest-queue"]},
                    "prompt_instance": _STR,
                    "token_instance": _STR,
                    "prompt_full_tokens": {"type": ["integer", "null"]},
                    "mixed_pool_borrowing": {"type": "boolean"},
                    "kv_transfer": {"enum": ["serialized", "layerwise", None]},
                    "layerwise_min_prompt_tokens": {"type": ["integer", "null"]},
                    "link_gbytes_per_s": _NUM_OR_NULL,
                }
            ),
            "batching": _obj(
                {
                    "max_batch_size": _INT1,
                    "max_batch_tokens": _INT1,
                    "max_preemptions": {"type": "integer", "minimum": 0},
                    "prompt_interrupts_decodes": {"enum": ["always", "never", "baseline"]},
                }
            ),
            "slo": _obj(
                {
                    "reference_machine": _STR,
                    "slowdown": _obj(dict.fromkeys(SLO_KEYS, _NUM)),
                    "latency_s": {
                        "type": "object",
                        "propertyNames": {"enum": list(SLO_KEYS)},
                        "additionalProperties": _NUM,
                    },
                }
            ),
            "workload": _obj(
                {
                    "name": _STR,
                    "source": _STR,
                    "arrival": _STR,
                    "requests": _INT1,
                    "duration_s": _NUM,
                    "rate_rps": _NUM_OR_NULL,
                    "prompt_tokens": _TOKENS,
                    "output_tokens": _TOKENS,
                    "seed": {"type": "integer"},
                }
            ),
            "predicted": _obj(
                {
                    "meets_slo": {"type": "boolean"},
                    "binding_slo": {"type": ["string", "null"]},
                    "slo_headroom": _NUM_OR_NULL,
                    "cost_usd_per_h": _NUM,
                    "power_kw": _NUM,
                    "rate_rps": _NUM_OR_NULL,
                    "slowdown": _NINE,
                    "latency_s": _NINE,
                    "metrics": _obj(dict.fromkeys(METRIC_KEYS, _NUM_OR_NULL)),
                }
            ),
        }
    ),
}
