"""make_workload / sample_requests / the reference recipe."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from splitplan.errors import InputError
from splitplan.workload import (
    Workload,
    make_workload,
    read_trace,
    sample_requests,
    splitwise_sim_trace,
    write_trace,
)


def test_acceptance_coding_70rps_120s(azure_dir: Path) -> None:
    wl = make_workload("coding", rate_rps=70, duration_s=120, seed=1)
    assert wl.name == "coding@70rps/120s"
    assert abs(wl.n / 8400 - 1) <= 0.03
    az = read_trace(azure_dir / "AzureLLMInferenceTrace_code.csv")
    for got, want in ((wl.prompt_tokens, az.prompt_tokens), (wl.output_tokens, az.output_tokens)):
        g, w = np.percentile(got, [50, 90, 99]), np.percentile(want, [50, 90, 99])
        np.testing.assert_array_less(np.abs(g / w - 1), 0.03)


def test_bit_identical_across_runs() -> None:
    a = make_workload("conversation", rate_rps=20, duration_s=30, arrival="gamma", cv=3.0, seed=9)
    b = make_workload("conversation", rate_rps=20, duration_s=30, arrival="gamma", cv=3.0, seed=9)
    for x, y in (
        (a.arrival_s, b.arrival_s),
        (a.prompt_tokens, b.prompt_tokens),
        (a.output_tokens, b.output_tokens),
    ):
        assert x.tobytes() == y.tobytes()
    assert a.name == "conversation@20rps/30s+gamma(cv=3)"
    c = make_workload("conversation", rate_rps=20, duration_s=30, arrival="gamma", cv=3.0, seed=10)
    assert a.arrival_s.tobytes() != c.arrival_s.tobytes()


def test_request_count() -> None:
    wl = make_workload("coding", rate_rps=5, requests=250, seed=0)
    assert wl.n == 250
    assert wl.name == "coding@5rps/250req"


def _small_trace(tmp_path: Path) -> Path:
    wl = Workload(
        arrival_s=np.arange(100) * 0.5,
        prompt_tokens=np.arange(1, 101),
        output_tokens=np.arange(1, 101) * 2,
        name="s",
    )
    p = tmp_path / "small.csv"
    write_trace(wl, p)
    return p


def test_trace_replay_and_rescale(tmp_path: Path) -> None:
    p = _small_trace(tmp_path)
    wl = make_workload(str(p))
    assert wl.n == 100
    assert wl.name == "small"
    assert wl.meta["arrival"] == "replay"
    cut = make_workload(str(p), duration_s=10.0)
    assert cut.n == 20
    np.testing.assert_array_equal(cut.prompt_tokens, np.arange(1, 21))
    fast = make_workload(str(p), arrival="replay", rate_rps=20.0)
    np.testing.assert_allclose(np.diff(fast.arrival_s), 0.05)
    assert fast.name == "small@20rps"


def test_trace_resampled_under_new_arrivals_keeps_pairs(tmp_path: Path) -> None:
    p = _small_trace(tmp_path)
    wl = make_workload(str(p), rate_rps=50, duration_s=20, seed=3)
    assert abs(wl.n / 1000 - 1) < 0.15
    np.testing.assert_array_equal(wl.output_tokens, 2 * wl.prompt_tokens)  # rows drawn as pairs
    assert set(np.unique(wl.prompt_tokens)) <= set(range(1, 101))
    g = make_workload(str(p), arrival="gamma", cv=2.0, duration_s=40, seed=3)  # the trace's own rate
    assert abs(g.n / 80 - 1) < 0.5


def test_sample_requests(tmp_path: Path) -> None:
    p, o = sample_requests("coding", 500, np.random.default_rng(0))
    assert p.shape == o.shape == (500,)
    tp, to = sample_requests(str(_small_trace(tmp_path)), 300, np.random.default_rng(0))
    np.testing.assert_array_equal(to, 2 * tp)


@pytest.mark.parametrize(
    ("source", "kwargs", "fragment"),
    [
        ("coding", {"rate_rps": 0, "duration_s": 10}, "rate_rps"),
        ("coding", {"rate_rps": 10, "duration_s": -1}, "duration_s"),
        ("coding", {"rate_rps": 10}, "duration"),
        ("coding", {"duration_s": 10}, "rate"),
        ("coding", {"rate_rps": 10, "duration_s": 10, "arrival": "uniform"}, "arrival"),
        ("coding", {"rate_rps": 10, "duration_s": 10, "arrival": "gamma", "cv": 0}, "cv"),
        ("coding", {"rate_rps": 10, "duration_s": 10, "cv": 2.0}, "cv"),
        ("coding", {"rate_rps": 10, "duration_s": 10, "arrival": "replay"}, "replay"),
        ("coding", {"rate_rps": 10, "duration_s": 10, "seed": -1}, "seed"),
        ("coding", {"rate_rps": 10, "requests": 0}, "requests"),
        ("coding", {"rate_rps": 0.001, "duration_s": 0.001}, "no request"),
        ("nonexistent-preset", {"rate_rps": 10, "duration_s": 10}, "unknown workload"),
    ],
)
def test_make_workload_validation(source: str, kwargs: dict, fragment: str) -> None:
    with pytest.raises(InputError, match=fragment):
        make_workload(source, **kwargs)


def test_splitwise_sim_recipe_reproduces_reference(reference_dir: Path, azure_dir: Path) -> None:
    ref = read_trace(reference_dir / "traces" / "rr_code_70_2min.csv")
    wl = splitwise_sim_trace(70, 120, azure_dir / "AzureLLMInferenceTrace_code.csv")
    assert wl.n == ref.n == 8502
    assert wl.arrival_s.tobytes() == ref.arrival_s.tobytes()
    np.testing.assert_array_equal(wl.prompt_tokens, ref.prompt_tokens)
    np.testing.assert_array_equal(wl.output_tokens, ref.output_tokens)
