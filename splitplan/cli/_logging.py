"""`--quiet` / `--verbose`: standard `logging` for the command line, and whether progress shows.

The library logs under the `splitplan` logger (DEBUG: what it is doing; WARNING: what a user should
know). The CLI adds its notes ("plan written to …") at INFO. Levels: `--quiet` → WARNING (no
notes, no progress bars), default → INFO, `-v` → DEBUG. Results on stdout and error lines are never
affected.
"""

from __future__ import annotations

import logging
import sys

LOGGER = "splitplan"


class _State:
    quiet = False
    verbose = 0
    handler: logging.Handler | None = None


STATE = _State()


class _Format(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        from splitplan.errors import redact

        msg = redact(record.getMessage())  # a log line never repeats a URL's password
        if record.levelno >= logging.WARNING:
            return f"splitplan: {record.levelname.lower()}: {msg}"
        if record.levelno <= logging.DEBUG:
            return f"splitplan: [{record.name.removeprefix('splitplan.')}] {msg}"
        return f"splitplan: {msg}"


def configure(*, quiet: bool = False, verbose: int = 0) -> None:
    """Route `splitplan` logs to the current stderr at the level the flags ask for."""
    STATE.quiet, STATE.verbose = quiet, verbose
    log = logging.getLogger(LOGGER)
    if STATE.handler is not None:
        log.removeHandler(STATE.handler)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Format())
    STATE.handler = handler
    log.addHandler(handler)
    log.propagate = False
    log.setLevel(logging.WARNING if quiet else (logging.DEBUG if verbose else logging.INFO))


def note(message: str) -> None:
    """A user-facing note on stderr (hidden by --quiet)."""
    logging.getLogger(f"{LOGGER}.cli").info(message)


def progress_enabled() -> bool:
    """Progress bars: on a terminal, unless --quiet."""
    return not STATE.quiet and sys.stderr.isatty()


def reset() -> None:
    """Undo `configure` (the entry point calls this when a command ends, so a library caller in the
    same process — a test, a notebook — sees logging as it was)."""
    log = logging.getLogger(LOGGER)
    if STATE.handler is not None:
        log.removeHandler(STATE.handler)
        STATE.handler = None
    log.propagate = True
    log.setLevel(logging.NOTSET)
    STATE.quiet, STATE.verbose = False, 0
