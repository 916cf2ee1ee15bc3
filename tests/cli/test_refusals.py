"""Bad input is one line and exit 2, with no URL password in it; an option that would change
nothing is refused, not ignored (found by feeding every command malformed values)."""

from __future__ import annotations

import pytest

from splitplan.cli import main
from splitplan.errors import redact

SECRET = "S3CR3T"
SIM = ["simulate", "--design", "splitwise-hh", "--prompt", "1", "--token", "1"]
SIM_GEN = [*SIM, "--rate", "2", "--duration", "5"]
HEAT = ["heatmap", "--design", "splitwise-hh", "--prompt-range", "1:2", "--token-range", "1:2"]


def _error(capsys, argv: list[str], needle: str) -> str:
    code = main(argv)
    cap = capsys.readouterr()
    assert code == 2, cap.err
    lines = [ln for ln in cap.err.splitlines() if ln.strip()]
    assert len(lines) == 1, cap.err
    assert needle in lines[0], lines[0]
    assert SECRET not in cap.err + cap.out
    return lines[0]


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        (f"s3://user:{SECRET}@host/x", "s3://user:***@host/x"),
        (f"folder s3:/user:{SECRET}@host does not exist", "folder s3:/user:***@host does not exist"),
        (f"cannot open 'postgresql://u:{SECRET}@db:5432/x'", "cannot open 'postgresql://u:***@db:5432/x'"),
        (f"redis://:{SECRET}@h", "redis://:***@h"),
        ("tcp://127.0.0.1:8786 and user@host and a:b@c", "tcp://127.0.0.1:8786 and user@host and a:b@c"),
    ],
)
def test_redact_masks_only_a_urls_password(text: str, shown: str) -> None:
    assert redact(text) == shown


@pytest.mark.parametrize(
    ("argv", "option"),
    [
        (
            [*SIM_GEN, "--engine", "des", "--requests-out", f"s3://user:{SECRET}@host/r.parquet"],
            "--requests-out",
        ),
        ([*SIM_GEN, "--config", f"https://u:{SECRET}@h/c.toml"], "config"),
        ([*SIM, "--trace", f"s3://u:{SECRET}@h/t.csv"], "s3:"),
        ([*HEAT, "--rate", "2", "--duration", "5", "--out", f"s3://u:{SECRET}@h/h.parquet"], "--out"),
        (["trace", "generate", "--rate", "2", "--duration", "5", "--out", f"s3://u:{SECRET}@h/t.csv"], "out"),
        (["reproduce", "--quick", "--out", f"s3://u:{SECRET}@h/rep"], "--out"),
    ],
)
def test_a_url_where_a_local_file_goes_is_refused_without_its_password(
    tmp_path, capsys, monkeypatch, argv, option
):
    monkeypatch.chdir(tmp_path)  # nothing may be created here, least of all a folder named s3:
    line = _error(capsys, argv, option)
    assert ":***@" in line
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--seed", "-1"], "seed must be an integer ≥ 0"),
        (["--quick", "--model", "bloom-176b", "--model", "llama2-70b"], "--quick runs one model"),
        (["--quick", "--duration", "90"], "--quick runs 60 s at most"),
        (["--duration", "inf"], "duration must be positive and finite"),
        (["--assumptions", "compat", "--assumptions", "compat"], "assumptions names 'compat' more than once"),
        (["--model", "deepseek-v3", "--duration", "5"], "does not fit on dgx-"),
        (["--out", ""], "--out needs a folder name"),
    ],
)
def test_reproduce_refuses_before_any_step(tmp_path, capsys, argv, needle) -> None:
    if "--out" not in argv:
        argv = [*argv, "--out", str(tmp_path / "rep")]
    _error(capsys, ["reproduce", *argv], needle)
    assert not (tmp_path / "rep").exists()


def test_reproduce_out_must_be_a_folder(tmp_path, capsys) -> None:
    afile = tmp_path / "afile"
    afile.write_text("x")
    _error(capsys, ["reproduce", "--quick", "--out", str(afile)], f"--out: {afile} is a file, not a folder")
    _error(capsys, ["reproduce", "--quick", "--out", str(afile / "sub")], "is a file, not a folder")


@pytest.fixture
def small_trace(tmp_path):
    path = tmp_path / "small.csv"
    assert main(["-q", "trace", "generate", "--out", str(path), "--rate", "2", "--duration", "5"]) == 0
    return path


def test_trace_generate_refuses_what_it_cannot_do(tmp_path, capsys, small_trace) -> None:
    gen = ["trace", "generate", "--rate", "2", "--duration", "5", "--out", str(tmp_path / "g.csv")]
    for cv in ("1e-300", "1e300"):
        _error(capsys, [*gen, "--arrival", "gamma", "--cv", cv], "cv must be between 0.001 and 1000")
    before = small_trace.read_bytes()
    _error(
        capsys,
        [
            "trace",
            "generate",
            "--workload",
            str(small_trace),
            "--rate",
            "2",
            "--duration",
            "5",
            "--out",
            str(small_trace),
        ],
        "--workload and --out are the same file",
    )
    assert small_trace.read_bytes() == before
    replay = [
        "trace",
        "generate",
        "--workload",
        str(small_trace),
        "--arrival",
        "replay",
        "--out",
        str(tmp_path / "r.csv"),
    ]
    _error(capsys, [*replay, "--seed", "4"], "--seed has no effect")
    assert main(["-q", *replay]) == 0


def test_a_seed_that_changes_nothing_is_refused(capsys, small_trace) -> None:
    _error(capsys, [*SIM, "--trace", str(small_trace), "--seed", "5"], "--seed has no effect here")
    _error(
        capsys,
        [*HEAT, "--engine", "des", "--trace", str(small_trace), "--seed", "7"],
        "--seed has no effect here",
    )
    # the analytic evaluator samples the requests with it: there it takes effect
    assert main(["-q", *SIM, "--trace", str(small_trace), "--seed", "5", "--engine", "analytic"]) == 0
    capsys.readouterr()


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ("max_batch_size = 99999999999999999999999\n", "config: max_batch_size must be at most 10,000,000"),
        ("chunk_tokens = 20000000\n", "config: chunk_tokens must be at most"),
        ("[weight_bytes]\nnosuchmodel = 1e9\n", "config: weight_bytes.nosuchmodel: unknown model"),
    ],
)
def test_config_values_no_run_could_use_are_refused(tmp_path, capsys, body, needle) -> None:
    f = tmp_path / "c.toml"
    f.write_text(body)
    _error(capsys, [*SIM_GEN, "--engine", "analytic", "--config", str(f)], needle)


def test_an_empty_perf_is_refused_not_read_as_the_default(capsys) -> None:
    _error(capsys, [*SIM_GEN, "--engine", "analytic", "--perf", ""], "--perf is empty")


def test_dpi_needs_a_raster_plot(tmp_path, capsys) -> None:
    base = [*HEAT, "--rate", "2", "--duration", "5", "--engine", "analytic"]
    for suffix in ("svg", "pdf"):
        _error(capsys, [*base, "--plot", str(tmp_path / f"p.{suffix}"), "--dpi", "100"], "is a vector figure")
    _error(capsys, [*base, "--dpi", "100"], "--dpi applies to --plot")
    assert main(["-q", *base, "--plot", str(tmp_path / "p.png"), "--dpi", "100"]) == 0
    assert (tmp_path / "p.png").is_file()


@pytest.mark.parametrize(
    ("argv", "twice"),
    [
        ([*SIM_GEN, "--design", "splitwise-aa"], "--design"),
        ([*SIM_GEN, "--rate=3"], "--rate"),
        (["trace", "generate", "--out", "a.csv", "--rate", "2", "--rate", "3", "--duration", "5"], "--rate"),
    ],
)
def test_a_single_valued_option_given_twice_is_refused(capsys, argv, twice) -> None:
    _error(capsys, argv, f"{twice} is given more than once")


def test_repeatable_options_and_counted_flags_may_repeat(capsys) -> None:
    argv = [
        "search",
        "--design",
        "splitwise-hh",
        "--design",
        "splitwise-aa",
        "--rate",
        "2",
        "--duration",
        "5",
    ]
    argv += ["--prompt-range", "1:2", "--token-range", "1:2", "--engine", "analytic", "--json"]
    assert main(argv) == 0
    assert main(["-vv", "catalog"]) == 0
    capsys.readouterr()


def test_verbose_shows_no_value_in_help(capsys) -> None:
    main(["--help"])
    line = next(ln for ln in capsys.readouterr().out.splitlines() if "--verbose" in ln)
    assert "<int>" not in line


SEARCH = ["search", "--design", "splitwise-hh", "--rate", "2", "--duration", "5", "--engine", "analytic"]
SEARCH += ["--prompt-range", "1:2", "--token-range", "1:2"]


@pytest.mark.parametrize(
    ("argv", "option"),
    [
        ([*SEARCH, "--export-plan", f"s3://u:{SECRET}@h/p.yaml"], "--export-plan"),
        ([*SEARCH, "--save-request", f"s3://u:{SECRET}@h/r.toml"], "--save-request"),
        ([*SIM_GEN, "--engine", "analytic", "--export-plan", f"s3://u:{SECRET}@h/p.yaml"], "--export-plan"),
    ],
)
def test_a_url_output_is_refused_even_where_a_folder_of_its_name_exists(
    tmp_path, capsys, monkeypatch, argv, option
):
    # the path form of the URL (s3:/u:…@h) names a folder here: it must still not be written to
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "s3:" / f"u:{SECRET}@h"
    folder.mkdir(parents=True)
    line = _error(capsys, argv, f"{option}: s3:/u:***@h/")
    assert "is a URL" in line
    assert list(folder.iterdir()) == []


def test_prompt_curves_are_refused_where_no_profile_model_reads_them(capsys) -> None:
    from splitplan.sim.config import shared_dir

    profile = shared_dir() / "reference" / "gpu-measurements" / "iterations.csv"
    if not profile.is_file():
        pytest.skip("the shared measurements are not here")
    check = ["perf", "check", "--profile", str(profile)]
    _error(
        capsys,
        [*check, "--perf", "kernels", "--prompt-curves", "bogus"],
        "unknown prompt curves 'bogus'",
    )
    _error(capsys, [*check, "--perf", "kernels", "--prompt-curves", "pooled"], "applies to a profile model")


def test_a_request_file_error_names_the_files_own_key(tmp_path, capsys) -> None:
    from splitplan import api
    from splitplan.api._request import save_request

    req = api.SearchRequest(
        designs=("splitwise-hh",), workload=api.WorkloadRequest(rate_rps=2.0, duration_s=10.0)
    )
    path = save_request(req, tmp_path / "rq.toml")
    path.write_text(path.read_text().replace("rate_rps = 2.0", 'rate_rps = "2"'))
    line = _error(capsys, ["search", "--request", str(path)], "[workload]: rate_rps must be a number")
    assert "--rate-rps" not in line
