"""The beyond-the-paper conclusions of `splitplan reproduce`: one sentence from the numbers."""

from __future__ import annotations

from pathlib import Path

from splitplan.api._reproduce import ReproduceReport, ReproduceRequest, _best, _Run


def run() -> _Run:
    return _Run(
        ReproduceRequest(), "bloom-176b", "compat", 60.0, Path("."), ReproduceReport(), lambda _m: None
    )


def test_conclusion_names_the_winners_and_the_margin():
    r = run()
    r._conclude(
        {"splitwise-aa": 0.8, "splitwise-hh": 1.1, "splitwise-ha": None, "splitwise-hhcap": 1.25},
        "iso-power, conversation",
        "throughput",
        higher=True,
        chunked="chunked-h100",
    )
    (text,) = r.report.notes
    assert "splitwise-hh, splitwise-hhcap" in text
    assert "best splitwise-hhcap: +25% against chunked-h100" in text
    assert "splitwise-aa, splitwise-ha do not" in text


def test_conclusion_for_a_lower_is_better_objective_and_for_no_winner():
    r = run()
    r._conclude(
        {"splitwise-aa": 0.9, "splitwise-hh": 1.2},
        "iso-throughput",
        "cost",
        higher=False,
        chunked="chunked-a100",
    )
    r._conclude({"splitwise-aa": 0.9}, "iso-cost", "throughput", higher=True, chunked="chunked-h100")
    r._conclude({"splitwise-aa": 1.1}, "iso-cost", "throughput", higher=True, chunked=None)
    first, second, third = r.report.notes
    assert "best splitwise-aa: −10% against chunked-a100" in first
    assert "no split design beats chunked-h100" in second
    assert "no chunked-prefill baseline meets the SLOs" in third


def test_best_skips_designs_without_a_value():
    assert _best({"a": None, "b": 2.0, "c": 3.0}, ("a", "b", "c")) == "c"
    assert _best({"a": None, "b": 2.0, "c": 3.0}, ("a", "b", "c"), higher=False) == "b"
    assert _best({"a": None}, ("a",)) is None
