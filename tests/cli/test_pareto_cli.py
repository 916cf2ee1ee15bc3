"""`splitplan pareto`: from a search's parquet or JSON, or running the search; bad input exit 2."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit" / "search"))
from search_fakes import FakeEvaluator

import splitplan.api._search as api_search
from splitplan.cli import main

SEARCH = ["--design", "splitwise-hh", "--design", "baseline-h100", "--duration", "10"]


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(api_search, "SimEvaluator", lambda _scenario: FakeEvaluator(bias=0.1))


@pytest.fixture
def search_files(tmp_path, capsys, fake):
    parquet = tmp_path / "s.parquet"
    args = ["search", *SEARCH, "--prompt-range", "10:16", "--token-range", "3:6", "--out", str(parquet)]
    assert main([*args, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    js = tmp_path / "s.json"
    js.write_text(json.dumps(doc))
    return parquet, js, doc


def _json(capsys, args):
    code = main(["pareto", *args, "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def test_from_parquet_the_cost_optimum_is_the_search_winner(search_files, capsys, tmp_path):
    parquet, _, doc = search_files
    plot = tmp_path / "p.svg"
    got = _json(capsys, [str(parquet), "--plot", str(plot)])
    best = doc["best"]
    cost = got["optima"]["cost"]
    assert (cost["design"], cost["cost_usd_per_h"]) == (best["design"], best["cost_usd_per_h"])
    assert got["candidates"] > len(got["cost_power_front"]) >= 1
    assert plot.read_text().lstrip().startswith("<?xml")
    assert got["plot"] == str(plot)


def test_from_json_uses_each_designs_best(search_files, capsys):
    _, js, doc = search_files
    got = _json(capsys, [str(js)])
    feasible = [r for r in doc["results"] if r["meets_slo"]]
    assert got["candidates"] == len(feasible)
    assert got["optima"]["cost"]["design"] == doc["best"]["design"]


def test_runs_the_search_when_no_file_is_given(fake, capsys):
    got = _json(capsys, [*SEARCH, "--max-machines", "16"])
    assert got["source"] == "search"
    assert set(got["designs"]) <= {"splitwise-hh", "baseline-h100"}
    assert got["optima"]["power"] is not None


def test_table_output(search_files, capsys):
    parquet, _, _ = search_files
    assert main(["pareto", str(parquet)]) == 0
    out = capsys.readouterr().out
    assert "Pareto fronts" in out
    assert "cost" in out


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["missing.parquet"], "does not exist"),
        (["{json}", "--rate", "5"], "--rate"),
        (["{json}", "--plot", "x.gif"], "--plot must name a .png or .svg or .pdf file"),
        (["{json}", "--dpi", "100"], "--dpi applies to --plot"),
        (["{json}", "--plot", "x.png", "--dpi", "1"], "--dpi"),
        (["{json}", "--plot", "x.svg", "--dpi", "100"], "is a vector figure"),
        (["{bad_json}"], "not valid JSON"),
        (["{bad_parquet}"], "as parquet"),
        (["{txt}"], ".parquet"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(search_files, tmp_path, capsys, args, needle):
    _, js, _ = search_files
    (tmp_path / "bad.json").write_text("{nope")
    (tmp_path / "bad.parquet").write_text("not parquet")
    (tmp_path / "s.txt").write_text("x")
    subst = {
        "{json}": str(js),
        "{bad_json}": str(tmp_path / "bad.json"),
        "{bad_parquet}": str(tmp_path / "bad.parquet"),
        "{txt}": str(tmp_path / "s.txt"),
    }
    code = main(["pareto", *[subst.get(a, a) for a in args]])
    err = capsys.readouterr().err
    assert code == 2
    assert needle in err
    assert err.count("\n") == 1
