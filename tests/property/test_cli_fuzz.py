"""Property: the CLI entry points, driven with generated arguments, values and files, end with exit
0 or 2 (2: exactly one stderr line), never a traceback, and never leave a partial or corrupt output
file (an output either is complete and readable, or was not written)."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pyarrow.parquet as pq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from splitplan.cli import main

# small by default (the default test run stays fast); SPLITPLAN_FUZZ_EXAMPLES=1000 for a campaign
FUZZ = settings(
    max_examples=int(os.environ.get("SPLITPLAN_FUZZ_EXAMPLES", "8")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    derandomize=True,
)

NUMBERS = st.one_of(
    st.sampled_from(["0", "-1", "nan", "inf", "-inf", "1e400", "1e-300", "abc", "", "true", "1:2", "0.5"]),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(min_value=-(10**30), max_value=10**30).map(str),
)
TEXT = st.one_of(NUMBERS, st.text(max_size=12), st.sampled_from(["a100-80gb", "dgx-h100", "coding", "des"]))


def _outcome(capsys, argv: list[str]) -> int:
    code = main(argv)  # an uncaught exception fails the test: that is a traceback
    err = capsys.readouterr().err
    assert code in (0, 2), (argv, code, err)
    assert "Traceback" not in err
    if code == 2:
        assert len([ln for ln in err.splitlines() if ln.strip()]) == 1, (argv, err)
    return code


SIM_OPTIONS = {
    "--prompt": NUMBERS,
    "--token": NUMBERS,
    "--machines": NUMBERS,
    "--rate": NUMBERS,
    "--duration": NUMBERS,
    "--seed": NUMBERS,
    "--prompt-power-cap": NUMBERS,
    "--token-power-cap": NUMBERS,
    "--prompt-gpu": TEXT,
    "--token-gpu": TEXT,
    "--design": st.sampled_from(["splitwise-hh", "splitwise-hhcap", "baseline-h100", "custom", "x"]),
    "--model": TEXT,
    "--workload": TEXT,
    "--max-memory": st.one_of(TEXT, st.sampled_from(["4GB", "1MB", "12GiB"])),
}


@st.composite
def _options(draw, table: dict[str, st.SearchStrategy[str]]) -> list[str]:
    names = draw(st.lists(st.sampled_from(sorted(table)), max_size=4, unique=True))
    out: list[str] = []
    for n in names:
        out += [n, draw(table[n])]
    return out


@FUZZ
@given(extra=_options(SIM_OPTIONS))
def test_simulate_generated_options(capsys, extra) -> None:
    base = [
        "simulate",
        "--engine",
        "analytic",
        "--prompt",
        "2",
        "--token",
        "2",
        "--duration",
        "3",
        "--rate",
        "5",
    ]
    _outcome(capsys, [*base, *extra])


CONFIG_KEYS = [
    "max_batch_size",
    "max_batch_tokens",
    "max_preemptions",
    "prompt_interrupts_decodes",
    "prompt_reserves_decode_kv",
    "prompt_full_tokens",
    "kv_bytes",
    "weight_bytes",
    "kv_transfer",
    "layerwise_min_prompt_tokens",
    "layerwise_overhead_s",
    "link_bytes_per_s",
    "memory_retry_s",
    "max_backlog_s",
    "profile_prompt_curves",
    "warmup_s",
    "perf",
    "mystery",
]
TOML_VALUES = st.one_of(
    st.integers(min_value=-(10**20), max_value=10**20).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(
        lambda x: (
            "nan" if math.isnan(x) else ("inf" if x == math.inf else "-inf" if x == -math.inf else repr(x))
        )
    ),
    st.sampled_from(["true", "false", '"serialized"', '"gqa"', '"by-count"', '"x"', "[1, 2]", "{a = 1}"]),
)


@FUZZ
@given(
    entries=st.dictionaries(st.sampled_from(CONFIG_KEYS), TOML_VALUES, max_size=4),
    junk=st.binary(max_size=8),
)
def test_simulate_generated_config_files(tmp_path_factory, capsys, entries, junk) -> None:
    d = tmp_path_factory.mktemp("cfg")
    f = d / "c.toml"
    f.write_bytes("".join(f"{k} = {v}\n" for k, v in entries.items()).encode() + junk)
    argv = ["simulate", "--engine", "analytic", "--prompt", "2", "--token", "2", "--duration", "3"]
    _outcome(capsys, [*argv, "--rate", "5", "--config", str(f)])


SLO_KEYS = ["ttft_p50", "ttft_p99", "tbt_p90", "e2e_p99", "e2e_p75"]


@FUZZ
@given(
    section=st.sampled_from(["slowdown", "latency_s", "limits"]),
    entries=st.dictionaries(st.sampled_from(SLO_KEYS), TOML_VALUES, max_size=3),
    junk=st.binary(max_size=6),
)
def test_search_generated_slo_files(tmp_path_factory, capsys, section, entries, junk) -> None:
    d = tmp_path_factory.mktemp("slo")
    f = d / "s.toml"
    f.write_bytes((f"[{section}]\n" + "".join(f"{k} = {v}\n" for k, v in entries.items())).encode() + junk)
    argv = ["search", "--design", "splitwise-hh", "--engine", "analytic", "--max-machines", "3"]
    _outcome(capsys, [*argv, "--rate", "5", "--duration", "3", "--slo", str(f)])


SEARCH_OPTIONS = {
    "--prompt-range": st.one_of(
        TEXT, st.tuples(st.integers(-2, 6), st.integers(-2, 6)).map(lambda t: f"{t[0]}:{t[1]}")
    ),
    "--token-range": st.one_of(
        TEXT, st.tuples(st.integers(-2, 6), st.integers(-2, 6)).map(lambda t: f"{t[0]}:{t[1]}")
    ),
    "--max-machines": NUMBERS,
    "--prompt-power-cap": NUMBERS,
    "--token-power-cap": NUMBERS,
    "--objective": st.sampled_from(["cost", "power", "throughput", "speed"]),
    "--power-budget-kw": NUMBERS,
    "--cost-budget-usd-per-h": NUMBERS,
    "--design": st.sampled_from(["splitwise-hh", "baseline-h100", "splitwise-aa", "nope"]),
    "--trials": NUMBERS,
}


@FUZZ
@given(extra=_options(SEARCH_OPTIONS), write_out=st.booleans())
def test_search_generated_options_and_output(tmp_path_factory, capsys, extra, write_out) -> None:
    d = tmp_path_factory.mktemp("search")
    out = d / "points.parquet"
    argv = ["search", "--engine", "analytic", "--rate", "5", "--duration", "3", *extra]
    if "--prompt-range" not in extra and "--max-machines" not in extra:
        argv += ["--max-machines", "3"]
    if write_out:
        argv += ["--out", str(out)]
    code = _outcome(capsys, argv)
    if write_out and code == 0:
        assert pq.read_table(out).num_rows > 0  # complete and readable
    if code == 2:
        assert not out.exists()
    assert not [p for p in d.iterdir() if p.name.endswith(".tmp")]


ROW = st.tuples(
    st.one_of(st.integers(-3, 10**6).map(str), NUMBERS),
    st.one_of(st.floats(-1, 100, allow_nan=False).map(lambda x: f"{x:.3f}"), NUMBERS),
    st.one_of(st.integers(-3, 10**6).map(str), NUMBERS),
    st.one_of(st.integers(-3, 10**6).map(str), NUMBERS),
)


@FUZZ
@given(
    rows=st.lists(ROW, max_size=8),
    junk=st.binary(max_size=6),
    out_name=st.sampled_from(["o.csv", "o.txt", "d"]),
)
def test_trace_convert_generated_files(tmp_path_factory, capsys, rows, junk, out_name) -> None:
    d = tmp_path_factory.mktemp("trace")
    (d / "d").mkdir()
    src = d / "in.csv"
    head = "request_id,request_type,application_id,arrival_timestamp,batch_size,prompt_size,token_size\n"
    body = "".join(f"{i},2,0,{t},1,{p},{o}\n" for i, (_, t, p, o) in enumerate(rows))
    src.write_bytes((head + body).encode() + junk)
    out = d / out_name
    code = _outcome(capsys, ["trace", "convert", str(src), str(out)])
    if code == 0:
        assert _outcome(capsys, ["trace", "stats", str(out)]) == 0  # the output reads back
    elif out_name != "d":
        assert not out.exists()
    assert not [p for p in Path(d).iterdir() if p.name.endswith(".tmp")]


@FUZZ
@given(
    option=st.sampled_from(["--tensor-parallel", "--seed", "--perf", "--prompt-curves"]),
    value=TEXT,
    profile=st.binary(max_size=40),
)
def test_perf_check_generated(tmp_path_factory, capsys, option, value, profile) -> None:
    d = tmp_path_factory.mktemp("perf")
    f = d / "p.csv"
    f.write_bytes(
        b"model,hardware,prompt_size,batch_size,token_size,prompt_time,token_time,tensor_parallel\n" + profile
    )
    _outcome(capsys, ["perf", "check", "--profile", str(f), option, value])
