"""`import splitplan` (and the CLI module) stays light: heavy libraries load only when used."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("optuna", "pyarrow", "scipy.optimize", "joblib", "numba", "matplotlib")


@pytest.mark.parametrize("module", ["splitplan", "splitplan.cli", "splitplan.api"])
def test_import_does_not_load_heavy_dependencies(module) -> None:
    code = (
        f"import sys, json; import {module}; "
        f"print(json.dumps([m for m in {list(HEAVY)!r} if m in sys.modules]))"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == []


def test_the_check_itself_detects_a_heavy_import() -> None:
    code = (
        "import sys, json; import splitplan, scipy.optimize; "
        "print(json.dumps('scipy.optimize' in sys.modules))"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert json.loads(r.stdout) is True
