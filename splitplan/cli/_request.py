"""`search --request FILE` / `--save-request FILE`: the replay rules at the command line.

A replay is the saved search: options that would change what it searches are refused, and only
how it runs (`--jobs`, `--backend`, `--scheduler`, `--storage`) and what it writes may be given.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

# parameters a replay may take from the command line (execution and outputs)
_REPLAY_OK = {
    "jobs",
    "backend",
    "scheduler",
    "storage",
    "out",
    "json_out",
    "export_plan",
    "save_request",
    "request",
}


def _explicit(ctx: Any) -> list[Any]:
    out = []
    for p in ctx.command.params:
        src = ctx.get_parameter_source(p.name)
        if src is not None and src.name in ("COMMANDLINE", "ENVIRONMENT"):
            out.append(p)
    return out


def replay_request(ctx: Any, cli_req: Any, request: Path) -> Any:
    """The saved request, with the execution options given on this command line."""
    from splitplan._io import refuse_url
    from splitplan.api._request import EXECUTION_FIELDS, load_request, with_execution
    from splitplan.errors import InputError

    refuse_url(request, "--request")  # named as the user typed it (the library says `request`)
    given = _explicit(ctx)
    refused = [p.opts[0] for p in given if p.name not in _REPLAY_OK]
    if refused:
        raise InputError(
            f"--request replays a saved search exactly; {', '.join(refused)} would change it "
            "(a replay takes only --jobs, --backend, --scheduler, --storage and output options)"
        )
    names = {p.name for p in given}
    execution = {f: getattr(cli_req, f) for f in EXECUTION_FIELDS if f in names}
    return with_execution(load_request(request), **execution)


def check_save_path(path: Path | None) -> None:
    if path is None:
        return
    from splitplan._io import check_output_path

    check_output_path(path, "--save-request", (".toml",))
