"""Helpers shared by the command modules: JSON output and rich console set-up."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from splitplan.errors import INTERRUPTED_EXIT


class _InterruptLine:
    """Whether the running command has already told the user what its interrupted run kept.

    typer turns a KeyboardInterrupt anywhere in a command into a bare exit 130 with nothing said;
    the entry point then prints the generic line, unless the command printed its own (`interrupted`).
    """

    said = False


def interrupted(message: str) -> typer.Exit:
    """Print the one line of an interrupted command (what was kept, how to resume) and return the
    exit to raise."""
    print(message, file=sys.stderr)
    _InterruptLine.said = True
    return typer.Exit(INTERRUPTED_EXIT)


def interrupt_line_said() -> bool:
    return _InterruptLine.said


def forget_interrupt_line() -> None:
    """At the start of each command run (the CLI can be called many times in one process)."""
    _InterruptLine.said = False


def print_json(doc: Any) -> None:
    json.dump(doc, sys.stdout, indent=2, allow_nan=False)
    sys.stdout.write("\n")


def given(ctx: typer.Context, name: str) -> bool:
    """Whether the user set option `name` (not just its default): lets a command refuse an option
    that would otherwise be silently ignored."""
    try:
        from typer._click.core import ParameterSource
    except ImportError:  # pragma: no cover
        from click.core import ParameterSource  # type: ignore[assignment]
    src = ctx.get_parameter_source(name)
    return src is not None and src != ParameterSource.DEFAULT


def refuse_with_trace(ctx: typer.Context, trace: str | None) -> None:
    """`--trace` replays a file as is: the generated-workload options would be ignored."""
    if trace is None:
        return
    from splitplan.errors import InputError

    clash = [f"--{n}" for n in ("workload", "rate", "duration") if given(ctx, n)]
    if clash:
        raise InputError(f"--trace replays a file as is; {', '.join(clash)} cannot be combined with it")


def refuse_unused_seed(ctx: typer.Context, trace: str | None, scenario: Any, engine: str) -> None:
    """`--seed` draws a generated workload's arrivals and sizes and the analytic evaluator's request
    sample. A replayed trace (`--trace`, or a trace file given without a rate) draws neither, and
    the DES draws nothing: there the seed would change nothing, so it is refused, not ignored."""
    replayed = trace is not None or scenario.workload.meta.get("arrival") == "replay"
    if given(ctx, "seed") and replayed and engine == "des":
        from splitplan.errors import InputError

        raise InputError("--seed has no effect here: the trace is replayed as is and the DES draws nothing")


def check_outputs(*items: tuple[str, Path | None, tuple[str, ...]]) -> None:
    """Every output path checked before any work (see splitplan._io.check_output_path)."""
    from splitplan._io import check_output_path

    seen: dict[str, str] = {}
    for option, path, suffixes in items:
        if path is None:
            continue
        check_output_path(path, option, suffixes)
        key = str(Path(path).resolve())
        if key in seen:
            from splitplan.errors import InputError

            raise InputError(f"{seen[key]} and {option} name the same file {path}")
        seen[key] = option


MaxMemoryOpt = Annotated[
    str | None,
    typer.Option(
        "--max-memory",
        help="Refuse runs whose estimated peak memory exceeds this (e.g. 4GB); default half the RAM.",
    ),
]


class _Display:
    wide = False  # `splitplan --wide`: tables at full width, values never wrapped or shortened


DISPLAY = _Display()
WIDE_COLUMNS = 240


def wide() -> bool:
    """Whether `--wide` was given (tables keep every value whole, on one line)."""
    return DISPLAY.wide


def console():  # -> rich.console.Console, imported lazily to keep --help fast
    from rich.console import Console

    if DISPLAY.wide:
        return Console(width=max(WIDE_COLUMNS, Console().width))
    return Console()


# Options shared by the commands that build a scenario (one definition, one help text).
ModelOpt = Annotated[str, typer.Option(help="Model name.")]
PerfOpt = Annotated[
    str | None,
    typer.Option(help="Performance model: analytic, a stack name (splitplan perf), a stack file or a CSV."),
]
ConfigOpt = Annotated[Path | None, typer.Option(help="Simulator assumptions (TOML).")]
SloOpt = Annotated[Path | None, typer.Option(help="SLO limits (TOML).")]
WorkloadOpt = Annotated[str, typer.Option(help="coding, conversation, or a trace CSV to resample.")]
RateOpt = Annotated[float, typer.Option(help="Request rate, req/s.")]
DurationOpt = Annotated[float, typer.Option(help="Workload duration, s.")]
TraceOpt = Annotated[str | None, typer.Option(help="Replay this trace file as is.")]
SeedOpt = Annotated[int, typer.Option(help="Random seed.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document.")]
PromptGpuOpt = Annotated[str | None, typer.Option(help="Custom design: prompt-pool GPU or machine.")]
TokenGpuOpt = Annotated[str | None, typer.Option(help="Custom design: token-pool GPU or machine.")]
PromptCapOpt = Annotated[float, typer.Option(help="Prompt-pool power cap in (0, 1].")]
TokenCapOpt = Annotated[float, typer.Option(help="Token-pool power cap in (0, 1].")]
PromptTpOpt = Annotated[
    int | None, typer.Option(help="Prompt-pool tensor parallelism: GPUs per instance (default: the node).")
]
TokenTpOpt = Annotated[int | None, typer.Option(help="Token-pool tensor parallelism (default: the node).")]
PromptPrecisionOpt = Annotated[
    str | None, typer.Option(help="Prompt-pool weight precision: fp16, bf16, fp8 or int4 (default fp16).")
]
TokenPrecisionOpt = Annotated[str | None, typer.Option(help="Token-pool weight precision (default fp16).")]
PromptKvOpt = Annotated[
    str | None,
    typer.Option(
        help="Prompt-pool KV-cache precision: fp16, bf16 or fp8 (default: the weights'; fp16 for int4)."
    ),
]
TokenKvOpt = Annotated[
    str | None, typer.Option(help="Token-pool KV-cache precision (default: the weights').")
]
ExportPlanOpt = Annotated[
    Path | None,
    typer.Option(
        "--export-plan",
        help="Write a neutral deployment plan (YAML) of the answer; see the export-a-deployment-plan how-to.",
    ),
]


def scenario_of_options(
    *,
    workload: str,
    rate: float,
    duration: float,
    trace: str | None,
    model: str,
    perf: str | None,
    config: Path | None,
    slo: Path | None,
    seed: int,
    chunk_tokens: int | None = None,
    memory_budget: float,
    what: str,
    **estimate: Any,
) -> Any:
    """The scenario a command's workload options describe. A replayed trace's size is known only
    once it is read, so its memory check (`what` N requests, `estimate` as for the generated
    workload's check before) comes here; a generated workload's was made before drawing it."""
    from splitplan import api
    from splitplan.api._memory import check_requests_memory
    from splitplan.api._simulate import WorkloadRequest

    scenario = api.build_scenario(
        workload=WorkloadRequest(workload=workload, rate_rps=rate, duration_s=duration, trace=trace),
        model=model,
        perf=perf,
        config=config,
        slo=slo,
        seed=seed,
        chunk_tokens=chunk_tokens,
    )
    if trace is not None:
        check_requests_memory(scenario.workload.n, memory_budget, what, replayed=True, **estimate)
    return scenario
