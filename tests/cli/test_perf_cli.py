"""`splitplan perf check|fit` on both table schemas, stacks by name or path, errors as one line."""

from __future__ import annotations

import json
import tomllib

from splitplan.cli import main


def test_check_measurement_table_json_has_precision_source_and_static_batch(
    tmp_path, capsys, measurement_table
) -> None:
    f = measurement_table
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


def test_check_table_output_and_stack_file_path(tmp_path, capsys, measurement_table) -> None:
    from splitplan.perf.stacks import find_stack

    f = measurement_table
    path = str(find_stack("kernels"))
    assert main(["perf", "check", "--profile", str(f), "--perf", path]) == 0
    out = capsys.readouterr().out
    assert "fp8" in out
    assert "static_batch MAPE" in out


def test_fit_writes_a_stack_the_catalog_finds_with_true_provenance(
    tmp_path, capsys, monkeypatch, measurement_table
) -> None:
    f = measurement_table
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


def test_bad_inputs_are_one_line(tmp_path, capsys, measurement_table, measurement_header) -> None:
    f = measurement_table
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
    bad.write_text(measurement_header + "eng,llama2-7b,a100-80gb,1,fp8,prompt,1,192,,,23,no,,\n")
    _one_line_error(capsys, ["perf", "check", "--profile", str(bad), "--perf", "kernels"], "fp8")
