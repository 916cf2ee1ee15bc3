"""Ctrl-C and SIGTERM during a search: exit 130, one line saying what was kept, the partial table
beside the destination (never over it), finished work in the storage. The simulations here are
slow Python fakes, so the signal lands between or inside Python code; interrupts inside the
compiled DES kernel are covered by tests/campaign/interrupts.py once the kernel polls a stop flag.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

ROOT = Path(__file__).resolve().parents[2]
DRIVER = """
import math, sys, time
from splitplan.search import evaluate
from splitplan.slo import SLO_KEYS

calls = [0]

def slow_decide(self, design, prompt, token, rate_scale=1.0, *, stop_below_headroom=None):
    # from the fourth decision on, each waits for the signal: on a loaded machine the search must
    # not end before the test has seen three verdicts stored and sent it
    calls[0] += 1
    time.sleep(0.15 if calls[0] <= 3 else 600)
    ok = prompt + token >= 6
    return evaluate.Decision(meets=ok, margin=0.1 if ok else -0.1, binding="ttft_p50",
                             slowdown={k: 1.0 for k in SLO_KEYS})

evaluate.SimEvaluator.decide = slow_decide
from splitplan.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _finished_points(db: Path) -> int:
    try:
        with sqlite3.connect(db) as con:
            q = "select count(*) from splitplan_claims where key like '%|point|%' and result is not null"
            return int(con.execute(q).fetchone()[0])
    except sqlite3.Error:
        return 0


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupted_search_keeps_work_beside_an_intact_destination(tmp_path, sig) -> None:
    out, db = tmp_path / "points.parquet", tmp_path / "s.db"
    pq.write_table(pa.table({"complete": [1, 2, 3]}), out)
    before = out.read_bytes()
    argv = ["search", "--design", "splitwise-hh", "--engine", "des", "--prompt-range", "1:6"]
    argv += [
        "--token-range",
        "1:6",
        "--rate",
        "5",
        "--duration",
        "5",
        "--out",
        str(out),
        "--storage",
        str(db),
    ]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.Popen(
        [sys.executable, "-c", DRIVER, *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    deadline = time.time() + 120
    while _finished_points(db) < 3 and time.time() < deadline and p.poll() is None:
        time.sleep(0.1)
    p.send_signal(sig)
    _, err = p.communicate(timeout=120)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert p.returncode == 130, err
    assert "Traceback" not in err
    assert len(lines) == 1, err
    assert "rerun the same command to resume" in lines[0]
    assert out.read_bytes() == before  # the complete file is untouched
    partial = tmp_path / "points.partial.parquet"
    assert str(partial) in lines[0]
    # 3 verdicts were posted; the signal may land between posting one and recording it
    assert pq.read_table(partial).num_rows >= 2
    assert not [f for f in tmp_path.iterdir() if f.name.endswith(".tmp")]


def test_an_interrupt_a_command_does_not_handle_still_says_one_line(monkeypatch, capsys) -> None:
    # typer answers a KeyboardInterrupt inside a command with a bare exit 130; the entry point
    # must still say what happened.
    import splitplan.api as api
    from splitplan.cli import main

    def stopped(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(api, "simulate", stopped)
    code = main(
        ["simulate", "--design", "baseline-a100", "--machines", "2", "--rate", "1", "--duration", "5"]
    )
    err = capsys.readouterr().err
    assert code == 130
    assert err.strip().splitlines() == ["splitplan: interrupted; no output file was written"]


def _wait_until_caught(pid: int, sig: int, timeout_s: float = 60.0) -> None:
    """Until process `pid` handles `sig` (Linux: its SigCgt mask). Before splitplan's entry point
    runs, nothing of it exists to answer a signal: the default action (or CPython's own fatal
    start-up error) is not splitplan's to change."""
    status = Path(f"/proc/{pid}/status")
    if not status.exists():
        return  # no /proc: the delays alone
    bit = 1 << (sig - 1)
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        try:
            lines = status.read_text().splitlines()
        except FileNotFoundError:
            return
        caught = next((ln for ln in lines if ln.startswith("SigCgt:")), "SigCgt: 0")
        if int(caught.split()[1], 16) & bit:
            return
        time.sleep(0.002)


@pytest.mark.parametrize("delay_s", [0.0, 0.2, 0.5])
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_while_the_cli_starts_ends_with_one_line_and_130(sig, delay_s) -> None:
    # the real entry point (`python -m splitplan`), interrupted while its modules still import:
    # `delay_s` after the entry point runs (it handles SIGTERM first thing, before the CLI imports)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    args = [sys.executable, "-m", "splitplan", "simulate", "--design", "baseline-a100", "--machines", "2"]
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    _wait_until_caught(p.pid, signal.SIGTERM)
    time.sleep(delay_s)
    p.send_signal(sig)
    _out, err = p.communicate(timeout=60)
    if p.returncode == 0:
        pytest.skip("the run finished before the signal")
    if err.startswith("Fatal Python error: init_import_site"):
        # CPython's SIGINT handler exists while it still imports `site`: an interrupt there is
        # CPython's fatal start-up error, before any of splitplan's code runs
        pytest.skip("the signal landed inside the interpreter's own start-up")
    assert "Traceback" not in err
    assert p.returncode == 130, err
    assert len(err.strip().splitlines()) == 1, err
