"""The `splitplan` console script and `python -m splitplan`: signals handled before anything heavy.

Importing the CLI's modules takes about half a second. Ctrl-C or SIGTERM in that window must end
like an interrupt anywhere else — one line, exit 130, no traceback — so SIGTERM is turned into a
KeyboardInterrupt first, and the import itself is guarded. The commands that show a progress bar
say that they started at once (`starting_line`), before that import: a user sees the command
alive within milliseconds, and the bar takes the line over.
"""

from __future__ import annotations

import os
import signal
import sys

from splitplan.errors import INTERRUPTED_EXIT, NOTHING_WRITTEN_LINE


def _sigterm_as_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


# commands that draw a progress bar on a terminal
_BAR_COMMANDS = frozenset({"search", "heatmap", "reproduce", "simulate", "pareto"})
_ERASE_LINE = "\r\x1b[2K"


def _erase_line() -> None:
    if sys.__stderr__ is not None:
        sys.__stderr__.write(_ERASE_LINE)
        sys.__stderr__.flush()


class _ErasesStartingLine:
    """A stream that erases the starting line before the first thing anyone writes (the bar, an
    error line, a result), then passes everything through."""

    def __init__(self, stream: object, pending: list[bool]) -> None:
        self._stream = stream
        self._pending = pending

    def write(self, text: str) -> int:
        if self._pending[0]:
            self._pending[0] = False
            _erase_line()
        return self._stream.write(text)  # type: ignore[attr-defined, no-any-return]

    def __getattr__(self, name: str) -> object:
        return getattr(self._stream, name)


def starting_line(argv: list[str]) -> bool:
    """Say `splitplan CMD: starting…` on a terminal's stderr for a command that will draw a bar;
    the first write to stdout or stderr erases it (and so does the exit)."""
    words = [a for a in argv if not a.startswith("-")]
    if not words or words[0] not in _BAR_COMMANDS or sys.__stderr__ is None:
        return False
    if not sys.__stderr__.isatty() or any(a in ("-q", "--quiet", "-h", "--help") for a in argv):
        return False
    pending = [True]
    sys.__stderr__.write(f"splitplan {words[0]}: starting…")
    sys.__stderr__.flush()
    sys.stderr = _ErasesStartingLine(sys.stderr, pending)  # type: ignore[assignment]
    sys.stdout = _ErasesStartingLine(sys.stdout, pending)  # type: ignore[assignment]

    def erase_at_exit() -> None:
        if pending[0]:
            pending[0] = False
            _erase_line()

    import atexit

    atexit.register(erase_at_exit)
    return True


def run() -> None:
    """Entry point: the CLI, with interrupts during start-up answered like any other."""
    signal.signal(signal.SIGTERM, _sigterm_as_interrupt)
    starting_line(sys.argv[1:])
    try:
        from splitplan.cli import run as cli_run
    except KeyboardInterrupt:
        sys.stderr.write(NOTHING_WRITTEN_LINE + "\n")
        sys.stderr.flush()
        os._exit(INTERRUPTED_EXIT)
    cli_run()
