"""The shipped analytic calibration scored on DES runs it was not fitted to.

data/sim/des_validation.npz holds DES runs of cases drawn at random from a seed disjoint from the
training set's, at rates in quarter-octave bands the training set never uses, half of them on
models the training set never sees (splitplan.sim.calibrate; regenerate with
`python -m splitplan.sim.calibrate generate`, refit with `python -m splitplan.sim.calibrate fit
--write`). The tests check that the stored runs still describe today's DES and performance model
(a slice is simulated live), that the calibration file names the training set it was fitted to,
and score the evaluator on the whole validation set.

The targets of the issue that asked for this set are all-nine verdict agreement ≥ 97 % of the
points and, on each case, the frontier within one machine on ≥ 95 % of its rows. Since the
evaluator replays the prompt and mixed pools (splitplan.sim._prompt_replay) and the walked rows
are settled it agrees with the held-out DES (runs of 80–240 s, as long as users' runs) on 97.2 %
of the frontier-dense points (99.5 % of the uniform slice) and 98.5 % of all rows are within one
machine, but 96.0 % of the cases have 95 % of theirs, four short (docs/background.md says where it
misses), so the tests hold the measured figures as floors, a little below them. On draws the
evaluator was never developed on (`python -m splitplan.sim.calibrate holdout`) it does less well:
ten draws of 100 cases, pooled, give 96.7 % of the verdicts (99.5 % of the uniform slice), 96.2 %
of the rows within one machine and 90.3 % of the cases, where a second DES realization scored
against the first gets 95.8 %, 95.7 % and 85.0 % (and the evaluator against that second
realization 97.1 %, 96.3 % and 90.3 %); one such draw runs live here, and another over the 2025
mixture-of-experts models that neither set holds.
The floors are regression guards: a refit or a change of the queue model that loses held-out
accuracy fails here, and the floors are raised as the model improves.
"""

from __future__ import annotations

import tomllib
from dataclasses import replace

import numpy as np
import pytest

from splitplan.sim import calibrate as cal
from splitplan.sim.analytic import (
    CALIBRATION,
    CHUNKED_CALIBRATION,
    Calibration,
    load_calibration,
    load_chunked_calibration,
)

pytestmark = pytest.mark.accuracy

TARGET_AGREEMENT, TARGET_FRONTIER = 0.97, 0.95  # the goal (verdicts reached; every case not yet)
# regression guards just under the measured held-out figures
MIN_HELD_OUT_AGREEMENT = 0.965  # measured 0.972 (frontier-dense points)
MIN_HELD_OUT_UNIFORM_AGREEMENT = 0.99  # measured 0.995 (uniform slice)
MIN_HELD_OUT_FRONTIER = 0.98  # measured 0.985
MIN_HELD_OUT_CASES = 0.95  # measured 0.960 (cases with ≥ 95 % of their rows within one machine)
MAX_HELD_OUT_BASELINE_TTFT_ERROR = 0.045  # measured 0.036
LIVE_SLICE = 12  # validation points re-simulated live to detect a stale set
# A fresh held-out draw (`calibrate holdout`), drawn and run live: seed 15013, 30 cases, never
# used to develop the evaluator. Measured 98.0 % of the verdicts (99.7 % of the uniform slice),
# 99.1 % of the rows within one machine, 96.6 % of the cases; ten fresh draws of 100 cases pooled
# gave 96.7 / 99.5 / 96.2 / 90.3 % (docs/background.md, "Fresh held-out draws").
FRESH_SEED, FRESH_CASES = 15_013, 30
MIN_FRESH_AGREEMENT, MIN_FRESH_UNIFORM, MIN_FRESH_FRONTIER, MIN_FRESH_CASES = 0.96, 0.985, 0.97, 0.93
# A fresh draw over the 2025 MoE models no set holds (`holdout --models`), seed 15053, 24 cases:
# measured 96.6 % of the verdicts (99.0 % of the uniform slice), 98.0 % of the rows within one
# machine, 91.3 % of the cases (21 of 23); two draws of 100 gave 97.2 / 99.5 / 97.9 / 93.0 % pooled.
UNSEEN_MODELS = (
    "qwen3-30b-a3b",
    "qwen3-235b-a22b",
    "llama4-scout",
    "llama4-maverick",
    "gpt-oss-120b",
    "gpt-oss-20b",
)
UNSEEN_SEED, UNSEEN_CASES = 15_053, 24
MIN_UNSEEN_AGREEMENT, MIN_UNSEEN_UNIFORM, MIN_UNSEEN_FRONTIER, MIN_UNSEEN_CASES = 0.955, 0.98, 0.96, 0.86


@pytest.fixture(scope="module")
def validation() -> cal.DesSet:
    return cal.load_set(cal.sim_data_dir() / cal.VALIDATION_FILE)


@pytest.fixture(scope="module")
def held_out_score(validation) -> cal.Score:
    return cal.score(validation, CALIBRATION)


def test_sets_are_disjoint_in_seed_rates_and_partly_in_models(validation) -> None:
    train = cal.load_set(cal.sim_data_dir() / cal.TRAINING_FILE)
    assert train.meta["seed"] != validation.meta["seed"]
    band = lambda r: int(np.floor(np.log2(r) / cal.RATE_BAND_OCTAVES)) % 2  # noqa: E731
    assert {band(c.rate_rps) for c in train.cases} == {0}
    assert {band(c.rate_rps) for c in validation.cases} == {1}
    unseen = {c.model for c in validation.cases} - {c.model for c in train.cases}
    assert len(unseen) >= 3, unseen
    # the space users search: both kinds of design, custom pools, TP < 8, fp8, traces
    for s in (train, validation):
        kinds = {c.design for c in s.cases}
        assert kinds & set(cal.PAPER_BASELINES)
        assert kinds & set(cal.PAPER_SPLIT)
        assert {"custom", "custom-baseline"} <= kinds
        assert any(c.prompt_tp < 8 for c in s.cases)
        assert any(c.prompt_precision == "fp8" for c in s.cases)
        assert any(c.workload.startswith("trace:") for c in s.cases)


def test_shipped_calibration_names_its_training_set() -> None:
    doc = tomllib.loads((cal.sim_data_dir() / cal.CALIBRATION_FILE).read_text())
    prov = doc["provenance"]
    train = cal.load_set(cal.sim_data_dir() / cal.TRAINING_FILE)
    refit = "refit: python -m splitplan.sim.calibrate fit --write"
    assert prov["training_fingerprint"] == train.fingerprint, refit
    assert prov["command"].startswith("python -m splitplan.sim.calibrate fit")
    assert prov["objective"]
    assert prov["date"]
    assert load_calibration() == CALIBRATION


def test_shipped_chunked_calibration_names_its_fit() -> None:
    """The chunked-prefill corrections live in the same file, with their own provenance."""
    doc = tomllib.loads((cal.sim_data_dir() / cal.CALIBRATION_FILE).read_text())
    prov = doc["chunked_provenance"]
    assert prov["command"] == "python -m splitplan.sim.calibrate fit-chunked --write"
    assert prov["training_set"] == "tests/golden/des_grids/chunked.npz"
    assert prov["held_out_rates_rps"]
    assert prov["date"]
    assert {"in_sample", "held_out"} <= set(doc["chunked_scores"])
    assert load_chunked_calibration() == CHUNKED_CALIBRATION


def test_a_stale_or_incomplete_calibration_file_is_refused(tmp_path) -> None:
    from splitplan.errors import InputError

    bad = tmp_path / "c.toml"
    bad.write_text("[calibration]\nprompt_full_slack = 0.7\n")
    with pytest.raises(InputError, match="missing"):
        load_calibration(bad)
    with pytest.raises(InputError, match="finite number"):
        Calibration(join_fraction=float("nan"))
    with pytest.raises(InputError, match="chunked_calibration"):
        load_chunked_calibration(bad)


def test_validation_set_still_describes_the_des(validation) -> None:
    """A few stored points, simulated again: same verdict and slowdowns (else regenerate)."""
    rng = np.random.default_rng(0)
    for j in rng.choice(len(validation.case), size=LIVE_SLICE, replace=False):
        case = validation.cases[int(validation.case[j])]
        design, sc = cal._built(case)
        got = cal._des(design, sc, int(validation.prompt[j]), int(validation.token[j]))
        assert got[0] == bool(validation.meets[j]), (
            f"the DES or the performance model changed since {cal.VALIDATION_FILE} was generated; "
            "rerun `python -m splitplan.sim.calibrate generate` and refit"
        )
        assert np.allclose(got[2], validation.slowdown[j], rtol=1e-4)


def test_held_out_verdict_agreement(held_out_score) -> None:
    assert held_out_score.agreement >= MIN_HELD_OUT_AGREEMENT, held_out_score.line()
    assert held_out_score.uniform_agreement >= MIN_HELD_OUT_UNIFORM_AGREEMENT, held_out_score.line()


def test_held_out_frontier_within_one_machine(held_out_score) -> None:
    assert held_out_score.frontier_within_one >= MIN_HELD_OUT_FRONTIER, held_out_score.line()
    assert held_out_score.cases_frontier_ok >= MIN_HELD_OUT_CASES, held_out_score.line()


def test_a_fresh_held_out_draw() -> None:
    """The stored validation set has been scored at every change since it was generated, so it
    is no longer quite held out; a draw the evaluator was never developed on is. It is also the
    stricter test: its rows sit at the shipped evaluator's own edge of feasibility. Drawn and run
    live (the DES included), so a change to the evaluator is judged where it is least sure."""
    s = cal.holdout(FRESH_SEED, jobs=1, n=FRESH_CASES)
    got = cal.score(s, CALIBRATION)
    assert len(s.cases) >= FRESH_CASES - 2
    assert got.agreement >= MIN_FRESH_AGREEMENT, got.line()
    assert got.uniform_agreement >= MIN_FRESH_UNIFORM, got.line()
    assert got.frontier_within_one >= MIN_FRESH_FRONTIER, got.line()
    assert got.cases_frontier_ok >= MIN_FRESH_CASES, got.line()


def test_a_fresh_draw_over_models_no_set_holds() -> None:
    """Architectures the evaluator was never fitted beside nor developed on (Qwen3-MoE, Llama 4,
    gpt-oss), drawn and run live as the fresh held-out draw is."""
    s = cal.holdout(UNSEEN_SEED, jobs=1, n=UNSEEN_CASES, models=UNSEEN_MODELS)
    got = cal.score(s, CALIBRATION)
    assert len(s.cases) >= UNSEEN_CASES - 2
    assert {c.model for c in s.cases} <= set(UNSEEN_MODELS)
    assert got.agreement >= MIN_UNSEEN_AGREEMENT, got.line()
    assert got.uniform_agreement >= MIN_UNSEEN_UNIFORM, got.line()
    assert got.frontier_within_one >= MIN_UNSEEN_FRONTIER, got.line()
    assert got.cases_frontier_ok >= MIN_UNSEEN_CASES, got.line()


def test_held_out_baseline_ttft_percentiles(validation) -> None:
    """The baselines' TTFT P50/P90/P99 on held-out points: within 4–5 % of the DES's on average
    (mean |log| of the ratio), and the fitted fresh share is what brings them there (every prompt
    at a uniform point of the running iteration is off by more)."""
    err = cal.baseline_ttft_error(validation, CALIBRATION)
    assert err <= MAX_HELD_OUT_BASELINE_TTFT_ERROR, err
    uniform = cal.baseline_ttft_error(validation, replace(CALIBRATION, baseline_fresh_share=0.0))
    assert uniform > err + 0.01, (uniform, err)


def test_the_score_detects_a_bad_calibration(validation, held_out_score) -> None:
    """The scoring is not vacuous: a calibration far off scores clearly worse."""
    off = replace(CALIBRATION, join_fraction=4.0, baseline_jsq_spread=0.0)
    worse = cal.score(validation, off, probe=True)
    assert worse.agreement < held_out_score.agreement - 0.01


def _held_out_case(
    design: str, model: str, trace: str, rate_rps: float, seed: int, duration_s: float = 60.0, **pools
) -> cal.Case:
    """A validation case: whole-node fp16 pools unless `pools` says otherwise, on the Azure "code"
    or "conv" trace, the "coding" or "conversation" preset, or a trace path under ../shared."""
    whole_node_fp16 = {
        "prompt_node": "",
        "token_node": "",
        "prompt_tp": 8,
        "token_tp": 8,
        "prompt_precision": "fp16",
        "token_precision": "fp16",
        "token_power_cap": 1.0,
    }
    if trace in {"code", "conv"}:
        workload = f"trace:data/azure-llm-2023/AzureLLMInferenceTrace_{trace}.csv"
    elif trace in {"coding", "conversation"}:
        workload = trace
    else:
        workload = f"trace:{trace}"
    return cal.Case(
        design=design,
        model=model,
        workload=workload,
        rate_rps=rate_rps,
        duration_s=duration_s,
        seed=seed,
        **(whole_node_fp16 | pools),
    )


def _splitwise_hh_coding(model: str, rate_rps: float, duration_s: float, seed: int) -> cal.Case:
    """Splitwise-HH (whole-node fp16 pools) on the coding preset."""
    return _held_out_case("splitwise-hh", model, "coding", rate_rps, seed, duration_s)


def _evaluator_and_des(case: cal.Case, prompt: int, token: int):
    from splitplan.sim.analytic import evaluate_grid
    from splitplan.sim.des import simulate_des

    design, sc = case.build()
    return evaluate_grid(design, [prompt], [token], sc), simulate_des(cal._config(design, prompt, token), sc)


def test_a_token_pool_near_saturation_fills_on_its_own_clock() -> None:
    """A validation case whose token pool runs near saturation (iteration time nearly
    proportional to the batch): over its 60 s trace the DES's batch is still growing at the end,
    and the evaluator's TBT P50 follows it. With the batch filling on the steady iteration time
    (the token pool's ramp before `_filling_decode`) it was 1.13× the DES's here (1.50 against
    1.32)."""
    case = _held_out_case(
        "custom",
        "qwen2.5-72b",
        "conv",
        26.924,
        697973175,
        prompt_node="dgx-a100",
        token_node="dgx-h100",
        token_precision="fp8",
    )
    got, des = _evaluator_and_des(case, 7, 3)
    assert got.utilization_token[0] > 0.7
    assert got.slowdown["tbt_p50"][0] == pytest.approx(des.slowdown["tbt_p50"], rel=0.05)


def test_an_admitted_prompt_waits_its_queued_tokens_packed() -> None:
    """A validation case with one prompt machine past saturation (llama2-13b, whose prompt
    iteration is mostly its fixed cost). An admitted prompt's queued tokens run packed, the last of
    them in its own iteration, so its wait stays far below its pending tokens at the pool's mean
    per-token time: with that bound the evaluator's TTFT P99 was 1.41× the DES's here (5.58
    against 3.96), with the admission chain's packed bound 4.02. The replayed prompt pool gives
    the DES's own TTFTs: its P99 to the digit, the others within the overflowed requests' share
    (they run on the mixed pool, replayed without its decodes)."""
    got, des = _evaluator_and_des(
        _held_out_case("splitwise-hhcap", "llama2-13b", "code", 22.332, 193344826), 1, 9
    )
    assert got.utilization_prompt[0] > 1.0
    assert got.slowdown["ttft_p99"][0] == pytest.approx(des.slowdown["ttft_p99"], rel=1e-6)
    for q in ("ttft_p50", "ttft_p90"):
        assert got.slowdown[q][0] == pytest.approx(des.slowdown[q], rel=0.01)


def test_a_single_token_machine_keeps_decoding_while_borrowed() -> None:
    """A validation case with one token machine at 0.4 decode utilization and a prompt pool
    that overflows now and then. The DES sends new decodes to the borrowed machine (no token
    machine is left to take them), so the drain of its batch keeps no machine away: counted
    away, the evaluator's token pool came out unstable here (utilization 1.35) where the DES
    meets every SLO."""
    got, des = _evaluator_and_des(
        _held_out_case("splitwise-hh", "llama3.1-8b", "code", 40.562, 783693373), 3, 1
    )
    assert des.stable
    assert des.verdict.meets
    assert got.utilization_token[0] < 0.6
    assert got.slowdown["tbt_p50"][0] == pytest.approx(des.slowdown["tbt_p50"], rel=0.05)


def test_a_baseline_decode_meets_no_prompts_after_the_trace_ends() -> None:
    """A validation baseline whose decodes are long against its trace (Llama-3.1-405B on 43 B200
    machines, conversation trace, 36 s at 167 req/s: a decode phase lasts about 20 s). Prompts
    stall a mixed-batching decode only while they still arrive; counted through the decode's end,
    the evaluator's TBT P50 was 1.29× the DES's here (1.10 against 0.85 of its limit)."""
    case = _held_out_case(
        "custom-baseline",
        "llama3.1-405b",
        "conv",
        166.596,
        2006540039,
        duration_s=36.015189438042455,
        prompt_node="hgx-b200",
        token_node="hgx-b200",
    )
    got, des = _evaluator_and_des(case, 43, 0)
    assert got.slowdown["tbt_p50"][0] == pytest.approx(des.slowdown["tbt_p50"], rel=0.12)


def _qwen_on_b200_and_a100_coding() -> cal.Case:
    """The validation case of Qwen2.5-72B on fp8 B200 prompt and A100 token machines, the
    reference coding trace at 81 req/s: its prompt pool overflows rarely at 7 prompt machines and
    a fifth of its prompts at 3."""
    return _held_out_case(
        "custom",
        "qwen2.5-72b",
        "reference/splitwise-sim/traces/rr_code_70_2min.csv",
        81.303,
        1489893200,
        prompt_node="hgx-b200",
        token_node="dgx-a100",
        prompt_precision="fp8",
    )


def test_a_rare_overflow_keeps_token_machines_away_for_a_residual_drain() -> None:
    """A validation case (Qwen2.5-72B, B200 prompt and A100 token machines, the reference coding
    trace) where 0.2 % of the requests overflow at 7 prompt machines. A borrowed token machine
    stays away until what is left of its batch's longest decode has run, a heavy-tailed rest: at
    5 token machines every one of five DES realizations fails TBT P50. With the drain as the
    decode lengths' own N/(N + 1) quantile the evaluator kept too few machines away and passed
    the point; 7 token machines pass in both."""
    case = _qwen_on_b200_and_a100_coding()
    short, des_short = _evaluator_and_des(case, 7, 5)
    enough, des_enough = _evaluator_and_des(case, 7, 7)
    assert not des_short.verdict.meets
    assert des_enough.verdict.meets
    assert not short.meets_slo[0]
    assert enough.meets_slo[0]


def test_borrowed_token_machines_keep_decoding_the_batch_they_hold() -> None:
    """A validation case (Splitwise-HH, Llama-2-70B, coding preset) whose prompt pool overflows
    1.1 % of the requests at 21 prompt machines. A borrowed token machine takes no new decode but
    keeps decoding its batch until it drains, so with 8 token machines the DES meets every SLO
    (TBT P90 0.87 of its limit). Counting the borrowed machines as lost to the token pool, from the
    overflowing share of an M/G/c prompt pool, the evaluator put the token pool past saturation
    (utilization 1.07, TBT P90 6.7); the replayed mixed pool keeps 0.65 of it busy."""
    case = _splitwise_hh_coding("llama2-70b", 114.172, 52.55236809234531, 745085284)
    got, des = _evaluator_and_des(case, 21, 8)
    assert des.meets_slo
    assert got.meets_slo[0]
    assert got.utilization_token[0] < 0.8
    for q in ("tbt_p50", "tbt_p90"):
        assert got.slowdown[q][0] == pytest.approx(des.slowdown[q], rel=0.1)


def test_a_borrowed_token_machine_drains_its_own_decodes() -> None:
    """A validation case (BLOOM-176B, four B200 prompt and 11 power-capped H200 token machines,
    the Azure conversation trace at 42 req/s) whose prompt pool borrows token machines ten
    times, each away for a drain of about 24 s. The DES meets every SLO at 11 token machines
    (TBT P50 1.24 against its limit of 1.25), and at 12. Counting the decodes a borrowed
    machine drains as load on the machines left as well put the evaluator's token pool past
    saturation at 11 (utilization 1.04, a batch of 137, TBT P50 1.58) and failed 12 (TBT P50
    1.32): its frontier was 13. `_SplitContext._drained_by_borrowed` keeps them on the machine
    that holds them: 1.34 at 11 and 1.19 at 12, the frontier 12."""
    case = _held_out_case(
        "custom",
        "bloom-176b",
        "conv",
        42.253,
        651310542,
        prompt_node="hgx-b200",
        token_node="hgx-h200",
        token_power_cap=0.8,
    )
    got, des = _evaluator_and_des(case, 4, 11)
    assert des.meets_slo
    assert got.utilization_token[0] < 1.0
    # (TBT P50 1.38 against the DES's 1.24: 1.36 at the mean count of machines away, 1.38 with
    # the batch following the count over time, `_SplitContext._batch_over_time`)
    for q in ("tbt_p50", "tbt_p90", "e2e_p90"):
        assert got.slowdown[q][0] == pytest.approx(des.slowdown[q], rel=0.12), q
    got, des = _evaluator_and_des(case, 4, 12)
    assert des.meets_slo
    assert got.meets_slo[0]


def test_decodes_on_a_borrowed_token_machine_wait_out_its_prompt() -> None:
    """A validation case (Qwen2.5-72B, B200 prompt and A100 token machines, the reference coding
    trace) whose 3 prompt machines overflow a fifth of the prompts: the mixed pool borrows token
    machines 77 times in the replay (the DES moves 69), and the decodes a borrowed machine holds
    wait out the prompt it was borrowed for. At 26 token machines the DES fails on TBT P90 (1.51)
    with a P99 of 4.38; with no decode on a borrowed machine the evaluator read a P99 of 1.1 and
    passed the point; `_SplitContext._borrowed_stalls` put it at 4.15 with the first prompt alone,
    and at 4.80 with the later prompts a caught decode meets. Its TBT P90 then reads 1.85 against
    the DES's 1.51 (1.39 before): here a borrowed machine runs prompts for 63 % of its time away
    (32 % in the Mixtral-8x22B case below), while over the points whose prompt pool is overloaded
    the evaluator's TBT P99 stays below the DES's (median ratio 0.88, docs/background.md)."""
    case = _qwen_on_b200_and_a100_coding()
    got, des = _evaluator_and_des(case, 3, 26)
    assert not des.meets_slo
    assert not got.meets_slo[0]
    assert got.slowdown["tbt_p99"][0] == pytest.approx(des.slowdown["tbt_p99"], rel=0.15)
    # E2E P90 1.86 against the DES's 1.58: with the batch following the machines the mixed pool
    # leaves over time (`_SplitContext._batch_over_time`) this overloaded pool (prompt
    # utilization 1.6) reads 3.5 % higher than at their mean count (1.80), TBT P90 1.93 (1.85)
    assert got.slowdown["e2e_p90"][0] == pytest.approx(des.slowdown["e2e_p90"], rel=0.2)


def test_a_caught_decode_waits_out_the_later_prompts_of_a_sustained_overflow() -> None:
    """A fresh held-out case (Mixtral-8x22B on Splitwise-HH, the Azure code trace at 162 req/s over
    148 s, seed 15007) whose prompt pool is overloaded at 13 prompt machines (utilization 1.19), so
    the mixed pool keeps borrowing token machines and each runs many overflowed prompts while it
    is away. A decode it holds waits out those it meets, not only the prompt it was borrowed for:
    at 14 token machines the DES fails on E2E P90 (1.54; TBT P99 2.00). Counting the first prompt
    alone the evaluator read 1.48 (TBT P99 1.77) and passed the point
    (`_SplitContext._borrowed_stalls`)."""
    case = _held_out_case("splitwise-hh", "mixtral-8x22b", "code", 161.806, 1396681213, 148.3259068312314)
    got, des = _evaluator_and_des(case, 13, 14)
    assert not des.meets_slo
    assert not got.meets_slo[0]
    # With the batch following the machines the mixed pool leaves over time
    # (`_SplitContext._batch_over_time`) this overloaded pool reads high: E2E P90 1.67 and TBT P99
    # 3.02 against the DES's 1.54 and 2.00 (1.52 and 1.96 at the mean count). Where the prompt pool
    # is overloaded the DES's full token machines hand new decodes to the mixed machines, which the
    # replay's count does not follow; applied only below overload the time-varying batch scored
    # worse on every held-out set (docs/background.md).
    assert got.slowdown["e2e_p90"][0] == pytest.approx(des.slowdown["e2e_p90"], rel=0.1)
    assert des.slowdown["tbt_p99"] <= got.slowdown["tbt_p99"][0] <= 1.6 * des.slowdown["tbt_p99"]


def test_a_baseline_batch_over_a_short_trace_runs_at_its_own_iteration_time() -> None:
    """A validation baseline whose conversation trace (20 s, Llama-3-8B on 41 H100s at 324 req/s)
    ends before the decode batch reaches its steady state (84 decodes per machine; the DES holds
    45 on average while prompts arrive). Filling the batch at the steady batch's iteration time
    made every decode last too long and the batch it meets too large: the evaluator's TBT P50
    was 1.05× the DES's here (1.30 against 1.24) and its smallest feasible N 45 against 41. With
    the batch marched over the trace's own arrivals, each iteration as long as the batch it holds
    (`_marched_batch`), it is within 2 %."""
    case = _held_out_case("baseline-h100", "llama3-8b", "conv", 324.506, 1036101128, duration_s=20.0)
    got, des = _evaluator_and_des(case, 41, 0)
    for q in ("tbt_p50", "e2e_p50"):
        assert got.slowdown[q][0] == pytest.approx(des.slowdown[q], rel=0.02), q


def test_a_token_pool_over_a_quarter_hour_trace_holds_the_des_batch() -> None:
    """Splitwise-HH, Llama-2-70B, the coding preset at 70 req/s over 900 s (8 token machines):
    a trace fifteen times the training set's longest. The token pool's march takes steps of
    3.6 s, longer than most coding decodes; reading each step's arrivals at its midpoint survival
    held almost none of them, and the evaluator's TBT P50 came out 0.96× the DES's (0.685 against
    0.713). A step's share still resident is now exact for any step length (`_marched_batch`)."""
    from splitplan.catalog import get_model
    from splitplan.design import ClusterConfig, get_design
    from splitplan.sim.analytic import evaluate_grid
    from splitplan.sim.des import simulate_des
    from splitplan.sim.scenario import Scenario
    from splitplan.workload import make_workload

    sc = Scenario(
        workload=make_workload("coding", rate_rps=70, duration_s=900, seed=0), model=get_model("llama2-70b")
    )
    hh = get_design("splitwise-hh")
    got = evaluate_grid(hh, [25], [8], sc)
    des = simulate_des(ClusterConfig(design=hh, prompt_machines=25, token_machines=8), sc)
    assert got.slowdown["tbt_p50"][0] == pytest.approx(des.slowdown["tbt_p50"], rel=0.015)
    assert got.slowdown["e2e_p50"][0] == pytest.approx(des.slowdown["e2e_p50"], rel=0.015)


def test_an_moe_decode_meets_the_batch_of_its_machine_not_the_mean() -> None:
    """Mixtral-8x22B on a custom MI300X → L40S pair (token machines at 80 % power), the Azure code
    trace at 81 req/s, 10 prompt and 36 token machines: about three decodes per token machine,
    where an MoE iteration grows steeply with the batch (35.5 ms at one decode, 49.1 at three).
    The memory-balanced scheduler leaves the counts spread, and a decode meets 3.9 on average
    where its machine holds 3.1. At the machine's mean the evaluator read TBT P90 1.30 against
    the DES's 1.485, and the row's frontier 36 against 40 (a fresh held-out draw, seed 15003);
    at the batch each decode meets (`_seen_batch_ratio`) it is within 3 %."""
    pair = {"prompt_node": "mi300x-8x", "token_node": "l40s-8x", "token_power_cap": 0.8}
    case = _held_out_case("custom", "mixtral-8x22b", "code", 81.089, 1067049816, **pair)
    got, des = _evaluator_and_des(case, 10, 36)
    assert got.slowdown["tbt_p90"][0] == pytest.approx(des.slowdown["tbt_p90"], rel=0.03)
    assert got.slowdown["tbt_p50"][0] == pytest.approx(des.slowdown["tbt_p50"], rel=0.03)


def test_a_dense_decode_moves_little_with_the_batch_it_meets() -> None:
    """Where the iteration time's batch-dependent part is flat at small batches (a dense 70B model
    on whole H100 nodes), the batch a decode meets leaves the mean iteration time where it was and
    spreads it little: the middle 80 % of requests within ±1.5 % at 2 decodes per machine and
    within ±5 % at 60, where compute starts to grow with the batch. The context part moves only
    with the decode's own context, and grouped-query attention keeps Llama-3.1-70B's KV small."""
    from splitplan.sim.analytic import _SCENARIOS, CALIBRATION, evaluate_grid

    case = _held_out_case("splitwise-hh", "llama3.1-70b", "conv", 40.0, 7)
    design, sc = case.build()
    evaluate_grid(design, [10], [10], sc)
    sample = _SCENARIOS.sample(sc, None)
    ctx = _SCENARIOS.context(sc, sample, design, CALIBRATION, None, lambda: pytest.fail("not cached"))
    ratio = ctx._seen_batch_ratio(np.array([2.0, 60.0]))
    assert np.all(np.abs(ratio.mean(axis=1) - 1.0) < 0.005)
    low, high = np.percentile(ratio, [10, 90], axis=1)
    assert low[0] > 0.985
    assert high[0] < 1.015
    assert low[1] > 0.95
    assert high[1] < 1.05


def test_a_decode_iterates_at_its_own_context_beside_the_batch_mean() -> None:
    """Llama-2-7B (no grouped-query attention: an iteration's time grows fast with its context) on
    A100 TP2 prompt and L40S TP2 token machines, the Azure code trace at 14.7 req/s (a fresh
    held-out draw, seed 15010), 16 + 6 machines: two decodes per token machine. Long prompts with
    short outputs set the E2E P90, and their decodes iterate at their own long context beside
    the others'. With every decode at the batch's mean context the evaluator read E2E P90 1.471
    and TBT P99 1.038 against the DES's 1.504 and 1.062, and the frontier 5 token machines
    against 7 at five prompt counts; with N − 1 others at the mean and its own (6 against 7),
    1.493 and 1.061."""
    pair = {"prompt_node": "dgx-a100", "token_node": "l40s-8x", "prompt_tp": 2, "token_tp": 2}
    case = _held_out_case("custom", "llama2-7b", "code", 14.676, 1644075569, duration_s=240.0, **pair)
    got, des = _evaluator_and_des(case, 16, 6)
    assert got.slowdown["e2e_p90"][0] == pytest.approx(des.slowdown["e2e_p90"], rel=0.012)
    assert got.slowdown["tbt_p99"][0] == pytest.approx(des.slowdown["tbt_p99"], rel=0.01)
    assert got.slowdown["tbt_p90"][0] == pytest.approx(des.slowdown["tbt_p90"], rel=0.01)


def test_a_decode_meets_the_token_machines_the_mixed_pool_leaves_at_its_time() -> None:
    """Llama-2-7B on MI300X TP8 fp8 prompt and L40S TP8 fp8 token machines at 80 % power, the
    Azure code trace at 320 req/s (a fresh held-out draw, seed 15012), 13 prompt machines (0.94
    utilization): 2 % of the prompts overflow onto token machines. The mixed pool holds 4.9 token
    machines on average, but not evenly: in the DES at 14 token machines it held 9 for a stretch
    of 15 s, whose 4 machines left took 100–170 decodes each while TBT P90 ran at 2 over it. With
    every decode at the batch of the mean count the evaluator read E2E P90 1.29 and TBT P90 1.13
    against the DES's 1.59 and 1.57, and met the SLOs two token machines below the DES; with the
    count the replay holds over each decode (`_SplitContext._batch_over_time`), 1.54 and 1.47: the
    DES's frontier, 15 (E2E P90 1.40 against 1.42 there)."""
    pair = {
        "prompt_node": "mi300x-8x",
        "token_node": "l40s-8x",
        "prompt_precision": "fp8",
        "token_precision": "fp8",
        "token_power_cap": 0.8,
    }
    case = _held_out_case("custom", "llama2-7b", "code", 319.873, 709269182, duration_s=80.0, **pair)
    for token, meets in ((14, False), (15, True)):
        got, des = _evaluator_and_des(case, 13, token)
        assert des.meets_slo is meets
        assert bool(got.meets_slo[0]) is meets
        assert got.slowdown["e2e_p90"][0] == pytest.approx(des.slowdown["e2e_p90"], rel=0.04)


def test_a_token_pool_short_of_machines_borrows_idle_prompt_machines() -> None:
    """The issue's own example: BLOOM-176B on Splitwise-HH, coding at 70 req/s. Its decodes need
    3.2 token machines' worth at the memory cap; with one token machine the DES lends it prompt
    machines (the scheduler moves the prompt machine with the least memory into the mixed pool
    when no token machine has room) and meets every SLO wherever the prompt pool has them to
    spare (33 prompt machines, utilization 0.65), but not at 24 (0.89), where three lent
    machines leave too few for the prompts. Without the lending the evaluator read the token pool
    as unstable at both, and needed four token machines at every prompt count from 29 to 39."""
    case = _splitwise_hh_coding("bloom-176b", 70.0, 120.0, 0)
    got, des = _evaluator_and_des(case, 33, 1)
    assert des.meets_slo
    assert bool(got.meets_slo[0])
    assert got.slowdown["tbt_p90"][0] == pytest.approx(des.slowdown["tbt_p90"], rel=0.1)
    got, des = _evaluator_and_des(case, 24, 1)
    assert not des.meets_slo
    assert not bool(got.meets_slo[0])


def test_an_all_borrowed_token_pool_is_mixed_in_periods_not_to_the_trace_end() -> None:
    """Two training cases whose prompt pools overflow 3–8 % of the prompts, each over 240 s: a
    B200 → H100 pair (Llama-2-70B, coding at 72 req/s, 5 + 12 machines) and Splitwise-HA (the
    Azure code trace at 25 req/s, 5 + 6). The mixed-pool replay finds every token machine
    borrowed 69 s and 27 s in; the DES does too, but a mixed machine falls idle and returns after
    28 s and 95 s on average, and its pool is all mixed for 55 s and 95 s of the trace. Mixed from
    then to the end, the evaluator stalled a quarter to two fifths of the decodes and read TBT P90
    at 1.57 and 2.15 where the DES meets every SLO at 1.03 and 1.23 (`_SplitContext._all_mixed`).
    The Splitwise-HA point then met every SLO in the evaluator too; since the decodes caught by a
    borrowing before the absorption also wait out the later prompts of the burst
    (`_SplitContext._borrowed_stalls`), 20 of its 501 sampled requests end later and its E2E P90
    reads 1.53 against the DES's 1.43 (limit 1.5): it fails there, on E2E, not on its TBT. With
    the batch following the machines the mixed pool leaves over time (`_batch_over_time`), 1.50:
    it meets every SLO, as the DES does."""
    b200_h100 = _held_out_case(
        "custom",
        "llama2-70b",
        "coding",
        72.14,
        1255129038,
        240.0,
        prompt_node="hgx-b200",
        token_node="dgx-h100",
    )
    splitwise_ha = _held_out_case("splitwise-ha", "llama2-70b", "code", 25.004, 2100285966, 240.0)
    for case, prompt, token in ((b200_h100, 5, 12), (splitwise_ha, 5, 6)):
        got, des = _evaluator_and_des(case, prompt, token)
        assert des.meets_slo
        assert got.meets_slo[0] or case is splitwise_ha
        assert got.binding[0] == "e2e_p90"
        # (Splitwise-HA: 1.105 against the DES's 1.231, and it meets every SLO as the DES does)
        assert got.slowdown["tbt_p90"][0] == pytest.approx(des.slowdown["tbt_p90"], rel=0.11)


def test_a_decode_on_a_nearly_idle_token_pool_meets_a_batch_of_about_one() -> None:
    """Mixtral-8x22B on one H200 TP4 fp8 prompt machine and A100 TP4 token machines, the
    conversation preset at 2.6 req/s over 240 s (a fresh held-out draw, seed 15011): about one
    decode per token machine, where an MoE decode iteration grows steeply with its batch. An
    empty machine holds the least memory and takes the next decode, so a decode mostly runs
    alone. The DES meets every SLO from 18 token machines on (TBT P50 1.23 there, 1.20 at 19).
    With the count's variance at N·cv² the evaluator had a decode meet about 1 + cv² and read
    TBT P50 1.27 at 18 and 1.26 at 19, past its limit of 1.25: its frontier was 21. With the
    variance at N·cv²·(1 − e^−N) (`_seen_batch_ratio`) it reads 1.25 and 1.23: 19."""
    case = _held_out_case(
        "custom",
        "mixtral-8x22b",
        "conversation",
        2.572,
        1839022235,
        240.0,
        prompt_node="hgx-h200",
        token_node="dgx-a100",
        prompt_tp=4,
        token_tp=4,
        prompt_precision="fp8",
    )
    got, des = _evaluator_and_des(case, 1, 19)
    assert des.meets_slo
    assert got.meets_slo[0]
    assert got.slowdown["tbt_p50"][0] == pytest.approx(des.slowdown["tbt_p50"], rel=0.04)


def test_a_lent_prompt_machine_decodes_at_its_own_memory_cap() -> None:
    """BLOOM-176B on seven B200 TP4 fp8 prompt machines and one MI300X TP1 fp8 token machine, the
    reference code trace at 20.5 req/s over 240 s (a fresh held-out draw, seed 15010). The token
    machine holds 3.6 decodes at its memory cap, and the decodes need 9.6 token machines' worth;
    a B200 TP4 instance at its own memory cap decodes 24 times as fast. The DES lends a prompt
    machine to the decodes and meets every SLO (TBT P90 1.40). Counting each lent machine as a
    token machine, the evaluator needed nine of them, more than the prompt pool can spare, and
    read the token pool as unstable (TBT P90 3,628); one B200 instance holds the decodes
    (`_SplitContext.evaluate`)."""
    case = _held_out_case(
        "custom",
        "bloom-176b",
        "reference/splitwise-sim/traces/rr_code_70_2min.csv",
        20.525,
        190331131,
        240.0,
        prompt_node="hgx-b200",
        token_node="mi300x-8x",
        prompt_tp=4,
        token_tp=1,
        prompt_precision="fp8",
        token_precision="fp8",
    )
    got, des = _evaluator_and_des(case, 7, 1)
    assert des.meets_slo
    assert got.meets_slo[0]
    assert got.utilization_token[0] < 1.0


def test_a_borrowed_idle_token_machine_keeps_its_prompts_decode() -> None:
    """BLOOM-176B on four H200 TP8 fp8 prompt machines and 80 A100 TP8 token machines at 80 %
    power, the Azure code trace at 31.6 req/s over 240 s (a fresh held-out draw, seed 15016). The
    prompt pool is overloaded (utilization 1.4): 952 of 7,679 prompts overflow. The token machines
    hold 0.6 decodes each, so the one borrowed for an overflowed prompt is idle, and the DES's
    scheduler sends that request's decode to it too (225 requests). The machine stays mixed until
    the decode ends and takes the overflowed prompts that follow, each stalling the decode: 69 of
    the 77 slowest TBTs are these decodes, and the DES reads TBT P99 6.70, past its limit of 5.
    With every overflowed request's decode on an unstalled token machine the evaluator read 1.00
    and met every SLO (`_prompt_replay._mixed`, `_SplitContext._kept_decodes`)."""
    case = _held_out_case(
        "custom",
        "bloom-176b",
        "code",
        31.56,
        1800336650,
        240.0,
        prompt_node="hgx-h200",
        token_node="dgx-a100",
        prompt_precision="fp8",
        token_power_cap=0.8,
    )
    got, des = _evaluator_and_des(case, 4, 80)
    assert des.slowdown["tbt_p99"] > 5.0
    assert got.slowdown["tbt_p99"][0] == pytest.approx(des.slowdown["tbt_p99"], rel=0.15)
    assert not got.meets_slo[0]


def test_a_borrowed_token_machine_holds_a_decode_where_none_is_idle() -> None:
    """Qwen2.5-72B on two B200 TP8 fp8 prompt machines and 80 A100 TP8 token machines, the
    reference code trace at 81.3 req/s over 240 s (the validation set's case 64). The prompt pool
    is overloaded (utilization 2.4) and the token machines hold 1.6 decodes each. The DES borrows
    529 times; its 197 slowest TBTs are all decodes whose token machine ran a prompt during them,
    and it reads TBT P99 5.65. The evaluator took the borrowed machine's batch from a normal
    spread, which reads zero below a few decodes per machine: no decode caught, TBT P99 1.48.
    With no machine idle the least loaded holds one (`_SplitContext._least_loaded_share`): 4.20."""
    case = _held_out_case(
        "custom",
        "qwen2.5-72b",
        "reference/splitwise-sim/traces/rr_code_70_2min.csv",
        81.303,
        1489893200,
        240.0,
        prompt_node="hgx-b200",
        token_node="dgx-a100",
        prompt_precision="fp8",
    )
    got, des = _evaluator_and_des(case, 2, 80)
    assert des.slowdown["tbt_p99"] > 5.0
    assert got.slowdown["tbt_p99"][0] > 0.7 * des.slowdown["tbt_p99"]


@pytest.mark.parametrize(
    ("model", "rate_rps", "seed", "prompt", "token", "machines", "rel"),
    [
        ("mixtral-8x7b", 10.809, 906541783, "hgx-b200", 2, (2, 10), 0.02),
        ("llama3.1-8b", 13.532, 318878617, "mi300x-8x", 1, (2, 12), 0.005),
    ],
)
def test_a_decode_joins_at_once_on_an_idle_token_machine(
    model: str, rate_rps: float, seed: int, prompt: str, token: int, machines: tuple[int, int], rel: float
) -> None:
    """Two fresh held-out draws on the reference code trace over 240 s, with TP2 prompt machines
    and A100 token machines at 1.2 and 1.3 decodes per token machine, so a decode's KV often
    lands on a machine running nothing and starts at once: Mixtral-8x7B on two B200 and ten A100
    TP2 at 10.8 req/s (seed 15005), and Llama-3.1-8B on two MI300X and twelve A100 TP1 at
    13.5 req/s (seed 15006). The DES meets every SLO at both (E2E P50 1.199 and 1.236).

    With a busy machine at every point of one decode or more (min(N, 1)) the evaluator read the
    first at E2E P50 1.254, past its limit of 1.25; with the chance a Poisson count of mean N
    leaves the machine busy (1 − e^−N), 1.240, and the second at 1.252 (its smallest token count
    at two prompt machines 13 against the DES's 10). A machine holding one decode falls idle when
    it ends and takes the next one, so fewer decodes find a busy machine than random placement
    would leave (`analytic._joined_busy_chance`: 0.31 and 0.45, against 0.69 and 0.73): 1.218
    and 1.238."""
    case = _held_out_case(
        "custom",
        model,
        "reference/splitwise-sim/traces/rr_code_70_2min.csv",
        rate_rps,
        seed,
        240.0,
        prompt_node=prompt,
        token_node="dgx-a100",
        prompt_tp=2,
        token_tp=token,
    )
    got, des = _evaluator_and_des(case, *machines)
    assert des.meets_slo
    assert got.meets_slo[0]
    assert got.slowdown["e2e_p50"][0] == pytest.approx(des.slowdown["e2e_p50"], rel=rel)


def test_a_decode_on_a_nearly_idle_token_pool_never_waits_to_join() -> None:
    """Llama-3.1-8B on eight H100 TP2 fp8 prompt machines and 300 A100 TP1 token machines, the
    coding preset at 79.6 req/s over 240 s (a fresh held-out draw, seed 15012): 0.3 decodes per
    token machine. The scheduler sends each decode to the machine with the least committed
    memory, an idle one while any is left, so in the DES no decode joins a machine running
    another and each runs as if alone (TBT P50 1.125). With the join paid at the chance a
    Poisson count leaves a machine busy (1 − e^−N, a quarter here) the evaluator read 1.140, and
    E2E P50 1.192 against the DES's 1.176 (`analytic._joined_busy_chance`)."""
    case = _held_out_case(
        "custom",
        "llama3.1-8b",
        "coding",
        79.603,
        1346589003,
        240.0,
        prompt_node="dgx-h100",
        token_node="dgx-a100",
        prompt_tp=2,
        token_tp=1,
        prompt_precision="fp8",
    )
    got, des = _evaluator_and_des(case, 8, 300)
    for q in ("tbt_p50", "e2e_p50"):
        assert got.slowdown[q][0] == pytest.approx(des.slowdown[q], rel=0.006), q


def test_a_lent_prompt_machine_with_far_more_memory_decodes_at_its_own_batch() -> None:
    """A fresh held-out draw (seed 15034, case 7): MI300X TP2 prompt machines and H200 TP1 token
    machines, which barely hold Llama-2-70B's weights (6.7 decodes each at their memory cap), on
    the Azure conversation trace at 40 req/s, over 60 s. With one token machine the DES lends
    prompt machines to the token pool, each holding hundreds of decodes, and its TBT P90 is 7.7.
    The evaluator timed the lent machines' decodes at the token machine's full-batch iteration
    and read 1.22, meeting every SLO there and at every token count of the row, where the DES
    needs 64 over 240 s. At the batch the excess makes on each lent machine it reads 5.2
    (`_SplitContext._lent_slowdown`). At 72 token machines no machine is lent, and both meet."""
    case = _held_out_case(
        "custom",
        "llama2-70b",
        "conv",
        39.98,
        1739891182,
        prompt_node="mi300x-8x",
        token_node="hgx-h200",
        prompt_tp=2,
        token_tp=1,
    )
    got, des = _evaluator_and_des(case, 18, 1)
    assert not des.meets_slo
    assert not got.meets_slo[0]
    assert got.slowdown["tbt_p90"][0] == pytest.approx(des.slowdown["tbt_p90"], rel=0.4)
    got, des = _evaluator_and_des(case, 18, 72)
    assert des.meets_slo
    assert got.meets_slo[0]
