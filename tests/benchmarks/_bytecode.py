"""Process-wall benchmarks time the package as an install leaves it: with its bytecode compiled.

`pip install` compiles every module's bytecode. A checkout run where PYTHONDONTWRITEBYTECODE is set
(some CI images and containers set it) instead compiles all of splitplan from source in every
process: about 0.15 s per process, a tenth of a small search's process wall, and more as the
package grows. So the benchmarks that time fresh processes compile it once first (into the
git-ignored __pycache__ folders, which Python reads whether or not it may write them).
"""

from __future__ import annotations

import compileall
from pathlib import Path


def compile_package(repo: Path) -> None:
    """Compile the checkout's splitplan package to bytecode (a no-op where it is up to date)."""
    compileall.compile_dir(repo / "splitplan", quiet=1)
