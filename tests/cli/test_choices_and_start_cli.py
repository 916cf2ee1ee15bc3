"""Options with a fixed set of values are choices (help, parse-time refusal, shell completion), and
a command that draws a progress bar says it started before its modules import."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from splitplan.cli import main

ROOT = Path(__file__).resolve().parents[2]

CHOICES = [
    (["search"], "--objective", ["cost", "power", "throughput"]),
    (["search"], "--engine", ["hybrid", "analytic", "des"]),
    (["search"], "--method", ["auto", "grid", "optuna"]),
    (["search"], "--budget", ["iso-power", "iso-cost"]),
    (["search"], "--backend", ["loky", "dask"]),
    (["heatmap"], "--engine", ["hybrid", "analytic", "des"]),
    (["simulate"], "--engine", ["des", "analytic"]),
    (["pareto"], "--engine", ["hybrid", "analytic", "des"]),
]


@pytest.mark.parametrize(("command", "option", "values"), CHOICES)
def test_a_choice_is_refused_at_parse_naming_its_values(capsys, command, option, values):
    assert main([*command, option, "no-such-value"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith(f"splitplan: error: Invalid value for '{option}': 'no-such-value' is not one of")
    assert all(f"'{v}'" in err[0] for v in values)
    assert "Value error" not in err[0]


@pytest.mark.parametrize(("command", "option", "values"), CHOICES)
def test_help_shows_a_choices_values(capsys, monkeypatch, command, option, values):
    monkeypatch.setenv("COLUMNS", "200")
    assert main([*command, "--help"]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if f" {option} " in ln)
    assert "<" + "|".join(values) + ">" in line


@pytest.mark.parametrize(("command", "option", "values"), CHOICES[:3])
def test_the_shell_completes_a_choices_values(command, option, values):
    env = dict(
        os.environ,
        PYTHONPATH=str(ROOT),
        _SPLITPLAN_COMPLETE="complete_bash",
        COMP_WORDS=" ".join(["splitplan", *command, option, ""]),
        COMP_CWORD=str(len(command) + 2),
    )
    r = subprocess.run(
        [sys.executable, "-c", "from splitplan.cli import app; app(prog_name='splitplan')"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert r.stdout.split() == values, r.stderr


def test_help_gives_flags_no_value_and_repeatable_options_an_item_name(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["search", "--help"]) == 0
    text = capsys.readouterr().out
    assert "<bool>" not in text
    assert "<list[" not in text
    assert any(" --design " in ln and " DESIGN " in ln for ln in text.splitlines())


def test_a_named_budget_keeps_accepting_any_case(capsys):
    code = main(["search", "--design", "splitwise-aa", "--engine", "analytic", "--budget", "ISO-POWER"])
    assert code == 0, capsys.readouterr().err


def _on_a_terminal(args: list[str], timeout_s: float = 120.0) -> bytes:
    """What `python -m splitplan ARGS` writes to a terminal (stdout and stderr together)."""
    pid, fd = pty.fork()
    if pid == 0:  # pragma: no cover - the child
        os.environ["PYTHONPATH"] = str(ROOT)
        os.execv(sys.executable, [sys.executable, "-m", "splitplan", *args])
    out = b""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        ready, _, _ = select.select([fd], [], [], 0.1)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
    os.waitpid(pid, 0)
    os.close(fd)
    return out


def test_a_bar_command_says_it_started_and_erases_the_line_before_anything_else():
    out = _on_a_terminal(["search", "--rate", "-1"])
    start = out.index(b"splitplan search: starting")
    erase = out.index(b"\r\x1b[2K", start)
    error = out.index(b"splitplan: error:")
    assert start < erase < error


def test_no_starting_line_off_a_terminal_or_with_quiet():
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    r = subprocess.run(
        [sys.executable, "-m", "splitplan", "search", "--rate", "-1"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert r.returncode == 2
    assert "starting" not in r.stderr
    quiet = _on_a_terminal(["-q", "search", "--rate", "-1"])
    assert b"starting" not in quiet
    assert b"splitplan: error:" in quiet
