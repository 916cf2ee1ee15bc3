"""Bad input files and folders of `catalog`, `catalog import-hf`, `perf fit`, `--perf FILE`,
`--catalog` / `$SPLITPLAN_CATALOG` and `search --request`: each is one line on stderr naming the
file or option, exit 2, never a traceback, and never a URL's password."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from splitplan._paths import data_dir
from splitplan.catalog._load import CATALOG_ENV, clear_caches
from splitplan.cli import main

SECRET = "S3CR3T"
URL = f"s3://u:{SECRET}@h/cat"
GARBAGE = bytes(range(128, 256)) * 2  # not UTF-8 anywhere
CONFIG = {
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 11008,
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 32,
    "vocab_size": 32000,
    "torch_dtype": "float16",
}
SIM = ["simulate", "--design", "splitwise-hh", "--prompt", "2", "--token", "2", "--rate", "5"]
SIM_A = [*SIM, "--duration", "5", "--engine", "analytic"]


@pytest.fixture(autouse=True)
def isolated(monkeypatch):
    monkeypatch.setenv(CATALOG_ENV, "")
    clear_caches()
    yield
    clear_caches()


def _error(capsys, argv: list[str], *needles: str) -> str:
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 2, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in lines[0], lines[0]
    assert SECRET not in out + err
    return lines[0]


def _garbage(tmp_path: Path, name: str = "garbage.bin") -> Path:
    f = tmp_path / name
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_bytes(GARBAGE)
    return f


def _config(tmp_path: Path, **changes: object) -> Path:
    f = tmp_path / "mymodel" / "config.json"
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_text(json.dumps({**CONFIG, **changes}))  # Python's JSON writes inf/nan as Infinity/NaN
    return f


def _afile(tmp_path: Path) -> Path:
    f = tmp_path / "afile"
    f.write_text("hi\n")
    return f


# bug 1: a request file that is not text
def test_a_binary_request_file_is_one_line(tmp_path, capsys) -> None:
    _error(capsys, ["search", "--request", str(_garbage(tmp_path))], "request", "not UTF-8")


def test_a_request_url_is_refused_without_its_password(capsys) -> None:
    _error(capsys, ["search", "--request", f"{URL}/r.toml"], "--request", "is a URL")


# bug 2: a catalog file that is not text
def test_a_binary_catalog_file_is_one_line(tmp_path, capsys) -> None:
    _garbage(tmp_path, "cat/models.toml")
    _error(capsys, ["--catalog", str(tmp_path / "cat"), "catalog"], "models.toml", "not UTF-8")


# bug 3: $SPLITPLAN_CATALOG is checked as --catalog is
def test_the_environment_catalog_is_checked_like_the_option(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.setenv(CATALOG_ENV, str(tmp_path / "nonexistent"))
    _error(capsys, ["catalog"], "$SPLITPLAN_CATALOG", "does not exist")
    monkeypatch.setenv(CATALOG_ENV, str(_afile(tmp_path)))
    _error(capsys, ["catalog"], "$SPLITPLAN_CATALOG", "is a file, not a folder")
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "gpus.toml").write_text("schema_version = 1\n[gpu.x\n")
    monkeypatch.setenv(CATALOG_ENV, str(bad))
    line = _error(capsys, ["catalog"], "gpus.toml", "not TOML")
    assert "dgx" not in line  # the file's own error, not a shipped machine's


def test_a_bad_environment_catalog_is_one_line_from_a_fresh_process(tmp_path) -> None:
    """The catalog must not be read while the CLI imports (outside its error handling)."""
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "gpus.toml").write_text("schema_version = 1\n[gpu.x\n")
    env = {**os.environ, CATALOG_ENV: str(bad)}
    for argv in (["catalog"], [*SIM_A, "--json"]):
        done = subprocess.run(
            [sys.executable, "-m", "splitplan", *argv], env=env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 2, done.stderr
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1, done.stderr
        assert "gpus.toml" in lines[0]


def test_paper_design_names_are_the_designs() -> None:
    from splitplan.design import CHUNKED_DESIGNS, PAPER_DESIGNS, _chunked_designs, _paper_designs

    assert tuple(_paper_designs()) == PAPER_DESIGNS
    assert tuple(_chunked_designs()) == CHUNKED_DESIGNS


# bug 11: --catalog FILE says what it is
def test_a_catalog_option_naming_a_file_says_so(tmp_path, capsys) -> None:
    _error(capsys, ["--catalog", str(_afile(tmp_path)), "catalog"], "--catalog", "is a file, not a folder")


# bug 4, 5: import-hf configs
@pytest.mark.parametrize(
    ("changes", "needles"),
    [
        ({"intermediate_size": float("inf")}, ("intermediate_size",)),
        ({"head_dim": float("nan")}, ("head_dim",)),
        ({"num_hidden_layers": 1e30}, ("num_hidden_layers",)),
        ({"num_hidden_layers": 10**30}, ("num_hidden_layers",)),
        ({"num_hidden_layers": 32.5}, ("num_hidden_layers",)),
        ({"num_key_value_heads": 8.0}, ("num_key_value_heads",)),
        ({"num_key_value_heads": 5}, ("num_key_value_heads (5) must divide num_attention_heads (32)",)),
        ({"torch_dtype": "int3"}, ("torch_dtype 'int3'",)),
        ({"num_local_experts": float("inf")}, ("num_local_experts",)),
    ],
)
def test_import_hf_bad_numbers_are_one_line(tmp_path, capsys, changes, needles) -> None:
    _error(capsys, ["catalog", "import-hf", str(_config(tmp_path, **changes)), "--name", "m1"], *needles)


def test_import_hf_reads_the_dtype_it_is_given(tmp_path, capsys) -> None:
    cfg = _config(tmp_path, torch_dtype="float32")
    assert main(["catalog", "import-hf", str(cfg), "--name", "m1"]) == 0
    assert "dtype_bytes = 4" in capsys.readouterr().out


def test_import_hf_binary_config_and_empty_name(tmp_path, capsys) -> None:
    _error(capsys, ["catalog", "import-hf", str(_garbage(tmp_path))], "not UTF-8")
    _error(capsys, ["catalog", "import-hf", str(_config(tmp_path)), "--name", ""], "--name", "empty")


# bug 6, 7: import-hf --out
def test_import_hf_out_must_be_a_folder(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)  # where a URL taken for a path would become a folder `s3:`
    cfg = str(_config(tmp_path))
    afile = _afile(tmp_path)
    for out in (afile, afile / "sub"):
        _error(capsys, ["catalog", "import-hf", cfg, "--out", str(out)], "--out", "is a file, not a folder")
    _error(capsys, ["catalog", "import-hf", cfg, "--out", URL], "--out", "is a URL")
    assert not (tmp_path / "s3:").exists()
    _garbage(tmp_path, "outbin/models.toml")
    _error(capsys, ["catalog", "import-hf", cfg, "--out", str(tmp_path / "outbin")], "models.toml", "UTF-8")


# bug 8: perf fit --name --out
def test_perf_fit_out_must_be_a_folder(tmp_path, capsys, monkeypatch, measurement_table) -> None:
    monkeypatch.chdir(tmp_path)  # where a URL taken for a path would become a folder `s3:`
    fit = ["perf", "fit", "--profile", str(measurement_table), "--name", "s2", "--out"]
    afile = _afile(tmp_path)
    for out in (afile, afile / "sub"):
        _error(capsys, [*fit, str(out)], "--out", "is a file, not a folder")
    _error(capsys, [*fit, URL], "--out", "is a URL")
    assert not (tmp_path / "s3:").exists()


# bug 9: --tensor-parallel 0 is refused, not taken as 8
def test_perf_fit_refuses_tensor_parallel_zero(tmp_path, capsys, measurement_table) -> None:
    argv = ["perf", "fit", "--profile", str(measurement_table), "--out", str(tmp_path / "c.toml")]
    _error(capsys, [*argv, "--tensor-parallel", "0"], "--tensor-parallel", "≥ 1")


# bug 10: stack files
def _stack(tmp_path: Path, old: str, new: str) -> Path:
    text = (data_dir() / "perf" / "kernels.toml").read_text()
    assert old in text
    f = tmp_path / "st.toml"
    f.write_text(text.replace(old, new, 1))
    return f


def test_a_stack_file_of_another_schema_version_is_refused(tmp_path, capsys) -> None:
    f = _stack(tmp_path, "schema_version = 1", "schema_version = 7")
    _error(capsys, [*SIM_A, "--perf", str(f)], str(f), "schema_version must be 1")


def test_a_stack_file_missing_a_parameter_is_refused(tmp_path, capsys) -> None:
    f = _stack(tmp_path, "\ncompute_eff =", "\n# compute_eff =")
    _error(capsys, [*SIM_A, "--perf", str(f)], str(f), "missing compute_eff")
