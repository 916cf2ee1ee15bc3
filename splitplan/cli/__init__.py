"""Layer 8 — the thin typer shell. Every command calls `splitplan.api`; errors become one line."""

from __future__ import annotations

import sys

import typer

try:  # typer ≥ 0.20 vendors click
    from typer._click import exceptions as click_exceptions
except ImportError:  # pragma: no cover
    from click import exceptions as click_exceptions  # type: ignore[no-redef]

from splitplan._version import __version__
from splitplan.errors import SplitplanError

app = typer.Typer(
    name="splitplan",
    help="Plan phase-split (prefill/decode) LLM inference clusters that meet all nine latency SLOs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"splitplan {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version_callback, is_eager=True, help="Print the version."
    ),
) -> None:
    """Plan phase-split (prefill/decode) LLM inference clusters that meet all nine latency SLOs."""


def _register() -> None:
    # Command modules import their heavy dependencies inside the command functions.
    from splitplan.cli import catalog

    catalog.register(app)
    from splitplan.cli import perf

    perf.register(app)
    from splitplan.cli import trace

    trace.register(app)
    from splitplan.cli import simulate

    simulate.register(app)
    from splitplan.cli import search

    search.register(app)
    from splitplan.cli import heatmap

    heatmap.register(app)
    from splitplan.cli import reproduce

    reproduce.register(app)


_register()


def _interrupted_by(exc: BaseException) -> bool:
    """A compiled function interrupted by Ctrl-C surfaces as SystemError with the KeyboardInterrupt
    in its chain; it is an interrupt, not an internal error."""
    seen = 0
    e: BaseException | None = exc
    while e is not None and seen < 20:
        if isinstance(e, KeyboardInterrupt):
            return True
        e = e.__cause__ or e.__context__
        seen += 1
    return False


INTERRUPTED = 130


def main(argv: list[str] | None = None) -> int:
    """Console entry point: one line on stderr and exit 2 for bad input, never a traceback.

    SIGTERM (a scheduler stopping the job) takes the same path as Ctrl-C: finished work is kept
    and the exit status is 130.
    """
    from splitplan.sim.des import sigterm_raises_keyboard_interrupt

    with sigterm_raises_keyboard_interrupt():
        return _main(argv)


def _main(argv: list[str] | None) -> int:
    try:
        rv = app(args=argv, standalone_mode=False)
        if isinstance(rv, int):  # a command's own exit code (e.g. 130 after Ctrl-C kept partial work)
            return rv
    except typer.Exit as exc:
        return int(exc.exit_code or 0)
    except (typer.Abort, KeyboardInterrupt):
        print("splitplan: interrupted; no output file was written", file=sys.stderr)
        return INTERRUPTED
    except click_exceptions.NoArgsIsHelpError as exc:
        print(exc.format_message() if hasattr(exc, "format_message") else "", file=sys.stderr)
        return 2
    except click_exceptions.UsageError as exc:
        print(f"splitplan: error: {exc.format_message()}", file=sys.stderr)
        return 2
    except click_exceptions.ClickException as exc:
        print(f"splitplan: error: {exc.format_message()}", file=sys.stderr)
        return exc.exit_code
    except SplitplanError as exc:
        print(f"splitplan: error: {_one_line(exc)}", file=sys.stderr)
        return 2
    except MemoryError:
        print(
            "splitplan: error: out of memory; lower --rate/--duration or the machine counts",
            file=sys.stderr,
        )
        return 2
    except SystemError as exc:
        if _interrupted_by(exc):
            print("splitplan: interrupted; no output file was written", file=sys.stderr)
            return INTERRUPTED
        raise
    return 0


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text


def run() -> None:  # pragma: no cover - console script shim
    sys.exit(main())
