"""Bad-input campaign over every command: counts tracebacks, wrong exit codes, multi-line errors,
silently ignored options and accepted nonsense.

    python tests/campaign/bad_inputs.py [--jobs N] [--limit K] [--repeat-errors R]

Each case runs `python -m splitplan …` in a fresh process (so a crash at exit, exit 134, is seen).
A *bad* case must end with exit 2 and exactly one stderr line, no traceback. An *effect* case runs
a valid command and checks that the option it sets shows in the result (else the option was
silently ignored). `--repeat-errors R` reruns the first R error cases to look for aborts at exit.
Not collected by pytest (slow: minutes); tests/cli and tests/property hold the fast checks.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
SHARED = ROOT.parent / "shared"

# the readers' own column lists: the campaign's files are written to the schemas they check
from splitplan.perf.profile import PROFILE_COLUMNS  # noqa: E402
from splitplan.workload.readers import AZURE_COLUMNS, REFERENCE_COLUMNS  # noqa: E402

TRACE = SHARED / "reference" / "splitwise-sim" / "traces" / "rr_code_70_2min.csv"
PROFILE = SHARED / "reference" / "splitwise-sim" / "perf_model.csv"
TIMEOUT_S = 180


@dataclass
class Case:
    name: str
    argv: list[str]
    expect: str = "error"  # "error" | "ok"
    check: Callable[[dict], str | None] | None = field(default=None, repr=False)  # effect check
    after: Callable[[], str | None] | None = field(default=None, repr=False)  # files left behind


@dataclass
class Outcome:
    case: Case
    rc: int
    stderr: str
    stdout: str
    wall_s: float
    verdict: str  # "pass" or a failure kind


def _files(tmp: Path) -> dict[str, Path]:
    f: dict[str, Path] = {}

    def w(name: str, data: bytes | str) -> Path:
        p = tmp / name
        p.write_bytes(data if isinstance(data, bytes) else data.encode())
        f[name] = p
        return p

    w("binary.toml", b"\xff\xfe\x00\x81bad\x00\xc3")
    w("binary.csv", b"\xff\xfe\x00\x81bad\x00\xc3")
    w(
        "latin1.csv",
        (",".join(AZURE_COLUMNS) + "\n2024-03-05 09:41:12,10,r\xe9\n").encode("latin-1"),
    )
    w("empty.toml", "")
    w("empty.csv", "")
    w("syntax.toml", "this is = = not toml [\n")
    (tmp / "folder").mkdir(exist_ok=True)
    f["folder"] = tmp / "folder"
    configs = {
        "weight_bytes_int": "weight_bytes = 5\n",
        "weight_bytes_neg": "[weight_bytes]\nllama2-70b = -1\n",
        "weight_bytes_bool": "[weight_bytes]\nllama2-70b = true\n",
        "weight_bytes_nan": "[weight_bytes]\nllama2-70b = nan\n",
        "warmup_huge": "warmup_s = 1e9\n",
        "warmup_neg": "warmup_s = -1\n",
        "link_zero": "link_bytes_per_s = 0\n",
        "link_nan": "link_bytes_per_s = nan\n",
        "link_str": 'link_bytes_per_s = "fast"\n',
        "backlog_zero": "max_backlog_s = 0\n",
        "backlog_inf": "max_backlog_s = inf\n",
        "retry_zero": "memory_retry_s = 0\n",
        "batch_bool": "max_batch_size = true\n",
        "batch_zero": "max_batch_size = 0\n",
        "batch_float": "max_batch_size = 1.5\n",
        "tokens_bool": "max_batch_tokens = false\n",
        "preempt_bool": "max_preemptions = true\n",
        "preempt_neg": "max_preemptions = -1\n",
        "full_tokens_zero": "prompt_full_tokens = 0\n",
        "layerwise_neg": "layerwise_min_prompt_tokens = -5\n",
        "overhead_neg": "layerwise_overhead_s = -0.1\n",
        "kv_transfer": 'kv_transfer = "pigeon"\n',
        "kv_bytes": 'kv_bytes = "fp4"\n',
        "interrupts": 'prompt_interrupts_decodes = "sometimes"\n',
        "reserves_int": "prompt_reserves_decode_kv = 1\n",
        "curves": 'profile_prompt_curves = "median"\n',
        "unknown_key": "turbo = true\n",
        "perf_int": "perf = 5\n",
        "perf_missing": 'perf = "nowhere.csv"\n',
    }
    for k, v in configs.items():
        f[f"config_{k}"] = w(f"config_{k}.toml", v)
    slos = {
        "neg": "[slowdown]\nttft_p50 = -1\n",
        "zero": "[slowdown]\nttft_p90 = 0\n",
        "nan": "[slowdown]\ntbt_p50 = nan\n",
        "inf": "[latency_s]\ne2e_p99 = inf\n",
        "bool": "[slowdown]\ne2e_p50 = true\n",
        "str": '[slowdown]\ne2e_p90 = "fast"\n',
        "unknown_key": "[slowdown]\nttft_p75 = 2\n",
        "unknown_section": "[limits]\nttft_p50 = 2\n",
        "not_table": "slowdown = 5\n",
    }
    for k, v in slos.items():
        f[f"slo_{k}"] = w(f"slo_{k}.toml", v)
    ref = ",".join(REFERENCE_COLUMNS) + "\n"
    az = ",".join(AZURE_COLUMNS) + "\n"
    traces = {
        "header_only": ref,
        "bad_header": "a,b,c\n1,2,3\n",
        "neg_tokens": ref + "0,2,0,0.0,1,-5,10\n",
        "zero_tokens": ref + "0,2,0,0.0,1,10,0\n",
        "huge_tokens": ref + "0,2,0,0.0,1,1000000000000000000000000000000,10\n",
        "float_tokens": ref + "0,2,0,0.0,1,10.5,10\n",
        "nan_time": ref + "0,2,0,nan,1,10,10\n",
        "backwards": ref + "0,2,0,5.0,1,10,10\n1,2,0,1.0,1,10,10\n",
        "short_row": ref + "0,2,0,0.0,1,10\n",
        "azure_bad_time": az + "yesterday,10,10\n",
        "azure_neg": az + "2024-03-05 09:41:12,10,-1\n",
    }
    for k, v in traces.items():
        f[f"trace_{k}"] = w(f"trace_{k}.csv", v)
    head = ",".join(PROFILE_COLUMNS) + "\n"
    profiles = {
        "header_only": head,
        "bad_gpu": head + "llama2-70b,z100,500,1,120,90,45,8\n",
        "bad_num": head + "llama2-70b,a100-80gb,500,1,120,fast,45,8\n",
        "wrong_cols": "a,b\n1,2\n",
    }
    for k, v in profiles.items():
        f[f"profile_{k}"] = w(f"profile_{k}.csv", v)
    good = w(
        "good_trace.csv", ref + "".join(f"{i},2,0,{i * 0.1:.1f},1,{100 + i},{20 + i}\n" for i in range(40))
    )
    f["good_trace"] = good
    return f


def _bad_values(kind: str) -> list[str]:
    return {
        "pos_float": ["0", "-1", "nan", "inf", "-inf", "abc", "", "1e400", "true"],
        "int": ["-1", "1.5", "abc", "", "1e30", "99999999999999999999999", "true"],
        "count": ["0", "-1", "1.5", "abc", "1000000000", "99999999999999999999999"],
        "cap": ["0", "-0.5", "1.5", "nan", "inf", "abc", ""],
        "range": ["5:2", "0:3", "a:b", "1:", ":3", "-1:3", "1:2:3", "1.5:3", ""],
        "memory": ["abc", "0", "-1GB", "1KB", "12XB", "nan"],
    }[kind]


def cases(tmp: Path) -> list[Case]:
    f = _files(tmp)
    out: list[Case] = []
    sim = [
        "simulate",
        "--design",
        "splitwise-hh",
        "--prompt",
        "2",
        "--token",
        "2",
        "--rate",
        "5",
        "--duration",
        "5",
    ]
    sim_a = [*sim, "--engine", "analytic"]
    search = [
        "search",
        "--design",
        "splitwise-hh",
        "--rate",
        "5",
        "--duration",
        "5",
        "--engine",
        "analytic",
        "--max-machines",
        "4",
    ]
    heat = [
        "heatmap",
        "--design",
        "splitwise-hh",
        "--prompt-range",
        "1:3",
        "--token-range",
        "1:3",
        "--rate",
        "5",
        "--duration",
        "5",
    ]
    gen_out = str(tmp / "gen.csv")
    gen = ["trace", "generate", "--out", gen_out, "--rate", "5", "--duration", "5"]

    def bad(name: str, argv: list[str]) -> None:
        out.append(Case(name, argv))

    # numeric options of every command
    for cmd, base in (("simulate", sim_a), ("search", search), ("heatmap", heat)):
        for opt in ("--rate", "--duration"):
            for v in _bad_values("pos_float"):
                bad(f"{cmd} {opt} {v!r}", [*base, opt, v])
        for v in ["-1", "1.5", "abc", "1e30"]:
            bad(f"{cmd} --seed {v!r}", [*base, "--seed", v])
        for v in _bad_values("memory"):
            bad(f"{cmd} --max-memory {v!r}", [*base, "--max-memory", v])
        for opt in ("--model", "--workload", "--perf"):
            bad(f"{cmd} {opt} unknown", [*base, opt, "no-such-thing"])
        for opt, name in (
            ("--config", "binary.toml"),
            ("--slo", "binary.toml"),
            ("--perf", "binary.csv"),
            ("--config", "syntax.toml"),
            ("--slo", "syntax.toml"),
            ("--config", "folder"),
            ("--slo", "folder"),
            ("--perf", "folder"),
            ("--workload", "binary.csv"),
            ("--workload", "latin1.csv"),
            ("--workload", "empty.csv"),
        ):
            bad(f"{cmd} {opt} {name}", [*base, opt, str(f[name])])
        for name in sorted(k for k in f if k.startswith("config_") and "." not in k):
            bad(f"{cmd} --config {name}", [*base, "--config", str(f[name])])
        for name in sorted(k for k in f if k.startswith("slo_") and "." not in k):
            bad(f"{cmd} --slo {name}", [*base, "--slo", str(f[name])])
        for name in ("profile_header_only", "profile_bad_gpu", "profile_bad_num", "profile_wrong_cols"):
            bad(f"{cmd} --perf {name}", [*base, "--perf", str(f[name])])
    for v in _bad_values("count"):
        bad(f"simulate --prompt {v!r}", [*sim_a[:4], v, *sim_a[5:]])
        bad(f"simulate --token {v!r}", [*sim_a[:6], v, *sim_a[7:]])
        bad(
            f"simulate baseline --machines {v!r}",
            ["simulate", "--design", "baseline-h100", "--machines", v, "--duration", "5", "--rate", "5"],
        )
    for opt in ("--prompt-power-cap", "--token-power-cap"):
        for v in _bad_values("cap"):
            bad(f"simulate named {opt} {v!r}", [*sim_a, opt, v])
            bad(
                f"simulate custom {opt} {v!r}",
                [
                    "simulate",
                    "--prompt-gpu",
                    "h100-80gb",
                    "--prompt",
                    "2",
                    "--token",
                    "2",
                    "--duration",
                    "5",
                    "--engine",
                    "analytic",
                    opt,
                    v,
                ],
            )
            bad(f"heatmap {opt} {v!r}", [*heat, opt, v])
            bad(f"search {opt} {v!r}", [*search, opt, v])
    trace_files = sorted(k for k in f if k.startswith("trace_") and "." not in k)
    for name in [*trace_files, "binary.csv", "latin1.csv", "empty.csv", "folder"]:
        bad(f"simulate --trace {name}", [*sim_a[:6], "2", "--engine", "analytic", "--trace", str(f[name])])
        bad(f"trace stats {name}", ["trace", "stats", str(f[name])])
        bad(f"trace convert {name}", ["trace", "convert", str(f[name]), str(tmp / "conv.csv")])
    bad("simulate --trace missing", [*sim_a[:7], "--trace", str(tmp / "missing.csv")])
    # conflicts and options that cannot apply
    conflicts = [
        ("simulate --machines with split", [*sim_a, "--machines", "3"]),
        (
            "simulate baseline with --prompt",
            ["simulate", "--design", "baseline-h100", "--prompt", "2", "--token", "2", "--duration", "5"],
        ),
        (
            "simulate baseline --token-gpu",
            [
                "simulate",
                "--design",
                "baseline-h100",
                "--machines",
                "2",
                "--token-gpu",
                "a100-80gb",
                "--duration",
                "5",
            ],
        ),
        (
            "simulate baseline --token-power-cap",
            [
                "simulate",
                "--design",
                "baseline-h100",
                "--machines",
                "2",
                "--token-power-cap",
                "0.5",
                "--duration",
                "5",
            ],
        ),
        ("simulate --trace with --rate", [*sim_a[:8], "--trace", str(f["good_trace"])]),
        (
            "simulate --trace with --duration",
            [*sim_a[:6], "2", "--duration", "5", "--trace", str(f["good_trace"])],
        ),
        (
            "simulate --trace with --workload",
            [*sim_a[:7], "--workload", "coding", "--trace", str(f["good_trace"])],
        ),
        ("simulate --requests-out with analytic", [*sim_a, "--requests-out", str(tmp / "r.parquet")]),
        ("simulate --engine bogus", [*sim, "--engine", "bogus"]),
        (
            "simulate --design unknown",
            ["simulate", "--design", "splitwise-zz", "--prompt", "1", "--token", "1"],
        ),
        ("simulate --prompt-gpu unknown", [*sim_a, "--prompt-gpu", "z100"]),
        ("simulate split without --token", ["simulate", "--design", "splitwise-hh", "--prompt", "2"]),
        ("search --prompt-range beyond --max-machines", [*search, "--prompt-range", "50:60"]),
        ("search --token-range beyond --max-machines", [*search, "--token-range", "3:9"]),
        (
            "search --token-range on baseline",
            [
                "search",
                "--design",
                "baseline-h100",
                "--token-range",
                "1:3",
                "--engine",
                "analytic",
                "--duration",
                "5",
            ],
        ),
        (
            "search --token-power-cap on baseline",
            [
                "search",
                "--design",
                "baseline-h100",
                "--token-power-cap",
                "0.5",
                "--engine",
                "analytic",
                "--duration",
                "5",
            ],
        ),
        (
            "search huge ranges",
            ["search", "--prompt-range", "1:1000000", "--token-range", "1:1000000", "--engine", "analytic"],
        ),
        ("search --rate 100000", ["search", "--rate", "100000"]),
        (
            "search --budget with --power-budget-kw",
            [*search, "--budget", "iso-power", "--power-budget-kw", "50"],
        ),
        ("search --scheduler without dask", [*search, "--scheduler", "tcp://x:1"]),
        ("search --backend dask without scheduler", [*search, "--backend", "dask"]),
        ("search --trials with grid", [*search, "--method", "grid", "--trials", "5"]),
        ("search --band with analytic", [*search, "--band", "0.1"]),
        ("search throughput without budget", [*search, "--objective", "throughput"]),
        ("search --objective bogus", [*search, "--objective", "speed"]),
        ("search --method bogus", [*search, "--method", "magic"]),
        ("search --engine bogus", [*search[:-4], "--engine", "bogus"]),
        ("search --budget bogus", [*search, "--budget", "iso-love"]),
        ("search --design unknown", ["search", "--design", "splitwise-zz"]),
        ("search --jobs 0", [*search, "--jobs", "0"]),
        ("search --jobs -5", [*search, "--jobs", "-5"]),
        ("search --trials 0", [*search, "--trials", "0"]),
        ("search --max-machines 0", [*search[:-2], "--max-machines", "0"]),
        ("search --max-machines -3", [*search[:-2], "--max-machines", "-3"]),
        ("search --storage missing folder", [*search, "--storage", str(tmp / "nope" / "s.db")]),
        ("search --storage bad url", [*search, "--storage", "postgresql://nobody@127.0.0.1:1/x"]),
        ("heatmap baseline", ["heatmap", "--design", "baseline-h100", "--prompt-range", "1:2"]),
        ("heatmap huge grid", ["heatmap", "--prompt-range", "1:100000", "--token-range", "1:100000"]),
        ("heatmap --engine bogus", [*heat, "--engine", "bogus"]),
        ("heatmap --jobs 0", [*heat, "--engine", "des", "--jobs", "0"]),
        ("heatmap --jobs with analytic", [*heat, "--engine", "analytic", "--jobs", "2"]),
        ("heatmap --sample-size with des", [*heat, "--engine", "des", "--sample-size", "50"]),
        ("heatmap --sample-size 3", [*heat, "--sample-size", "3"]),
        ("heatmap --trace with --rate", [*heat[:6], "--rate", "5", "--trace", str(f["good_trace"])]),
        ("trace generate --requests 0", [*gen, "--requests", "0"]),
        ("trace generate --cv with poisson", [*gen, "--cv", "2"]),
        ("trace generate --cv 0", [*gen, "--arrival", "gamma", "--cv", "0"]),
        ("trace generate --arrival bogus", [*gen, "--arrival", "bogus"]),
        ("trace generate --recipe bogus", [*gen, "--recipe", "bogus"]),
        ("trace generate --recipe with --seed", [*gen, "--recipe", "splitwise-sim", "--seed", "3"]),
        ("trace generate --seed -1", [*gen, "--seed", "-1"]),
        ("trace generate replay preset", [*gen, "--arrival", "replay"]),
        (
            "trace generate --rate 1e12",
            ["trace", "generate", "--out", gen_out, "--rate", "1e12", "--duration", "10"],
        ),
        ("trace convert onto itself", ["trace", "convert", str(f["good_trace"]), str(f["good_trace"])]),
        (
            "perf check --seed -1",
            ["perf", "check", "--profile", str(PROFILE), "--perf", "profile", "--seed", "-1"],
        ),
        ("perf check --seed with analytic", ["perf", "check", "--profile", str(PROFILE), "--seed", "3"]),
        (
            "perf check --tensor-parallel 0",
            ["perf", "check", "--profile", str(PROFILE), "--tensor-parallel", "0"],
        ),
        (
            "perf check --tensor-parallel 3",
            ["perf", "check", "--profile", str(PROFILE), "--tensor-parallel", "3"],
        ),
        ("perf check --perf bogus", ["perf", "check", "--profile", str(PROFILE), "--perf", "magic"]),
        (
            "perf check --prompt-curves with analytic",
            ["perf", "check", "--profile", str(PROFILE), "--prompt-curves", "pooled"],
        ),
        ("catalog extra arg", ["catalog", "extra"]),
        ("unknown command", ["frobnicate"]),
        ("reproduce --duration 0", ["reproduce", "--quick", "--duration", "0", "--out", str(tmp / "rep")]),
        (
            "reproduce --model unknown",
            ["reproduce", "--quick", "--model", "gpt-9", "--out", str(tmp / "rep")],
        ),
        (
            "reproduce --assumptions bogus",
            ["reproduce", "--quick", "--assumptions", "x", "--out", str(tmp / "rep")],
        ),
        ("reproduce --jobs 0", ["reproduce", "--quick", "--jobs", "0", "--out", str(tmp / "rep")]),
    ]
    for v in _bad_values("range"):
        conflicts.append((f"search --prompt-range {v!r}", [*search[:-2], "--prompt-range", v]))
        conflicts.append((f"heatmap --prompt-range {v!r}", ["heatmap", "--prompt-range", v]))
        conflicts.append((f"heatmap --token-range {v!r}", ["heatmap", "--token-range", v]))
    for name, argv in conflicts:
        bad(name, argv)
    for opt in ("--power-budget-kw", "--cost-budget-usd-per-h"):
        for v in _bad_values("pos_float"):
            bad(f"search {opt} {v!r}", [*search, "--objective", "throughput", opt, v])
    # output paths: checked before any work
    bad_outs = {
        "missing folder": tmp / "nope" / "x",
        "a folder": f["folder"],
        "/proc": Path("/proc/x"),
        "wrong extension": tmp / "x.txt",
    }
    for label, p in bad_outs.items():
        suffixed = p if label in ("a folder", "wrong extension") else p.with_suffix(".parquet")
        png = p if label in ("a folder", "wrong extension") else p.with_suffix(".png")
        csv = p if label in ("a folder",) else p.with_suffix(".txt" if label == "wrong extension" else ".csv")
        toml = p if label in ("a folder", "wrong extension") else p.with_suffix(".toml")
        bad(f"search --out {label}", [*search, "--out", str(suffixed)])
        bad(f"simulate --requests-out {label}", [*sim, "--requests-out", str(suffixed)])
        bad(f"heatmap --out {label}", [*heat, "--out", str(suffixed)])
        bad(f"heatmap --plot {label}", [*heat, "--plot", str(png)])
        bad(
            f"trace generate --out {label}",
            ["trace", "generate", "--out", str(csv), "--rate", "5", "--duration", "5"],
        )
        bad(f"trace convert OUT {label}", ["trace", "convert", str(f["good_trace"]), str(csv)])
        bad(f"perf fit --out {label}", ["perf", "fit", "--profile", str(PROFILE), "--out", str(toml)])
    bad("simulate --requests-out x.csv", [*sim, "--requests-out", str(tmp / "x.csv")])
    bad("heatmap --out and --plot swapped", [*heat, "--out", str(tmp / "a.png")])
    for name in ("binary.csv", "folder", "profile_header_only", "profile_wrong_cols", "empty.csv"):
        bad(f"perf check --profile {name}", ["perf", "check", "--profile", str(f[name])])
        bad(
            f"perf fit --profile {name}",
            ["perf", "fit", "--profile", str(f[name]), "--out", str(tmp / "c.toml")],
        )

    # effects: an option given must show in the result
    def key(doc: dict, *path: str):
        for p in path:
            doc = doc[p]
        return doc

    def effect(name: str, argv: list[str], check: Callable[[dict], str | None]) -> None:
        out.append(Case(name, [*argv, "--json"], expect="ok", check=check))

    base_kw = 22.4  # 2 + 2 DGX-H100 at full power

    effect(
        "simulate named --token-power-cap applied",
        [*sim_a, "--token-power-cap", "0.5"],
        lambda d: None if d["power_kw"] < base_kw - 1 else f"power_kw {d['power_kw']}",
    )
    effect(
        "simulate named --prompt-power-cap applied",
        [*sim_a, "--prompt-power-cap", "0.5"],
        lambda d: None if d["power_kw"] < base_kw - 1 else f"power_kw {d['power_kw']}",
    )
    effect(
        "simulate named --prompt-gpu applied",
        [*sim_a, "--prompt-gpu", "a100-80gb"],
        lambda d: None if "a100" in d["design"] else f"design {d['design']}",
    )
    effect(
        "simulate hhcap --token-power-cap 1 applied",
        [
            "simulate",
            "--design",
            "splitwise-hhcap",
            "--prompt",
            "2",
            "--token",
            "2",
            "--duration",
            "5",
            "--engine",
            "analytic",
            "--token-power-cap",
            "1.0",
        ],
        lambda d: None if abs(d["power_kw"] - base_kw) < 0.01 else f"power_kw {d['power_kw']}",
    )
    effect(
        "simulate baseline --prompt-power-cap applied",
        [
            "simulate",
            "--design",
            "baseline-h100",
            "--machines",
            "2",
            "--duration",
            "5",
            "--engine",
            "analytic",
            "--prompt-power-cap",
            "0.5",
        ],
        lambda d: None if d["power_kw"] < base_kw / 2 - 1 else f"power_kw {d['power_kw']}",
    )
    effect(
        "simulate --rate applied",
        [*sim_a[:8], "9", *sim_a[9:]],
        lambda d: None if d["requests"] > 30 else f"requests {d['requests']}",
    )
    effect(
        "simulate --duration applied",
        [*sim_a[:10], "2", *sim_a[11:]],
        lambda d: None if d["requests"] < 20 else f"requests {d['requests']}",
    )
    effect(
        "simulate --trace applied",
        [*sim_a[:8], "--trace", str(f["good_trace"])],
        lambda d: None if d["requests"] == 40 else f"requests {d['requests']}",
    )
    effect(
        "simulate --model applied",
        [*sim_a, "--model", "bloom-176b"],
        lambda d: None if d["requests"] > 0 else "no requests",
    )
    effect(
        "simulate one-instant trace has undefined throughput",
        [*sim[:6], "2", "--trace", str(tmp / "instant.csv")],
        lambda d: None if d["throughput_rps"] is None else f"throughput {d['throughput_rps']}",
    )
    (tmp / "instant.csv").write_text(
        ",".join(REFERENCE_COLUMNS) + "\n" + "".join(f"{i},2,0,0.0,1,100,20\n" for i in range(50))
    )

    def in_range(lo: int, hi: int, which: str) -> Callable[[dict], str | None]:
        def check(d: dict) -> str | None:
            for r in d["results"]:
                v = r[which]
                if v is not None and not lo <= v <= hi:
                    return f"{r['design']} {which} {v} outside {lo}:{hi}"
            return None

        return check

    effect(
        "search --prompt-range honoured",
        [*search[:-2], "--prompt-range", "2:3"],
        in_range(2, 3, "prompt_machines"),
    )
    effect(
        "search --token-range honoured",
        [*search[:-2], "--token-range", "3:4"],
        in_range(3, 4, "token_machines"),
    )
    effect("search --max-machines honoured", search, in_range(1, 4, "prompt_machines"))
    effect(
        "search named --token-power-cap applied",
        [*search, "--token-power-cap", "0.5"],
        lambda d: None if all(r["token_power_cap"] == 0.5 for r in d["results"]) else str(d["results"]),
    )
    effect(
        "search --trials beyond space",
        [
            "search",
            "--prompt-gpu",
            "h100-80gb",
            "--prompt-gpu",
            "a100-80gb",
            "--token-gpu",
            "a100-80gb",
            "--prompt-range",
            "1:3",
            "--token-range",
            "1:3",
            "--method",
            "optuna",
            "--trials",
            "1000000000",
            "--engine",
            "analytic",
            "--rate",
            "5",
            "--duration",
            "5",
        ],
        lambda d: None if d["results"] else "no results",
    )
    effect(
        "heatmap ranges honoured",
        [*heat, "--engine", "analytic"],
        lambda d: None if d["points"] == 9 else f"points {d['points']}",
    )
    effect(
        "heatmap named --token-power-cap applied",
        [*heat, "--token-power-cap", "0.5"],
        lambda d: None if d["design"] != "splitwise-hh" else "design unchanged",
    )
    effect(
        "trace generate --requests applied",
        [*gen, "--requests", "7"],
        lambda d: None if d["requests"] == 7 else f"requests {d['requests']}",
    )
    effect(
        "trace generate --duration applied",
        ["trace", "generate", "--out", gen_out, "--rate", "10", "--duration", "2"],
        lambda d: None if d["duration_s"] <= 2 else f"duration {d['duration_s']}",
    )
    return out


def _run(case: Case, env: dict[str, str]) -> Outcome:
    t0 = time.perf_counter()
    try:
        p = subprocess.run(
            [sys.executable, "-m", "splitplan", *case.argv],
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            env=env,
            cwd=ROOT,
        )
        rc, out, err = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired:
        return Outcome(case, -1, "", "", time.perf_counter() - t0, "hang")
    wall = time.perf_counter() - t0
    lines = [ln for ln in err.splitlines() if ln.strip()]
    if "Traceback" in err or ("Error:" in err and "splitplan: error" not in err):
        verdict = "traceback"
    elif rc == 134 or rc < 0:
        verdict = f"abort (exit {rc})"
    elif case.expect == "error":
        if rc == 0:
            verdict = "accepted nonsense"
        elif rc != 2:
            verdict = f"exit {rc}"
        elif len(lines) != 1:
            verdict = "multi-line error"
        else:
            verdict = "pass"
    else:
        if rc == 2:
            verdict = "rejected valid" if case.check is None else "pass (refused)"
        elif rc != 0:
            verdict = f"exit {rc}"
        else:
            try:
                problem = case.check(json.loads(out)) if case.check else None
            except (ValueError, KeyError, TypeError) as exc:
                problem = f"unreadable output ({exc})"
            verdict = "pass" if problem is None else f"ignored option: {problem}"
    return Outcome(case, rc, err, out, wall, verdict)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--repeat-errors", type=int, default=0)
    args = ap.parse_args()
    env = dict(os.environ, PYTHONPATH=str(ROOT), NUMBA_NUM_THREADS="1")
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        todo = cases(tmp)
        if args.limit:
            todo = todo[: args.limit]
        if args.repeat_errors:
            errs = [c for c in todo if c.expect == "error"]
            todo = todo + [errs[i % len(errs)] for i in range(args.repeat_errors)]
        t0 = time.perf_counter()

        def one(c: Case) -> Outcome:
            r = _run(c, env)
            if not r.verdict.startswith("pass"):
                tail = (r.stderr.strip().splitlines() or [""])[-1][:200]
                print(f"FAIL [{r.verdict}] {c.name}: rc={r.rc} {tail}", flush=True)
            return r

        with ThreadPoolExecutor(args.jobs) as pool:
            results = list(pool.map(one, todo))
        wall = time.perf_counter() - t0
    tally = Counter(r.verdict.split(":")[0] for r in results)
    print(
        f"cases: {len(results)} ({sum(c.expect == 'error' for c in todo)} bad-input, "
        f"{sum(c.expect == 'ok' for c in todo)} effect) in {wall:.0f} s"
    )
    for k, v in sorted(tally.items()):
        print(f"  {k}: {v}")
    fails = [r for r in results if not r.verdict.startswith("pass")]
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
