"""The `splitplan` console script and `python -m splitplan`: signals handled before anything heavy.

Importing the CLI's modules takes about half a second. Ctrl-C or SIGTERM in that window must end
like an interrupt anywhere else — one line, exit 130, no traceback — so SIGTERM is turned into a
KeyboardInterrupt first, and the import itself is guarded.
"""

from __future__ import annotations

import os
import signal
import sys

from splitplan.errors import INTERRUPTED_EXIT, NOTHING_WRITTEN_LINE


def _sigterm_as_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def run() -> None:
    """Entry point: the CLI, with interrupts during start-up answered like any other."""
    signal.signal(signal.SIGTERM, _sigterm_as_interrupt)
    try:
        from splitplan.cli import run as cli_run
    except KeyboardInterrupt:
        sys.stderr.write(NOTHING_WRITTEN_LINE + "\n")
        sys.stderr.flush()
        os._exit(INTERRUPTED_EXIT)
    cli_run()
