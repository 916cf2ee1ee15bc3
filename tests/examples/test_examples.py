"""Every script in examples/ runs to completion (a non-zero exit fails; none is skipped)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))


def test_there_are_examples():
    assert len(EXAMPLES) >= 3


@pytest.mark.parametrize("script", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_example_runs(script: Path, tmp_path: Path):
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, f"{script.name} exited {proc.returncode}:\n{proc.stderr[-3000:]}"
    assert proc.stdout.strip(), f"{script.name} printed nothing"
    assert "Traceback" not in proc.stderr


def test_examples_use_only_the_public_api():
    for script in EXAMPLES:
        for line in script.read_text().splitlines():
            s = line.strip()
            if s.startswith(("import splitplan", "from splitplan")):
                assert s in ("from splitplan import api", "import splitplan.api as api"), (
                    f"{script.name}: {s!r} reaches past splitplan.api"
                )
