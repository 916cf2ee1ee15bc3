"""Random and corrupted CSVs: every input parses or fails with one line (exit 2), never a traceback."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from splitplan.cli import main
from splitplan.errors import InputError
from splitplan.workload import read_trace, scan_trace
from splitplan.workload.readers import AZURE_COLUMNS, MOONCAKE_KEYS, REFERENCE_COLUMNS

BURSTGPT_HEADER = ["Timestamp", "Model", "Request tokens", "Response tokens", "Total tokens", "Log Type"]

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


def _az_row(i: int, t: float, p: int, o: int, offset_min: int | None = None) -> list[str]:
    """An Azure row: a naive time (the 2023 release) or, with `offset_min`, the same instant written
    in a zone `offset_min` minutes east of UTC (the 2024 release writes +00:00)."""
    ts = np.datetime64("2023-11-16T18:00:00", "us") + np.timedelta64(int(t * 1e6), "us")
    if offset_min is None:
        return [str(ts).replace("T", " "), str(p), str(o)]
    local = ts + np.timedelta64(offset_min, "m")
    sign, m = ("+" if offset_min >= 0 else "-"), abs(offset_min)
    return [f"{str(local).replace('T', ' ')}{sign}{m // 60:02d}:{m % 60:02d}", str(p), str(o)]


def _burst_row(i: int, t: float, p: int, o: int) -> list[str]:
    return [repr(5.0 + t), "ChatGPT", str(p), str(o), str(p + o), "Conversation log"]


@st.composite
def corrupted_csv(draw: st.DrawFn) -> tuple[str, int]:
    """A valid trace of either format, then a few random corruptions; returns (text, #clean rows)."""
    fmt = draw(st.sampled_from(["azure", "azure-offset", "burstgpt", "reference"]))
    header = list({"burstgpt": BURSTGPT_HEADER, "reference": REFERENCE_COLUMNS}.get(fmt, AZURE_COLUMNS))
    offset_min = draw(st.integers(-12 * 60, 14 * 60)) if fmt == "azure-offset" else None
    n = draw(st.integers(0, 12))
    gaps = draw(st.lists(st.floats(0, 5, allow_nan=False), min_size=n, max_size=n))
    sizes = draw(st.lists(st.tuples(st.integers(1, 10**5), st.integers(1, 10**4)), min_size=n, max_size=n))
    t = np.cumsum(gaps) if n else np.array([])
    if fmt.startswith("azure"):
        rows = [_az_row(i, float(t[i]), *sizes[i], offset_min=offset_min) for i in range(n)]
    else:
        rows = [(_burst_row if fmt == "burstgpt" else _ref_row)(i, float(t[i]), *sizes[i]) for i in range(n)]
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


def _parses_or_fails_in_one_line(
    text: str, clean_rows: int, name: str, skip: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    """The file parses (all of it when uncorrupted) or fails in one line, with or without skip mode."""
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / name
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
@given(case=corrupted_csv(), skip=st.booleans())
def test_corrupted_csv_parses_or_fails_in_one_line(
    case: tuple[str, int], skip: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    _parses_or_fails_in_one_line(*case, "trace.csv", skip, capsys)


@SETTINGS
@given(
    gaps=st.lists(st.floats(0, 5, allow_nan=False), min_size=1, max_size=12),
    offset_min=st.integers(-12 * 60, 14 * 60),
)
def test_a_utc_offset_names_the_same_instants(gaps: list[float], offset_min: int) -> None:
    """The same instants written as naive times or in any zone read to the same arrivals."""
    t = np.cumsum(gaps)
    with tempfile.TemporaryDirectory() as d:
        read = []
        for offset in (None, offset_min):
            path = Path(d) / f"{offset}.csv"
            rows = [",".join(_az_row(i, float(x), 10, 5, offset_min=offset)) for i, x in enumerate(t)]
            path.write_text("\n".join([",".join(AZURE_COLUMNS), *rows]) + "\n", encoding="utf-8")
            read.append(read_trace(path).arrival_s)
    np.testing.assert_allclose(read[1], read[0], atol=1e-9)


def _json_object(line: str) -> dict | None:
    """The line's JSON object, or None where an earlier corruption left none."""
    try:
        row = json.loads(line)
    except ValueError:
        return None
    return row if isinstance(row, dict) else None


@st.composite
def corrupted_jsonl(draw: st.DrawFn) -> tuple[str, int]:
    """A valid Mooncake trace, then a few random corruptions; returns (text, #clean lines)."""
    n = draw(st.integers(1, 12))
    stamps = np.cumsum(draw(st.lists(st.integers(0, 5000), min_size=n, max_size=n)))
    sizes = draw(st.lists(st.tuples(st.integers(1, 10**5), st.integers(1, 10**4)), min_size=n, max_size=n))
    lines = [
        json.dumps({"timestamp": int(ms), "input_length": p, "output_length": o, "hash_ids": [1, 2]})
        for ms, (p, o) in zip(stamps, sizes, strict=True)
    ]
    corruptions = draw(st.integers(0, 4))
    for _ in range(corruptions):
        r = draw(st.integers(0, len(lines) - 1))
        kind = draw(st.sampled_from(["cell", "drop_key", "junk", "truncate", "swap"]))
        row = _json_object(lines[r])
        if kind == "cell" and row is not None:
            row[draw(st.sampled_from(MOONCAKE_KEYS))] = draw(
                st.one_of(
                    st.none(),
                    st.booleans(),
                    st.integers(-5, 10**20),
                    st.sampled_from([0, -1, 10**18, 2**63, 10**30]),
                    st.floats(),
                    st.text(max_size=4),
                )
            )
            lines[r] = json.dumps(row)
        elif kind == "drop_key" and row is not None:
            row.pop(draw(st.sampled_from(MOONCAKE_KEYS)), None)
            lines[r] = json.dumps(row)
        elif kind == "junk":
            lines.insert(r, draw(cell))
        elif kind == "truncate":
            lines[r] = lines[r][: draw(st.integers(0, len(lines[r])))]
        else:
            r2 = draw(st.integers(0, len(lines) - 1))
            lines[r], lines[r2] = lines[r2], lines[r]
    return "\n".join(lines) + "\n", (n if corruptions == 0 else -1)


@SETTINGS
@given(case=corrupted_jsonl(), skip=st.booleans())
def test_corrupted_mooncake_parses_or_fails_in_one_line(
    case: tuple[str, int], skip: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    _parses_or_fails_in_one_line(*case, "trace.jsonl", skip, capsys)


@SETTINGS
@given(
    data=st.binary(max_size=300), header=st.sampled_from(["", "azure", "burstgpt", "mooncake", "reference"])
)
def test_random_bytes_never_traceback(data: bytes, header: str, capsys: pytest.CaptureFixture[str]) -> None:
    prefix = {
        "": b"",
        "azure": ",".join(AZURE_COLUMNS).encode() + b"\n",
        "burstgpt": ",".join(BURSTGPT_HEADER).encode() + b"\n",
        "mooncake": b'{"timestamp": 0, "input_length": 5, "output_length": 2}\n',
        "reference": ",".join(REFERENCE_COLUMNS).encode() + b"\n",
    }[header]
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "trace.csv"
        path.write_bytes(prefix + data)
        _check_one_line(path, capsys)
