"""`splitplan simulate`: JSON contract, per-request parquet, one-line errors."""

from __future__ import annotations

import json

import pytest

from splitplan.cli import main
from splitplan.slo import SLO_KEYS

SMALL = ["--rate", "20", "--duration", "20"]


def run(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_json_has_the_product_keys(capsys):
    code, out, err = run(
        capsys, "simulate", "--design", "splitwise-hh", "--prompt", "4", "--token", "2", *SMALL, "--json"
    )
    assert code == 0, err
    doc = json.loads(out)
    for key in (
        "design",
        "prompt_machines",
        "token_machines",
        "machines",
        "engine",
        "requests",
        "completed",
        "slowdown",
        "latency_s",
        "meets_slo",
        "binding_slo",
        "cost_usd_per_h",
        "power_kw",
        "throughput_rps",
        "sim_wall_s",
    ):
        assert key in doc
    assert set(doc["slowdown"]) == set(SLO_KEYS) == set(doc["latency_s"])
    assert doc["machines"] == 6
    assert doc["cost_usd_per_h"] == pytest.approx(6 * 38.0)
    assert doc["completed"] == doc["requests"]


def test_baseline_reports_null_pool_counts(capsys):
    code, out, _ = run(capsys, "simulate", "--design", "baseline-a100", "--machines", "5", *SMALL, "--json")
    doc = json.loads(out)
    assert code == 0
    assert doc["prompt_machines"] is None
    assert doc["machines"] == 5


def test_requests_out_parquet(tmp_path, capsys):
    import pyarrow.parquet as pq

    out_file = tmp_path / "req.parquet"
    code, _, err = run(
        capsys,
        "simulate",
        "--design",
        "splitwise-aa",
        "--prompt",
        "3",
        "--token",
        "3",
        *SMALL,
        "--requests-out",
        str(out_file),
    )
    assert code == 0, err
    table = pq.read_table(out_file)
    assert {"ttft_s", "tbt_s", "e2e_s", "prompt_machine", "token_machine"} <= set(table.column_names)
    assert not list(tmp_path.glob(".*.tmp"))


def test_rich_table_names_binding_slo(capsys):
    code, out, _ = run(
        capsys, "simulate", "--design", "splitwise-hh", "--prompt", "4", "--token", "2", *SMALL
    )
    assert code == 0
    assert "binding" in out
    assert "ttft_p50" in out


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--design", "splitwise-zz", "--prompt", "1", "--token", "1"], "unknown design"),
        (["--design", "splitwise-hh", "--prompt", "-3", "--token", "1"], "--prompt"),
        (["--design", "baseline-h100"], "--machines"),
        (["--prompt-gpu", "tpu-v9", "--prompt", "1", "--token", "1"], "unknown machine or GPU"),
        (["--prompt-gpu", "80gb", "--prompt", "1", "--token", "1"], "names several machine types"),
        (["--design", "splitwise-h", "--prompt", "1", "--token", "1"], "did you mean 'splitwise-hh'"),
        (
            ["--prompt-gpu", "h100-80gb", "--prompt-power-cap", "1.5", "--prompt", "1", "--token", "1"],
            "power-cap",
        ),
        (["--design", "splitwise-hh", "--prompt", "1", "--token", "1", "--model", "gpt-9"], "unknown model"),
        (["--design", "splitwise-hh", "--prompt", "1", "--token", "1", "--rate", "-1"], "rate"),
        (["--design", "splitwise-hh", "--prompt", "1", "--token", "1", "--engine", "magic"], "engine"),
        (
            ["--design", "splitwise-hh", "--prompt", "1", "--token", "1", "--perf", "/nonexistent.csv"],
            "does not exist",
        ),
    ],
)
def test_bad_input_is_one_line_exit_2(capsys, args, needle):
    code, _out, err = run(capsys, "simulate", *SMALL, *args)
    assert code == 2
    assert needle in err
    assert len(err.strip().splitlines()) == 1
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("option", "body", "needle"),
    [
        ("--slo", '[slowdown]\nttft_p50 = "fast"\n', "ttft_p50 must be a number"),
        ("--config", "max_batch_size = 0\n", "max_batch_size"),
        (
            "--config",
            'profile_prompt_curves = "median"\n',
            "profile_prompt_curves must be by-count or pooled",
        ),
    ],
)
def test_bad_slo_and_config_files(tmp_path, capsys, option, body, needle):
    f = tmp_path / "file.toml"
    f.write_text(body)
    code, _, err = run(
        capsys,
        "simulate",
        "--design",
        "splitwise-hh",
        "--prompt",
        "2",
        "--token",
        "1",
        option,
        str(f),
        *SMALL,
    )
    assert code == 2
    assert needle in err
    assert len(err.strip().splitlines()) == 1


def test_model_that_does_not_fit(tmp_path, capsys):
    # BLOOM-176B leaves 32 GB on 8 x L40S; heavier weights (say, another dtype) leave no room
    cfg = tmp_path / "heavy.toml"
    cfg.write_text("[weight_bytes]\nbloom-176b = 380e9\n")
    code, _, err = run(
        capsys,
        "simulate",
        "--prompt-gpu",
        "l40s-48gb",
        "--prompt",
        "1",
        "--token",
        "1",
        "--model",
        "bloom-176b",
        "--config",
        str(cfg),
        *SMALL,
    )
    assert code == 2
    assert "does not fit" in err


def test_table_shows_the_slo_files_limits(tmp_path, capsys):
    slo = tmp_path / "slo.toml"
    slo.write_text("[slowdown]\nttft_p50 = 0.4\n[latency_s]\ne2e_p99 = 5.0\n")
    code, out, _ = run(
        capsys,
        "simulate",
        "--design",
        "splitwise-hh",
        "--prompt",
        "6",
        "--token",
        "2",
        "--slo",
        str(slo),
        *SMALL,
    )
    assert code == 0
    assert "0.4" in out
    assert "5 s" in out
    assert "FAIL" in out


@pytest.mark.parametrize(
    ("seconds", "shown"), [(0.000491, "0.491 ms"), (0.0344, "34.4 ms"), (0.5, "500 ms"), (12.34, "12.3 s")]
)
def test_the_simulation_wall_time_keeps_three_figures(seconds: float, shown: str) -> None:
    from splitplan.cli.simulate import _wall

    assert _wall(seconds) == shown
