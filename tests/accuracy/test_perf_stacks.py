"""The physical model's stacks against measurements they were and were not fitted to.

- `kernels` and `tensorrt-llm`, leave-one-group-out on ../shared/reference/gpu-measurements/
  iterations.csv (group = model, GPU, TP, precision): pooled MAPE ≤ 15 % for prompt rows and for
  token / static-batch rows, no held-out group above 30 %;
- `splitwise-sim`: the shipped stack on the SplitwiseSim profile's TP8 rows (in-sample) ≤ 5 % token
  and ≤ 8 % prompt per group; its TP2/TP4 rows were held out of the fit.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from splitplan.perf.check import check_measurements
from splitplan.perf.measurements import read_measurements
from splitplan.perf.stackfit import FitOptions, cross_validate

pytestmark = pytest.mark.accuracy


@pytest.fixture(scope="module")
def iterations_csv() -> Path:
    import os

    shared = Path(os.environ.get("SPLITPLAN_SHARED", Path(__file__).resolve().parents[2].parent / "shared"))
    f = shared / "reference" / "gpu-measurements" / "iterations.csv"
    if not f.is_file():
        pytest.skip(f"GPU measurements not found at {f}")
    return f


# The fit options of each shipped stack, as in the regenerating command of its file.
STACK_OPTIONS = {
    "kernels": FitOptions(source="vidur", host_overhead=False),
    "tensorrt-llm": FitOptions(source="trtllm"),
}


@pytest.mark.parametrize("stack", sorted(STACK_OPTIONS))
def test_leave_one_group_out(iterations_csv, stack: str) -> None:
    opts = STACK_OPTIONS[stack]
    rows = read_measurements(str(iterations_csv))
    sel = rows.subset(opts.select(rows))
    assert len(sel.groups()) >= 4
    errors, pooled = cross_validate(sel, opts.free(), opts.start())
    assert pooled.get("prompt", 0.0) <= 15.0, pooled
    for phase in ("token", "static_batch"):
        assert pooled.get(phase, 0.0) <= 15.0, pooled
    worst = max(errors, key=lambda e: e.mape)
    assert worst.mape <= 30.0, worst


@pytest.mark.parametrize("stack", sorted(STACK_OPTIONS))
def test_shipped_stack_in_sample(iterations_csv, stack: str) -> None:
    res = check_measurements(iterations_csv, stack, source=STACK_OPTIONS[stack].source)
    assert res.groups
    assert all(g.mape <= 30.0 for g in res.groups), res.groups
    assert res.prompt_mape <= 15.0


def test_splitwise_sim_stack_tp8_in_sample(profile_csv) -> None:
    res = check_measurements(profile_csv, "splitwise-sim", tensor_parallel=8)
    limits = {"prompt": 8.0, "token": 5.0}
    assert len(res.groups) == 12
    bad = [g for g in res.groups if g.mape > limits[g.phase]]
    assert not bad, bad


def test_splitwise_sim_stack_held_out_tp2_tp4(profile_csv) -> None:
    """TP2/TP4 rows were never fitted: prefill and decode within 20 % per group (issue's target)."""
    for tp in (2, 4):
        res = check_measurements(profile_csv, "splitwise-sim", tensor_parallel=tp)
        assert res.rows_dropped == (30 if tp == 2 else 0)
        for g in res.groups:
            assert g.mape <= 20.0, g


@pytest.mark.parametrize("stack", ["kernels", "tensorrt-llm", "splitwise-sim"])
def test_shipped_stack_is_reproducible_by_its_command(iterations_csv, profile_csv, stack: str) -> None:
    """Refitting with the options of the stack file's own command gives its parameters."""
    import shlex

    from splitplan.perf.physical import StackParams
    from splitplan.perf.stackfit import _gpu_of, _prepare, fit_stack, predict_all
    from splitplan.perf.stacks import load_stack

    shipped = load_stack(stack)
    argv = shlex.split(str(shipped.provenance["command"]))

    def opt(name: str) -> str | None:
        return argv[argv.index(name) + 1] if name in argv else None

    tp = opt("--tensor-parallel")
    opts = FitOptions(
        source=opt("--source"),
        tensor_parallel=int(tp) if tp else None,
        host_overhead="--no-host-overhead" not in argv,
        knee="--knee" in argv,
        sequence_overhead="--sequence-overhead" in argv,
        refine="--refine" in argv,
    )
    table = profile_csv if shipped.provenance["schema"] == "profile" else iterations_csv
    assert read_measurements(str(table)).sha256 == shipped.provenance["sha256"]
    fresh = fit_stack(str(table), stack, opts)

    # The refit must give the shipped model: the same iteration time, within 0.1 %, on every row
    # it was fitted to. Not the same parameters to 0.1 %: a parameter the rows barely determine
    # lands where the platform's floating point takes the optimizer (the TP8-only splitwise-sim
    # stack's all-reduce latency scale: 4.386 against 4.410 with the same predictions; a
    # once-per-iteration overhead the fit drives to about zero: 1.4 against 3.3 µs).
    rows = read_measurements(str(table))
    fitted = rows.subset(opts.select(rows))

    def same(got: StackParams, want: StackParams, on) -> bool:
        assert sorted(got.to_dict()) == sorted(want.to_dict())
        prep = _prepare(on)
        pairs = zip(predict_all(got, prep), predict_all(want, prep), strict=True)
        return all(np.allclose(a, b, rtol=1e-3, atol=0.0) for a, b in pairs)

    assert same(fresh.params, shipped.params, fitted)
    assert sorted(fresh.refine) == sorted(shipped.refine)
    gpus = np.array([_gpu_of(h) for h in fitted.hardware])
    for (gpu, model), p in shipped.refine.items():
        own = fitted.subset((gpus == gpu) & (fitted.model == model))
        assert same(fresh.refine[gpu, model], p, own), (gpu, model, fresh.refine[gpu, model], p)
