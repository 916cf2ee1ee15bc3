"""check_profile and fit_analytic on synthetic profiles generated from a known analytic model."""

from __future__ import annotations

import tomllib

import numpy as np
import pytest

from splitplan.catalog import get_model
from splitplan.errors import CatalogError, InputError
from splitplan.perf.analytic import AnalyticCoefficients, AnalyticPerfModel, load_coefficients
from splitplan.perf.check import check_profile, machine_for_hardware
from splitplan.perf.fit import fit_analytic, save_fit

HEADER = "model,hardware,prompt_size,batch_size,token_size,prompt_time,token_time,tensor_parallel\n"
TRUE = AnalyticCoefficients(
    bw_eff=0.7,
    prompt_flops_eff=0.5,
    token_flops_eff=0.2,
    prompt_overhead_s=0.03,
    token_overhead_s=0.025,
    token_seq_s=2e-4,
    knee_tokens=3000.0,
    knee_gain=0.8,
    knee_power=3.0,
)
GRID = (
    [(p, 1, 128) for p in (128, 256, 512, 1024, 2048, 4096, 8192)]
    + [(512, b, 128) for b in (2, 4, 8, 16, 32, 64)]
    + [(512, 1, t) for t in (256, 1024, 4096)]
)


def synthetic_csv(tmp_path, noise: float = 0.0, name: str = "synthetic.csv"):
    rng = np.random.default_rng(1)
    lines = [HEADER]
    for model in ("llama2-70b", "bloom-176b"):
        for hw in ("a100-80gb", "h100-80gb", "h100-80gb-pcap"):
            pm = AnalyticPerfModel(get_model(model), machine_for_hardware(hw, 8), TRUE)
            for p, b, t in GRID:
                for _ in range(3):
                    pt = float(pm.prompt_time_s(p * b)) * 1e3 * (1 + noise * rng.standard_normal())
                    tt = float(pm.token_time_s(b, b * (p + t / 2))) * 1e3
                    tt *= 1 + noise * rng.standard_normal()
                    lines.append(f"{model},{hw},{p},{b},{t},{pt},{tt},8\n")
    f = tmp_path / name
    f.write_text("".join(lines))
    return f


def test_hardware_mapping() -> None:
    m = machine_for_hardware("h100-80gb-pcap", 8)
    assert m.type.name == "dgx-h100"
    assert m.power_cap == 0.7
    assert machine_for_hardware("a100-80gb", 8).power_cap == 1.0
    m4 = machine_for_hardware("a100-80gb", 4)
    assert m4.type.gpus == 8  # a TP4 instance on the catalog's 8-GPU node
    assert m4.tensor_parallel == 4
    assert m4.memory_bytes == 4 * m4.type.gpu.memory_bytes
    with pytest.raises(CatalogError, match="z100"):
        machine_for_hardware("z100-80gb", 8)


def test_check_exact_model_scores_zero(tmp_path) -> None:
    f = synthetic_csv(tmp_path)
    c = tmp_path / "true.toml"
    entry = "".join(f"{k} = {getattr(TRUE, k)!r}\n" for k in TRUE.numeric_fields())
    c.write_text("[gpu.a100-80gb]\n" + entry + "[gpu.h100-80gb]\n" + entry)
    res = check_profile(f, "analytic", coefficients_path=c)
    assert len(res.groups) == 12
    assert {g.phase for g in res.groups} == {"prompt", "token"}
    assert all(g.n == len(GRID) * 3 for g in res.groups)
    assert res.prompt_mape < 1e-9
    assert res.token_mape < 1e-9
    doc = res.to_json()
    assert set(doc["overall"]) == {"prompt_mape", "token_mape"}
    assert set(doc["groups"][0]) == {
        "model",
        "hardware",
        "tensor_parallel",
        "phase",
        "mape",
        "n",
        "precision",
        "source",
    }


def test_check_profile_mode_is_seeded_split(tmp_path) -> None:
    f = synthetic_csv(tmp_path, noise=0.02)
    a = check_profile(f, "profile", split_seed=3)
    b = check_profile(f, "profile", split_seed=3)
    c = check_profile(f, "profile", split_seed=4)
    assert a == b
    assert a != c
    total = sum(g.n for g in a.groups if g.phase == "prompt")
    assert total == round(0.2 * len(GRID) * 3 * 6)


def test_check_rejects_bad_options(tmp_path) -> None:
    f = synthetic_csv(tmp_path)
    with pytest.raises(InputError, match="performance model"):
        check_profile(f, "magic")
    with pytest.raises(InputError, match="tensor parallelism"):
        check_profile(f, "analytic", tensor_parallel=3)


def test_fit_recovers_a_known_model(tmp_path) -> None:
    f = synthetic_csv(tmp_path, noise=0.01, name="noisy.csv")
    res = fit_analytic(f, per_model=False)
    assert sorted(res.coefficients) == ["a100-80gb", "h100-80gb"]
    assert not res.models
    out = save_fit(res, tmp_path / "fit.toml", date="2000-01-01")
    text = out.read_text()
    assert "MIT" in text
    assert res.profile_sha256 in text
    assert "2000-01-01" in text
    assert "splitplan perf fit --profile" in text
    tomllib.loads(text)
    cs = load_coefficients(out)
    assert cs.gpus["a100-80gb"].calibrated
    assert not cs.default.calibrated
    check = check_profile(f, "analytic", coefficients_path=out)
    assert check.prompt_mape < 2.0
    assert check.token_mape < 2.0


def test_fit_per_model_writes_refinements(tmp_path) -> None:
    f = synthetic_csv(tmp_path, noise=0.01, name="noisy2.csv")
    res = fit_analytic(f, per_model=True)
    assert ("a100-80gb", "llama2-70b") in res.models
    out = save_fit(res, tmp_path / "fit2.toml")
    cs = load_coefficients(out)
    assert ("h100-80gb", "bloom-176b") in cs.models
