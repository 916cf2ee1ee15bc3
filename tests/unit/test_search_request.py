"""Saved search requests: every field round-trips (unset ones too), SLOs are stored resolved,
inputs are absolute and hashed, and a changed input or unknown key is refused."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "search"))
from search_fakes import FakeEvaluator

import splitplan.api._search as api_search
from splitplan import api
from splitplan.api._request import load_request, request_toml, save_request, with_execution
from splitplan.cli import main
from splitplan.errors import InputError
from splitplan.slo import SloSpec, load_slo

ROOT = Path(__file__).resolve().parents[2]
COMPAT = ROOT / "examples" / "splitwise-sim-compat.toml"


@pytest.fixture
def trace(tmp_path) -> Path:
    path = tmp_path / "trace.csv"
    api.trace_generate("coding", path, rate_rps=5.0, duration_s=20.0, seed=1)
    return path


def test_every_field_round_trips(tmp_path, trace, monkeypatch):
    slo = tmp_path / "slo.toml"
    slo.write_text("[slowdown]\ntpot_p99 = 4.0\n[latency_s]\ne2e_p50 = 1.5\n")
    monkeypatch.chdir(tmp_path)
    req = api.SearchRequest(
        designs=("splitwise-hh", "baseline-a100"),
        prompt_gpus=("dgx-h100",),
        token_gpus=("dgx-a100", "dgx-h100"),
        prompt_power_cap=(0.6, 1.0),
        prompt_range=(2, 9),
        max_machines=12,
        workload=api.WorkloadRequest(workload="trace.csv", rate_rps=None, duration_s=30.0),
        model="llama2-70b",
        slo="slo.toml",
        objective="throughput",
        budget="iso-power",
        engine="des",
        method="optuna",
        trials=17,
        band=0.25,
        seed=9,
        jobs=2,
        storage="runs.db",
    )
    path = save_request(req, tmp_path / "req.toml")
    back = load_request(path)
    expected = replace(
        req,
        workload=replace(req.workload, workload=str(trace.resolve())),
        slo=load_slo(slo),
    )
    assert back == expected
    assert back.workload.rate_rps is None  # unset stays unset, not the default 70
    assert back.slo == SloSpec(
        slowdown={**load_slo(None).slowdown, "tbt_p99": 4.0}, latency_s={"e2e_p50": 1.5}
    )
    assert str(trace.resolve()) in path.read_text()


def test_config_and_its_profile_are_hashed():
    import tomllib

    from splitplan.sim.config import config_perf

    perf = config_perf(COMPAT)
    if perf is None or not Path(perf).is_file():
        pytest.skip("the compat config's profile (../shared) is not available")
    files = tomllib.loads(request_toml(api.SearchRequest(config=COMPAT)))["files"]
    assert set(files) == {str(COMPAT.resolve()), str(Path(perf).resolve())}
    assert all(len(v) == 64 for v in files.values())


def test_changed_input_is_refused(tmp_path, trace):
    req = api.SearchRequest(workload=api.WorkloadRequest(workload=str(trace)))
    path = save_request(req, tmp_path / "req.toml")
    assert load_request(path).workload.workload == str(trace.resolve())
    trace.write_text(trace.read_text() + "\n")
    with pytest.raises(InputError, match="changed since the request was saved"):
        load_request(path)
    trace.unlink()
    with pytest.raises(InputError, match="no longer exists"):
        load_request(path)


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        (lambda t: t.replace("[search]", "[search]\nbogus = 1"), "unknown key"),
        (
            lambda t: t.replace('kind = "splitplan/search-request"', 'kind = "x"'),
            "not a saved search request",
        ),
        (lambda t: t.replace("request_version = 1", "request_version = 7"), "not supported"),
        (lambda t: t + "\n[[", "not valid TOML"),
        (lambda t: t.replace("[slo.slowdown]", "[slo.slowdown]\nfoo = 1.0"), "unknown slowdown key"),
    ],
)
def test_bad_request_files_are_refused(tmp_path, edit, needle):
    path = save_request(api.SearchRequest(), tmp_path / "req.toml")
    path.write_text(edit(path.read_text()))
    with pytest.raises(InputError, match=needle):
        load_request(path)


def test_only_execution_fields_change_in_a_replay():
    req = with_execution(api.SearchRequest(), jobs=4, storage="x.db")
    assert (req.jobs, req.storage) == (4, "x.db")
    with pytest.raises(InputError, match="only jobs"):
        with_execution(api.SearchRequest(), seed=3)


SMALL = ["--design", "splitwise-hh", "--prompt-range", "10:16", "--token-range", "3:6", "--duration", "10"]


def test_cli_replay_gives_the_same_answer(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(api_search, "SimEvaluator", lambda _s: FakeEvaluator(bias=0.1))
    req_file = tmp_path / "req.toml"
    args = ["search", *SMALL, "--objective", "power", "--seed", "4", "--ttft-p99-ms", "900"]
    assert main([*args, "--save-request", str(req_file), "--json"]) == 0
    first = json.loads(capsys.readouterr().out)
    assert main(["search", "--request", str(req_file), "--jobs", "1", "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    first.pop("wall_s")
    again.pop("wall_s")
    assert again == first
    assert load_request(req_file).slo.latency_s == {"ttft_p99": 0.9}
    assert load_request(req_file).objective == "power"


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--request", "{req}", "--rate", "5"], "--rate would change it"),
        (["--request", "{req}", "--e2e-p99-ms", "5"], "--e2e-p99-ms would change it"),
        (["--request", "{missing}"], "does not exist"),
        (["--save-request", "{json}"], "--save-request must name a .toml file"),
        (["--save-request", "{nodir}"], "does not exist"),
    ],
)
def test_cli_bad_replays_are_one_line_and_exit_2(tmp_path, capsys, args, needle):
    req = save_request(api.SearchRequest(), tmp_path / "req.toml")
    subst = {
        "{req}": str(req),
        "{missing}": str(tmp_path / "missing.toml"),
        "{json}": str(tmp_path / "r.json"),
        "{nodir}": str(tmp_path / "no" / "r.toml"),
    }
    code = main(["search", *[subst.get(a, a) for a in args]])
    err = capsys.readouterr().err
    assert code == 2
    assert needle in err
    assert err.count("\n") == 1
