"""Helpers shared by the command modules: JSON output and rich console set-up."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer


def print_json(doc: Any) -> None:
    json.dump(doc, sys.stdout, indent=2, allow_nan=False)
    sys.stdout.write("\n")


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
