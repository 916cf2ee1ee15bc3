"""`splitplan reproduce --quick`: runs in CI, writes the report, agrees with the paper under the
reference simulator's assumptions."""

from __future__ import annotations

import json

import pytest

from splitplan.cli import main


@pytest.fixture(scope="module")
def quick_report(tmp_path_factory, profile_csv):
    out = tmp_path_factory.mktemp("reproduce")
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = main(["reproduce", "--quick", "--out", str(out), "--jobs", "2", "--json"])
    assert code == 0
    return out, json.loads(buf.getvalue())


def test_writes_report_and_plots(quick_report):
    out, doc = quick_report
    md = (out / "report.md").read_text()
    assert "Fig. 12" in md
    assert "Fig. 18" in md
    assert "| ratio |" in md
    assert (out / "fig12_bloom-176b_compat.png").stat().st_size > 10_000
    assert json.loads((out / "report.json").read_text())["comparisons"] == doc["comparisons"]


def test_directions_match_the_paper_under_its_assumptions(quick_report):
    _, doc = quick_report
    assert doc["directions_match"]["compat"] is True


def test_fig12_and_fig18_within_15_percent_under_compat(quick_report):
    _, doc = quick_report
    rows = [c for c in doc["comparisons"] if c["assumptions"] == "compat"]
    machines = next(c for c in rows if c["item"].startswith("machines"))
    assert abs(machines["ratio"] - 1) <= 0.15
    fig18 = [c for c in rows if c["section"].startswith("Fig. 18") and "(text)" not in c["item"]]
    assert len(fig18) >= 6
    for c in fig18:
        assert c["ratio"] is not None, c
        assert abs(c["ratio"] - 1) <= 0.15, c


def test_bad_assumption_is_one_line_error(capsys, tmp_path):
    code = main(["reproduce", "--quick", "--out", str(tmp_path), "--assumptions", "vibes"])
    err = capsys.readouterr().err
    assert code == 2
    assert "unknown assumptions" in err
    assert len(err.strip().splitlines()) == 1


def test_beyond_paper_section_compares_split_designs_with_chunked_prefill(quick_report):
    out, doc = quick_report
    rows = [c for c in doc["comparisons"] if c["section"].startswith("Beyond the paper")]
    assert {c["assumptions"] for c in rows} == {"compat", "splitplan"}
    items = {c["item"] for c in rows}
    for d in ("splitwise-aa", "splitwise-hh", "splitwise-ha", "splitwise-hhcap"):
        assert f"{d} / chunked-h100 throughput" in items
    assert all(c["paper"] is None for c in rows)
    assert any(c["ours"] is not None for c in rows)
    conclusions = [n for n in doc["notes"] if n.startswith("Beyond the paper")]
    assert len(conclusions) == 2  # one sentence per figure, model and assumptions
    assert "Beyond the paper" in (out / "report.md").read_text()


def test_bad_section_is_one_line_error(capsys, tmp_path):
    code = main(["reproduce", "--quick", "--out", str(tmp_path), "--section", "appendix"])
    err = capsys.readouterr().err
    assert code == 2
    assert "unknown section" in err
    assert len(err.strip().splitlines()) == 1
