"""Error tree (below every layer). Expected outcomes are errors users can act on; anything else is a bug.

    SplitplanError
    ├── InputError            bad flag, file, CSV row, SLO file, config value
    │   └── CatalogError      unknown GPU / machine / model / design name, malformed catalog entry
    ├── ModelDoesNotFitError  weights (plus minimal KV) exceed a machine's memory
    └── InfeasibleError       no configuration meets the SLOs (a result, reported, exit 0 at the CLI)

The CLI turns any SplitplanError into one line on stderr and exit code 2 (InfeasibleError: 0).
"""

from __future__ import annotations


class SplitplanError(Exception):
    """Base of every error splitplan raises on purpose."""


class InputError(SplitplanError, ValueError):
    """A user-supplied value, file or option is invalid; the message names it."""


class CatalogError(InputError):
    """An unknown or malformed catalog entry (GPU, machine type, model, design)."""


class ModelDoesNotFitError(InputError):
    """The model's weights do not fit in the machine's memory."""


class InfeasibleError(SplitplanError):
    """No configuration in the searched space meets every SLO."""
