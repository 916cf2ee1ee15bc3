"""Random and corrupted CSVs: every input parses or fails with one line (exit 2), never a traceback."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from splitplan.cli import main
from splitplan.errors import InputError
from splitplan.workload import read_trace, scan_trace
from splitplan.workload.readers import AZURE_COLUMNS, REFERENCE_COLUMNS

SETTINGS = settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)

cell = st.one_of(
    st.integers(-5, 10**6).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=8),
    st.sampled_from(
        [
            "",
            " ",
            '"',
            '""',
            "1e999",
            "99999999999999999999",
            "2024-03-05 09:41:12.1234500",
            "2023-02-30 00:00:00",
            "0x10",
            "+7",
            " 3 ",
            "nan",
            "-0",
        ]
    ),
)


def _ref_row(i: int, t: float, p: int, o: int) -> list[str]:
    return [str(i), "2", "0", repr(t), "1", str(p), str(o)]


def _az_row(i: int, t: float, p: int, o: int) -> list[str]:
    ts = np.datetime64("2023-11-16T18:00:00", "us") + np.timedelta64(int(t * 1e6), "us")
    return [str(ts).replace("T", " "), str(p), str(o)]


@st.composite
def corrupted_csv(draw: st.DrawFn) -> tuple[str, int]:
    """A valid trace of either format, then a few random corruptions; returns (text, #clean rows)."""
    azure = draw(st.booleans())
    header = list(AZURE_COLUMNS if azure else REFERENCE_COLUMNS)
    n = draw(st.integers(0, 12))
    gaps = draw(st.lists(st.floats(0, 5, allow_nan=False), min_size=n, max_size=n))
    sizes = draw(st.lists(st.tuples(st.integers(1, 10**5), st.integers(1, 10**4)), min_size=n, max_size=n))
    t = np.cumsum(gaps) if n else np.array([])
    rows = [(_az_row if azure else _ref_row)(i, float(t[i]), *sizes[i]) for i in range(n)]
    corruptions = draw(st.integers(0, 4))
    for _ in range(corruptions):
        kind = draw(st.sampled_from(["cell", "drop_cell", "add_cell", "swap", "blank", "header", "junk"]))
        if kind == "header":
            j = draw(st.integers(0, len(header) - 1))
            header[j] = draw(st.sampled_from(["", "x", header[j].lower(), header[j] + " "]))
        elif kind == "junk":
            rows.insert(draw(st.integers(0, len(rows))), [draw(cell)])
        elif rows:
            r = draw(st.integers(0, len(rows) - 1))
            if kind == "cell" and rows[r]:
                rows[r][draw(st.integers(0, len(rows[r]) - 1))] = draw(cell)
            elif kind == "drop_cell" and rows[r]:
                rows[r].pop()
            elif kind == "add_cell":
                rows[r].append(draw(cell))
            elif kind == "swap":
                r2 = draw(st.integers(0, len(rows) - 1))
                rows[r], rows[r2] = rows[r2], rows[r]
            elif kind == "blank":
                rows[r] = []
    newline = draw(st.sampled_from(["\n", "\r\n"]))
    text = newline.join([",".join(header), *(",".join(r) for r in rows)])
    if draw(st.booleans()):
        text += newline
    return text, (n if corruptions == 0 else -1)


def _check_one_line(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["trace", "stats", str(path), "--json"])
    _out, err = capsys.readouterr()
    assert rc in (0, 2), err
    assert "Traceback" not in err
    if rc == 2:
        assert len(err.strip().splitlines()) == 1, err
        assert err.startswith("splitplan: error: ")
    try:
        read_trace(path)
        message = None
    except InputError as exc:
        message = str(exc)
    assert rc == (0 if message is None else 2)
    assert message is None or "\n" not in message


@SETTINGS
@given(case=corrupted_csv(), skip=st.booleans())
def test_corrupted_csv_parses_or_fails_in_one_line(
    case: tuple[str, int], skip: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    text, clean_rows = case
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "trace.csv"
        path.write_text(text, encoding="utf-8")
        _check_one_line(path, capsys)
        if clean_rows > 0:  # uncorrupted input must parse completely
            assert read_trace(path).n == clean_rows
        if skip:
            try:
                read = scan_trace(path, skip_bad_rows=True)
            except InputError as exc:
                message = str(exc)
                assert "\n" not in message
            else:
                assert read.workload.n + len(read.bad_rows) >= 1
                assert all(str(b).startswith(f"{path}:") for b in read.bad_rows)
                assert np.all(np.diff(read.workload.arrival_s) >= 0)


@SETTINGS
@given(data=st.binary(max_size=300), header=st.sampled_from(["", "azure", "reference"]))
def test_random_bytes_never_traceback(data: bytes, header: str, capsys: pytest.CaptureFixture[str]) -> None:
    prefix = {
        "": b"",
        "azure": ",".join(AZURE_COLUMNS).encode() + b"\n",
        "reference": ",".join(REFERENCE_COLUMNS).encode() + b"\n",
    }[header]
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "trace.csv"
        path.write_bytes(prefix + data)
        _check_one_line(path, capsys)
