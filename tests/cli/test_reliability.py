"""Reliability of the command line: bad files and values are one-line errors, options take effect
or are refused, output paths are checked before any work, memory is estimated before a run, an
interrupted search keeps its partial table beside (never over) the destination."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from splitplan.cli import main

SIM = ["simulate", "--design", "splitwise-hh", "--prompt", "2", "--token", "2", "--rate", "5"]
SIM_A = [*SIM, "--duration", "5", "--engine", "analytic"]


def _error(capsys, argv: list[str], needle: str) -> str:
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    assert needle in lines[0], lines[0]
    return lines[0]


def _json(capsys, argv: list[str]) -> dict:
    code = main([*argv, "--json"])
    cap = capsys.readouterr()
    assert code == 0, cap.err
    return json.loads(cap.out)


@pytest.mark.parametrize("option", ["--slo", "--config", "--perf"])
def test_non_utf8_files_are_one_line_errors(tmp_path, capsys, option) -> None:
    f = tmp_path / "bin.toml"
    f.write_bytes(b"ok = 1\n\xff\xfe\x81")
    _error(capsys, [*SIM_A, option, str(f)], "not UTF-8 text")


def test_non_utf8_profile_in_perf_check(tmp_path, capsys) -> None:
    f = tmp_path / "p.csv"
    f.write_bytes(b"\xff\xfe")
    _error(capsys, ["perf", "check", "--profile", str(f)], "not UTF-8")


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ("weight_bytes = 5\n", "weight_bytes must be a table"),
        ("warmup_s = 1e9\n", "excludes every request"),
        ("link_bytes_per_s = 0\n", "link_bytes_per_s must be a number ≥ 1e+06"),
        ("link_bytes_per_s = 1e-300\n", "link_bytes_per_s must be a number ≥ 1e+06"),
        ("max_backlog_s = 0\n", "max_backlog_s must be a number > 0"),
        ("memory_retry_s = 0\n", "memory_retry_s"),
        ("max_preemptions = true\n", "max_preemptions"),
        ("max_batch_size = true\n", "max_batch_size"),
        ("prompt_reserves_decode_kv = 1\n", "prompt_reserves_decode_kv"),
        ("[weight_bytes]\nllama2-70b = true\n", "weight_bytes.llama2-70b"),
        ("warmup_s = true\n", "warmup_s"),
    ],
)
def test_config_nonsense_is_refused(tmp_path, capsys, body, needle) -> None:
    f = tmp_path / "c.toml"
    f.write_text(body)
    _error(capsys, [*SIM_A, "--config", str(f)], needle)


@pytest.mark.parametrize(
    ("interrupts", "argv", "refused"),
    [
        ("never", ["simulate", "--design", "baseline-h100", "--machines", "3"], "--engine des"),
        ("never", SIM, "--engine des"),
        ("baseline", SIM, "--engine des"),
        ("never", ["search", "--design", "splitwise-hh", "--max-machines", "3"], "--engine des or hybrid"),
        (
            "baseline",
            ["heatmap", "--design", "splitwise-hh", "--prompt-range", "1:2", "--token-range", "1:2"],
            "--engine des or hybrid",
        ),
        ("baseline", ["simulate", "--design", "baseline-h100", "--machines", "3"], None),
        ("never", ["simulate", "--design", "chunked-h100", "--machines", "3"], None),
    ],
)
def test_a_setting_only_the_des_simulates_is_refused_by_the_analytic_engine(
    tmp_path, capsys, interrupts, argv, refused
) -> None:
    # the evaluator lets a prompt interrupt the decodes of a mixed-batching machine; where the
    # config says it does not, an answer from the evaluator alone would ignore the setting
    f = tmp_path / "c.toml"
    f.write_text(f'prompt_interrupts_decodes = "{interrupts}"\n')
    args = [*argv, *([] if "--rate" in argv else ["--rate", "5"]), "--duration", "5", "--config", str(f)]
    if "heatmap" in argv:
        args += ["--out", str(tmp_path / "h.parquet")]
    if refused is None:
        assert _json(capsys, [*args, "--engine", "analytic"])["engine"] == "analytic"
        return
    line = _error(capsys, [*args, "--engine", "analytic"], "prompt_interrupts_decodes")
    assert line.endswith(refused)
    if argv[0] == "simulate":  # the DES takes it
        assert _json(capsys, [*args, "--engine", "des"])["engine"] == "des"


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["perf", "check", "--profile", "x.csv", "--seed", "-1"], "--seed"),
        (["search", "--objective", "throughput", "--power-budget-kw", "nan"], "--power-budget-kw"),
        (["search", "--objective", "throughput", "--power-budget-kw", "inf"], "--power-budget-kw"),
        (["search", "--objective", "throughput", "--cost-budget-usd-per-h", "nan"], "--cost-budget"),
        (["simulate", "--prompt", "1000000000", "--token", "2"], "--prompt must be between 1 and 100,000"),
        (["simulate", "--design", "baseline-h100", "--machines", "1000000000"], "--machines"),
        ([*SIM_A, "--seed", "-1"], "--seed"),
    ],
)
def test_listed_tracebacks_are_one_line_errors(capsys, argv, needle) -> None:
    _error(capsys, argv, needle)


def test_power_cap_and_gpu_on_named_design_take_effect(capsys) -> None:
    full = _json(capsys, SIM_A)
    capped = _json(capsys, [*SIM_A, "--token-power-cap", "0.5"])
    assert capped["power_kw"] == pytest.approx(full["power_kw"] - 2 * 0.5 * full["power_kw"] / 4)
    a100 = _json(capsys, [*SIM_A, "--prompt-gpu", "a100-80gb"])
    assert a100["design"] == "splitwise-hh:dgx-a100/dgx-h100"
    assert a100["cost_usd_per_h"] < full["cost_usd_per_h"]
    # a named design keeps its own caps unless told otherwise; told, it changes
    hhcap = ["simulate", "--design", "splitwise-hhcap", "--prompt", "2", "--token", "2", "--duration", "5"]
    hhcap += ["--engine", "analytic"]
    assert _json(capsys, hhcap)["power_kw"] < full["power_kw"]
    assert _json(capsys, [*hhcap, "--token-power-cap", "1"])["power_kw"] == pytest.approx(full["power_kw"])


@pytest.mark.parametrize("cap", ["0", "-0.5", "1.5", "nan"])
def test_invalid_caps_on_named_design_are_refused(capsys, cap) -> None:
    _error(capsys, [*SIM_A, "--token-power-cap", cap], "--token-power-cap")


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--machines", "3"], "not --machines"),
        (["--trace", "x.csv"], "--trace replays a file as is"),
        (["--requests-out", "r.parquet"], "--requests-out needs --engine des"),
    ],
)
def test_conflicting_simulate_options(capsys, extra, needle) -> None:
    _error(capsys, [*SIM_A, *extra], needle)


def test_baseline_refuses_split_options(capsys) -> None:
    base = ["simulate", "--design", "baseline-h100", "--duration", "5", "--engine", "analytic"]
    _error(capsys, [*base, "--prompt", "2", "--token", "2"], "not --prompt/--token")
    _error(capsys, [*base, "--machines", "2", "--token-power-cap", "0.5"], "one pool")
    capped = _json(capsys, [*base, "--machines", "2", "--prompt-power-cap", "0.5"])
    assert capped["power_kw"] == pytest.approx(5.6)  # 2 DGX-H100 at half of 5.6 kW


def test_search_ranges_are_honoured_exactly(capsys) -> None:
    base = ["search", "--design", "splitwise-hh", "--engine", "analytic", "--rate", "5", "--duration", "5"]
    _error(capsys, [*base, "--prompt-range", "50:60", "--max-machines", "4"], "beyond --max-machines 4")
    line = _error(capsys, [*base, "--prompt-range", "5:2", "--max-machines", "4"], "1 ≤ A ≤ B")
    assert "'5:2'" in line
    _error(capsys, ["search", "--design", "baseline-h100", "--token-range", "1:4"], "token pool")
    _error(capsys, [*base, "--prompt-range", "1:1000000", "--token-range", "1:1000000"], "at most")
    doc = _json(capsys, [*base, "--prompt-range", "2:3", "--token-range", "1:2"])
    r = doc["results"][0]
    assert 2 <= r["prompt_machines"] <= 3
    assert 1 <= r["token_machines"] <= 2


def test_search_cap_on_named_design_is_searched(capsys) -> None:
    base = ["search", "--design", "splitwise-hh", "--engine", "analytic", "--rate", "5", "--duration", "5"]
    doc = _json(capsys, [*base, "--max-machines", "4", "--token-power-cap", "0.5"])
    assert doc["results"][0]["token_power_cap"] == 0.5
    assert doc["results"][0]["design"].startswith("splitwise-hh")


@pytest.mark.parametrize(
    ("make", "needle"),
    [
        (lambda t: t / "missing" / "x.parquet", "does not exist"),
        (lambda t: t, "is a folder"),
        (lambda t: Path("/proc/x.parquet"), "system folder"),
        (lambda t: t / "x.csv", "must name a .parquet file"),
    ],
)
def test_output_paths_checked_before_work(tmp_path, capsys, make, needle) -> None:
    p = str(make(tmp_path))
    _error(capsys, ["search", "--out", p], needle)
    _error(capsys, [*SIM, "--requests-out", p], needle)
    _error(capsys, ["heatmap", "--out", p], needle)


def test_trace_outputs_checked(tmp_path, capsys) -> None:
    _error(capsys, ["trace", "generate", "--out", str(tmp_path / "no" / "t.csv")], "does not exist")
    _error(capsys, ["trace", "generate", "--out", str(tmp_path / "t.parquet")], ".csv")
    _error(capsys, ["perf", "fit", "--profile", "p.csv", "--out", str(tmp_path)], "is a folder")


def test_memory_is_estimated_before_the_run(capsys) -> None:
    _error(capsys, ["search", "--rate", "100000"], "--max-memory")
    sim = ["simulate", "--design", "splitwise-hh", "--prompt", "2", "--token", "2", "--engine", "analytic"]
    _error(capsys, [*sim, "--max-memory", "400MB", "--rate", "20000", "--duration", "100"], "--max-memory")
    _error(capsys, [*SIM_A, "--max-memory", "lots"], "--max-memory must be a size")


def test_degenerate_trace_throughput_is_null(tmp_path, capsys) -> None:
    f = tmp_path / "instant.csv"
    header = "request_id,request_type,application_id,arrival_timestamp,batch_size,prompt_size,token_size\n"
    f.write_text(header + "".join(f"{i},2,0,0.0,1,100,20\n" for i in range(5)))
    doc = _json(
        capsys, ["simulate", "--design", "splitwise-hh", "--prompt", "2", "--token", "2", "--trace", str(f)]
    )
    assert doc["throughput_rps"] is None


def test_stale_temp_files_of_killed_writers_are_removed(tmp_path) -> None:
    from splitplan._io import write_text_atomic

    target = tmp_path / "x.toml"
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    stale = tmp_path / f".x.toml.{int(dead.stdout)}.abc123.tmp"
    stale.write_text("")
    live = tmp_path / f".x.toml.{os.getppid()}.def456.tmp"  # a running writer's file is left alone
    live.write_text("")
    write_text_atomic(target, "a = 1\n")
    assert target.read_text() == "a = 1\n"
    assert not stale.exists()
    assert live.exists()


def test_partial_path_is_beside_the_destination() -> None:
    from splitplan._io import partial_path

    assert partial_path(Path("/a/b/points.parquet")) == Path("/a/b/points.partial.parquet")


def test_simultaneous_starts_on_a_fresh_sqlite_file(tmp_path) -> None:
    """Processes opening one new SQLite storage at once all succeed (the schema is created once)."""
    script = Path(__file__).resolve().parents[1] / "campaign" / "simultaneous_starts.py"
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    res = subprocess.run(
        [sys.executable, str(script), "6"], capture_output=True, text=True, env=env, timeout=300
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert "failures: 0 of 6" in res.stdout
