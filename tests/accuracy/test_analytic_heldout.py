"""The shipped analytic calibration scored on DES runs it was not fitted to.

data/sim/des_validation.npz holds DES runs of cases drawn at random from a seed disjoint from the
training set's, at rates in quarter-octave bands the training set never uses, half of them on
models the training set never sees (splitplan.sim.calibrate; regenerate with
`python -m splitplan.sim.calibrate generate`, refit with `python -m splitplan.sim.calibrate fit
--write`). The tests check that the stored runs still describe today's DES and performance model
(a slice is simulated live), that the calibration file names the training set it was fitted to,
and score the evaluator on the whole validation set.

The targets of the issue that asked for this set are all-nine verdict agreement ≥ 97 % of the
points and the frontier within one machine on ≥ 95 % of the rows. The shipped calibration does
not reach them (held out: 93.9 % of the frontier-dense points, 97.3 % of the uniform slice, 94.1 %
of the rows; docs/background.md says where it misses), so the tests hold the measured figures as
floors, a little below them. The floors are regression guards, not targets: a refit or a change of
the queue model that loses held-out accuracy fails here, and the floors are raised as the model
improves.
"""

from __future__ import annotations

import tomllib

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

TARGET_AGREEMENT, TARGET_FRONTIER = 0.97, 0.95  # the goal (not reached yet; see the docstring)
# regression guards just under the measured held-out figures (not the targets above)
MIN_HELD_OUT_AGREEMENT = 0.934  # measured 0.939 (frontier-dense points)
MIN_HELD_OUT_UNIFORM_AGREEMENT = 0.968  # measured 0.973 (uniform slice)
MIN_HELD_OUT_FRONTIER = 0.936  # measured 0.941
LIVE_SLICE = 12  # validation points re-simulated live to detect a stale set


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


def test_the_score_detects_a_bad_calibration(validation, held_out_score) -> None:
    """The scoring is not vacuous: a calibration far off scores clearly worse."""
    from dataclasses import replace

    off = replace(CALIBRATION, mixed_prompt_capacity=0.05, join_fraction=4.0, baseline_jsq_spread=0.0)
    worse = cal.score(validation, off, probe=True)
    assert worse.agreement < held_out_score.agreement - 0.01


def test_a_token_pool_near_saturation_fills_on_its_own_clock() -> None:
    """A validation case whose token pool runs near saturation (iteration time nearly
    proportional to the batch): over its 60 s trace the DES's batch is still growing at the end,
    and the evaluator's TBT P50 follows it. With the batch filling on the steady iteration time
    (`_ResidentRamp` in the token pool) it was 1.13× the DES's here (1.50 against 1.32)."""
    from splitplan.sim.analytic import evaluate_grid
    from splitplan.sim.des import simulate_des

    case = cal.Case(
        design="custom",
        prompt_node="dgx-a100",
        token_node="dgx-h100",
        prompt_tp=8,
        token_tp=8,
        prompt_precision="fp16",
        token_precision="fp8",
        token_power_cap=1.0,
        model="qwen2.5-72b",
        workload="trace:data/azure-llm-2023/AzureLLMInferenceTrace_conv.csv",
        rate_rps=26.924,
        duration_s=60.0,
        seed=697973175,
    )
    design, sc = case.build()
    got = evaluate_grid(design, [7], [3], sc)
    des = simulate_des(cal._config(design, 7, 3), sc)
    assert got.utilization_token[0] > 0.7
    assert got.slowdown["tbt_p50"][0] == pytest.approx(des.slowdown["tbt_p50"], rel=0.05)
