"""`--ttft-p99-ms`-style flags: the nine absolute latency limits, in milliseconds, on every command
that takes `--slo FILE`. A flag overrides the file's `[latency_s]` entry of the same SLO; TBT's
flags are also spelled `--tpot-…-ms` and `--itl-…-ms`, as the field calls it.

Added by wrapping a command (`with_slo_flags`) rather than by nine parameters in each signature: the
wrapper folds the flags and `--slo` into one resolved `SloSpec`, which the command passes on as its
`slo` (every `load_slo` accepts a spec as is).
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable
from typing import Annotated, Any

import typer

from splitplan.slo import METRICS, PERCENTILES, SLO_KEYS, TBT_ALIASES


def _param(key: str, alias: str = "") -> str:
    return f"{alias or key.split('_')[0]}_{key.split('_')[1]}_ms"


def _flags(key: str) -> list[str]:
    """Spellings of one SLO's flag: the canonical one first, then TBT's aliases."""
    metric, pct = key.split("_")
    names = [f"--{metric}-{pct}-ms"]
    if metric == "tbt":
        names += [f"--{alias}-{pct}-ms" for alias in TBT_ALIASES]
    return names


def _help(key: str) -> str:
    metric, pct = key.split("_")
    text = f"{metric.upper()} {pct.upper()} latency limit, ms (overrides --slo)."
    if metric == "tbt":  # the aliases are separate hidden options, so help stays 80 columns wide
        text += " Also " + ", ".join(f"`{f}`" for f in _flags(key)[1:]) + "."
    return text


def _options(key: str) -> list[inspect.Parameter]:
    out = []
    for i, flag in enumerate(_flags(key)):
        alias = "" if i == 0 else TBT_ALIASES[i - 1]
        option = typer.Option(flag, help=_help(key) if i == 0 else "", hidden=i > 0)
        out.append(
            inspect.Parameter(
                _param(key, alias),
                inspect.Parameter.KEYWORD_ONLY,
                default=None,
                annotation=Annotated[float | None, option],
            )
        )
    return out


def _pop_latency(kwargs: dict[str, Any]) -> dict[str, float | None]:
    from splitplan.errors import InputError

    out: dict[str, float | None] = {}
    for key in SLO_KEYS:
        flags = _flags(key)
        values = [kwargs.pop(p.name, None) for p in _options(key)]
        given = [(f, v) for f, v in zip(flags, values, strict=True) if v is not None]
        if len(given) > 1:
            raise InputError(f"{' and '.join(f for f, _ in given)} name the same SLO: give one")
        out[key] = given[0][1] if given else None
    return out


def slo_flag_names() -> dict[str, list[str]]:
    """SLO key → its flag spellings (first: the canonical one)."""
    return {k: _flags(k) for k in SLO_KEYS}


def resolve_slo(slo: Any, latency_ms: dict[str, float | None]) -> Any:
    """The `--slo` file (or None) with the given flags applied; unchanged when no flag is given."""
    given = {k: v for k, v in latency_ms.items() if v is not None}
    if not given:
        return slo
    from splitplan.errors import InputError
    from splitplan.slo import SloSpec, load_slo

    for key, ms in given.items():
        if isinstance(ms, bool) or not (isinstance(ms, int | float) and math.isfinite(ms) and ms > 0):
            raise InputError(f"{_flags(key)[0]} must be a positive number of milliseconds, got {ms!r}")
    base = load_slo(slo)
    latency = dict(base.latency_s)
    latency.update({k: float(v) / 1000.0 for k, v in given.items()})
    return SloSpec(slowdown=dict(base.slowdown), latency_s=latency)


def with_slo_flags(command: Callable[..., Any]) -> Callable[..., Any]:
    """`command` (which has an `slo` parameter) plus the nine latency flags."""
    sig = inspect.signature(command, eval_str=True)
    if "slo" not in sig.parameters:
        raise TypeError(f"{command.__name__} has no slo parameter")
    extra = [p for key in (f"{m}_p{q}" for m in METRICS for q in PERCENTILES) for p in _options(key)]

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        kwargs["slo"] = resolve_slo(kwargs.get("slo"), _pop_latency(kwargs))
        return command(*args, **kwargs)

    params = list(sig.parameters.values())
    wrapper.__signature__ = sig.replace(parameters=params + extra)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {
        **{p.name: p.annotation for p in params},
        **{p.name: p.annotation for p in extra},
        "return": sig.return_annotation,
    }
    return wrapper
