"""The training/validation-set machinery of the analytic calibration (splitplan.sim.calibrate)."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from splitplan.errors import SplitplanError
from splitplan.sim import calibrate as cal


def test_case_draws_are_seeded_and_the_two_sets_differ() -> None:
    a = cal.draw_cases(cal.TRAINING_SEED, 20, held_out=False)
    assert a == cal.draw_cases(cal.TRAINING_SEED, 20, held_out=False)
    b = cal.draw_cases(cal.VALIDATION_SEED, 20, held_out=True)
    assert a != b
    assert {c.model for c in a} <= set(cal.TRAINING_MODELS)
    assert {c.model for c in b} & set(cal.HELD_OUT_MODELS)


def test_a_draw_over_named_models_takes_every_case_from_them() -> None:
    new = ("qwen3-30b-a3b", "gpt-oss-20b")
    cases = cal.draw_cases(15051, 30, held_out=True, models=new)
    assert {c.model for c in cases} == set(new)
    assert cases == cal.draw_cases(15051, 30, held_out=True, models=new)


def test_holdout_refuses_model_names_it_does_not_know_before_running(capsys) -> None:
    assert cal.main(["holdout", "--seed", "3", "--models", "qwen3-30b,gpt-oss-20b"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "unknown model 'qwen3-30b'; did you mean 'qwen3-30b-a3b'" in err
    with pytest.raises(SystemExit) as stop:  # argparse's own exit, after its one line
        cal.main(["holdout", "--seed", "3", "--models", "a,,b"])
    assert stop.value.code == 2
    assert "give distinct model names" in capsys.readouterr().err


def test_a_draw_over_a_model_few_machines_hold_says_how_many_cases_ran(capsys) -> None:
    """Llama 4 Maverick (801 GB at fp16) fits few of the machines the cases draw: a draw says how
    many of its cases ran, and one where none did is one line and exit 2."""
    argv = ["holdout", "--jobs", "1", "--models", "llama4-maverick"]
    assert cal.main([*argv, "--seed", "1", "--cases", "2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "none of the 2 drawn cases ran" in err
    assert cal.main([*argv, "--seed", "77", "--cases", "6"]) == 0
    ran = re.search(r"(\d) of the 6 drawn cases ran: the others' models fit none", capsys.readouterr().out)
    assert ran is not None
    assert 1 <= int(ran.group(1)) < 6


@given(st.floats(min_value=0.05, max_value=5000.0), st.integers(0, 1))
def test_rates_land_in_their_sets_band(rate: float, parity: int) -> None:
    moved = cal._in_band(rate, parity)
    assert int(np.floor(np.log2(moved) / cal.RATE_BAND_OCTAVES)) % 2 == parity
    assert rate <= moved <= rate * 2.0**cal.RATE_BAND_OCTAVES * (1 + 1e-12)


@given(st.integers(1, 80), st.integers(1, 80))
def test_frontier_walk_finds_the_smallest_feasible_count(frontier: int, start: int) -> None:
    calls: list[int] = []

    def run(x: int) -> tuple:
        calls.append(x)
        return (x >= frontier, True, [])

    found, runs = cal._frontier(run, start, 1, 80)
    assert found == frontier
    assert len(calls) == len(set(calls)) == len(runs)
    if frontier > 1:
        assert runs[frontier - 1][0] is False  # the count below was run and fails
    assert len(runs) <= 2 * int(np.ceil(np.log2(abs(frontier - start) + 2))) + 2


def test_frontier_walk_reports_none_above_the_range() -> None:
    found, runs = cal._frontier(lambda x: (False, False, []), 5, 1, 40)
    assert found == 40 + cal.NONE_MARGIN
    assert 40 in runs


@given(
    st.lists(st.booleans(), min_size=40, max_size=40),
    st.integers(1, 40),
    st.sets(st.integers(1, 40), max_size=6),
)
def test_a_settled_row_has_no_run_meeting_below_its_frontier(
    verdicts: list[bool], start: int, extra: set[int]
) -> None:
    """Whatever the DES's verdicts along a row (monotone or not), after the walk from any start
    and a few other runs on the row, the settled frontier meets with the count below it failing
    (or is the row's first count), and no run on the row meets below it."""
    calls: list[int] = []

    def run(x: int) -> tuple:
        calls.append(x)
        return (verdicts[x - 1], True, [])

    walked, runs = cal._frontier(run, start, 1, 40)
    runs |= {x: run(x) for x in extra - set(runs)}
    front, runs = cal._settled(run, runs, walked, 1, 40)
    assert len(calls) == len(set(calls)) == len(runs)
    assert front <= walked
    assert not any(r[0] and x < front for x, r in runs.items())
    if front <= 40:
        assert runs[front][0]
        assert front == 1 or runs[front - 1][0] is False
    else:
        assert not any(r[0] for r in runs.values())


def test_fingerprint_detects_a_changed_verdict(tmp_path) -> None:
    s = cal.load_set(cal.sim_data_dir() / cal.VALIDATION_FILE)
    path = tmp_path / "v.npz"
    cal.save_set(s, path)
    assert cal.load_set(path).fingerprint == s.fingerprint
    flipped = s.meets.copy()
    flipped[0] = not flipped[0]
    assert cal.fingerprint(replace(s, meets=flipped)) != s.fingerprint
    z = dict(np.load(path))
    z["meets"] = flipped
    np.savez_compressed(path, **z)
    with pytest.raises(SplitplanError, match="fingerprint"):
        cal.load_set(path)


@pytest.mark.parametrize("kind", ["text", "other arrays", "truncated", "plain array"])
def test_a_file_that_is_not_a_des_set_is_one_line_and_exit_2(tmp_path, capsys, kind: str) -> None:
    path = tmp_path / "s.npz"
    if kind == "text":
        path.write_text("prompt,token\n1,2\n")
    elif kind == "other arrays":
        np.savez(path, meets=np.ones(3, bool))
    elif kind == "truncated":
        path.write_bytes((cal.sim_data_dir() / cal.VALIDATION_FILE).read_bytes()[:2000])
    else:
        with open(path, "wb") as fh:
            np.save(fh, np.arange(3))
    with pytest.raises(SplitplanError, match="not a DES set"):
        cal.load_set(path)
    assert cal.main(["score", "--file", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert f"{path}: not a DES set" in err


def test_a_negative_seed_is_refused_before_any_run(capsys) -> None:
    with pytest.raises(SystemExit) as stop:
        cal.main(["holdout", "--seed", "-3", "--jobs", "1"])
    assert stop.value.code == 2
    assert "argument --seed: must be at least 0, got -3" in capsys.readouterr().err
    s = _slice(cal.load_set(cal.sim_data_dir() / cal.VALIDATION_FILE), [0])
    with pytest.raises(SplitplanError, match="would become negative"):
        cal.rerun(s, -(s.cases[0].seed + 1), jobs=1)


def test_probe_scoring_equals_the_full_scan_on_monotone_rows() -> None:
    s = cal.load_set(cal.sim_data_dir() / cal.VALIDATION_FILE)
    cases = list(range(0, len(s.cases), max(1, len(s.cases) // 6)))
    full = cal.score(s, cases=cases)
    probe = cal.score(s, probe=True, cases=cases)
    assert probe.agreement == full.agreement
    assert probe.frontier_within_one == pytest.approx(full.frontier_within_one, abs=0.05)


def _slice(s: cal.DesSet, cases: list[int]) -> cal.DesSet:
    """The set's points and rows of some of its cases, renumbered."""
    at = np.concatenate([np.flatnonzero(s.case == i) for i in cases])
    rows = np.concatenate([np.flatnonzero(s.front_case == i) for i in cases])
    new = {i: j for j, i in enumerate(cases)}
    return replace(
        s,
        cases=[s.cases[i] for i in cases],
        case=np.array([new[int(i)] for i in s.case[at]], dtype=s.case.dtype),
        prompt=s.prompt[at],
        token=s.token[at],
        meets=s.meets[at],
        stable=s.stable[at],
        slowdown=s.slowdown[at],
        uniform=s.uniform[at],
        front_case=np.array([new[int(i)] for i in s.front_case[rows]], dtype=s.front_case.dtype),
        front_prompt=s.front_prompt[rows],
        front_des=s.front_des[rows],
        front_top=s.front_top[rows],
    )


def test_the_stored_realization_run_again_agrees_with_its_des_everywhere() -> None:
    """`rerun` at shift 0 is the stored DES itself (it is deterministic): same verdicts on the same
    points, same frontiers on the same rows — what makes its scores at other shifts comparable."""
    s = _slice(cal.load_set(cal.sim_data_dir() / cal.VALIDATION_FILE), [40, 41])
    again, kept = cal.rerun(s, 0, jobs=1)
    assert kept == [0, 1]
    for name in ("prompt", "token", "meets", "uniform", "front_prompt", "front_des"):
        assert np.array_equal(getattr(again, name), getattr(s, name)), name
    same = cal.realization_agreement(s, again, kept)
    assert (same.agreement, same.frontier_within_one, same.cases_frontier_ok) == (1.0, 1.0, 1.0)
    # three identical realizations: every point unanimous, and the evaluator's misses against the
    # majority are exactly its misses against the stored DES
    vote = cal.majority(s, [(again, kept), (again, kept)])
    model = cal.score(s)
    assert (vote.realizations, vote.points, vote.unanimous) == (3, model.points, model.points)
    assert vote.stored_agreement == 1.0
    assert vote.evaluator_agreement == pytest.approx(model.agreement)
    assert vote.evaluator_wrong_on_unanimous == round(model.points * (1 - model.agreement))
    # and on the rows: off every realization is off the stored one, and the stored DES is off none
    # (case 40's row at 7 prompt machines reads 2 token machines against the DES's 4 as this is written)
    off = round(model.rows * (1 - model.frontier_within_one))
    assert off >= 1  # the checks below mean something only with a row off
    assert (vote.cases, vote.rows) == (2, model.rows)
    assert vote.evaluator_rows_off_every == off
    assert f"evaluator {off} of {model.rows} rows in {vote.evaluator_cases_off_every} of 2" in vote.line()
    assert (vote.stored_rows_off_others, vote.stored_cases_off_others) == (0, 0)
    # two reruns whose frontiers are the evaluator's: it is off no realization, and the stored DES
    # is off every rerun exactly where the evaluator was off it
    _, fronts = cal.case_predictions(s, 0)
    _, fronts_1 = cal.case_predictions(s, 1)
    evaluated = [fronts[int(p)] for p in again.front_prompt[again.front_case == 0]]
    evaluated += [fronts_1[int(p)] for p in again.front_prompt[again.front_case == 1]]
    moved = replace(again, front_des=np.array(evaluated, dtype=again.front_des.dtype))
    vote = cal.majority(s, [(moved, kept), (moved, kept)])
    assert (vote.evaluator_rows_off_every, vote.evaluator_cases_off_every) == (0, 0)
    assert vote.stored_rows_off_others == off


def test_another_realization_moves_the_seed_and_leaves_out_a_case_it_cannot_run() -> None:
    # the training draw's case 59 (BLOOM-176B on MI300X TP2 instances, the code trace at 10 req/s
    # for 240 s) runs at its own seed, but draws at seed + 1 a request whose KV cache fits no
    # instance (7,427 prompt and 841 output tokens: 33.2 GB against 31.6 GB): it is left out, and
    # the scores run over the other case
    train = cal.load_set(cal.sim_data_dir() / cal.TRAINING_FILE)
    drawn = cal.draw_cases(cal.TRAINING_SEED, cal.TRAINING_CASES, held_out=False)[59]
    bloom = replace(drawn, rate_rps=10.0, duration_s=240.0)
    assert bloom.model == "bloom-176b"
    cal._check_requests_fit(*bloom.build())
    s = replace(_slice(train, [0, 1]), cases=[bloom, train.cases[1]])
    other, kept = cal.rerun(s, 1, jobs=1)
    assert kept == [1]
    assert [c.seed for c in other.cases] == [s.cases[1].seed + 1]
    assert np.array_equal(other.prompt, s.prompt[s.case == 1])
    scored = cal.realization_agreement(s, other, kept)
    assert scored.points == int((s.case == 1).sum())
    assert 0.0 < scored.agreement <= 1.0


def test_reproducibility_refuses_the_stored_realization(capsys) -> None:
    assert cal.main(["reproducibility", "--shift", "0"]) == 2
    assert "--shift takes distinct offsets other than 0" in capsys.readouterr().err
    assert cal.main(["reproducibility", "--shift", "1", "1"]) == 2


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["fit", "--rounds", "0"], "--rounds: must be at least 1, got 0"),
        (["fit", "--rounds", "two"], "--rounds: expected a whole number, got 'two'"),
        (["generate", "--jobs", "0"], "--jobs: must be at least 1, or -1 for every core"),
        (["generate", "--cases", "-3"], "--cases: must be at least 1, got -3"),
        (["reproducibility", "--jobs", "-2"], "--jobs: must be at least 1, or -1 for every core"),
    ],
)
def test_counts_that_would_do_nothing_or_fail_in_a_worker_are_refused(argv, message, capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        cal.main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err


def test_the_stored_sets_are_settled() -> None:
    """No stored run meets below the frontier of the walked row it lies on (`run_case` settles
    each row as it walks it, and `settle` does it to older sets: the first sets, generated before
    the walk settled, held six such rows, one a Splitwise-HHcap row at one prompt machine "none"
    though its DES met at 4, 6, 8 and 9 token machines)."""
    for name in (cal.TRAINING_FILE, cal.VALIDATION_FILE):
        s = cal.load_set(cal.sim_data_dir() / name)
        assert not any(cal._unsettled(r) for r in cal._records(s)), name
        assert cal._assemble(cal._records(s), s.meta).fingerprint == s.fingerprint
        assert cal.settle_set(s, jobs=1) == (s, 0, 0)


def test_settling_moves_a_row_to_the_smallest_count_its_runs_show(tmp_path, monkeypatch, capsys) -> None:
    s = cal.load_set(cal.sim_data_dir() / cal.VALIDATION_FILE)
    hhcap = _slice(s, [89])
    row = int(np.flatnonzero(hhcap.front_prompt == 5)[0])
    assert hhcap.front_des[row] == 4
    walked = hhcap.front_des.copy()
    walked[row] = hhcap.front_top[row] + cal.NONE_MARGIN  # as the walk from the top recorded it
    unsettled = replace(hhcap, front_des=walked)
    settled, moved, runs = cal.settle_set(unsettled, jobs=1)
    assert (moved, runs) == (1, 0)  # its stored runs at 3 (fails) and 4 (meets) bracket it
    assert settled.fingerprint == hhcap.fingerprint
    assert settled.meta["settled"]["rows"] == s.meta.get("settled", {"rows": 0})["rows"] + 1
    # the command rewrites a set it settles, atomically, and leaves a settled one alone
    monkeypatch.setattr(cal, "sim_data_dir", lambda: tmp_path)
    cal.save_set(unsettled, tmp_path / cal.VALIDATION_FILE)
    assert cal.main(["settle", "--set", "validation", "--jobs", "1"]) == 0
    assert "1 walked rows moved, 0 DES runs added" in capsys.readouterr().out
    assert cal.load_set(tmp_path / cal.VALIDATION_FILE).fingerprint == hhcap.fingerprint
    assert cal.main(["settle", "--set", "validation", "--jobs", "1"]) == 0
    assert "0 walked rows moved" in capsys.readouterr().out


def test_a_missing_or_altered_set_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setattr(cal, "sim_data_dir", lambda: tmp_path)
    assert cal.main(["score"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "no such DES set" in err
    assert cal.TRAINING_FILE in err
    s = _slice(cal.load_set(cal.data_dir() / "sim" / cal.VALIDATION_FILE), [3])
    cal.save_set(s, tmp_path / cal.TRAINING_FILE)
    with np.load(tmp_path / cal.TRAINING_FILE) as z:
        arrays = {k: z[k] for k in z.files}
    arrays["meets"] = ~arrays["meets"]  # a verdict changed after the fingerprint was taken
    np.savez_compressed(tmp_path / cal.TRAINING_FILE, **arrays)
    assert cal.main(["score"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "do not match the stored fingerprint" in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["settle", "--jobs", "0"], "--jobs"),
        (["score", "--set", "nope"], "--set"),
        (["fit", "--rounds", "0"], "--rounds"),
        (["generate", "--bogus"], "--bogus"),
        (["holdout"], "--seed"),
        (["holdout", "--seed", "x"], "--seed"),
        ([], "cmd"),
    ],
)
def test_a_bad_argument_is_one_line_and_exit_2(argv, named, capsys) -> None:
    with pytest.raises(SystemExit) as stop:
        cal.main(argv)
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith("python -m splitplan.sim.calibrate")
    assert named in err


def test_a_case_whose_longer_workload_outgrows_an_instance_is_drawn_again() -> None:
    # training case 59 (BLOOM-176B on MI300X TP2 instances) run for its 80–240 s holds a request
    # whose KV cache fits no instance (the rate probe's shorter workload does not): the case is
    # drawn again with another model instead of stopping the whole generation in a worker
    assert (cal.MAX_REQUESTS, cal.DURATION_S) == (24_000, (80.0, 240.0))
    case = cal.draw_cases(cal.TRAINING_SEED, cal.TRAINING_CASES, held_out=False)[59]
    assert (case.model, case.prompt_node, case.prompt_tp) == ("bloom-176b", "mi300x-8x", 2)
    got = cal.run_case(59, case, 0, cal.TRAINING_SEED, cal.TRAINING_MODELS)
    assert got is not None
    assert got["case"]["model"] != "bloom-176b"
    assert cal.run_case(59, case, 0, cal.TRAINING_SEED, ()) is None  # nothing else to draw


def test_the_fresh_share_is_fitted_to_the_ttft_error_alone(monkeypatch) -> None:
    """fit_fresh_share keeps the other fields and takes the tenth with the least TTFT error."""
    from splitplan.sim.analytic import CALIBRATION

    monkeypatch.setattr(cal, "baseline_ttft_error", lambda s, c: (c.baseline_fresh_share - 0.3) ** 2)
    start = replace(CALIBRATION, baseline_fresh_share=0.9)
    lines: list[str] = []
    got = cal.fit_fresh_share(None, start, lines.append)
    assert got == replace(start, baseline_fresh_share=0.3)
    assert lines
    assert "0.9 → 0.3" in lines[0]
    assert "baseline_fresh_share" in cal.TTFT_FIELDS
    assert "baseline_fresh_share" not in cal.BASELINE_FIELDS


def test_misses_are_the_rows_score_counts_off_with_where_they_part() -> None:
    """`misses` lists exactly the walked rows `score` counts more than one machine off, each with the
    evaluator's binding SLO at the first pool size the two disagree on, and where the evaluator is
    optimistic the SLO the DES fails on most there (a join delay five times the fitted one makes an
    evaluator that misses rows on both kinds of design, and one baseline row optimistic, where the
    evaluator's binding SLO is not the one the DES fails)."""
    from splitplan.sim.analytic import CALIBRATION

    s = _slice(cal.load_set(cal.sim_data_dir() / cal.VALIDATION_FILE), [59, 93, 1, 2, 3, 6])
    off = replace(CALIBRATION, join_fraction=5 * CALIBRATION.join_fraction, baseline_jsq_spread=8.0)
    sc = cal.score(s, off)
    found = cal.misses(s, off)
    assert len(found) == sc.rows - round(sc.frontier_within_one * sc.rows) > 0
    assert {m.prompt_machines == 0 for m in found} == {True, False}
    for m in found:
        assert abs(m.evaluator - m.des) > 1
        assert m.at == max(min(m.des - 1 if m.evaluator < m.des else m.des, m.top), 1)
        assert m.slo in cal.SLO_KEYS
        assert np.isfinite(m.evaluator_value)
        line = m.line()
        assert line.startswith(f"case {m.case} ({s.cases[m.case].label()})")
        assert ("optimistic" in line) == (m.evaluator < m.des)
        pm, tm = (m.at, 0) if m.prompt_machines == 0 else (m.prompt_machines, m.at)
        run = np.flatnonzero((s.case == m.case) & (s.prompt == pm) & (s.token == tm))
        if m.evaluator > m.des or not len(run):
            assert m.des_slo == ""
            continue
        limits = cal._built(s.cases[m.case])[1].slo.slowdown
        ratios = {k: s.slowdown[run[0], cal.SLO_KEYS.index(k)] / lim for k, lim in limits.items()}
        assert m.des_slo == max(ratios, key=ratios.__getitem__)
        assert ratios[m.des_slo] > 1.0  # the DES fails there, on that SLO
        assert m.des_slo_des_value == s.slowdown[run[0], cal.SLO_KEYS.index(m.des_slo)]
        assert np.isfinite(m.des_slo_evaluator_value)
        assert f"the DES fails on {m.des_slo} {m.des_slo_des_value:.3f}" in line
    assert any(m.des_slo not in ("", m.slo) for m in found)


def test_holdout_refuses_an_output_folder_it_cannot_write_before_running(
    tmp_path, monkeypatch, capsys
) -> None:
    monkeypatch.setattr(cal, "holdout", lambda *a, **k: pytest.fail("ran the DES for a set it cannot store"))
    locked = tmp_path / "locked"
    locked.mkdir()
    monkeypatch.setattr(cal.os, "access", lambda path, mode: Path(path) != locked)
    assert cal.main(["holdout", "--seed", "3", "--out", str(locked / "sub" / "h.npz")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert f"cannot write in {locked}" in err


def test_a_case_label_names_a_custom_pairs_instances() -> None:
    drawn = cal.draw_cases(cal.VALIDATION_SEED, 1, held_out=True)[0]
    custom = replace(
        drawn, design="custom", prompt_node="mi300x-8x", token_node="l40s-8x", prompt_tp=2, token_tp=4
    )
    custom = replace(custom, prompt_precision="fp16", token_precision="fp8", token_power_cap=0.8)
    custom = replace(custom, model="mixtral-8x22b", workload="trace:a/b/x.csv", rate_rps=81.1)
    assert custom.label() == (
        "custom mi300x-8x TP2 fp16 → l40s-8x TP4 fp8 at 80% power, mixtral-8x22b, x.csv at 81.1 req/s"
    )
    paper = replace(custom, design="splitwise-ha", workload="coding")
    assert paper.label() == "splitwise-ha, mixtral-8x22b, coding at 81.1 req/s"


def test_holdout_draws_a_fresh_seeded_set_and_scores_it(tmp_path, capsys) -> None:
    """A fresh held-out draw (two cases) runs, prints its score, and stores a set that scores the
    same again; the same seed draws the same set."""
    out = tmp_path / "h.npz"
    argv = ["holdout", "--seed", "3", "--cases", "2", "--jobs", "1", "--misses"]
    assert cal.main([*argv, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("seed 3 ")
    assert "walked rows more than one machine off" in printed
    s = cal.load_set(out)
    assert (s.meta["set"], s.meta["seed"], len(s.cases)) == ("holdout", 3, 2)
    assert {c.model for c in s.cases} <= set(cal.TRAINING_MODELS + cal.HELD_OUT_MODELS)
    assert all(int(np.floor(np.log2(c.rate_rps) / cal.RATE_BAND_OCTAVES)) % 2 == 1 for c in s.cases)
    assert cal.holdout(3, jobs=1, n=2).fingerprint == s.fingerprint
    assert cal.main(["score", "--file", str(out)]) == 0
    again = capsys.readouterr().out.splitlines()[0]
    assert again.removeprefix("h.npz").strip() == printed.splitlines()[0].removeprefix("seed 3").strip()
    # and the DES's own repeatability on the draw: another realization of both cases
    assert cal.main(["reproducibility", "--file", str(out), "--shift", "1", "--jobs", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("h.npz: 2 of 2 cases ran again at seed +1")
    assert "DES at seed +1 vs the stored DES" in lines[1]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["holdout", "--seed", str(cal.TRAINING_SEED)], "the training set's seed"),
        (["holdout", "--seed", "3", "--out", "here.csv"], "--out here.csv: name an .npz file"),
        (["score", "--file", "h.npz", "--set", "training"], "--file and --set each name the sets"),
        (["reproducibility", "--file", "h.npz", "--set", "both"], "--file and --set each name the sets"),
    ],
)
def test_held_out_draws_refuse_the_training_seed_a_bad_output_and_two_sources(argv, message, capsys) -> None:
    assert cal.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert message in err


def _validation_slice(cases: list[int]) -> cal.DesSet:
    return _slice(cal.load_set(cal.sim_data_dir() / cal.VALIDATION_FILE), cases)


def test_pooled_scores_are_the_score_of_the_sets_taken_together() -> None:
    """Pooling weighs each share by what it counts: two parts of a set pool to the whole set's
    score (a mean of the two parts' shares would not: their sizes differ)."""
    whole = cal.score(_validation_slice([59, 93, 1, 2, 3, 6, 10]))
    parts = [cal.score(_validation_slice(c)) for c in ([59, 93], [1, 2, 3, 6, 10])]
    assert parts[0].points != parts[1].points
    got = cal.pooled(parts)
    assert (got.points, got.uniform_points, got.rows, got.cases) == (
        whole.points,
        whole.uniform_points,
        whole.rows,
        whole.cases,
    )
    for name in ("agreement", "uniform_agreement", "frontier_within_one", "cases_frontier_ok"):
        assert getattr(got, name) == pytest.approx(getattr(whole, name), abs=1e-12)
    assert got.worst_case_frontier == min(p.worst_case_frontier for p in parts)
    assert cal.pooled([whole]) == whole
    with pytest.raises(ValueError, match="at least one"):
        cal.pooled([])


def test_the_breakdown_counts_every_disagreement_once_and_every_case_in_each_family() -> None:
    """With a join delay five times the fitted one the evaluator parts from the DES on both kinds
    of design; the breakdown's counts add up to the score's, whichever way they are grouped."""
    from splitplan.sim.analytic import CALIBRATION

    s = _validation_slice([59, 93, 1, 2, 3, 6])
    off = replace(CALIBRATION, join_fraction=5 * CALIBRATION.join_fraction, baseline_jsq_spread=8.0)
    sc, b = cal.score_with_breakdown(s, off)
    assert sc == cal.score(s, off)
    verdicts = np.concatenate([cal.case_predictions(s, i, off)[0] for i in range(len(s.cases))])
    des = np.concatenate([s.meets[s.case == i] for i in range(len(s.cases))])
    assert b.optimistic == int(np.sum(verdicts & ~des)) > 0
    assert b.pessimistic == int(np.sum(~verdicts & des)) > 0
    total = b.optimistic + b.pessimistic
    assert total == sc.points - round(sc.agreement * sc.points)
    assert sum(b.deciding.values()) == total
    assert set(b.deciding) <= {*cal.SLO_KEYS, "unstable"}
    assert list(b.near_limit) == sorted(b.near_limit)
    assert b.near_limit[-1] <= total
    missed = len(s.cases) - round(sc.cases_frontier_ok * len(s.cases))
    for family in cal.FAMILIES:
        counts = b.families[family].values()
        assert sum(c for c, _ in counts) == len(s.cases)
        assert sum(m for _, m in counts) == missed
    assert "custom baseline" in b.families["design"]
    both = cal.merged([b, b])
    assert (both.points, both.optimistic, both.near_limit) == (
        2 * b.points,
        2 * b.optimistic,
        tuple(2 * n for n in b.near_limit),
    )
    assert both.families["model"] == {v: (2 * c, 2 * m) for v, (c, m) in b.families["model"].items()}


def test_a_verdict_flipped_just_past_a_limit_is_an_optimistic_knife_edge_on_that_slo() -> None:
    """A stored DES point that meets, turned into a failure 1 % past its TBT P90 limit: the
    evaluator (which still meets there) is optimistic at one more point, on TBT P90, within 2 %
    of the limit."""
    s = _validation_slice([1, 2, 3])
    _, before = cal.score_with_breakdown(s)
    verdicts = np.concatenate([cal.case_predictions(s, i)[0] for i in range(len(s.cases))])
    k = int(np.flatnonzero(verdicts & s.meets)[0])
    limit = cal._built(s.cases[int(s.case[k])])[1].slo.slowdown["tbt_p90"]
    slowdown = s.slowdown.copy()
    slowdown[k, cal.SLO_KEYS.index("tbt_p90")] = 1.01 * limit
    meets = s.meets.copy()
    meets[k] = False
    _, after = cal.score_with_breakdown(replace(s, meets=meets, slowdown=slowdown))
    assert after.optimistic == before.optimistic + 1
    assert after.pessimistic == before.pessimistic
    assert after.deciding.get("tbt_p90", 0) == before.deciding.get("tbt_p90", 0) + 1
    assert after.near_limit == tuple(n + 1 for n in before.near_limit)


def test_score_pools_several_stored_sets_and_breaks_them_down(tmp_path, capsys) -> None:
    paths = [tmp_path / "a.npz", tmp_path / "b.npz"]
    sets = [_validation_slice([59, 93]), _validation_slice([1, 2, 3])]
    for path, s in zip(paths, sets, strict=True):
        cal.save_set(s, path)
    assert cal.main(["score", "--breakdown", "--file", *map(str, paths)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("a.npz")
    assert lines[0].endswith(cal.score(sets[0]).line())
    pooled = [line for line in lines if line.startswith("pooled over 2 sets:")]
    assert pooled == [f"pooled over 2 sets: {cal.pooled([cal.score(s) for s in sets]).line()}"]
    after = lines[lines.index(pooled[0]) + 1 :]
    assert after[0].strip().startswith("verdicts part at ")
    assert [line.strip().split(",")[0] for line in after[2:]] == [
        line.split(",")[0] for line in cal.merged([cal.score_with_breakdown(s)[1] for s in sets]).lines()[2:]
    ]


def test_a_realization_breakdown_counts_where_another_des_parts_from_the_stored_one(
    tmp_path, monkeypatch, capsys
) -> None:
    """The stored DES against itself parts nowhere; with one verdict turned into a failure 3 % past
    its E2E P90 limit it parts at that point: within 5 % of a limit, not 2 %, on E2E P90, the other
    realization pessimistic there. `reproducibility --breakdown` prints it beside the evaluator's."""
    s = _validation_slice([1, 2, 3])
    kept = [0, 1, 2]
    same = cal.realization_breakdown(s, s, kept)
    assert (same.optimistic, same.pessimistic, same.near_limit) == (0, 0, (0, 0))
    assert all(m == 0 for values in same.families.values() for _, m in values.values())
    k = int(np.flatnonzero(s.meets & s.stable)[0])
    limit = cal._built(s.cases[int(s.case[k])])[1].slo.slowdown["e2e_p90"]
    slowdown = s.slowdown.copy()
    slowdown[k, cal.SLO_KEYS.index("e2e_p90")] = 1.03 * limit
    meets = s.meets.copy()
    meets[k] = False
    other = replace(s, meets=meets, slowdown=slowdown)
    got = cal.realization_breakdown(s, other, kept)
    assert (got.optimistic, got.pessimistic, got.near_limit, got.deciding) == (0, 1, (0, 1), {"e2e_p90": 1})
    path = tmp_path / "r.npz"
    cal.save_set(s, path)
    monkeypatch.setattr(
        cal, "rerun", lambda ds, shift, jobs: (replace(other, meta={**s.meta, "wall_s": 0.0}), kept)
    )
    assert cal.main(["reproducibility", "--file", str(path), "--breakdown"]) == 0
    out = capsys.readouterr().out
    assert "  the DES at seed +1 against the stored DES:\n    verdicts part at 1 of " in out
    assert "  the evaluator against the stored DES:\n    verdicts part at " in out


def test_score_takes_the_evaluators_sample_size_everywhere_it_evaluates(tmp_path, capsys) -> None:
    """`score --sample-size N` scores the evaluator at N sampled requests: its line is `score`'s at
    that size, which differs from the default's on these cases; a size the evaluator refuses is
    refused before any work, in one line."""
    s = _validation_slice([0, 3, 4])
    small = cal.score(s, sample_size=101)
    assert small.agreement != cal.score(s).agreement
    assert cal.score_with_breakdown(s, sample_size=101)[0] == small
    path = tmp_path / "s.npz"
    cal.save_set(s, path)
    assert cal.main(["score", "--file", str(path), "--sample-size", "101", "--breakdown"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].endswith(small.line())
    with pytest.raises(SystemExit) as stop:
        cal.main(["score", "--file", str(path), "--sample-size", "9"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "--sample-size: must be at least 10, got 9" in err


def test_score_gives_the_spread_over_draws_of_the_evaluators_sample(tmp_path, capsys) -> None:
    """`score --sample-draws K` scores again at K − 1 further draws of the evaluator's request
    sample (the scenario's seed + k, the same workload and the same stored DES runs) and prints
    each and their range; pooled over several files too. K < 1 is refused in one line."""
    s = _validation_slice([0, 3, 4])
    design, sc = cal._built(s.cases[0])
    drawn = cal._built(s.cases[0], 2)
    assert drawn[0] is design
    assert drawn[1].workload is sc.workload
    assert drawn[1].seed == sc.seed + 2
    draws = [cal.score(s, sample_draw=k) for k in range(3)]
    assert draws[0] == cal.score(s)
    assert len({(d.agreement, d.frontier_within_one) for d in draws}) > 1  # the sample moves them
    path = tmp_path / "s.npz"
    cal.save_set(s, path)
    assert cal.main(["score", "--file", str(path), str(path), "--sample-draws", "3"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].endswith(draws[0].line())
    assert out[2].endswith(draws[1].line())
    assert "sample draw 2" in out[3]
    assert out[3].endswith(draws[2].line())

    def span(attr: str) -> str:
        got = [getattr(d, attr) for d in draws]
        return f"{min(got):.1%}–{max(got):.1%}"

    assert out[4].strip() == (
        f"over 3 draws of the evaluator's sample: verdicts {span('agreement')}, "
        f"rows within one {span('frontier_within_one')}, cases {span('cases_frontier_ok')}"
    )
    assert out[-1].strip() == out[4].strip()  # the same set twice pools to the same shares
    with pytest.raises(SystemExit) as stop:
        cal.main(["score", "--file", str(path), "--sample-draws", "0"])
    assert stop.value.code == 2
    assert "--sample-draws: must be at least 1, got 0" in capsys.readouterr().err
