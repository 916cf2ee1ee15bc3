"""`--ttft-p99-ms`-style latency flags on simulate, search and heatmap; TPOT/ITL as TBT's names
in SLO files and flags."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit" / "search"))
from search_fakes import FakeEvaluator

import splitplan.api._search as api_search
from splitplan.cli import main
from splitplan.cli._slo_flags import resolve_slo, slo_flag_names
from splitplan.errors import InputError
from splitplan.slo import SLO_KEYS, load_slo

SIM = ["simulate", "--design", "splitwise-hh", "--prompt", "4", "--token", "2", "--rate", "5"]
SIM += ["--duration", "20", "--engine", "analytic", "--json"]


def _sim(capsys, *args) -> dict:
    code = main([*SIM, *args])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def test_every_slo_has_a_flag_and_tbt_has_its_aliases():
    names = slo_flag_names()
    assert set(names) == set(SLO_KEYS)
    assert names["ttft_p99"] == ["--ttft-p99-ms"]
    assert names["tbt_p90"] == ["--tbt-p90-ms", "--tpot-p90-ms", "--itl-p90-ms"]


def test_a_flag_takes_effect_and_binds(capsys):
    free = _sim(capsys)
    assert free["meets_slo"]
    ttft_ms = free["latency_s"]["ttft_p99"] * 1000
    tight = _sim(capsys, "--ttft-p99-ms", f"{ttft_ms * 0.5}")
    assert not tight["meets_slo"]
    assert tight["binding_slo"] == "ttft_p99_latency"
    loose = _sim(capsys, "--ttft-p99-ms", f"{ttft_ms * 2}")
    assert loose["meets_slo"]


@pytest.mark.parametrize("flag", ["--tbt-p50-ms", "--tpot-p50-ms", "--itl-p50-ms"])
def test_tbt_aliases_are_the_same_limit(capsys, flag):
    free = _sim(capsys)
    tbt_ms = free["latency_s"]["tbt_p50"] * 1000
    doc = _sim(capsys, flag, f"{tbt_ms * 0.9}")
    assert doc["binding_slo"] == "tbt_p50_latency"
    assert not doc["meets_slo"]


def test_flags_override_the_file(tmp_path):
    f = tmp_path / "slo.toml"
    f.write_text("[slowdown]\ntpot_p50 = 1.1\n[latency_s]\nttft_p99 = 2.0\nitl_p99 = 0.5\n")
    spec = load_slo(f)
    assert spec.slowdown["tbt_p50"] == 1.1
    assert spec.latency_s == {"ttft_p99": 2.0, "tbt_p99": 0.5}
    merged = resolve_slo(f, {"ttft_p99": 250.0, "e2e_p50": 900.0})
    assert merged.latency_s == {"ttft_p99": 0.25, "tbt_p99": 0.5, "e2e_p50": 0.9}
    assert merged.slowdown["tbt_p50"] == 1.1
    assert resolve_slo(f, dict.fromkeys(SLO_KEYS)) == f  # no flag: the file as given


def test_one_slo_named_twice_in_a_file_is_refused(tmp_path):
    f = tmp_path / "slo.toml"
    f.write_text("[latency_s]\ntbt_p99 = 0.1\ntpot_p99 = 0.2\n")
    with pytest.raises(InputError, match="name the same SLO"):
        load_slo(f)


def test_search_judges_with_the_flags(capsys, monkeypatch):
    seen = []

    def make(scenario):
        seen.append(scenario.slo)
        return FakeEvaluator()

    monkeypatch.setattr(api_search, "SimEvaluator", make)
    args = ["search", "--design", "splitwise-hh", "--prompt-range", "10:12", "--token-range", "3:4"]
    assert main([*args, "--duration", "10", "--e2e-p99-ms", "800", "--itl-p90-ms", "60", "--json"]) == 0
    capsys.readouterr()
    assert seen[0].latency_s == {"e2e_p99": 0.8, "tbt_p90": 0.06}


def test_heatmap_judges_with_the_flags(capsys):
    args = ["heatmap", "--design", "splitwise-hh", "--prompt-range", "3:5", "--token-range", "1:3"]
    args += ["--rate", "5", "--duration", "20", "--json"]
    assert main(args) == 0
    free = json.loads(capsys.readouterr().out)
    assert main([*args, "--e2e-p50-ms", "1"]) == 0
    tight = json.loads(capsys.readouterr().out)
    assert free["feasible"] > 0
    assert tight["feasible"] == 0


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--ttft-p99-ms", "0"], "--ttft-p99-ms must be a positive number"),
        (["--e2e-p90-ms", "nan"], "--e2e-p90-ms must be a positive number"),
        (["--tbt-p99-ms", "5", "--tpot-p99-ms", "6"], "name the same SLO"),
        (["--ttft-p50-ms", "x"], "--ttft-p50-ms"),
    ],
)
def test_bad_flags_are_one_line_and_exit_2(capsys, args, needle):
    code = main([*SIM, *args])
    err = capsys.readouterr().err
    assert code == 2
    assert needle in err
    assert err.count("\n") == 1
