"""A search's `--storage` as Optuna's own tools read it: the answer study's best trial is the search's
answer, the verdict cache keeps out of user attributes, and locations are spelled as Optuna spells
them (an RDB URL, or a journal file's path for `JournalFileBackend`)."""

from __future__ import annotations

import json
import sqlite3

import pytest

from splitplan.cli import main
from splitplan.search.store import StorageKind, locate_storage

optuna = pytest.importorskip("optuna")

# the commands of docs/howto/resume-a-search.md ("A quick way to see it work")
HOWTO = [
    "search",
    "--design",
    "splitwise-hh",
    "--design",
    "splitwise-aa",
    "--rate",
    "20",
    "--duration",
    "30",
    "--max-machines",
    "10",
]
SMALL = ["search", "--design", "splitwise-hh", "--prompt-range", "2:6", "--token-range", "1:4"]
SMALL += ["--rate", "20", "--duration", "30"]


def _json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> dict:
    code = main([*argv, "--json"])
    out = capsys.readouterr().out
    assert code == 0, out
    return json.loads(out)


def _answer_study(storage: object) -> object:
    (name,) = [s.study_name for s in optuna.get_all_study_summaries(storage) if "-answer-" in s.study_name]
    return optuna.load_study(study_name=name, storage=storage)


def _assert_best_trial_is_the_answer(study: object, best: dict) -> None:
    trial = study.best_trial  # type: ignore[attr-defined]
    assert trial.params["design"] == best["design"]
    assert trial.params["prompt_gpu"] == best["prompt_gpu"]
    assert trial.params["token_gpu"] == best["token_gpu"]
    assert trial.user_attrs["prompt_machines"] == best["prompt_machines"]
    assert trial.user_attrs["token_machines"] == best["token_machines"]
    assert trial.value == pytest.approx(best["cost_usd_per_h"], rel=1e-12)
    assert trial.system_attrs["splitplan:decided_by"] == best["verified_by"] == "des"
    assert all(v <= 0 for v in trial.constraints.values())
    # optuna-dashboard shows the storage's best trial, ranked by value alone
    raw = study._storage.get_best_trial(study._study_id)  # type: ignore[attr-defined]
    assert raw.number == trial.number


def test_resume_howto_storage_reads_truthfully_in_optuna(capsys, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    first = _json(capsys, [*HOWTO, "--storage", "search.db"])
    again = _json(capsys, [*HOWTO, "--storage", "search.db"])
    assert first["des_evaluations"] > 0
    assert again["des_evaluations"] == 0
    assert again["best"] == first["best"]
    url = f"sqlite:///{tmp_path / 'search.db'}"
    assert any(url in n for n in first["notes"])  # the note names the storage as Optuna spells it
    study = _answer_study(url)
    _assert_best_trial_is_the_answer(study, first["best"])
    # one completed trial per DES-decided point; the rerun added none
    assert len(study.trials) == first["des_evaluations"]
    assert {t.state for t in study.trials} == {optuna.trial.TrialState.COMPLETE}
    feasible = [t for t in study.trials if all(v <= 0 for v in t.constraints.values())]
    assert 0 < len(feasible) < len(study.trials)
    assert all(t.value == float("inf") for t in study.trials if t not in feasible)
    assert all(t.value == t.user_attrs["cost_usd_per_h"] for t in feasible)
    # what `optuna studies` lists stays small: no study has user attributes; the verdicts are
    # system attributes of the points study
    summaries = optuna.get_all_study_summaries(url)
    assert all(s.user_attrs == {} for s in summaries)
    with sqlite3.connect(tmp_path / "search.db") as con:
        (n_user,) = con.execute("select count(*) from study_user_attributes").fetchone()
        (n_verdicts,) = con.execute(
            "select count(*) from study_system_attributes where key like 'verdict:%'"
        ).fetchone()
    assert n_user == 0
    assert n_verdicts == first["des_evaluations"]
    _assert_dashboard_shows(url, first["best"])


def _assert_dashboard_shows(url: str, best: dict) -> None:
    """optuna-dashboard's own API (where installed) names the search's answer as the best trial."""
    try:
        from optuna_dashboard import wsgi
    except ImportError:
        return
    import io

    app = wsgi(optuna.storages.RDBStorage(url))

    def get(path: str) -> dict:
        env = {"REQUEST_METHOD": "GET", "PATH_INFO": path, "QUERY_STRING": "", "SERVER_NAME": "x"}
        env |= {"SERVER_PORT": "80", "wsgi.url_scheme": "http", "wsgi.input": io.BytesIO()}
        env["wsgi.errors"] = io.StringIO()
        return json.loads(b"".join(app(env, lambda *_a: None)))

    (sid,) = [s["study_id"] for s in get("/api/studies")["study_summaries"] if "-answer-" in s["study_name"]]
    shown = get(f"/api/studies/{sid}")["best_trials"][0]
    params = {p["name"]: p["param_external_value"] for p in shown["params"]}
    assert params["design"] == best["design"]
    assert int(params["prompt_instances"]) == best["prompt_instances"]
    assert int(params["token_instances"]) == best["token_instances"]
    assert shown["values"] == [best["cost_usd_per_h"]]


@pytest.mark.parametrize("spelling", ["{dir}/search.log", "journal:{dir}/search.log"])
def test_journal_storage_opens_with_optunas_journal_file_backend(capsys, tmp_path, spelling) -> None:
    storage = spelling.format(dir=tmp_path)
    doc = _json(capsys, [*SMALL, "--storage", storage])
    path = tmp_path / "search.log"
    assert path.is_file()
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    study = _answer_study(JournalStorage(JournalFileBackend(str(path))))
    _assert_best_trial_is_the_answer(study, doc["best"])
    again = _json(capsys, [*SMALL, "--storage", str(path)])  # Optuna's spelling resumes it
    assert again["des_evaluations"] == 0
    assert again["best"] == doc["best"]


def test_storage_locations_follow_optunas_spelling(tmp_path) -> None:
    db = tmp_path / "a.db"
    assert locate_storage(str(db)).optuna_spelling == f"sqlite:///{db}"
    assert locate_storage(str(tmp_path / "a.log")).kind is StorageKind.JOURNAL
    assert locate_storage(str(tmp_path / "a.jsonl")).optuna_spelling == str(tmp_path / "a.jsonl")
    assert locate_storage("postgresql://u:p@host/db").optuna_spelling == "postgresql://u:p@host/db"
    # an existing file is what it contains, whatever its name
    sqlite3.connect(tmp_path / "x.log").execute("create table t (a int)").connection.commit()
    assert locate_storage(str(tmp_path / "x.log")).kind is StorageKind.RDB
    (tmp_path / "y.db").write_text('{"op_code": 0}\n')
    assert locate_storage(str(tmp_path / "y.db")).kind is StorageKind.JOURNAL


def test_runs_stopped_early_read_as_at_least_their_bound(capsys, tmp_path, monkeypatch) -> None:
    """A frontier search's runs stopped once certain to fail (des_stopped) enter the answer study
    with their bound as the slo constraint — the least their violation can be — never as unstable."""
    from splitplan.search.frontier import STOP_BELOW_HEADROOM

    monkeypatch.chdir(tmp_path)
    argv = ["search", "--design", "splitwise-hh", "--workload", "conversation", "--rate", "300"]
    argv += ["--duration", "10", "--prompt-range", "1:120", "--token-range", "1:120"]
    _json(capsys, [*argv, "--storage", "sqlite:///s.db"])
    trials = _answer_study("sqlite:///s.db").trials  # type: ignore[attr-defined]
    cut = [t for t in trials if t.user_attrs.get("des_stopped")]
    assert cut, "no run stopped early: the case no longer tests it"
    assert all(t.constraints["slo"] == -STOP_BELOW_HEADROOM for t in cut)
    assert all(not t.user_attrs["meets_slo"] for t in cut)
