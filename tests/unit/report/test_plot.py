"""Heatmap figures: format by extension, --dpi, one log scale per metric row holding every limit,
limit ticks that never overlap, and overloaded cells named in the legend."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from splitplan.errors import InputError
from splitplan.report.plot import _limit_ticks, check_dpi, plot_format, plot_heatmap, row_scale
from splitplan.slo import DEFAULT_SLOWDOWN_LIMITS, SLO_KEYS

PV, TV = np.arange(1, 6), np.arange(1, 5)


def _slowdown(overloaded: bool = True, pv: np.ndarray = PV, tv: np.ndarray = TV) -> dict[str, np.ndarray]:
    p, t = np.meshgrid(pv, tv, indexing="ij")
    out = {}
    for i, k in enumerate(SLO_KEYS):
        v = (12.0 + i) / (p * t)
        if overloaded:
            v[0, 0] = np.inf  # unstable point
        out[k] = v
    return out


def _plot(path, pv: np.ndarray = PV, tv: np.ndarray = TV, **kw):
    sd = _slowdown(pv=pv, tv=tv)
    meets = np.all([sd[k] <= DEFAULT_SLOWDOWN_LIMITS[k] for k in SLO_KEYS], axis=0)
    return plot_heatmap(
        path,
        prompt_values=pv,
        token_values=tv,
        slowdown=sd,
        meets_slo=meets,
        limits=DEFAULT_SLOWDOWN_LIMITS,
        cost_optimal=(3, 4),
        power_optimal=(4, 3),
        title="test",
        **kw,
    )


def _png_size(path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", head[16:24])


def test_format_follows_the_extension(tmp_path):
    assert _plot(tmp_path / "a.pdf").read_bytes()[:5] == b"%PDF-"
    svg = _plot(tmp_path / "a.svg").read_text()
    assert "<svg" in svg
    assert "overloaded" in svg  # named in the legend
    _png_size(_plot(tmp_path / "a.PNG"))
    with pytest.raises(InputError, match=r"\.png, \.svg or \.pdf"):
        plot_format("a.jpg")


def test_dpi_scales_a_png(tmp_path):
    w1, h1 = _png_size(_plot(tmp_path / "lo.png", dpi=40))
    w2, h2 = _png_size(_plot(tmp_path / "hi.png", dpi=80))
    assert w2 == pytest.approx(2 * w1, rel=0.05)
    assert h2 == pytest.approx(2 * h1, rel=0.05)


@pytest.mark.parametrize("dpi", [0, 5, 5000, 72.0, True, "100"])
def test_bad_dpi_is_refused(dpi):
    with pytest.raises(InputError, match=r"^dpi must be") as info:
        check_dpi(dpi)
    assert "--" not in str(info.value)  # a library error names the parameter, not a CLI flag
    with pytest.raises(InputError, match=r"^--dpi must be"):
        check_dpi(dpi, name="--dpi")


@pytest.mark.parametrize("metric", ["ttft", "tbt", "e2e"])
def test_each_row_scale_holds_every_limit_and_value(metric):
    sd = _slowdown()
    vmin, vmax = row_scale(sd, DEFAULT_SLOWDOWN_LIMITS, metric)
    for q in (50, 90, 99):
        lim = DEFAULT_SLOWDOWN_LIMITS[f"{metric}_p{q}"]
        assert vmin < lim < vmax
        finite = sd[f"{metric}_p{q}"][np.isfinite(sd[f"{metric}_p{q}"])]
        assert vmin <= finite.min()


def test_close_limits_share_one_tick():
    ticks, labels = _limit_ticks([(1.25, "P50 ≤ 1.25"), (1.5, "P90 ≤ 1.5"), (5.0, "P99 ≤ 5")])
    assert len(ticks) == 2
    assert labels == ["P90 ≤ 1.5\nP50 ≤ 1.25", "P99 ≤ 5"]
    assert 1.25 < ticks[0] < 1.5
    ticks, _ = _limit_ticks([(2.0, "a"), (3.0, "b"), (6.0, "c")])
    assert ticks == [2.0, 3.0, 6.0]


def test_axes_tick_whole_machines(tmp_path):
    import re

    values = np.arange(1, 21)  # matplotlib's own ticks here: 2.5, 5.0, 7.5 …
    svg = _plot(tmp_path / "a.svg", pv=values, tv=values).read_text()
    ticks = set(re.findall(r"<!-- ([0-9.]+) -->", svg))  # each text's source in the SVG
    assert {"2", "10", "20"} <= ticks
    assert all(float(x).is_integer() for x in ticks), sorted(ticks)
