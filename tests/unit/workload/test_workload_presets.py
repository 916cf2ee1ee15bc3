"""Embedded presets: shipped files are self-describing and sampling reproduces the source trace."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scipy.stats import spearmanr

from splitplan._paths import data_dir
from splitplan.errors import InputError
from splitplan.workload import get_preset, read_trace
from splitplan.workload.presets import PRESETS, build_preset_toml

KEYS = [(col, q) for col in ("prompt", "output") for q in (50, 90, 99)]


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_preset_file_has_attribution_and_regeneration(name: str) -> None:
    text = (data_dir() / "presets" / f"{name}.toml").read_text()
    assert "CC-BY 4.0" in text
    assert "python -m splitplan.workload.presets" in text
    pre = get_preset(name)
    assert 200 <= len(pre.probabilities) <= 500


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_sampling_matches_recorded_trace_quantiles(name: str) -> None:
    """Works on a fresh machine: the preset records its source's quantiles."""
    pre = get_preset(name)
    for n in (8400, 200_000):
        p, o = pre.sample_sizes(n, np.random.default_rng(11))
        assert p.dtype == np.int64
        assert o.dtype == np.int64
        assert p.min() >= 1
        assert o.min() >= 1
        cols = {"prompt": p, "output": o}
        for col, q in KEYS:
            want = pre.trace_quantiles[f"{col}_p{q}"]
            got = np.percentile(cols[col], q)
            assert abs(got / want - 1) <= 0.02, (name, n, col, q, got, want)


@pytest.mark.parametrize(
    ("name", "fname"),
    [("coding", "AzureLLMInferenceTrace_code.csv"), ("conversation", "AzureLLMInferenceTrace_conv.csv")],
)
def test_sampling_matches_azure_trace(azure_dir: Path, name: str, fname: str) -> None:
    wl = read_trace(azure_dir / fname)
    p, o = get_preset(name).sample_sizes(100_000, np.random.default_rng(2))
    for got, want in ((p, wl.prompt_tokens), (o, wl.output_tokens)):
        g, w = np.percentile(got, [50, 90, 99]), np.percentile(want, [50, 90, 99])
        np.testing.assert_array_less(np.abs(g / w - 1), 0.02)
    rs_trace = spearmanr(wl.prompt_tokens, wl.output_tokens)[0]
    assert abs(spearmanr(p, o)[0] - rs_trace) < 0.02


def test_correlation_is_reproduced_when_strong() -> None:
    rng = np.random.default_rng(0)
    z = rng.standard_normal((2, 20_000))
    prompt = np.exp(7 + z[0]).astype(np.int64) + 1
    output = np.exp(4 + 0.8 * z[0] + 0.6 * z[1]).astype(np.int64) + 1
    import tomllib

    from splitplan.workload.presets import Preset

    doc = tomllib.loads(build_preset_toml("synthetic", prompt, output, "synthetic"))
    pre = Preset(
        name="synthetic",
        probabilities=np.array(doc["quantiles"]["probability"]),
        prompt_quantiles=np.array(doc["quantiles"]["prompt_tokens"]),
        output_quantiles=np.array(doc["quantiles"]["output_tokens"]),
        copula_rho=doc["copula_rho"],
        source_rows=doc["source_rows"],
        source="x",
        attribution="x",
    )
    p, o = pre.sample_sizes(50_000, np.random.default_rng(1))
    assert abs(spearmanr(p, o)[0] - spearmanr(prompt, output)[0]) < 0.02


def test_sampling_is_deterministic() -> None:
    pre = get_preset("coding")
    a = pre.sample_sizes(1000, np.random.default_rng(4))
    b = pre.sample_sizes(1000, np.random.default_rng(4))
    assert a[0].tobytes() == b[0].tobytes()
    assert a[1].tobytes() == b[1].tobytes()
    assert pre.sample_sizes(0, np.random.default_rng(0))[0].shape == (0,)


def test_unknown_preset_and_bad_count() -> None:
    with pytest.raises(InputError, match="unknown workload preset"):
        get_preset("chat")
    with pytest.raises(InputError):
        get_preset("coding").sample_sizes(-1, np.random.default_rng(0))


def test_regeneration_reproduces_shipped_files(azure_dir: Path, tmp_path: Path) -> None:
    from splitplan.workload.presets import main

    assert main([str(azure_dir), str(tmp_path)]) == 0
    for name in PRESETS:
        shipped = (data_dir() / "presets" / f"{name}.toml").read_text()
        assert (tmp_path / f"{name}.toml").read_text() == shipped
