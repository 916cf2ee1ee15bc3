"""`splitplan search` / `pareto` input handling: execution options (--backend, --scheduler, --jobs),
--trials and --max-machines take effect or are refused in one line (exit 2), and no URL password
reaches a message, a saved request or an output file's metadata."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit" / "search"))
from search_fakes import FakeEvaluator

import splitplan.api._search as api_search
from splitplan import api
from splitplan.cli import main
from splitplan.errors import InputError

SRCH = [
    "search",
    "--design",
    "splitwise-hh",
    "--rate",
    "2",
    "--duration",
    "10",
    "--prompt-range",
    "1:2",
    "--token-range",
    "1:2",
]
SECRET = "S3CR3T"


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeEvaluator:
    ev = FakeEvaluator(bias=0.1)
    monkeypatch.setattr(api_search, "SimEvaluator", lambda _scenario: ev)
    return ev


@pytest.fixture
def no_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """A refusal must come before any work: building the scenario fails the test."""

    def boom(**_kw: object) -> None:
        raise AssertionError("the search started")

    monkeypatch.setattr(api_search, "build_scenario", boom)


def refused(capsys: pytest.CaptureFixture[str], args: list[str]) -> str:
    """Run the CLI; assert exit 2 and one `splitplan: error:` line; return that line."""
    code = main(args)
    out, err = capsys.readouterr()
    assert code == 2, (out, err)
    err = err.strip()
    assert err.startswith("splitplan: error:"), err
    assert "\n" not in err, err
    assert "Traceback" not in err
    assert SECRET not in out + err
    return err


# --- bug 1: the scheduler address is checked before any work -----------------------------------


@pytest.mark.parametrize("engine", ["des", "hybrid"])
@pytest.mark.parametrize(
    "address", ["garbage", "tcp://127.0.0.1", "tcp://host:99999", "foo://host:1", "tcp://h:1 x", " "]
)
def test_bad_scheduler_address_is_refused_before_any_work(
    capsys: pytest.CaptureFixture[str], no_work: None, engine: str, address: str
) -> None:
    err = refused(capsys, [*SRCH, "--engine", engine, "--backend", "dask", "--scheduler", address])
    assert "--scheduler" in err
    assert "tcp://HOST:PORT" in err


@pytest.mark.parametrize("address", ["tcp://127.0.0.1:8786", "127.0.0.1:8786", "tls://[::1]:8786"])
def test_good_scheduler_addresses_pass_the_check(address: str) -> None:
    from splitplan.search.parallel import check_scheduler

    check_scheduler(address)


def test_a_scheduler_dask_cannot_reach_is_one_line(
    capsys: pytest.CaptureFixture[str], fake: FakeEvaluator, monkeypatch: pytest.MonkeyPatch
) -> None:
    import distributed

    def client(address: str, timeout: float) -> None:
        raise OSError(f"Timed out trying to connect to {address} after {timeout:g} s")

    monkeypatch.setattr(distributed, "Client", client)
    args = [*SRCH, "--engine", "des", "--backend", "dask", "--scheduler", "tcp://127.0.0.1:1"]
    err = refused(capsys, args)
    assert "cannot reach the Dask scheduler at tcp://127.0.0.1:1" in err
    assert "Timed out" in err


def test_an_address_dask_rejects_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    import distributed

    from splitplan.search.parallel import Runner

    def client(address: str, timeout: float) -> None:
        raise ValueError(f"invalid address {address!r}\nmore detail")

    monkeypatch.setattr(distributed, "Client", client)
    runner = Runner(jobs=2, backend="dask", scheduler="tcp://127.0.0.1:1")
    with pytest.raises(InputError) as exc:
        runner.map(abs, [(-1,), (-2,)])
    assert str(exc.value) == (
        "cannot reach the Dask scheduler at tcp://127.0.0.1:1: invalid address 'tcp://127.0.0.1:1'"
    )


# --- bug 2: a scheduler address with credentials ------------------------------------------------


@pytest.mark.parametrize("engine", ["hybrid", "des"])
@pytest.mark.parametrize("address", [f"tcp://u:{SECRET}@127.0.0.1:1", f"u:{SECRET}@127.0.0.1:1"])
def test_scheduler_with_a_password_is_refused_without_showing_it(
    capsys: pytest.CaptureFixture[str], no_work: None, engine: str, address: str
) -> None:
    err = refused(capsys, [*SRCH, "--engine", engine, "--backend", "dask", "--scheduler", address])
    assert "--scheduler" in err
    assert "no user name or password" in err


# --- bug 3: options the analytic engine would ignore --------------------------------------------


@pytest.mark.parametrize(
    "extra",
    [
        ["--backend", "dask", "--scheduler", "garbage"],
        ["--backend", "dask", "--scheduler", "tcp://127.0.0.1:1"],
        ["--jobs", "4"],
        ["--jobs", "-1"],
    ],
)
def test_analytic_engine_refuses_the_des_execution_options(
    capsys: pytest.CaptureFixture[str], no_work: None, extra: list[str]
) -> None:
    err = refused(capsys, [*SRCH, "--engine", "analytic", *extra])
    assert "--engine analytic runs none" in err
    assert extra[0] in err


def test_analytic_engine_from_a_request_file_refuses_dask(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, no_work: None
) -> None:
    from splitplan.api._request import save_request

    req = api.SearchRequest(
        designs=("splitwise-hh",),
        workload=api.WorkloadRequest(rate_rps=2.0, duration_s=10.0),
        engine="hybrid",
        backend="dask",
        scheduler="tcp://127.0.0.1:8786",
    )
    path = save_request(req, tmp_path / "rq.toml")
    path.write_text(path.read_text().replace('engine = "hybrid"', 'engine = "analytic"'))
    err = refused(capsys, ["search", "--request", str(path)])
    assert "[search]: backend dask" in err  # the file's own keys, not flags
    assert "engine analytic runs none" in err
    # a saved analytic search replayed onto a cluster: the same refusal
    analytic = save_request(replace(req, engine="analytic", backend="loky", scheduler=None), path)
    args = ["search", "--request", str(analytic), "--backend", "dask", "--scheduler", "tcp://h:8786"]
    assert "--engine analytic runs none" in refused(capsys, args)


# --- bug 4: --trials where --method auto picks the grid ------------------------------------------


def test_trials_refused_when_auto_picks_the_grid(capsys: pytest.CaptureFixture[str], no_work: None) -> None:
    err = refused(capsys, [*SRCH, "--engine", "analytic", "--trials", "10"])
    assert "--trials" in err
    assert "grid" in err


def test_trials_taken_when_auto_picks_optuna(capsys: pytest.CaptureFixture[str], fake: FakeEvaluator) -> None:
    # a searched power cap is a third dimension: auto resolves to Optuna, which takes the trials
    args = [*SRCH, "--engine", "analytic", "--prompt-power-cap", "0.5:1.0", "--trials", "7", "--json"]
    assert main(args) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["results"][0]["method"] == "optuna"
    assert doc["evaluated_points"] == 7


# --- bug 5: --max-machines tops only the ranges not given ---------------------------------------


@pytest.mark.parametrize("mm", ["5", "1", "1000000000"])
def test_max_machines_with_every_range_given_is_refused(
    capsys: pytest.CaptureFixture[str], no_work: None, mm: str
) -> None:
    err = refused(capsys, [*SRCH, "--engine", "analytic", "--max-machines", mm])
    assert "--max-machines" in err
    assert "no effect" in err


def test_max_machines_refused_for_a_baseline_with_its_range_given(
    capsys: pytest.CaptureFixture[str], no_work: None
) -> None:
    args = ["search", "--design", "baseline-h100", "--prompt-range", "1:4", "--max-machines", "9"]
    assert "no effect" in refused(capsys, args)


def test_max_machines_tops_the_range_not_given() -> None:
    req = api.SearchRequest(designs=("splitwise-hh",), prompt_range=(1, 2), max_machines=5)
    (space,) = api_search.build_spaces(req)
    assert (space.prompt_range, space.token_range) == ((1, 2), (1, 5))


def test_a_huge_max_machines_is_refused_by_name(capsys: pytest.CaptureFixture[str], no_work: None) -> None:
    args = [*SRCH[:-2], "--engine", "analytic", "--max-machines", "1000000000"]  # token range not given
    err = refused(capsys, args)
    assert "--max-machines" in err
    assert "at most 1,000,000" in err


# --- bug 6: no password in a saved request, the parquet metadata or a storage error -------------


def test_save_request_refuses_a_storage_password_before_the_search(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, no_work: None
) -> None:
    rq = tmp_path / "rq.toml"
    storage = f"postgresql://u:{SECRET}@127.0.0.1:1/db"
    err = refused(capsys, [*SRCH, "--storage", storage, "--save-request", str(rq)])
    assert "request file would hold" in err
    assert "PGPASSWORD" in err
    assert "--storage" in err
    assert not rq.exists()


def test_a_storage_error_does_not_show_the_password(
    capsys: pytest.CaptureFixture[str], fake: FakeEvaluator
) -> None:
    err = refused(capsys, [*SRCH, "--storage", f"postgresql://u:{SECRET}@127.0.0.1:1/db"])
    assert "cannot open storage" in err
    assert "postgresql://u:***@127.0.0.1:1/db" in err


def test_the_library_storage_error_is_masked() -> None:
    from splitplan.search.store import open_board, open_storage

    for opener in (open_storage, lambda s: open_board(s, "f")):
        with pytest.raises(InputError) as exc:
            opener(f"postgresql://u:{SECRET}@127.0.0.1:1/db")
        assert SECRET not in str(exc.value)


def test_request_documents_never_hold_a_password() -> None:
    from splitplan.api._request import check_savable, request_document

    req = api.SearchRequest(storage=f"postgresql://u:{SECRET}@db/x")
    doc = request_document(req, hash_files=False)  # also the metadata of a search's --out file
    assert SECRET not in json.dumps(doc)
    assert doc["search"]["storage"] == "postgresql://u:***@db/x"
    with_scheduler = api.SearchRequest(backend="dask", scheduler="tcp://h:1")
    object.__setattr__(with_scheduler, "scheduler", f"tcp://u:{SECRET}@h:1")  # past its own check
    with pytest.raises(InputError, match=r"scheduler. carries a password") as exc:
        check_savable(with_scheduler)
    assert SECRET not in str(exc.value)


# --- bug 7: pareto takes the search's checks -----------------------------------------------------


@pytest.mark.parametrize("engine", ["analytic", "hybrid"])
@pytest.mark.parametrize(
    ("option", "value"), [("--jobs", "0"), ("--jobs", "-5"), ("--rate", "0"), ("--duration", "0")]
)
def test_pareto_refuses_what_search_refuses(
    capsys: pytest.CaptureFixture[str], fake: FakeEvaluator, engine: str, option: str, value: str
) -> None:
    args = ["pareto", "--design", "splitwise-hh", "--max-machines", "2", "--engine", engine]
    err = refused(capsys, [*args, option, value])
    assert option in err
    assert fake.calls == []
    assert fake.screens == 0
