"""A user catalog folder with a new GPU (and its node type) and a new model, end to end: search,
simulate and heatmap run on it, and `catalog` labels its entries as the user's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from splitplan.catalog._load import CATALOG_ENV, clear_caches
from splitplan.cli import main

GPUS = """schema_version = 1
[gpu.x200-96gb]
memory_bytes = 96e9
hbm_bytes_per_s = 4.0e12
fp16_flops = 1200e12
fp8_flops = 2400e12
tdp_w = 800
source = "lab measurements"
"""
MACHINES = """schema_version = 1
[machine.x200-8x]
gpu = "x200-96gb"
gpus = 8
cost_usd_per_h = 30.0
interconnect_bytes_per_s = 400e9
source = "negotiated price"
"""
CONFIG = {
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "vocab_size": 128256,
    "tie_word_embeddings": False,
}
SMALL = ["--rate", "4", "--duration", "20", "--model", "my-8b"]


@pytest.fixture
def catalog_dir(tmp_path, monkeypatch, capsys) -> Path:
    monkeypatch.setenv(CATALOG_ENV, "")
    clear_caches()
    d = tmp_path / "mycat"
    d.mkdir()
    (d / "gpus.toml").write_text(GPUS)
    (d / "machines.toml").write_text(MACHINES)
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(CONFIG))
    assert main(["catalog", "import-hf", str(cfg), "--name", "my-8b", "--out", str(d)]) == 0
    assert "computed from the architecture" in capsys.readouterr().out
    yield d
    clear_caches()


def _json(capsys, argv: list[str]) -> dict:
    assert main(argv) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def test_user_catalog_end_to_end(catalog_dir: Path, capsys, tmp_path) -> None:
    cat = ["--catalog", str(catalog_dir)]
    doc = _json(
        capsys,
        [
            "simulate",
            "--prompt-gpu",
            "x200-8x",
            "--prompt",
            "1",
            "--token",
            "1",
            "--token-tp",
            "1",
            "--token-precision",
            "fp8",
            "--json",
            *SMALL,
            *cat,
        ],
    )
    assert doc["meets_slo"] in (True, False)
    assert (doc["token_tp"], doc["token_precision"], doc["cost_usd_per_h"]) == (1, "fp8", 30.0 + 30.0 / 8)

    out = tmp_path / "h.parquet"
    doc = _json(
        capsys,
        [
            *cat,
            "heatmap",
            "--prompt-gpu",
            "x200-8x",
            "--prompt-range",
            "1:2",
            "--token-range",
            "1:2",
            "--out",
            str(out),
            "--json",
            *SMALL,
        ],
    )
    assert doc["points"] == 4
    assert out.is_file()

    doc = _json(
        capsys,
        [
            "search",
            "--prompt-gpu",
            "x200-8x",
            "--prompt-tp",
            "2,8",
            "--token-tp",
            "1,8",
            "--token-precision",
            "fp8",
            "--prompt-range",
            "1:4",
            "--token-range",
            "1:8",
            "--json",
            *SMALL,
            *cat,
        ],
    )
    best = doc["best"]
    assert best["prompt_gpu"] == best["token_gpu"] == "x200-8x"
    assert best["verified_by"] == "des"
    assert best["prompt_tp"] in (2, 8)
    assert best["token_precision"] == "fp8"

    doc = _json(capsys, ["catalog", "--json", *cat])
    origin = {(k, e["name"]): e["origin"] for k in ("gpus", "machines", "models") for e in doc[k]}
    assert origin[("gpus", "x200-96gb")] == str(catalog_dir.resolve() / "gpus.toml")
    assert origin[("machines", "x200-8x")] == str(catalog_dir.resolve() / "machines.toml")
    assert origin[("models", "my-8b")] == str(catalog_dir.resolve() / "models.toml")
    assert origin[("gpus", "h100-80gb")] == "shipped"
    assert main(["catalog", *cat]) == 0
    text = capsys.readouterr().out
    assert "user:" in text
    assert "x200-96gb" in text


def test_without_the_catalog_the_user_entries_are_unknown(catalog_dir: Path, capsys) -> None:
    assert main(["simulate", "--prompt-gpu", "x200-8x", "--prompt", "1", "--token", "1", *SMALL]) == 2
    err = capsys.readouterr().err
    assert "unknown" in err
    assert len(err.strip().splitlines()) == 1


def test_a_bad_user_catalog_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setenv(CATALOG_ENV, "")
    clear_caches()
    d = tmp_path / "bad"
    d.mkdir()
    (d / "gpus.toml").write_text(GPUS.replace("tdp_w = 800\n", ""))
    try:
        assert main(["--catalog", str(d), "catalog"]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1
        assert "missing field 'tdp_w'" in err
        assert main(["catalog", "--catalog", str(tmp_path / "missing")]) == 2
        assert "does not exist" in capsys.readouterr().err
    finally:
        clear_caches()


def _stack_copy(src: str, dst: Path, name: str) -> None:
    from splitplan._paths import data_dir

    text = (data_dir() / "perf" / f"{src}.toml").read_text()
    dst.write_text(text.replace(f'name = "{src}"', f'name = "{name}"', 1))


def test_a_catalog_folder_s_perf_stack_is_found_by_name_and_reread(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setenv(CATALOG_ENV, "")
    clear_caches()
    d = tmp_path / "stacks"
    (d / "perf").mkdir(parents=True)
    run = ["simulate", "--design", "splitwise-hh", "--prompt", "2", "--token", "2", "--engine", "analytic"]
    run += ["--rate", "4", "--duration", "20", "--json"]

    def result(argv: list[str]) -> dict:
        doc = _json(capsys, argv)
        return {k: v for k, v in doc.items() if k not in ("sim_wall_s", "perf")}

    try:
        assert main([*run, "--perf", "mystack"]) == 2
        assert "unknown performance stack 'mystack'" in capsys.readouterr().err
        _stack_copy("splitwise-sim", d / "perf" / "mystack.toml", "mystack")
        mine = result(["--catalog", str(d), *run, "--perf", "mystack"])
        assert mine == result([*run, "--perf", "splitwise-sim"])
        # the same file rewritten: a new --catalog reads it again (its cache is the catalog's)
        _stack_copy("tensorrt-llm", d / "perf" / "mystack.toml", "mystack")
        again = result(["--catalog", str(d), *run, "--perf", "mystack"])
        assert again == result([*run, "--perf", "tensorrt-llm"])
        assert again != mine
    finally:
        clear_caches()
