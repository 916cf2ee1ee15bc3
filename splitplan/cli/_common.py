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


def console():  # -> rich.console.Console, imported lazily to keep --help fast
    from rich.console import Console

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
