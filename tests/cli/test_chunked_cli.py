"""`--chunk-tokens` and the chunked-prefill designs on the command line."""

from __future__ import annotations

import json

from splitplan.cli import main


def run_json(capsys, args: list[str]) -> dict:
    code = main(args)
    out = capsys.readouterr().out
    assert code == 0
    return json.loads(out)


SIM = ["simulate", "--design", "chunked-h100", "--machines", "3", "--rate", "8", "--duration", "20", "--json"]


def test_chunk_tokens_takes_effect(capsys):
    default = run_json(capsys, SIM)
    small = run_json(capsys, [*SIM, "--chunk-tokens", "64"])
    assert default["slowdown"]["ttft_p50"] != small["slowdown"]["ttft_p50"]
    assert small["slowdown"]["ttft_p50"] > default["slowdown"]["ttft_p50"]


def test_chunk_tokens_is_refused_where_it_cannot_take_effect(capsys):
    for args in (
        ["simulate", "--design", "baseline-a100", "--machines", "3", "--chunk-tokens", "256"],
        ["search", "--design", "splitwise-hh", "--chunk-tokens", "256", "--max-machines", "2"],
        [*SIM, "--chunk-tokens", "0"],
    ):
        code = main(args)
        err = capsys.readouterr().err
        assert code == 2, args
        assert "chunk" in err
        assert len(err.strip().splitlines()) == 1


def test_catalog_lists_the_chunked_designs(capsys):
    doc = run_json(capsys, ["catalog", "--json"])
    names = {d["name"] for d in doc["designs"]}
    assert {"chunked-a100", "chunked-h100", "baseline-a100", "splitwise-hh"} <= names
