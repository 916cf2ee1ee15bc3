"""`splitplan trace generate|stats|convert` through the real entry point."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from splitplan.cli import main
from splitplan.workload import read_trace
from splitplan.workload.readers import AZURE_COLUMNS, REFERENCE_COLUMNS


def _json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> dict:
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_generate_acceptance(tmp_path: Path, azure_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "c.csv"
    doc = _json(
        capsys,
        [
            "trace",
            "generate",
            "--workload",
            "coding",
            "--rate",
            "70",
            "--duration",
            "120",
            "--seed",
            "1",
            "--out",
            str(out),
            "--json",
        ],
    )
    assert abs(doc["requests"] / 8400 - 1) <= 0.03
    wl = read_trace(out)
    assert wl.n == doc["requests"]
    az = read_trace(azure_dir / "AzureLLMInferenceTrace_code.csv")
    for got, want in ((wl.prompt_tokens, az.prompt_tokens), (wl.output_tokens, az.output_tokens)):
        g, w = np.percentile(got, [50, 90, 99]), np.percentile(want, [50, 90, 99])
        np.testing.assert_array_less(np.abs(g / w - 1), 0.03)
    assert out.read_text().splitlines()[0] == ",".join(REFERENCE_COLUMNS)


def test_generate_is_reproducible_and_gamma(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    for out in (a, b):
        assert (
            main(
                [
                    "trace",
                    "generate",
                    "--workload",
                    "conversation",
                    "--rate",
                    "10",
                    "--duration",
                    "30",
                    "--arrival",
                    "gamma",
                    "--cv",
                    "2",
                    "--seed",
                    "4",
                    "--out",
                    str(out),
                ]
            )
            == 0
        )
    assert a.read_bytes() == b.read_bytes()
    assert "conversation@10rps/30s+gamma(cv=2)" in capsys.readouterr().out


def test_stats_table_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "t.csv"
    assert main(["trace", "generate", "--rate", "5", "--requests", "200", "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["trace", "stats", str(out)]) == 0
    text = capsys.readouterr().out
    assert "200" in text
    assert "p99" in text
    assert "prompt" in text
    doc = _json(capsys, ["trace", "stats", str(out), "--json"])
    assert doc["requests"] == 200
    assert set(doc["prompt_tokens"]) == {"mean", "min", "max", "p50", "p90", "p99"}


def test_convert_azure_to_reference(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "az.csv"
    src.write_text(
        ",".join(AZURE_COLUMNS) + "\n2024-03-05 09:41:12.1234500,2201,17\n"
        "2024-03-05 09:41:12.1754500,1630,9\n"
    )
    out = tmp_path / "ref.csv"
    doc = _json(capsys, ["trace", "convert", str(src), str(out), "--json"])
    assert doc["requests"] == 2
    lines = out.read_text().splitlines()
    assert lines[0] == ",".join(REFERENCE_COLUMNS)
    assert lines[1].split(",") == ["0", "2", "0", "0", "1", "2201", "17"]
    np.testing.assert_allclose(read_trace(out).arrival_s, [0.0, 0.052])


def test_bad_rows_exit_2_or_skipped_with_count(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "bad.csv"
    src.write_text(
        ",".join(REFERENCE_COLUMNS) + "\n0,2,0,0.1,1,5,6\n1,2,0,0.2,1,zero,6\n2,2,0,0.3,1,5,0\n"
        "3,2,0,0.4,1,5,6\n"
    )
    assert main(["trace", "stats", str(src)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert f"{src}:3: prompt_size is not an integer" in err
    doc = _json(capsys, ["trace", "stats", str(src), "--skip-bad-rows", "--json"])
    assert doc["requests"] == 2
    assert doc["skipped_rows"] == 2
    assert main(["trace", "stats", str(src), "--skip-bad-rows"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err == [
        f"splitplan: skipped {src}:3: prompt_size is not an integer: 'zero'",
        f"splitplan: skipped {src}:4: token_size must be ≥ 1, got 0",
        "splitplan: skipped 2 bad rows",
    ]


@pytest.mark.parametrize(
    "argv",
    [
        ["trace", "generate", "--rate", "0", "--duration", "10", "--out", "{tmp}/x.csv"],
        ["trace", "generate", "--rate", "10", "--out", "{tmp}/x.csv"],
        [
            "trace",
            "generate",
            "--workload",
            "nope",
            "--rate",
            "10",
            "--duration",
            "1",
            "--out",
            "{tmp}/x.csv",
        ],
        [
            "trace",
            "generate",
            "--rate",
            "10",
            "--duration",
            "1",
            "--arrival",
            "gamma",
            "--cv",
            "-1",
            "--out",
            "{tmp}/x.csv",
        ],
        ["trace", "generate", "--rate", "10", "--duration", "1", "--out", "{tmp}/missing/x.csv"],
        ["trace", "generate", "--rate", "10", "--duration", "1", "--recipe", "other", "--out", "{tmp}/x.csv"],
        ["trace", "stats", "{tmp}/missing.csv"],
        ["trace", "convert", "{tmp}/missing.csv", "{tmp}/y.csv"],
    ],
)
def test_bad_input_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    assert main([a.replace("{tmp}", str(tmp_path)) for a in argv]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert "Traceback" not in err
    assert not (tmp_path / "x.csv").exists()


def test_recipe_splitwise_sim(
    tmp_path: Path, reference_dir: Path, azure_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "rr.csv"
    assert (
        main(
            [
                "trace",
                "generate",
                "--recipe",
                "splitwise-sim",
                "--workload",
                str(azure_dir / "AzureLLMInferenceTrace_code.csv"),
                "--rate",
                "70",
                "--duration",
                "120",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    assert out.read_bytes() == (reference_dir / "traces" / "rr_code_70_2min.csv").read_bytes()
