"""The profile model: the reference simulator's interpolation semantics (pooled) and the by-count
prompt curves, on small synthetic tables."""

from __future__ import annotations

import numpy as np
import pytest

from splitplan.catalog import Machine, get_machine_type, get_model
from splitplan.errors import InputError
from splitplan.perf import ProfilePerfModel, get_perf_model, prompt_cap_factor, read_profile
from splitplan.perf.profile import interp_extrap, median_curve

HEADER = "model,hardware,prompt_size,batch_size,token_size,prompt_time,token_time,tensor_parallel\n"
LLAMA = get_model("llama2-70b")
A100 = Machine(type=get_machine_type("dgx-a100"))
H100 = Machine(type=get_machine_type("dgx-h100"))


def write(tmp_path, rows: list[str], name: str = "p.csv"):
    f = tmp_path / name
    f.write_text(HEADER + "".join(r + "\n" for r in rows))
    return f


@pytest.fixture
def table(tmp_path):
    # batch tokens 100 (three rows: median 30 ms), 200 (prompt 50), 400 (prompt 90).
    rows = [
        "llama2-70b,a100-80gb,100,1,128,10,20,8",
        "llama2-70b,a100-80gb,100,1,128,30,22,8",
        "llama2-70b,a100-80gb,50,2,128,1000,24,8",
        "llama2-70b,a100-80gb,200,1,128,50,30,8",
        "llama2-70b,a100-80gb,100,4,128,90,50,8",
        "llama2-70b,h100-80gb,100,1,128,10,10,8",
        "llama2-70b,h100-80gb,200,1,128,20,12,8",
        "llama2-70b,h100-80gb-pcap,100,1,128,13,10,8",
        "llama2-70b,h100-80gb-pcap,200,1,128,26,12,8",
    ]
    return read_profile(write(tmp_path, rows))


def test_median_per_batch_tokens_and_linear_interpolation(table) -> None:
    pm = ProfilePerfModel(table, LLAMA, A100, "pooled")
    assert pm.kind == "profile"
    assert pm.calibrated
    assert pm.prompt_time_s(100) == pytest.approx(0.030)  # median of 10, 30, 1000
    assert pm.prompt_time_s(150) == pytest.approx(0.040)
    assert pm.prompt_time_s(300) == pytest.approx(0.070)
    assert pm.decode_alone_time_s(100) == pytest.approx(0.022)


def test_linear_extrapolation_beyond_both_ends(table) -> None:
    pm = ProfilePerfModel(table, LLAMA, A100, "pooled")
    # Below: slope of the first segment (30 → 50 ms over 100 tokens).
    assert pm.prompt_time_s(50) == pytest.approx(0.020)
    # Above: slope of the last segment (50 → 90 ms over 200 tokens).
    assert pm.prompt_time_s(600) == pytest.approx(0.130)
    # The token curve is keyed by batch tokens too: small decode batches extrapolate below 100.
    assert pm.token_time_s(1, 123.0) == pytest.approx(0.022 - 99 * (0.030 - 0.022) / 100)
    out = pm.prompt_time_s(np.array([50.0, 100.0, 600.0]))
    np.testing.assert_allclose(out, [0.020, 0.030, 0.130])


def test_token_ignores_context_and_mixed_uses_prompt_curve(table) -> None:
    pm = ProfilePerfModel(table, LLAMA, A100, "pooled")
    t = pm.token_time_s(np.array([100.0, 200.0]), np.array([[0.0], [1e6]]))
    assert t.shape == (2, 2)
    np.testing.assert_allclose(t[0], t[1])
    assert pm.mixed_time_s(150, 5000) == pytest.approx(0.040 * 1.1)


@pytest.fixture
def by_count_table(tmp_path):
    # lone prompts: 10 ms per 100 tokens; batches: 100×2 → 30 ms, 100×4 → 50 ms
    rows = [
        "llama2-70b,a100-80gb,100,1,128,10,20,8",
        "llama2-70b,a100-80gb,200,1,128,20,30,8",
        "llama2-70b,a100-80gb,400,1,128,40,50,8",
        "llama2-70b,a100-80gb,100,2,128,30,30,8",
        "llama2-70b,a100-80gb,100,4,128,50,50,8",
    ]
    return read_profile(write(tmp_path, rows, "by_count.csv"))


def test_by_count_times_a_lone_prompt_and_a_batch_on_their_own_rows(by_count_table) -> None:
    pm = ProfilePerfModel(by_count_table, LLAMA, A100)
    assert pm.prompt_curves == "by-count"
    assert pm.prompt_time_s(400) == pytest.approx(0.040)
    assert pm.prompt_time_s(400, 4) == pytest.approx(0.050)
    assert pm.prompt_time_s(300, 3) == pytest.approx(0.040)
    np.testing.assert_allclose(pm.prompt_time_s(np.array([200.0, 400.0]), np.array([1, 4])), [0.020, 0.050])
    # below the first batched point: the lone-prompt curve scaled by 30/20 to meet it at 200 tokens
    assert pm.prompt_time_s(150, 2) == pytest.approx(0.0225)
    pooled = ProfilePerfModel(by_count_table, LLAMA, A100, "pooled")
    assert pooled.prompt_time_s(400) == pytest.approx(0.045)  # median of 40 and 50
    assert pooled.prompt_time_s(400, 4) == pytest.approx(0.045)
    # the table measures no mixed iteration: both keep the reference's pooled curve × 1.1
    assert pm.mixed_time_s(400, 1e5) == pytest.approx(0.0495)
    assert pooled.mixed_time_s(400, 0.0) == pytest.approx(0.0495)


def test_by_count_falls_back_to_pooled_without_two_points_per_curve(table, tmp_path) -> None:
    h100_by_count = ProfilePerfModel(table, LLAMA, H100)  # no batched rows
    h100_pooled = ProfilePerfModel(table, LLAMA, H100, "pooled")
    x = np.array([50.0, 150.0, 300.0])
    np.testing.assert_allclose(h100_by_count.prompt_time_s(x, 3), h100_pooled.prompt_time_s(x))
    one_batched = read_profile(
        write(
            tmp_path,
            [
                "llama2-70b,a100-80gb,100,1,128,10,20,8",
                "llama2-70b,a100-80gb,400,1,128,40,50,8",
                "llama2-70b,a100-80gb,100,2,128,30,30,8",
            ],
            "one_batched.csv",
        )
    )
    by_count = ProfilePerfModel(one_batched, LLAMA, A100)
    pooled = ProfilePerfModel(one_batched, LLAMA, A100, "pooled")
    np.testing.assert_allclose(by_count.prompt_time_s(x, 2), pooled.prompt_time_s(x))
    with pytest.raises(InputError, match="prompt_curves"):
        ProfilePerfModel(table, LLAMA, A100, "per-row")


def test_capped_rows_or_cap_curve(table) -> None:
    capped = ProfilePerfModel(table, LLAMA, Machine(type=H100.type, power_cap=0.7))
    assert capped.prompt_time_s(100) == pytest.approx(0.013)  # the -pcap rows
    other = ProfilePerfModel(table, LLAMA, Machine(type=H100.type, power_cap=0.6))
    assert other.prompt_time_s(100) == pytest.approx(0.010 * prompt_cap_factor(0.6))
    assert other.token_time_s(100, 0) == pytest.approx(0.010)


def test_missing_group_is_input_error(table) -> None:
    with pytest.raises(InputError, match="no rows"):
        ProfilePerfModel(table, get_model("bloom-176b"), A100)


def test_helpers() -> None:
    x, y = median_curve([3, 1, 3, 3, 1], [5.0, 1.0, 7.0, 6.0, 3.0])
    np.testing.assert_allclose(x, [1, 3])
    np.testing.assert_allclose(y, [2.0, 6.0])
    xp, fp = np.array([1.0, 2.0]), np.array([10.0, 20.0])
    np.testing.assert_allclose(interp_extrap([0.0, 1.5, 4.0], xp, fp), [0.0, 15.0, 40.0])
    np.testing.assert_allclose(interp_extrap([7.0], np.array([1.0]), np.array([3.0])), [3.0])


@pytest.mark.parametrize(
    ("body", "match"),
    [
        ("", "empty"),
        ("model,hardware\nllama2-70b,a100-80gb\n", "missing column"),
        (HEADER, "no data rows"),
        (HEADER + "llama2-70b,a100-80gb,abc,1,128,10,20,8\n", ":2:"),
        (HEADER + "llama2-70b,a100-80gb,100,1,128,-3,20,8\n", "positive"),
        (HEADER + "llama2-70b,a100-80gb,100,1\n", "expected 8 fields"),
    ],
)
def test_read_profile_rejects_bad_files(tmp_path, body, match) -> None:
    f = tmp_path / f"bad{abs(hash(body))}.csv"
    f.write_text(body)
    with pytest.raises(InputError, match=match):
        read_profile(f)


def test_get_perf_model_by_path(tmp_path) -> None:
    f = write(tmp_path, ["llama2-70b,a100-80gb,100,1,128,10,20,8", "llama2-70b,a100-80gb,200,1,128,20,30,8"])
    pm = get_perf_model(f, LLAMA, A100)
    assert isinstance(pm, ProfilePerfModel)
    with pytest.raises(InputError):
        get_perf_model(tmp_path / "nope.csv", LLAMA, A100)
