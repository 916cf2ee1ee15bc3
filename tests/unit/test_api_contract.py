"""The library's public surface: `splitplan.api.__all__` pinned, and every CLI command's twin."""

from __future__ import annotations

import inspect
import re

import typer.main

from splitplan import api
from splitplan.cli import app

PUBLIC = {
    # command twins
    "catalog", "catalog_import_hf", "heatmap", "pareto", "perf_check", "perf_fit", "reproduce", "search",
    "simulate",
    "trace_convert", "trace_generate", "trace_stats",
    # deployment plans and served-token metrics of a search or a simulation
    "export_plan", "search_metrics", "search_plan", "simulation_metrics", "simulation_plan",
    # requests, results and their parts
    "CatalogListing", "CheckResult", "ColumnStats", "ImportedModel", "Comparison", "DesignResult",
    "HeatmapPoint", "HeatmapResult", "PerfFitResult", "ReproduceReport", "ReproduceRequest", "SearchOutcome",
    "SearchRequest", "SimResult", "TraceStats", "TraceWritten", "WorkloadRequest",
    # vocabulary, scenario, design and config helpers
    "PAPER_DESIGNS", "ClusterConfig", "Design", "Engine", "Method", "Objective", "Scenario", "SimConfig",
    "SloSpec", "build_scenario", "custom_design", "get_design", "load_config", "load_slo", "make_config",
    "resolve_design", "workload_stats",
}  # fmt: skip

TWINS = {
    ("catalog",): "catalog",
    ("catalog", "import-hf"): "catalog_import_hf",
    ("simulate",): "simulate",
    ("search",): "search",
    ("heatmap",): "heatmap",
    ("reproduce",): "reproduce",
    ("pareto",): "pareto",
    ("perf", "check"): "perf_check",
    ("perf", "fit"): "perf_fit",
    ("trace", "generate"): "trace_generate",
    ("trace", "stats"): "trace_stats",
    ("trace", "convert"): "trace_convert",
}


def cli_commands() -> dict[tuple[str, ...], object]:
    out: dict[tuple[str, ...], object] = {}

    def walk(cmd: object, path: tuple[str, ...]) -> None:
        subs = getattr(cmd, "commands", None)
        if subs:
            if getattr(cmd, "invoke_without_command", False) and path:
                out[path] = cmd  # a group that is a command itself (`catalog`)
            for name, sub in subs.items():
                walk(sub, (*path, name))
        else:
            out[path] = cmd

    walk(typer.main.get_command(app), ())
    return out


def test_public_names_are_pinned() -> None:
    assert set(api.__all__) == PUBLIC
    assert len(api.__all__) == len(PUBLIC)
    for name in api.__all__:
        assert getattr(api, name) is not None


def test_every_cli_command_has_a_library_twin_it_calls() -> None:
    commands = cli_commands()
    assert set(commands) == set(TWINS)
    for path, twin in TWINS.items():
        fn = getattr(api, twin)
        assert callable(fn), twin
        body = inspect.getsource(commands[path].callback)  # type: ignore[attr-defined]
        assert re.search(rf"\bapi\.{twin}\(", body), f"{' '.join(path)} does not call api.{twin}"


def test_library_requests_take_typed_values() -> None:
    req = api.SearchRequest(prompt_range=(2, 5), token_power_cap=(0.5, 1.0), objective="power", engine="des")
    assert req.objective is api.Objective.POWER
    assert req.engine is api.Engine.DES
    assert req.prompt_power_cap == (1.0, 1.0)
    assert req.token_power_cap == (0.5, 1.0)


def test_library_errors_name_parameters_not_flags() -> None:
    import pytest

    from splitplan.errors import InputError

    for kwargs, name in (
        ({"prompt_range": "1:5"}, "`prompt_range`"),
        ({"max_machines": 0}, "`max_machines`"),
        ({"jobs": 0}, "`jobs`"),
        ({"prompt_power_cap": "0.5:1"}, "`prompt_power_cap`"),
    ):
        with pytest.raises(InputError) as info:
            api.SearchRequest(**kwargs)  # type: ignore[arg-type]
        assert name in str(info.value)
        assert "--" not in str(info.value)


def test_errors_of_the_other_library_entry_points_name_parameters_not_flags(tmp_path) -> None:
    import pytest

    from splitplan.api._memory import parse_memory
    from splitplan.api._plan import check_plan_path
    from splitplan.design import get_design
    from splitplan.errors import InputError
    from splitplan.search.parallel import Runner

    hh, a100 = get_design("splitwise-hh"), get_design("baseline-a100")
    for call, name in (
        (lambda: api.make_config(hh, None, None, 3), "`machines`"),
        (lambda: api.make_config(a100, 2, 2, None), "`machines`"),
        (lambda: api.build_scenario(seed=-1), "`seed`"),
        (lambda: api.resolve_design("splitwise-hh", prompt_power_cap=1.5), "`prompt_power_cap`"),
        (lambda: check_plan_path(tmp_path / "plan.txt"), "`export_plan`"),
        (lambda: parse_memory("lots"), "`max_memory`"),
        (lambda: Runner(jobs=0), "`jobs`"),
    ):
        with pytest.raises(InputError) as info:
            call()
        assert name in str(info.value)
        assert "--" not in str(info.value)
