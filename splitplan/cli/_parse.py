"""The CLI's string options as typed values — the library takes numbers and tuples, never text.

Errors name the option (`--prompt-range`), since only the CLI knows it.
"""

from __future__ import annotations

import contextlib
import math
import re
from collections.abc import Iterator

from splitplan.errors import InputError

_RANGE = re.compile(r"^\s*(\d+)\s*(?::\s*(\d+)\s*)?$")


def parse_range(text: str, option: str, *, single: bool = False) -> tuple[int, int]:
    """ "A:B" (inclusive, 1 ≤ A ≤ B) → (A, B); with `single`, "N" means N:N too."""
    m = _RANGE.match(str(text))
    if not m or (m.group(2) is None and not single):
        form = "A:B or N" if single else "A:B"
        raise InputError(f"{option} must look like {form} with whole numbers, got {text!r}")
    lo = int(m.group(1))
    hi = lo if m.group(2) is None else int(m.group(2))
    if lo < 1 or hi < lo:
        raise InputError(f"{option} needs 1 ≤ A ≤ B, got {text!r}")
    return lo, hi


def parse_cap(text: str, option: str) -> float | tuple[float, float]:
    """A power cap "0.7" (fixed) or an interval "0.5:1.0" (a search dimension)."""
    parts = str(text).split(":")
    try:
        values = [float(x) for x in parts]
    except ValueError:
        values = []
    if len(values) not in (1, 2) or not all(math.isfinite(v) for v in values):
        raise InputError(f"{option} must be a number or LO:HI, got {text!r}")
    return values[0] if len(values) == 1 else (values[0], values[1])


@contextlib.contextmanager
def library_errors_as_flags() -> Iterator[None]:
    """Re-raise a library InputError with its parameter names spelled as this CLI's options.

    The library names its parameters in backticks (`max_machines`, `prompt_range`); a user of the
    CLI typed `--max-machines`, `--prompt-range`.
    """
    try:
        yield
    except InputError as exc:
        raise InputError(params_as_flags(str(exc))) from None


def params_as_flags(text: str) -> str:
    """`max_machines` → --max-machines in a library message (the CLI's spelling of the parameter)."""
    return _PARAM.sub(lambda m: "--" + _FLAG.get(m.group(1), m.group(1)).replace("_", "-"), text)


# library parameter → CLI option where the names differ (repeatable options are singular)
_FLAG = {"prompt_gpus": "prompt_gpu", "token_gpus": "token_gpu", "split_seed": "seed", "designs": "design"}
_PARAM = re.compile(r"`([a-z][a-z0-9_]*)`")


def parse_int_list(text: str | None, option: str) -> tuple[int, ...] | None:
    """ "2,4,8" → (2, 4, 8); absent → None. The library checks the values (≥ 1, no repeats)."""
    if text is None:
        return None
    try:
        return tuple(int(part.strip()) for part in str(text).split(","))
    except ValueError:
        raise InputError(f"{option} must be an integer or a comma list of integers, got {text!r}") from None


def parse_name_list(text: str | None) -> tuple[str, ...] | None:
    """ "fp16,fp8" → ("fp16", "fp8"); absent → None. The library checks the names."""
    if text is None:
        return None
    return tuple(part.strip() for part in str(text).split(","))
