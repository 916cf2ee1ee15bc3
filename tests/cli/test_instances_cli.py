"""`--prompt-tp/--token-tp/--*-precision` on simulate, heatmap and search: outputs say each pool's
instance, and every bad instance is one line and exit 2."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from splitplan.cli import main

SMALL = ["--model", "llama3.1-70b", "--rate", "4", "--duration", "20"]


def _json(capsys, argv: list[str]) -> dict:
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_simulate_reports_instances_and_whole_nodes(capsys) -> None:
    doc = _json(
        capsys,
        [
            "simulate",
            "--design",
            "splitwise-hh",
            "--prompt",
            "3",
            "--token",
            "5",
            "--prompt-tp",
            "4",
            "--token-tp",
            "2",
            "--token-precision",
            "fp8",
            "--json",
            *SMALL,
        ],
    )
    assert (doc["prompt_instances"], doc["token_instances"]) == (3, 5)
    assert (doc["prompt_machines"], doc["token_machines"], doc["machines"]) == (2, 2, 4)
    assert (doc["prompt_tp"], doc["token_tp"]) == (4, 2)
    assert (doc["prompt_precision"], doc["token_precision"], doc["token_kv_precision"]) == (
        "fp16",
        "fp8",
        "fp8",
    )
    assert doc["cost_usd_per_h"] == pytest.approx(38.0 * (3 * 4 + 5 * 2) / 8)


def test_paper_design_json_is_unchanged_apart_from_added_keys(capsys) -> None:
    doc = _json(
        capsys, ["simulate", "--design", "splitwise-hh", "--prompt", "2", "--token", "1", "--json", *SMALL]
    )
    assert (doc["prompt_machines"], doc["token_machines"], doc["machines"]) == (2, 1, 3)
    assert (doc["prompt_instances"], doc["prompt_tp"], doc["token_kv_precision"]) == (2, 8, "fp16")


def test_heatmap_takes_instances(capsys, tmp_path) -> None:
    out = tmp_path / "h.parquet"
    doc = _json(
        capsys,
        [
            "heatmap",
            "--design",
            "splitwise-hh",
            "--token-tp",
            "2",
            "--token-kv-precision",
            "fp8",
            "--prompt-range",
            "1:3",
            "--token-range",
            "1:3",
            "--out",
            str(out),
            "--json",
            *SMALL,
        ],
    )
    assert (doc["token_tp"], doc["token_precision"], doc["token_kv_precision"]) == (2, "fp16", "fp8")
    assert pq.read_table(out).num_rows == 9


def test_search_records_each_pools_instance(capsys, tmp_path) -> None:
    out = tmp_path / "pts.parquet"
    doc = _json(
        capsys,
        [
            "search",
            "--design",
            "splitwise-hh",
            "--prompt-tp",
            "4,8",
            "--token-tp",
            "2,4",
            "--token-precision",
            "fp8",
            "--prompt-range",
            "1:6",
            "--token-range",
            "1:6",
            "--out",
            str(out),
            "--json",
            *SMALL,
        ],
    )
    best = doc["best"]
    assert best["design"] == "splitwise-hh"
    assert best["verified_by"] == "des"
    assert best["method"] == "grid"
    assert best["prompt_tp"] in (4, 8)
    assert best["token_tp"] in (2, 4)
    assert best["token_precision"] == "fp8"
    nodes = -(-best["prompt_instances"] * best["prompt_tp"] // 8) + -(
        -best["token_instances"] * best["token_tp"] // 8
    )
    assert best["machines"] == nodes
    rows = pq.read_table(out).to_pylist()
    assert {(r["prompt_tp"], r["token_tp"]) for r in rows} == {(4, 2), (4, 4), (8, 2), (8, 4)}
    assert {r["token_precision"] for r in rows} == {"fp8"}
    assert {r["design"] for r in rows} == {"splitwise-hh"}


def test_search_without_designs_leaves_out_gpus_without_fp8_and_says_so(capsys) -> None:
    doc = _json(
        capsys,
        [
            "search",
            "--token-precision",
            "fp8",
            "--design",
            "splitwise-hh",
            "--prompt-range",
            "1:3",
            "--token-range",
            "1:3",
            "--json",
            *SMALL,
        ],
    )
    assert [r["design"] for r in doc["results"]] == ["splitwise-hh"]
    from splitplan.api._search import SearchRequest, build_spaces

    notes: list[str] = []
    spaces = build_spaces(SearchRequest(token_precision="fp8"), notes)
    kept = ["baseline-a100", "baseline-h100", "splitwise-hh", "splitwise-hhcap"]
    kept += ["chunked-a100", "chunked-h100"]  # chunked baselines run fp16; token options do not apply
    assert [s.name for s in spaces] == kept
    assert any("splitwise-ha left out" in n and "fp8" in n for n in notes)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["simulate", "--prompt", "1", "--token", "1", "--prompt-tp", "3"], "does not divide the 8 GPUs"),
        (
            [
                "simulate",
                "--design",
                "splitwise-ha",
                "--prompt",
                "1",
                "--token",
                "1",
                "--token-precision",
                "fp8",
            ],
            "no fp8 support",
        ),
        (["simulate", "--prompt", "1", "--token", "1", "--prompt-precision", "fp4"], "must be one of"),
        (["simulate", "--prompt", "1", "--token", "1", "--token-kv-precision", "int4"], "must be one of"),
        (["simulate", "--prompt", "1", "--token", "1", "--token-tp", "1"], "does not fit"),
        (["simulate", "--design", "baseline-h100", "--machines", "2", "--token-tp", "2"], "one pool"),
        (["search", "--design", "splitwise-hh", "--token-tp", "1,2"], "token pool.*does not fit"),
        (["search", "--design", "splitwise-ha", "--token-precision", "fp8"], "no fp8 support"),
        (["search", "--design", "splitwise-hh", "--prompt-tp", "2,x"], "comma list of integers"),
        (["search", "--design", "splitwise-hh", "--prompt-tp", "6"], "does not divide"),
        (["search", "--design", "baseline-h100", "--token-tp", "2"], "one pool"),
        (["heatmap", "--design", "splitwise-hh", "--token-tp", "16"], "does not divide"),
    ],
)
def test_bad_instances_are_one_line_and_exit_2(capsys, argv: list[str], message: str) -> None:
    import re

    assert main([*argv, *SMALL]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert re.search(message, err), err


ACCEPTANCE = ["search", "--model", "llama3.1-70b", "--prompt-tp", "2,4,8", "--token-tp", "1,2,4,8"]
ACCEPTANCE += ["--token-precision", "fp8"]
# a small workload and count ranges (instances of the smallest TP) keep it a few seconds; the
# full-size command is the same code path with Optuna for its larger space
SMALLER = ["--rate", "5", "--duration", "30", "--prompt-range", "1:12", "--token-range", "1:24"]


def test_acceptance_search_over_tp_per_pool(capsys) -> None:
    doc = _json(capsys, [*ACCEPTANCE, *SMALLER, "--json"])
    rows = {r["design"]: r for r in doc["results"]}
    assert list(rows) == [
        "baseline-a100",
        "baseline-h100",
        "splitwise-hh",
        "splitwise-hhcap",
        "chunked-a100",
        "chunked-h100",
    ]
    assert any("splitwise-ha left out" in n for n in doc["notes"])
    for name, r in rows.items():
        assert r["method"] == "grid"
        assert r["prompt_tp"] in (2, 4, 8)
        assert r["prompt_precision"] == "fp16"
        if name.startswith("splitwise"):
            assert r["meets_slo"]
            assert r["verified_by"] == "des"
            assert r["token_tp"] in (1, 2, 4, 8)
            assert (r["token_precision"], r["token_kv_precision"]) == ("fp8", "fp8")
    best = doc["best"]
    assert best["design"].startswith("splitwise")
    assert best["token_tp"] is not None
    assert main([*ACCEPTANCE, *SMALLER]) == 0
    text = capsys.readouterr().out
    winner = next(line for line in text.splitlines() if line.startswith("Winner:"))
    assert f"tp{best['prompt_tp']} fp16 / tp{best['token_tp']} fp8" in winner


# H200 TP1 instances hold Llama-2-70B's weights with 3 GB to spare, and the conversation preset
# over 60 s has a prompt of 11,013 tokens, whose KV cache needs 3.7 GB
TIGHT = ["--design", "custom", "--prompt-gpu", "hgx-h200", "--token-gpu", "hgx-h200"]
TIGHT += ["--model", "llama2-70b", "--workload", "conversation", "--rate", "20", "--duration", "60"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["search", *TIGHT, "--token-tp", "1,2"],
            r"token pool: a request of 11,013 prompt tokens needs .* drop it",
        ),
        (["search", *TIGHT, "--token-tp", "1,2", "--engine", "analytic"], r"token pool: a request of 11,013"),
        (
            ["heatmap", *TIGHT, "--token-tp", "1", "--engine", "analytic"],
            r"^splitplan: error: a request of 11,013",
        ),
    ],
)
def test_an_instance_too_small_for_a_request_is_refused_by_every_engine(
    capsys, argv: list[str], message: str
) -> None:
    """A token instance that holds the weights but not the workload's largest request: the DES
    refuses it at any pool size, so a search refuses the choice before spending time (it used to
    answer with the other TP, the small one screened and never simulated), and the analytic
    engine refuses it as the DES does (it used to give a verdict)."""
    import re

    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert re.search(message, err), err
