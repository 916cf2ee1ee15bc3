"""The three parquet kinds (search points, heatmap, per-request) share report.output_schema: read
back with pyarrow and pandas, names, types, units, nulls and the one metadata document agree."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "search"))
from search_fakes import FakeEvaluator

import splitplan.api._search as api_search
from splitplan.cli import main
from splitplan.report.output_schema import KINDS, SCHEMA_VERSION, columns, read_metadata, unit_of

TYPES = {"int64": pa.int64(), "float64": pa.float64(), "bool": pa.bool_(), "string": pa.string()}


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("parquet")
    mp = pytest.MonkeyPatch()
    mp.setattr(api_search, "SimEvaluator", lambda _s: FakeEvaluator())
    out = {k: tmp / f"{k}.parquet" for k in KINDS}
    try:
        search = ["search", "--design", "splitwise-hh", "--design", "baseline-h100", "--duration", "10"]
        search += ["--prompt-range", "10:16", "--token-range", "3:6", "--ttft-p99-ms", "900"]
        assert main([*search, "--out", str(out["search-points"]), "--json"]) == 0
    finally:
        mp.undo()
    heatmap = ["heatmap", "--design", "splitwise-hh", "--prompt-range", "1:4", "--token-range", "1:3"]
    assert main([*heatmap, "--rate", "20", "--duration", "10", "--out", str(out["heatmap"]), "--json"]) == 0
    sim = ["simulate", "--design", "splitwise-hh", "--prompt", "2", "--token", "1", "--rate", "5"]
    assert main([*sim, "--duration", "10", "--requests-out", str(out["requests"]), "--json"]) == 0
    return out


@pytest.mark.parametrize("kind", KINDS)
def test_pyarrow_reads_names_types_units(files, kind, capsys):
    table = pq.read_table(files[kind])
    cols = columns(kind)
    assert table.column_names == [c.name for c in cols]
    for c in cols:
        field = table.schema.field(c.name)
        assert field.type == TYPES[c.type], c.name
        assert field.metadata[b"unit"].decode() == c.unit == unit_of(c.name)
        if c.type == "float64":  # the null convention: never NaN or inf
            values = [v for v in table.column(c.name).to_pylist() if v is not None]
            assert all(math.isfinite(v) for v in values), c.name
    assert table.num_rows > 0


@pytest.mark.parametrize("kind", KINDS)
def test_one_metadata_document(files, kind):
    doc = read_metadata(files[kind])
    assert doc["schema_version"] == SCHEMA_VERSION
    assert doc["kind"] == kind
    assert doc["command"] == {"search-points": "search", "heatmap": "heatmap", "requests": "simulate"}[kind]
    assert doc["model"] == "llama2-70b"
    assert doc["seed"] == 0 or doc["seed"] == "0"
    assert set(doc["slo"]["slowdown"]) >= {"ttft_p50", "e2e_p99"}
    assert {"python", "numpy", "pyarrow"} <= set(doc["stack"])
    assert set(doc["columns"]) == {c.name for c in columns(kind)}
    if kind == "search-points":
        assert doc["slo"]["latency_s"] == {"ttft_p99": 0.9}
        assert doc["request"]["search"]["designs"] == ["splitwise-hh", "baseline-h100"]


def test_unbounded_margins_are_null_not_sentinels(files):
    import numpy as np

    from splitplan.report.output_schema import build_table

    cols = {"prompt_machines": [1, 2, 3, 4], "margin": np.array([-1e9, -np.inf, np.nan, 0.5])}
    table = build_table("heatmap", cols, command="heatmap")
    assert table.column("margin").to_pylist() == [None, None, None, 0.5]
    assert table.column("engine").to_pylist() == [None] * 4  # a missing column is null, not absent
    margins = pq.read_table(files["heatmap"]).column("margin").to_pylist()
    assert all(m is None or m > -1e9 for m in margins)


@pytest.mark.parametrize("kind", KINDS)
def test_pandas_keeps_nullable_integers_and_booleans(files, kind):
    pd = pytest.importorskip("pandas")
    df = pd.read_parquet(files[kind])
    assert list(df.columns) == [c.name for c in columns(kind)]
    for c in columns(kind):
        dtype = df[c.name].dtype
        if c.type == "int64":
            assert str(dtype) == "Int64", c.name
        elif c.type == "bool":
            assert str(dtype) == "boolean", c.name
        elif c.type == "float64":
            assert str(dtype) == "float64", c.name
    if kind == "search-points":
        base = df[df["design"] == "baseline-h100"]
        assert base["prompt_machines"].isna().all()
        assert str(df["machines"].dtype) == "Int64"


@pytest.mark.parametrize("kind", ["search-points", "heatmap"])
def test_latency_columns_beside_the_slowdowns_as_in_per_request_files(files, kind):
    """`ttft_p50_s` … `e2e_p99_s`: seconds, named like the per-request `ttft_s`, right after the nine
    slowdowns, null where not measured."""
    from splitplan.slo import LATENCY_COLUMNS, SLO_KEYS

    names = [c.name for c in columns(kind)]
    i = names.index(SLO_KEYS[-1])
    assert tuple(names[i + 1 : i + 10]) == LATENCY_COLUMNS
    request_unit = {c.name: c.unit for c in columns("requests")}["ttft_s"]
    table = pq.read_table(files[kind])
    for col in LATENCY_COLUMNS:
        assert table.schema.field(col).metadata[b"unit"].decode() == request_unit == "s"
    if kind == "heatmap":  # simulated by the analytic model: measured wherever the point is stable
        df = table.to_pandas()
        stable = df[df["stable"]]
        assert len(stable) > 0
        assert (stable[list(LATENCY_COLUMNS)] > 0).all().all()
        assert (stable["ttft_p50_s"] <= stable["ttft_p99_s"]).all()
        assert (stable["e2e_p50_s"] >= stable["ttft_p50_s"]).all()
