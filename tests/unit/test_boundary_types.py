"""Wrong value types at the library and request-file boundaries: one InputError naming the field.

A request file (`search --request`) or a library caller can give any type: "0.3" for a number, 5
for a list of names, True for a rate. Each must be refused by name where it enters (the request
loader, SearchRequest, WorkloadRequest, SloSpec, ReproduceRequest, the catalog lookups), never a
TypeError, ValueError or AttributeError from deep inside. A saved request replays exactly: every
field the saver writes reads back as the value it was saved from.
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

import pytest

from splitplan import api
from splitplan.api._request import load_request, save_request
from splitplan.api._search import DEFAULT_CAP, SearchRequest
from splitplan.api._simulate import WorkloadRequest
from splitplan.catalog import get_model
from splitplan.errors import InputError
from splitplan.slo import SloSpec

SMALL = WorkloadRequest(rate_rps=2.0, duration_s=10.0)


def _base_request() -> SearchRequest:
    return SearchRequest(
        designs=("splitwise-hh",),
        prompt_range=(1, 2),
        token_range=(1, 2),
        engine="analytic",
        workload=SMALL,
    )


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    raise AssertionError(f"cannot write {v!r}")


def _dump(doc: dict[str, Any], prefix: str = "") -> str:
    """A small TOML writer: scalars and arrays first, then tables (nested tables dotted)."""
    lines = [f"{json.dumps(k)} = {_value(v)}" for k, v in doc.items() if not isinstance(v, dict)]
    for k, v in doc.items():
        if isinstance(v, dict):
            name = f"{prefix}{k}"
            lines += ["", f"[{name}]", _dump(v, f"{name}.")]
    return "\n".join(lines)


@pytest.fixture
def saved(tmp_path: Path) -> dict[str, Any]:
    path = save_request(_base_request(), tmp_path / "base.toml")
    return tomllib.loads(path.read_text())


def _edit(doc: dict[str, Any], where: tuple[str, ...], value: Any) -> dict[str, Any]:
    doc = json.loads(json.dumps(doc))  # a deep copy
    target = doc
    for key in where[:-1]:
        target = target[key]
    target[where[-1]] = value
    return doc


REQUEST_CASES = [
    (("search", "band"), "0.3", "band"),
    (("search", "band"), True, "band"),
    (("search", "rate_tol"), "x", "rate_tol"),
    (("search", "designs"), 5, "designs"),
    (("search", "designs"), [1], "designs"),
    (("search", "designs"), [["splitwise-hh"]], "designs"),
    (("search", "designs"), "splitwise-hh", "designs"),
    (("search", "prompt_gpus"), 7, "prompt_gpus"),
    (("search", "token_gpus"), [1, 2], "token_gpus"),
    (("search", "model"), 70, "model"),
    (("search", "storage"), 5, "storage"),
    (("search", "trials"), "200", "trials"),
    (("search", "seed"), "0", "seed"),
    (("search", "chunk_tokens"), "5", "chunk_tokens"),
    (("search", "power_budget_kw"), "100", "power_budget_kw"),
    (("search", "perf"), 5, "perf"),
    (("search", "config"), 5, "config"),
    (("search", "prompt_tp"), "4", "prompt_tp"),
    (("search", "prompt_tp"), [4.0], "prompt_tp"),
    (("workload", "rate_rps"), "2", "rate_rps"),
    (("workload", "rate_rps"), True, "rate_rps"),
    (("workload", "duration_s"), [10], "duration_s"),
    (("workload", "cv"), "2", "cv"),
    (("workload", "workload"), 5, "workload"),
    (("workload", "trace"), 5, "trace"),
    (("slo", "slowdown"), "ab", "slowdown"),
    (("slo", "slowdown"), [1, 2], "slowdown"),
    (("slo", "latency_s"), 5, "latency_s"),
    (("slo", "slowdown", "ttft_p50"), "2", "ttft_p50"),
    (("slo", "other"), {"x": 1.0}, "other"),
    (("files",), 5, "files"),
    (("files",), [1, 2], "files"),
    (("files",), "abc", "files"),
    (("files", "/no/such/file"), 5, "/no/such/file"),
    (("foo",), 1, "foo"),
    (("splitplan_version",), 5, "splitplan_version"),
]


@pytest.mark.parametrize(("where", "value", "field"), REQUEST_CASES, ids=lambda x: repr(x))
def test_a_bad_request_file_value_is_one_input_error_naming_the_key(
    tmp_path: Path, saved: dict[str, Any], where: tuple[str, ...], value: Any, field: str
) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(_dump(_edit(saved, where, value)))
    with pytest.raises(InputError) as info:
        load_request(path)
    message = str(info.value)
    assert field in message, message
    assert "\n" not in message


def test_the_unedited_request_file_loads(tmp_path: Path, saved: dict[str, Any]) -> None:
    path = tmp_path / "same.toml"
    path.write_text(_dump(saved))
    assert load_request(path) == replace(_base_request(), slo=SloSpec())  # the SLOs saved resolved


def _reproduce(**kw: Any) -> Any:
    return api.ReproduceRequest(**kw)


LIBRARY_CASES = [
    (lambda: api.build_scenario(workload=WorkloadRequest(rate_rps="2", duration_s=5.0)), "rate_rps"),
    (lambda: WorkloadRequest(rate_rps=True), "rate_rps"),
    (lambda: WorkloadRequest(duration_s=[5]), "duration_s"),
    (lambda: WorkloadRequest(trace=5), "trace"),
    (lambda: api.build_scenario(workload=SMALL, model=5), "model"),
    (lambda: api.build_scenario(workload=SMALL, model=None), "model"),
    (lambda: api.build_scenario(workload=SMALL, config=5), "config"),
    (lambda: api.build_scenario(workload=SMALL, slo=5), "slo"),
    (lambda: api.build_scenario(workload={"rate_rps": 2}), "workload"),
    (lambda: SearchRequest(band="0.3"), "band"),
    (lambda: SearchRequest(band=True), "band"),
    (lambda: SearchRequest(rate_tol="x"), "rate_tol"),
    (lambda: SearchRequest(storage=5), "storage"),
    (lambda: SearchRequest(designs=5), "designs"),
    (lambda: SearchRequest(designs=(1,)), "designs"),
    (lambda: SearchRequest(model=5), "model"),
    (lambda: SearchRequest(trials="5"), "trials"),
    (lambda: SearchRequest(seed="1"), "seed"),
    (lambda: SearchRequest(workload={"rate_rps": 2}), "workload"),
    (lambda: SearchRequest(chunk_tokens="5"), "chunk_tokens"),
    (lambda: SearchRequest(cost_budget_usd_per_h="5"), "cost_budget_usd_per_h"),
    (lambda: _reproduce(rate_rps="70"), "rate"),
    (lambda: _reproduce(duration_s=True), "duration"),
    (lambda: _reproduce(out_dir=5), "out_dir"),
    (lambda: _reproduce(models="llama2-70b"), "models"),
    (lambda: _reproduce(seed=True), "seed"),
    (lambda: SloSpec(slowdown="x"), "slowdown"),
    (lambda: SloSpec(slowdown=[1, 2]), "slowdown"),
    (lambda: SloSpec(slowdown=None), "slowdown"),
    (lambda: SloSpec(latency_s=5), "latency_s"),
    (lambda: api.get_design(5), "design"),
    (lambda: api.get_design(None), "design"),
    (lambda: api.custom_design(None), "prompt_gpu"),
    (lambda: api.custom_design(5), "prompt_gpu"),
    (lambda: api.custom_design("dgx-h100", 5), "token_gpu"),
    (lambda: get_model(5), "model"),
]


@pytest.mark.parametrize(("call", "field"), LIBRARY_CASES, ids=[f for _, f in LIBRARY_CASES])
def test_a_bad_library_value_is_one_input_error_naming_the_field(call: Any, field: str) -> None:
    with pytest.raises(InputError) as info:
        call()
    assert field in str(info.value), str(info.value)
    assert "\n" not in str(info.value)


def test_the_search_problem_refuses_strings_by_name() -> None:
    from splitplan.search.problem import SearchProblem, paper_space

    space = paper_space("splitwise-hh", prompt_range=(1, 2), token_range=(1, 2))
    for kw, field in (({"band": "0.3"}, "band"), ({"rate_tol": "x"}, "rate"), ({"rate_rps": "2"}, "rate")):
        with pytest.raises(InputError, match=field):
            SearchProblem(spaces=(space,), **kw)


# Every field the saver writes, set away from its default, so each must read back as saved.
ROUND_TRIP = SearchRequest(
    designs=("splitwise-hh", "splitwise-aa"),
    prompt_gpus=("dgx-h100",),
    token_gpus=("dgx-a100", "dgx-h100"),
    prompt_power_cap=(0.5, 1.0),
    token_power_cap=0.7,
    prompt_tp=4,
    token_tp=(4, 8),
    prompt_precision="fp8",
    token_precision=("fp16", "fp8"),
    prompt_kv_precision="fp8",
    token_kv_precision=("fp16", "fp8"),
    prompt_range=(1, 3),
    token_range=(2, 4),
    max_machines=9,
    workload=WorkloadRequest(rate_rps=3.0, duration_s=12.0, arrival="gamma", cv=2.0),
    model="llama3-70b",
    perf="analytic",
    chunk_tokens=256,
    slo=SloSpec(slowdown={"ttft_p50": 3.0, "tbt_p99": 4.0}, latency_s={"e2e_p99": 30.0}),
    objective="throughput",
    power_budget_kw=200.0,
    cost_budget_usd_per_h=500.0,
    budget="iso-power",
    engine="des",
    method="grid",
    trials=50,
    band=0.1,
    rate_tol=0.05,
    seed=3,
    jobs=2,
    backend="loky",
    storage="sqlite:///points.db",
)
# not set above: they need an input file that exists (`config`) or Dask (`scheduler`, `backend`)
NOT_COVERED = {"config", "scheduler", "backend"}


def test_the_round_trip_request_sets_every_field() -> None:
    default = SearchRequest()
    same = {f.name for f in fields(SearchRequest) if getattr(ROUND_TRIP, f.name) == getattr(default, f.name)}
    assert same <= NOT_COVERED, f"set these in ROUND_TRIP too: {sorted(same - NOT_COVERED)}"


def test_every_saved_field_reads_back_as_saved(tmp_path: Path) -> None:
    loaded = load_request(save_request(ROUND_TRIP, tmp_path / "all.toml"))
    for f in fields(SearchRequest):
        if f.name == "slo":
            assert loaded.slo.slowdown == {**dict(ROUND_TRIP.slo.slowdown)}  # type: ignore[union-attr]
            assert loaded.slo.latency_s == ROUND_TRIP.slo.latency_s  # type: ignore[union-attr]
            continue
        assert getattr(loaded, f.name) == getattr(ROUND_TRIP, f.name), f.name


def test_a_single_tp_and_precision_replay(tmp_path: Path) -> None:
    """The CLI's `--prompt-tp 4 --prompt-precision fp8` is saved as lists: the replay reads them."""
    req = SearchRequest(
        designs=("splitwise-hh",),
        prompt_range=(1, 2),
        token_range=(1, 2),
        engine="analytic",
        workload=SMALL,
        prompt_tp=(4,),
        prompt_precision=("fp8",),
        token_kv_precision=("fp8",),
    )
    path = save_request(req, tmp_path / "r.toml")
    assert "prompt_tp = [4]" in path.read_text()
    assert load_request(path) == replace(req, slo=SloSpec())


def test_caps_not_given_stay_not_given_in_a_replay(tmp_path: Path) -> None:
    """A named design keeps its own caps (splitwise-hhcap's token pool at 0.7) unless a cap is
    given; a saved request that wrote the default (1.0, 1.0) would replay as a given 1.0."""
    req = SearchRequest(designs=("splitwise-hhcap",), engine="analytic", workload=SMALL)
    loaded = load_request(save_request(req, tmp_path / "cap.toml"))
    assert loaded.prompt_power_cap is DEFAULT_CAP
    assert loaded.token_power_cap is DEFAULT_CAP
