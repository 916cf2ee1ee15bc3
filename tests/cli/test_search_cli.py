"""`splitplan search`: JSON contract, exit codes, parquet output, Ctrl-C, CLI ↔ API equivalence."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit" / "search"))
from search_fakes import FakeEvaluator

import splitplan.api._search as api_search
from splitplan import api
from splitplan.cli import main
from splitplan.slo import SLO_KEYS

RESULT_KEYS = {
    "design",
    "prompt_machines",
    "token_machines",
    "machines",
    "prompt_gpu",
    "token_gpu",
    "prompt_power_cap",
    "token_power_cap",
    "cost_usd_per_h",
    "power_kw",
    "rate_rps",
    "meets_slo",
    "verified_by",
    "slowdown",
}
SMALL = [
    "--design",
    "splitwise-hh",
    "--design",
    "baseline-h100",
    "--prompt-range",
    "10:16",
    "--token-range",
    "3:6",
]


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeEvaluator:
    ev = FakeEvaluator(bias=0.1)
    monkeypatch.setattr(api_search, "SimEvaluator", lambda _scenario: ev)
    return ev


def run_json(capsys: pytest.CaptureFixture[str], args: list[str]) -> dict:
    code = main(["search", *args, "--json"])
    out = capsys.readouterr().out
    assert code == 0, out
    return json.loads(out)


def test_json_keys_on_the_real_simulators(capsys: pytest.CaptureFixture[str]) -> None:
    doc = run_json(capsys, SMALL)
    assert {"results", "best", "evaluated_points", "wall_s"} <= set(doc)
    hh, base = doc["results"]
    assert set(hh) >= RESULT_KEYS
    assert set(hh["slowdown"]) == set(SLO_KEYS)
    assert hh["design"] == "splitwise-hh"
    assert hh["meets_slo"]
    assert hh["verified_by"] == "des"
    assert hh["machines"] == hh["prompt_machines"] + hh["token_machines"]
    assert base["prompt_machines"] is None
    assert base["token_machines"] is None
    assert doc["best"]["design"] == "splitwise-hh"
    assert doc["evaluated_points"] == 7 * 4 + 7


def test_cli_and_api_agree(capsys: pytest.CaptureFixture[str], fake: FakeEvaluator) -> None:
    doc = run_json(capsys, ["--design", "splitwise-aa", "--design", "baseline-a100", "--seed", "3"])
    req = api.SearchRequest(designs=("splitwise-aa", "baseline-a100"), seed=3)
    outcome = api.search(req)
    ref = outcome.to_json()
    doc.pop("wall_s"), ref.pop("wall_s")
    metrics = api.search_metrics(req, outcome)  # the CLI adds each design's served-token metrics
    assert [r.pop("metrics") for r in doc["results"]] == [metrics[r["design"]] for r in doc["results"]]
    assert doc["best"].pop("metrics") == metrics[doc["best"]["design"]]
    assert doc == ref
    assert doc["best"]["design"] in ("splitwise-aa", "baseline-a100")
    assert doc["savings_vs_best_baseline"] is not None


@pytest.mark.parametrize(
    "args",
    [
        ["--objective", "banana"],
        ["--engine", "exhaustive"],
        ["--design", "splitwise-xx"],
        ["--out", "points.csv"],
        ["--objective", "throughput"],  # needs a budget
        ["--budget", "iso-banana", "--objective", "throughput"],
        ["--prompt-range", "9:3"],
        ["--jobs", "0"],
        ["--backend", "dask"],  # needs --scheduler
        ["--prompt-gpu", "h100", "--prompt-power-cap", "1.5"],
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], fake: FakeEvaluator, args: list[str]
) -> None:
    assert main(["search", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("splitplan: error:")
    assert "\n" not in err


def test_no_feasible_configuration_is_a_result(
    capsys: pytest.CaptureFixture[str], fake: FakeEvaluator
) -> None:
    doc = run_json(capsys, ["--design", "splitwise-aa", "--cost-budget-usd-per-h", "100"])
    r = doc["results"][0]
    assert r["meets_slo"] is False
    assert r["prompt_machines"] is None
    assert r["cost_usd_per_h"] is None
    assert doc["best"] is None
    assert main(["search", "--design", "splitwise-aa", "--cost-budget-usd-per-h", "100"]) == 0
    assert "No design meets all nine SLOs" in capsys.readouterr().out


def test_out_writes_every_point_with_how_it_was_decided(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fake: FakeEvaluator
) -> None:
    out = tmp_path / "points.parquet"
    assert main(["search", "--design", "splitwise-hh", "--out", str(out)]) == 0
    table = pq.read_table(out)
    assert table.num_rows == 39 * 39
    assert set(table.column("decided_by").to_pylist()) <= {"des", "dominance"}
    assert table.schema.metadata[b"engine"] == b"hybrid"
    assert "points written" in capsys.readouterr().out
    assert not list(tmp_path.glob(".*.tmp"))


def test_throughput_with_the_iso_power_budget(
    capsys: pytest.CaptureFixture[str], fake: FakeEvaluator
) -> None:
    doc = run_json(
        capsys,
        [
            "--design",
            "splitwise-hh",
            "--design",
            "baseline-a100",
            "--objective",
            "throughput",
            "--budget",
            "iso-power",
        ],
    )
    hh, base = doc["results"]
    assert hh["machines"] == 40
    assert base["machines"] == 70
    assert hh["rate_rps"] > 0
    assert hh["prompt_machines"] + hh["token_machines"] == 40


def test_ctrl_c_keeps_finished_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fake: FakeEvaluator
) -> None:
    from typer.testing import CliRunner

    from splitplan.cli import app

    fake.fail_after = 10
    out, db = tmp_path / "p.parquet", tmp_path / "s.db"
    args = ["search", "--design", "splitwise-hh", "--out", str(out), "--storage", str(db)]
    res = CliRunner().invoke(app, args)
    err = res.stderr
    assert res.exit_code == 130
    assert "interrupted after 10 DES runs" in err
    assert "rerun the same command to resume" in err
    # the partial table goes beside the destination, never over it
    assert not out.exists()
    assert pq.read_table(tmp_path / "p.partial.parquet").num_rows == 10
    assert "p.partial.parquet" in err
    assert len([ln for ln in err.splitlines() if ln.strip()]) == 1
    fake.fail_after = None
    n_before = len(fake.calls)
    assert main(["search", "--design", "splitwise-hh", "--storage", str(db), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["des_evaluations"] == len(fake.calls) - n_before
    assert doc["results"][0]["meets_slo"]


def _stored_points(db: Path) -> int:
    import sqlite3

    if not db.exists():
        return 0
    try:
        with sqlite3.connect(db) as con:
            return int(
                con.execute(
                    "select count(*) from study_system_attributes where key like 'verdict:%'"
                ).fetchone()[0]
            )
    except sqlite3.OperationalError:  # tables not created yet
        return 0


def test_killed_search_resumes_from_storage(tmp_path: Path) -> None:
    """A search killed (SIGKILL) midway resumes from --storage: no finished point is re-run and the
    answer equals an uninterrupted run's."""
    import signal
    import subprocess
    import time

    args = [
        sys.executable,
        "-m",
        "splitplan",
        "search",
        "--design",
        "splitwise-hh",
        "--prompt-range",
        "10:20",
        "--token-range",
        "2:8",
        "--engine",
        "des",
        "--json",
    ]
    ref = json.loads(
        subprocess.run(
            [*args, "--storage", str(tmp_path / "a.db")], check=True, capture_output=True, text=True
        ).stdout
    )
    db = tmp_path / "b.db"
    proc = subprocess.Popen(
        [*args, "--storage", str(db)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 120
    while _stored_points(db) < 10 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    kept = _stored_points(db)
    assert 10 <= kept < 77
    doc = json.loads(
        subprocess.run([*args, "--storage", str(db)], check=True, capture_output=True, text=True).stdout
    )
    assert doc["des_evaluations"] == 77 - kept
    assert ref["des_evaluations"] == 77
    assert doc["results"] == ref["results"]


def test_two_workers_share_one_optuna_study(tmp_path: Path) -> None:
    """Two processes started together on one --storage split the trials between them."""
    import sqlite3
    import subprocess

    db = tmp_path / "shared.db"
    args = [
        sys.executable,
        "-m",
        "splitplan",
        "search",
        "--prompt-gpu",
        "a100-80gb",
        "--prompt-gpu",
        "h100-80gb",
        "--token-gpu",
        "a100-80gb",
        "--token-gpu",
        "h100-80gb",
        "--prompt-power-cap",
        "0.5:1",
        "--token-power-cap",
        "0.5:1",
        "--trials",
        "48",
        "--storage",
        str(db),
        "--json",
    ]
    procs = [
        subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)
    ]
    docs = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        docs.append(json.loads(out))
    with sqlite3.connect(db) as con:
        # the sampler's study (the answer study beside it holds the decided points)
        states = dict(
            con.execute(
                "select t.state, count(*) from trials t join studies s on s.study_id = t.study_id"
                " where s.study_name not like '%-answer-%' group by t.state"
            ).fetchall()
        )
    assert set(states) == {"COMPLETE"}
    assert 48 <= states["COMPLETE"] < 2 * 48  # shared work, not two separate studies
    for doc in docs:
        r = doc["results"][0]
        assert r["meets_slo"]
        assert r["verified_by"] == "des"
    import optuna

    url = f"sqlite:///{db}"
    (answer,) = [s.study_name for s in optuna.get_all_study_summaries(url) if "-answer-" in s.study_name]
    best = optuna.load_study(study_name=answer, storage=url).best_trial
    # written by the worker that claimed it: its answer
    assert any(
        best.value == pytest.approx(d["best"]["cost_usd_per_h"], rel=1e-12)
        and best.params["prompt_gpu"] == d["best"]["prompt_gpu"]
        for d in docs
    )


@pytest.mark.parametrize("engine", ["analytic", "hybrid"])
def test_absolute_latency_limit_is_named_as_the_binding_slo(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, engine: str
) -> None:
    """With `ttft_p99 = 0.76` s in [latency_s], the optimum's binding SLO is that limit, for the
    analytic-decided (engine analytic) and the DES-decided (hybrid) answer alike."""
    slo = tmp_path / "slo.toml"
    slo.write_text("[latency_s]\nttft_p99 = 0.76\n")
    args = ["--design", "splitwise-hh", "--prompt-range", "10:16", "--token-range", "3:6"]
    args += ["--perf", "analytic"]  # the performance model the limit was chosen under
    doc = run_json(capsys, [*args, "--slo", str(slo), "--engine", engine])
    best = doc["best"]
    assert best["verified_by"] == ("analytic" if engine == "analytic" else "des")
    assert best["binding_slo"] == "ttft_p99_latency"
    assert 0 <= best["slo_headroom"] < 0.05
    # without the latency limit a slowdown SLO binds, at an optimum no dearer
    plain = run_json(capsys, [*args, "--engine", engine])["best"]
    assert plain["binding_slo"] in SLO_KEYS
    assert plain["cost_usd_per_h"] <= best["cost_usd_per_h"]


def test_search_points_carry_the_des_latencies(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Each DES-decided point of `--out` has its nine latency percentiles in seconds, the same the
    simulator reports for that configuration."""
    out = tmp_path / "p.parquet"
    args = ["--design", "splitwise-hh", "--prompt-range", "2:6", "--token-range", "1:4"]
    args += ["--rate", "20", "--duration", "30"]
    best = run_json(capsys, [*args, "--out", str(out)])["best"]
    df = pq.read_table(out).to_pandas()
    des = df[df["decided_by"] == "des"]
    assert len(des) > 0
    row = des[
        (des["prompt_machines"] == best["prompt_machines"])
        & (des["token_machines"] == best["token_machines"])
    ]
    assert len(row) == 1
    counts = ["--prompt", str(best["prompt_machines"]), "--token", str(best["token_machines"])]
    code = main(
        ["simulate", "--design", "splitwise-hh", *counts, "--rate", "20", "--duration", "30", "--json"]
    )
    assert code == 0
    sim = json.loads(capsys.readouterr().out)
    for k in SLO_KEYS:
        assert row[f"{k}_s"].iloc[0] == pytest.approx(sim["latency_s"][k], abs=1e-9)  # JSON: 9 digits
