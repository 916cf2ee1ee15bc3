"""`--export-plan` on `search` and `simulate`: the file appears, bad names are refused up front."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit" / "search"))
from search_fakes import FakeEvaluator

import splitplan.api._search as api_search
from splitplan.cli import main

yaml = pytest.importorskip("yaml")

SIM = ["simulate", "--design", "splitwise-hh", "--prompt", "3", "--token", "2", "--rate", "5"]
SIM += ["--duration", "20", "--engine", "analytic"]
SEARCH = ["search", "--design", "splitwise-hh", "--prompt-range", "10:16", "--token-range", "3:6"]


def test_simulate_exports_a_plan(tmp_path, capsys):
    path = tmp_path / "plan.yaml"
    assert main([*SIM, "--export-plan", str(path)]) == 0
    plan = yaml.safe_load(path.read_text())
    assert plan["source"]["command"] == "simulate"
    assert [p["instances"] for p in plan["pools"]] == [3, 2]


def test_search_exports_the_winner(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(api_search, "SimEvaluator", lambda _scenario: FakeEvaluator())
    path = tmp_path / "plan.yml"
    assert main([*SEARCH, "--duration", "10", "--json", "--export-plan", str(path)]) == 0
    plan = yaml.safe_load(path.read_text())
    assert plan["source"]["command"] == "search"
    assert plan["design"]["name"] == "splitwise-hh"


def test_search_without_an_answer_writes_no_plan(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(api_search, "SimEvaluator", lambda _scenario: FakeEvaluator(prompt_need=1e6))
    path = tmp_path / "plan.yaml"
    assert main([*SEARCH, "--duration", "10", "--export-plan", str(path)]) == 0
    assert "no deployment plan written" in capsys.readouterr().err
    assert not path.exists()


@pytest.mark.parametrize("name", ["plan.json", "missing/plan.yaml"])
def test_bad_plan_names_are_refused_before_work(tmp_path, capsys, name):
    code = main([*SIM, "--export-plan", str(tmp_path / name)])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1
    assert "--export-plan" in err
    assert list(tmp_path.iterdir()) == []
