"""Layer 8 — the thin typer shell. Every command calls `splitplan.api`; errors become one line."""

from __future__ import annotations

import os
import signal
import sys
from typing import Annotated, Any

import typer

try:  # typer ≥ 0.20 vendors click
    from typer._click import exceptions as click_exceptions
except ImportError:  # pragma: no cover
    from click import exceptions as click_exceptions  # type: ignore[no-redef]

from splitplan._version import __version__
from splitplan.cli._common import forget_interrupt_line, interrupt_line_said
from splitplan.errors import INTERRUPTED_EXIT as INTERRUPTED
from splitplan.errors import NOTHING_WRITTEN_LINE as _NOTHING_WRITTEN
from splitplan.errors import InfeasibleError, SplitplanError, redact

app = typer.Typer(
    name="splitplan",
    help="Plan phase-split (prefill/decode) LLM inference clusters that meet all nine latency SLOs.",
    no_args_is_help=True,
    add_completion=True,  # --install-completion: option names and choices complete in the shell
    pretty_exceptions_enable=False,
)


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"splitplan {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    ctx: typer.Context,
    version: bool = typer.Option(
        False, "--version", callback=_version_callback, is_eager=True, help="Print the version."
    ),
    catalog: Annotated[
        list[str] | None,
        typer.Option(
            "--catalog",
            metavar="DIR",
            help="A user catalog folder (gpus/machines/models.toml, perf/) adding to or overriding the "
            "shipped one; repeatable; any command takes it (also $SPLITPLAN_CATALOG).",
        ),
    ] = None,
    quiet: bool = typer.Option(
        False, "--quiet", "-q", help="No progress bars or notes; results and errors only."
    ),
    verbose: int = typer.Option(
        0, "--verbose", "-v", count=True, help="Log what splitplan is doing (debug)."
    ),
    wide: bool = typer.Option(
        False, "--wide", help="Tables at full width: no value wrapped or shortened to fit the terminal."
    ),
) -> None:
    """Plan phase-split (prefill/decode) LLM inference clusters that meet all nine latency SLOs."""
    from splitplan.cli._logging import configure, reset

    if quiet and verbose:
        raise typer.BadParameter("--quiet and --verbose contradict each other; give one")
    configure(quiet=quiet, verbose=verbose)
    from splitplan.cli._common import DISPLAY

    DISPLAY.wide = wide
    ctx.call_on_close(reset)  # a library caller in the same process sees logging as it was
    if catalog:
        from pathlib import Path

        from splitplan.catalog import use_user_catalogs

        use_user_catalogs([Path(c) for c in catalog])


def _catalog_first(argv: list[str]) -> list[str]:
    """`--catalog DIR` is accepted anywhere on the line; it is a root option, so it moves first."""
    front: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--catalog" and i + 1 < len(argv):
            front += [a, argv[i + 1]]
            i += 2
            continue
        if a.startswith("--catalog="):
            front.append(a)
        else:
            rest.append(a)
        i += 1
    return front + rest


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
    from splitplan.cli import pareto

    pareto.register(app)


_register()

_BUILT: list[object] = []


def _tidy_metavars(cmd: object) -> None:
    """A flag takes no value: help shows none (typer would write `<bool>`). Repeatable options name
    their item where they are declared (`metavar="DESIGN"`)."""
    for p in getattr(cmd, "params", []):
        if getattr(p, "is_flag", False) and getattr(p, "metavar", None) is None:
            p.metavar = ""
        if getattr(p, "count", False):  # -v, -vv: a counted flag takes no value either
            p.metavar = ""
    help_option = getattr(cmd, "get_help_option", None)
    if help_option is not None:  # --help is made per context, not kept in `params`

        def valueless_help(ctx: Any, _made: Any = help_option) -> Any:
            opt = _made(ctx)
            if opt is not None and getattr(opt, "metavar", None) is None:
                opt.metavar = ""
            return opt

        cmd.get_help_option = valueless_help  # type: ignore[attr-defined]
    for sub in getattr(cmd, "commands", {}).values():
        _tidy_metavars(sub)


def _command() -> Any:
    """The click group typer builds from `app` (once per process), with tidy metavars."""
    if not _BUILT:
        cmd = typer.main.get_command(app)
        _tidy_metavars(cmd)
        _BUILT.append(cmd)
    return _BUILT[0]  # type: ignore[return-value]


def _repeated_option(args: list[str]) -> str | None:
    """The first single-valued option given twice on the line (its name), else None.

    click keeps the last of `--design a --design b` and drops the first without a word; a user who
    typed both meant something the run would not do, so the line is refused instead. Repeatable
    options (`--model`, `--catalog`), flags and counted flags may repeat."""
    cmd: Any = _command()
    words = iter(args)
    seen: dict[str, int] = {}
    for word in words:
        if word == "--":
            break
        sub = getattr(cmd, "commands", {}).get(word)
        if sub is not None and not seen:  # a (sub)command: its own options from here on
            cmd = sub
            continue
        name = word.split("=", 1)[0]
        param = next((p for p in getattr(cmd, "params", []) if name in (*p.opts, *p.secondary_opts)), None)
        if param is None or not getattr(param, "opts", None):
            continue
        if getattr(param, "is_flag", False) or getattr(param, "count", False):
            continue
        if "=" not in word:
            next(words, None)  # its value, which may look like anything
        if getattr(param, "multiple", False):
            continue
        key = param.opts[0]
        seen[key] = seen.get(key, 0) + 1
        if seen[key] > 1:
            return name
    return None


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


def main(argv: list[str] | None = None) -> int:
    """Console entry point: one line on stderr and exit 2 for bad input, never a traceback.

    SIGTERM (a scheduler stopping the job) takes the same path as Ctrl-C: finished work is kept
    and the exit status is 130.
    """
    try:
        from splitplan.sim.des import sigterm_raises_keyboard_interrupt

        with sigterm_raises_keyboard_interrupt():
            return _main(argv)
    except KeyboardInterrupt:  # while the simulator's modules import, before a command runs
        print(_NOTHING_WRITTEN, file=sys.stderr)
        return INTERRUPTED


def _main(argv: list[str] | None) -> int:
    forget_interrupt_line()
    try:
        args = _catalog_first(list(sys.argv[1:] if argv is None else argv))
        twice = _repeated_option(args)
        if twice is not None:
            print(f"splitplan: error: {twice} is given more than once; give it once", file=sys.stderr)
            return 2
        rv = _command().main(args=args, prog_name="splitplan", standalone_mode=False)
        _unless_said(rv)
        if isinstance(rv, int):  # a command's own exit code (e.g. 130 after Ctrl-C kept partial work)
            return rv
    except typer.Exit as exc:
        _unless_said(exc.exit_code)
        return int(exc.exit_code or 0)
    except (typer.Abort, KeyboardInterrupt):
        print(_NOTHING_WRITTEN, file=sys.stderr)
        return INTERRUPTED
    except click_exceptions.NoArgsIsHelpError as exc:
        print(redact(exc.format_message()) if hasattr(exc, "format_message") else "", file=sys.stderr)
        return 2
    except click_exceptions.UsageError as exc:
        # a choice's refusal reads "…: Value error, 'x' is not one of …": the words add nothing
        msg = exc.format_message().replace("Value error, ", "")
        print(f"splitplan: error: {redact(msg)}", file=sys.stderr)
        return 2
    except click_exceptions.ClickException as exc:
        print(f"splitplan: error: {redact(exc.format_message())}", file=sys.stderr)
        return exc.exit_code
    except InfeasibleError as exc:
        print(f"splitplan: {redact(str(exc))}", file=sys.stderr)
        return 0
    except SplitplanError as exc:
        from splitplan.cli._parse import params_as_flags

        # library messages name parameters (`max_machines`); a CLI user typed --max-machines
        print(f"splitplan: error: {redact(params_as_flags(_one_line(exc)))}", file=sys.stderr)
        return 2
    except MemoryError:
        print(
            "splitplan: error: out of memory; lower --rate/--duration or the machine counts",
            file=sys.stderr,
        )
        return 2
    except SystemError as exc:
        if _interrupted_by(exc):
            print(_NOTHING_WRITTEN, file=sys.stderr)
            return INTERRUPTED
        raise
    return 0


def _unless_said(code: object) -> None:
    """typer answers a KeyboardInterrupt inside a command with a silent exit 130: say the line
    the command did not."""
    if code == INTERRUPTED and not interrupt_line_said():
        print(_NOTHING_WRITTEN, file=sys.stderr)


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text


def run() -> None:  # pragma: no cover - console script shim
    code = main()
    if code == INTERRUPTED:
        # The run has kept its work and said so. Skip interpreter finalization: a library that
        # saw the KeyboardInterrupt inside its own compiled code can make CPython report the exit
        # as killed-by-SIGINT (-2) instead of 130, and a worker thread still stopping must not hold
        # the exit.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    # The work is done and said; an interrupt now has nothing left to stop, and would only print
    # "Exception ignored" from whatever finalizer it lands in.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    sys.exit(code)
