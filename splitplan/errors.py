"""Error tree (below every layer). Errors are what a user can act on; anything else is a bug.

    SplitplanError
    ├── InputError                bad option, file, CSV row, SLO file, config value (names it)
    │   ├── CatalogError          unknown GPU / machine / model / design name, malformed entry
    │   └── ModelDoesNotFitError  weights (plus minimal KV) exceed a machine's memory
    └── InfeasibleError           a deployment plan asked of a design that meets the SLOs nowhere

"No configuration meets the SLOs" is a result, not an error: searches and heatmaps report it
(meets_slo false, nulls) and the CLI exits 0. Only what needs a feasible configuration to exist
(an exported deployment plan) raises InfeasibleError: one line, no file, exit 0. The CLI turns any
other SplitplanError into one line on stderr and exit code 2.
"""

from __future__ import annotations

import re

# a URL's credentials: scheme://user:password@ — also as a path collapses it (scheme:/user:password@)
_CREDENTIALS = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.-]*:/{1,2}[^\s/@:'\"]*):[^\s/@'\"]*@")


def redact(text: str) -> str:
    """`text` with the password of every URL in it replaced by ***.

    Why here, below every layer: a storage URL or a path typed as a URL can carry a password, and
    any message, log line or output that repeats what the user gave must not repeat that. Every
    place that shows a user's value (the CLI's error line, logs, files that record the options)
    passes it through this one rule."""
    return _CREDENTIALS.sub(r"\g<head>:***@", text)


class SplitplanError(Exception):
    """Base of every error splitplan raises on purpose."""


class InputError(SplitplanError, ValueError):
    """A user-supplied value, file or option is invalid; the message names it."""


class CatalogError(InputError):
    """An unknown or malformed catalog entry (GPU, machine type, model, design)."""


class ModelDoesNotFitError(InputError):
    """The model's weights do not fit in the machine's memory."""


class InfeasibleError(SplitplanError):
    """No configuration of the design(s) meets every SLO, so there is nothing to deploy."""


INTERRUPTED_EXIT = 130  # the shell's code for a run stopped by SIGINT (SIGTERM takes the same path)
NOTHING_WRITTEN_LINE = "splitplan: interrupted; no output file was written"
