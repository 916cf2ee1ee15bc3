"""`splitplan perf check|fit` on both table schemas, stacks by name or path, errors as one line."""

from __future__ import annotations

import json
import tomllib

from splitplan.cli import main
from splitplan.perf.measurements import MEASUREMENT_COLUMNS

# the measurement schema's columns (the reader's own list) and its three optional ones
HEADER = ",".join((*MEASUREMENT_COLUMNS, "estimated", "derivation", "notes")) + "\n"
ROWS = (
    "eng,llama2-7b,a100-80gb,1,fp16,prompt,1,192,,,24,no,,\n"
    "eng,llama2-7b,a100-80gb,1,fp16,prompt,1,1536,,,117,no,,\n"
    "eng,llama2-7b,a100-80gb,1,fp16,token,8,,8000,,12,no,,\n"
    "eng,llama2-7b,a100-80gb,1,fp16,static_batch,64,192,,128,2400,no,,\n"
    "eng,llama2-70b,h100-80gb,4,fp8,prompt,1,192,,,33,no,,\n"
    "eng,llama2-70b,h100-80gb,4,fp8,prompt,1,1536,,,97,no,,\n"
    "eng,llama2-70b,h100-80gb,4,fp8,token,64,,64000,,20,no,,\n"
    "eng,llama2-70b,h100-80gb,4,fp8,static_batch,64,1536,,128,17000,no,,\n"
)


def _table(tmp_path):
    f = tmp_path / "m.csv"
    f.write_text(HEADER + ROWS)
    return f


def test_check_measurement_table_json_has_precision_source_and_static_batch(tmp_path, capsys) -> None:
    f = _table(tmp_path)
    assert main(["perf", "check", "--profile", str(f), "--perf", "datasheet", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["perf"] == "datasheet"
    phases = {(g["model"], g["phase"]) for g in doc["groups"]}
    assert ("llama2-70b", "static_batch") in phases
    g = next(g for g in doc["groups"] if g["model"] == "llama2-70b")
    assert g["precision"] == "fp8"
    assert g["source"] == "eng"
    assert g["tensor_parallel"] == 4
    assert set(doc["overall"]) == {"prompt_mape", "token_mape", "static_batch_mape"}


def test_check_table_output_and_stack_file_path(tmp_path, capsys) -> None:
    from splitplan.perf.stacks import find_stack

    f = _table(tmp_path)
    path = str(find_stack("kernels"))
    assert main(["perf", "check", "--profile", str(f), "--perf", path]) == 0
    out = capsys.readouterr().out
    assert "fp8" in out
    assert "static_batch MAPE" in out


def test_fit_writes_a_stack_the_catalog_finds_with_true_provenance(tmp_path, capsys, monkeypatch) -> None:
    f = _table(tmp_path)
    cat = tmp_path / "cat"
    argv = ["perf", "fit", "--profile", str(f), "--name", "myengine", "--out", str(cat), "--cv", "group"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "leave-one-group-out" in out
    assert "llama2-70b h100-80gb TP4 fp8" in out
    written = cat / "perf" / "myengine.toml"
    doc = tomllib.loads(written.read_text())
    import hashlib

    assert doc["provenance"]["sha256"] == hashlib.sha256(f.read_bytes()).hexdigest()
    assert doc["provenance"]["source"] == str(f)
    assert doc["provenance"]["rows"] == 8
    assert "--name myengine" in doc["provenance"]["command"]
    monkeypatch.setenv("SPLITPLAN_CATALOG", str(cat))
    assert main(["perf", "check", "--profile", str(f), "--perf", "myengine", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["overall"]["prompt_mape"] < 50


def _one_line_error(capsys, argv: list[str], needle: str) -> None:
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert needle in lines[0]


def test_bad_inputs_are_one_line(tmp_path, capsys) -> None:
    f = _table(tmp_path)
    _one_line_error(capsys, ["perf", "check", "--profile", str(f), "--perf", "nostack"], "nostack")
    _one_line_error(
        capsys, ["perf", "fit", "--profile", str(f), "--out", str(tmp_path), "--knee"], "need --name"
    )
    _one_line_error(
        capsys,
        ["perf", "fit", "--profile", str(f), "--name", "x", "--out", str(tmp_path), "--cv", "row"],
        "--cv",
    )
    _one_line_error(
        capsys,
        ["perf", "fit", "--profile", str(f), "--name", "x", "--out", str(tmp_path), "--source", "zzz"],
        "no rows",
    )
    bad = tmp_path / "bad.csv"
    bad.write_text(HEADER + "eng,llama2-7b,a100-80gb,1,fp8,prompt,1,192,,,23,no,,\n")
    _one_line_error(capsys, ["perf", "check", "--profile", str(bad), "--perf", "kernels"], "fp8")
