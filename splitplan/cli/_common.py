"""Helpers shared by the command modules: JSON output and rich console set-up."""

from __future__ import annotations

import json
import sys
from typing import Any


def print_json(doc: Any) -> None:
    json.dump(doc, sys.stdout, indent=2, allow_nan=False)
    sys.stdout.write("\n")


def console():  # -> rich.console.Console, imported lazily to keep --help fast
    from rich.console import Console

    return Console()
