"""--quiet / --verbose through standard logging, and the progress counts heatmap and reproduce
report (bars themselves only draw on a terminal)."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit" / "search"))
from search_fakes import FakeEvaluator

import splitplan.api._search as api_search
from splitplan import api
from splitplan.api._reproduce import ReproduceRequest, planned_steps
from splitplan.cli import main
from splitplan.cli._logging import STATE
from splitplan.cli._progress import StepProgress
from splitplan.design import get_design

SEARCH = ["search", "--design", "splitwise-hh", "--prompt-range", "10:16", "--token-range", "3:6"]
SEARCH += ["--duration", "10"]
HEATMAP = ["heatmap", "--design", "splitwise-hh", "--prompt-range", "3:4", "--token-range", "1:2"]
HEATMAP += ["--rate", "5", "--duration", "10"]


@pytest.fixture
def fake(monkeypatch):
    monkeypatch.setattr(api_search, "SimEvaluator", lambda _s: FakeEvaluator())


def test_notes_show_by_default_and_hide_with_quiet(tmp_path, capsys, fake):
    assert main([*SEARCH, "--export-plan", str(tmp_path / "a.yaml")]) == 0
    assert "deployment plan written to" in capsys.readouterr().err
    assert main(["--quiet", *SEARCH, "--export-plan", str(tmp_path / "b.yaml")]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert "Winner" in out  # results are never hidden
    assert (tmp_path / "b.yaml").is_file()


def test_verbose_logs_library_debug_lines(capsys):
    assert main(["-v", *HEATMAP]) == 0
    err = capsys.readouterr().err
    assert "[api._heatmap] splitwise-hh: analytic screen of 4 points" in err
    assert main(HEATMAP) == 0
    assert capsys.readouterr().err == ""


def test_quiet_and_verbose_contradict(capsys):
    assert main(["-q", "-v", "catalog"]) == 2
    err = capsys.readouterr().err
    assert "--quiet and --verbose" in err
    assert err.count("\n") == 1


def test_logging_is_restored_after_a_command(capsys):
    assert main(["-q", "catalog"]) == 0
    capsys.readouterr()
    log = logging.getLogger("splitplan")
    assert log.propagate
    assert log.level == logging.NOTSET
    assert not STATE.quiet


class Recorder:
    def __init__(self) -> None:
        self.total = 0
        self.done = 0

    def add(self, n: int) -> None:
        self.total += n

    def advance(self, n: int = 1) -> None:
        self.done += n
        assert self.done <= self.total  # never ahead of what was scheduled


@pytest.mark.parametrize(("engine", "jobs"), [("analytic", 1), ("des", 1), ("hybrid", 1), ("des", 2)])
def test_heatmap_progress_counts_every_des_run(engine, jobs):
    scenario = api.build_scenario(workload=api.WorkloadRequest(rate_rps=5.0, duration_s=10.0))
    rec = Recorder()
    hm = api.heatmap(get_design("splitwise-hh"), scenario, (2, 5), (1, 3), engine, jobs=jobs, progress=rec)
    assert rec.done == rec.total == 1 + hm.des_points
    if engine == "des":
        assert hm.des_points == 12


def test_reproduce_steps_match_its_announcements(monkeypatch, tmp_path):
    req = ReproduceRequest(out_dir=tmp_path, quick=True, models=("bloom-176b",), assumptions=("splitplan",))
    assert planned_steps(req) == 2 + 1  # Fig. 12, iso-power conversation; beyond: iso-power conversation
    paper = ReproduceRequest(
        out_dir=tmp_path, quick=True, models=("bloom-176b",), assumptions=("splitplan",), sections=("paper",)
    )
    assert planned_steps(paper) == 2
    full = ReproduceRequest(out_dir=tmp_path, models=("bloom-176b", "llama2-70b"), assumptions=("splitplan",))
    assert planned_steps(full) == 2 * (7 + 4)


def test_step_progress_off_a_terminal_logs_its_steps(capsys, caplog):
    with caplog.at_level(logging.DEBUG, logger="splitplan"):
        with StepProgress("reproduce", notes=True) as bar:
            bar.add(2)
            bar.describe("Fig. 12")
            bar.advance(1)
        with StepProgress("heatmap") as bar:
            bar.describe("des over 4 points")
    levels = {r.getMessage(): r.levelno for r in caplog.records}
    assert levels["reproduce: Fig. 12"] == logging.INFO
    assert levels["heatmap: des over 4 points"] == logging.DEBUG
