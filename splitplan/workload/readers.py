"""Trace files in and out: the Azure LLM inference traces' format, BurstGPT's, Mooncake's and the
reference simulator's.

The Azure format is that of the public Azure LLM inference traces, the 2023 release (naive times,
``2023-11-16 18:17:03.9799600``) and the 2024 one (times with a UTC offset, ``2024-05-10
00:00:00.009930+00:00``); times with an offset are read as the instants they name. BurstGPT's
(``Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type``) gives seconds from its
trace's start; a failed request there has 0 response tokens, a bad row like any other. Mooncake's
is JSON lines (``{"timestamp": ms, "input_length": …, "output_length": …, "hash_ids": […]}``).

Parsing is columnar (pyarrow.csv reads every column as text, pyarrow.compute validates whole columns
at once); only when a column fails validation do we locate the offending rows, so a clean
million-row file costs one vectorized pass. Every bad row is named as ``file:line: problem``.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from splitplan._io import write_with
from splitplan.errors import InputError
from splitplan.workload.base import Workload

AZURE_COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
BURSTGPT_COLUMNS = ("Timestamp", "Request tokens", "Response tokens")  # (the others are not read)
REFERENCE_COLUMNS = (
    "request_id",
    "request_type",
    "application_id",
    "arrival_timestamp",
    "batch_size",
    "prompt_size",
    "token_size",
)
# Reference-format columns that must be integers, with their smallest allowed value.
_REFERENCE_INTS = {
    "request_id": 0,
    "request_type": 0,
    "application_id": 0,
    "batch_size": 1,
    "prompt_size": 1,
    "token_size": 1,
}
_COLUMNS = {"azure": AZURE_COLUMNS, "burstgpt": BURSTGPT_COLUMNS, "reference": REFERENCE_COLUMNS}
_FROM_FIRST_ROW = ("azure", "burstgpt", "mooncake")  # formats whose times count from the first row
MOONCAKE_KEYS = ("timestamp", "input_length", "output_length")  # (hash_ids and others not read)
_INT_RE = r"^\s*\+?[0-9]{1,18}\s*$"
_NEG_INT_RE = r"^\s*-[0-9]{1,18}\s*$"
_BIG_INT_RE = r"^\s*\+?[0-9]{19,}\s*$"  # a whole number beyond int64 (and any token count)
_FLOAT_RE = r"^\s*\+?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]{1,3})?\s*$"
_UTC_OFFSET = r"(Z|[+-][0-9]{2}(:?[0-9]{2})?)"
_DATETIME_RE = (
    r"^\s*[0-9]{4}-[0-9]{2}-[0-9]{2}[ T][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,9})?" + _UTC_OFFSET + r"?\s*$"
)
_OFFSET_RE = r":[0-9]{2}(\.[0-9]{1,9})?" + _UTC_OFFSET + r"\s*$"  # a date-time that names its offset
_DATETIME_FORM = "a date-time (YYYY-MM-DD HH:MM:SS[.fff], optionally with a UTC offset: Z or ±HH:MM)"
MAX_LISTED_BAD_ROWS = 5


@dataclass(frozen=True, slots=True)
class BadRow:
    """One rejected row: where it is and what is wrong with it."""

    path: str
    line: int
    problem: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.problem}"


@dataclass(frozen=True, slots=True)
class TraceRead:
    """A parsed trace plus the rows that were skipped (only non-empty with skip_bad_rows)."""

    workload: Workload
    format: str  # "azure" | "burstgpt" | "mooncake" | "reference"
    bad_rows: tuple[BadRow, ...]


def detect_format(header: list[str]) -> str:
    """'azure', 'burstgpt' or 'reference' from the header's column names (order-free; extra
    columns allowed)."""
    names = set(header)
    if "TIMESTAMP" in names or "ContextTokens" in names or "GeneratedTokens" in names:
        return "azure"
    if "Request tokens" in names or "Response tokens" in names:
        return "burstgpt"
    if names & set(REFERENCE_COLUMNS):
        return "reference"
    return "unknown"


def _read_header(raw: bytes, path: str) -> list[str]:
    end = raw.find(b"\n")
    first = (raw if end < 0 else raw[:end]).split(b"\r", 1)[0]
    try:
        text = first.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise InputError(f"{path}:1: header is not UTF-8 text") from None
    names = [c.strip().strip('"').strip() for c in text.split(",")]
    if len(names) != len(set(names)):
        raise InputError(f"{path}:1: duplicate column names in header")
    return names


def read_trace(path: str | Path, *, skip_bad_rows: bool = False) -> Workload:
    """A trace file (Azure LLM inference trace, BurstGPT, Mooncake or reference simulator format,
    auto-detected) as a Workload.

    Azure, BurstGPT and Mooncake times become seconds after the first row. Workload.name
    is the file stem. With `skip_bad_rows`, malformed rows are dropped and counted in
    ``meta["skipped_rows"]``; otherwise the first one raises InputError naming its file and line.
    """
    return scan_trace(path, skip_bad_rows=skip_bad_rows).workload


def scan_trace(path: str | Path, *, skip_bad_rows: bool = False) -> TraceRead:
    """Like read_trace, also returning every skipped row (for the CLI to list them)."""
    p = Path(path)
    shown = str(path)
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise InputError(f"{shown}: trace file not found") from None
    except IsADirectoryError:
        raise InputError(f"{shown}: is a folder, not a trace file") from None
    except OSError as exc:
        raise InputError(f"{shown}: cannot read trace file ({exc.strerror or exc})") from None
    if not raw or raw.isspace():
        raise InputError(f"{shown}: empty file (expected a CSV header and rows)")
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise InputError(f"{shown}:{line}: not UTF-8 text (byte {exc.start + 1} of the file)") from None
    if raw.removeprefix(b"\xef\xbb\xbf").lstrip()[:1] == b"{":  # (after a UTF-8 byte-order mark)
        return _scan_mooncake(raw, p, shown, skip_bad_rows)
    header = _read_header(raw, shown)
    fmt = detect_format(header)
    if fmt == "unknown":
        raise InputError(
            f"{shown}:1: unrecognised header; expected Azure columns {','.join(AZURE_COLUMNS)}, "
            f"BurstGPT columns {','.join(BURSTGPT_COLUMNS)} "
            f"or reference columns {','.join(REFERENCE_COLUMNS)}"
        )
    wanted = _COLUMNS[fmt]
    missing = [c for c in wanted if c not in header]
    if missing:
        raise InputError(f"{shown}:1: missing column {missing[0]} ({fmt} trace format)")
    fast = _fast_read(raw, header, fmt)
    if fast is not None:
        t, prompt, output = fast
        return _finished(p, shown, fmt, t, prompt, output, np.ones(len(t), dtype=bool), {}, skip_bad_rows)
    cols, lines, bad = _parse_columns(raw, header, wanted, shown)
    n = len(lines)
    ok = np.ones(n, dtype=bool)
    if fmt == "azure":
        t = _datetime_seconds(cols["TIMESTAMP"], lines, ok, bad, shown, "TIMESTAMP")
        prompt = _ints(cols["ContextTokens"], lines, ok, bad, shown, "ContextTokens", 1)
        output = _ints(cols["GeneratedTokens"], lines, ok, bad, shown, "GeneratedTokens", 1)
        time_col = "TIMESTAMP"
    elif fmt == "burstgpt":
        t = _floats(cols["Timestamp"], lines, ok, bad, shown, "Timestamp")
        prompt = _ints(cols["Request tokens"], lines, ok, bad, shown, "Request tokens", 1)
        output = _ints(cols["Response tokens"], lines, ok, bad, shown, "Response tokens", 1)
        time_col = "Timestamp"
    else:
        for name, low in _REFERENCE_INTS.items():
            if name not in ("prompt_size", "token_size"):
                _ints(cols[name], lines, ok, bad, shown, name, low)
        t = _floats(cols["arrival_timestamp"], lines, ok, bad, shown, "arrival_timestamp")
        prompt = _ints(cols["prompt_size"], lines, ok, bad, shown, "prompt_size", 1)
        output = _ints(cols["token_size"], lines, ok, bad, shown, "token_size", 1)
        time_col = "arrival_timestamp"
    _monotonic(t, lines, ok, bad, shown, time_col)
    return _finished(p, shown, fmt, t, prompt, output, ok, bad, skip_bad_rows)


def _finished(
    p: Path,
    shown: str,
    fmt: str,
    t: npt.NDArray[np.float64],
    prompt: npt.NDArray[np.int64],
    output: npt.NDArray[np.int64],
    ok: npt.NDArray[np.bool_],
    bad: dict[int, BadRow],
    skip_bad_rows: bool,
) -> TraceRead:
    """The rows `ok` keeps as a Workload, or the bad rows as one InputError line (no skip mode)."""
    bad_rows = tuple(sorted(bad.values(), key=lambda b: b.line))
    if bad_rows and not skip_bad_rows:
        first = bad_rows[0]
        more = ""
        if len(bad_rows) > 1:
            others = ", ".join(str(b.line) for b in bad_rows[1 : 1 + MAX_LISTED_BAD_ROWS])
            tail = ", …" if len(bad_rows) > 1 + MAX_LISTED_BAD_ROWS else ""
            more = f"; {len(bad_rows) - 1} more bad rows (lines {others}{tail})"
        raise InputError(f"{first}{more}; use --skip-bad-rows to drop them")
    if not ok.any():
        raise InputError(f"{shown}: no valid requests in trace")
    if not ok.all():  # (a clean file's columns are kept as they are, not copied)
        t, prompt, output = t[ok], prompt[ok], output[ok]
    if fmt in _FROM_FIRST_ROW:
        t = t - t[0]
    meta = {"source": shown, "format": fmt}
    if skip_bad_rows:
        meta["skipped_rows"] = str(len(bad_rows))
    wl = Workload(arrival_s=t, prompt_tokens=prompt, output_tokens=output, name=p.stem or "trace", meta=meta)
    return TraceRead(workload=wl, format=fmt, bad_rows=bad_rows)


def _scan_mooncake(raw: bytes, p: Path, shown: str, skip_bad_rows: bool) -> TraceRead:
    """A Mooncake trace: JSON lines of {"timestamp": ms, "input_length", "output_length", …}.

    The prefix-cache block ids (hash_ids) are not read: splitplan models no prefix cache, so every
    prompt is computed in full. A clean file is read columnar (pyarrow.json); otherwise each line
    is parsed on its own, and every bad one is named by its line."""
    import json

    fast = _fast_mooncake(raw)
    if fast is not None:
        t, prompt, output = fast
        return _finished(
            p, shown, "mooncake", t, prompt, output, np.ones(len(t), dtype=bool), {}, skip_bad_rows
        )
    texts = raw.decode("utf-8-sig").split("\n")
    rows = [(n + 1, line) for n, line in enumerate(texts) if line.strip()]
    lines = np.array([n for n, _ in rows], dtype=np.int64)
    t = np.full(len(rows), np.nan)
    prompt = np.zeros(len(rows), dtype=np.int64)
    output = np.zeros(len(rows), dtype=np.int64)
    ok = np.ones(len(rows), dtype=bool)
    bad: dict[int, BadRow] = {}
    for i, (line, text) in enumerate(rows):
        problem = None
        try:
            row = json.loads(text)
        except (ValueError, RecursionError):
            row, problem = None, "not a JSON object"
        if problem is None and not isinstance(row, dict):
            problem = "not a JSON object"
        if problem is None:
            assert isinstance(row, dict)
            missing = [k for k in MOONCAKE_KEYS if k not in row]
            ms, n_in, n_out = (row.get(k) for k in MOONCAKE_KEYS)
            if missing:
                problem = f"missing {missing[0]}"
            elif isinstance(ms, bool) or not isinstance(ms, int | float) or not math.isfinite(ms) or ms < 0:
                problem = f"timestamp is not a non-negative number of milliseconds: {_show(str(ms))}"
            else:
                for key, value in (("input_length", n_in), ("output_length", n_out)):
                    if isinstance(value, bool) or not isinstance(value, int):
                        problem = f"{key} is not an integer: {_show(str(value))}"
                    elif value < 1:
                        problem = f"{key} must be ≥ 1, got {value}"
                    elif value >= 10**18:  # (the CSV formats' bound: 18 digits)
                        problem = f"{key} is too large: {_show(str(value))}"
                    if problem:
                        break
        if problem is not None:
            ok[i] = False
            bad[line] = BadRow(shown, line, problem)
            continue
        t[i] = float(ms) / 1e3  # type: ignore[arg-type]
        prompt[i], output[i] = int(n_in), int(n_out)  # type: ignore[arg-type]
    _monotonic(t, lines, ok, bad, shown, "timestamp")
    return _finished(p, shown, "mooncake", t, prompt, output, ok, bad, skip_bad_rows)


def _fast_mooncake(
    raw: bytes,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64], npt.NDArray[np.int64]] | None:
    """The columnar read of a clean Mooncake file (seconds, prompt and output tokens), or None if
    anything at all is off (the line-by-line read then names every bad line)."""
    import pyarrow as pa
    import pyarrow.json as pjson

    try:
        table = pjson.read_json(io.BytesIO(raw), read_options=pjson.ReadOptions(use_threads=False))
    except (pa.ArrowException, ValueError, OverflowError):
        return None
    if table.num_rows == 0 or any(k not in table.column_names for k in MOONCAKE_KEYS):
        return None
    cols = {k: table.column(k) for k in MOONCAKE_KEYS}
    if any(c.null_count for c in cols.values()):
        return None
    if not all(pa.types.is_integer(cols[k].type) for k in MOONCAKE_KEYS[1:]):
        return None
    if not (pa.types.is_integer(cols["timestamp"].type) or pa.types.is_floating(cols["timestamp"].type)):
        return None
    t = cols["timestamp"].to_numpy().astype(np.float64) / 1e3
    prompt = cols["input_length"].to_numpy().astype(np.int64)
    output = cols["output_length"].to_numpy().astype(np.int64)
    if not np.all(np.isfinite(t)) or t.min() < 0 or np.any(np.diff(t) < 0):
        return None
    if prompt.min() < 1 or output.min() < 1:
        return None
    return t, prompt, output


def _fast_read(
    raw: bytes, header: list[str], fmt: str
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64], npt.NDArray[np.int64]] | None:
    """Typed multi-threaded parse of a clean file, or None if anything at all is off.

    A None sends the file through the slower text-column path, which names every bad row.
    """
    import pyarrow as pa
    import pyarrow.csv as pcsv

    if fmt == "azure":
        # naive times (the 2023 traces) or times with a UTC offset (the 2024 traces), not a mix
        kinds = [
            {"TIMESTAMP": time_type, "ContextTokens": pa.int64(), "GeneratedTokens": pa.int64()}
            for time_type in (pa.timestamp("ns"), pa.timestamp("ns", "UTC"))
        ]
    elif fmt == "burstgpt":
        kinds = [{"Timestamp": pa.float64(), "Request tokens": pa.int64(), "Response tokens": pa.int64()}]
    else:
        kinds = [{c: pa.int64() for c in _REFERENCE_INTS} | {"arrival_timestamp": pa.float64()}]
    names = _COLUMNS[fmt]
    for types in kinds:
        try:
            table = pcsv.read_csv(
                io.BytesIO(raw),
                read_options=pcsv.ReadOptions(
                    skip_rows=1, column_names=header, block_size=1 << 22, use_threads=False
                ),
                parse_options=pcsv.ParseOptions(ignore_empty_lines=False),
                convert_options=pcsv.ConvertOptions(column_types=types, include_columns=list(names)),
            )
            break
        except (pa.ArrowException, ValueError, OverflowError):
            continue
    else:
        return None
    if table.num_rows == 0 or any(table.column(c).null_count for c in names):
        return None
    cols = {c: table.column(c).to_numpy() for c in names}
    if fmt == "azure":
        t = cols["TIMESTAMP"].astype("datetime64[ns]").astype(np.int64)
        t = (t - t[0]).astype(np.float64) / 1e9
        prompt, output = cols["ContextTokens"], cols["GeneratedTokens"]
    elif fmt == "burstgpt":
        t = cols["Timestamp"].astype(np.float64)
        prompt, output = cols["Request tokens"], cols["Response tokens"]
        if not np.all(np.isfinite(t)) or t.min() < 0:
            return None
    else:
        t = cols["arrival_timestamp"].astype(np.float64)
        prompt, output = cols["prompt_size"], cols["token_size"]
        if not np.all(np.isfinite(t)) or t.min() < 0:
            return None
        if any(cols[c].min() < low for c, low in _REFERENCE_INTS.items()):
            return None
    if prompt.min() < 1 or output.min() < 1 or np.any(np.diff(t) < 0):
        return None
    return t, prompt.astype(np.int64), output.astype(np.int64)


def _parse_columns(
    raw: bytes, header: list[str], wanted: tuple[str, ...], shown: str
) -> tuple[dict[str, object], npt.NDArray[np.int64], dict[int, BadRow]]:
    """Every wanted column as a pyarrow string array, the file line of each row, rows already bad."""
    import pyarrow as pa
    import pyarrow.csv as pcsv

    invalid: list[tuple[int | None, int, int]] = []

    def handler(row: object) -> str:
        invalid.append((row.number, row.expected_columns, row.actual_columns))  # type: ignore[attr-defined]
        return "skip"

    def read(threads: bool) -> pa.Table:
        invalid.clear()
        return pcsv.read_csv(
            io.BytesIO(raw),
            read_options=pcsv.ReadOptions(
                skip_rows=1, column_names=header, use_threads=threads, block_size=1 << 22
            ),
            parse_options=pcsv.ParseOptions(invalid_row_handler=handler, ignore_empty_lines=False),
            convert_options=pcsv.ConvertOptions(
                column_types={c: pa.string() for c in header},
                include_columns=list(wanted),
                strings_can_be_null=False,
                quoted_strings_can_be_null=False,
            ),
        )

    try:
        # one thread: Arrow's CSV worker threads, once started, could still be alive while the
        # process tears down after an error line and abort it ("terminate called without an active
        # exception", exit 134); one thread also gives every invalid row its line number
        table = read(False)
    except (pa.ArrowException, ValueError, OverflowError) as exc:
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(f"{shown}: not a readable CSV file ({msg})") from None
    bad: dict[int, BadRow] = {}
    for num, expected, actual in invalid:
        line = int(num) if num is not None else 0
        bad[line] = BadRow(shown, line, f"expected {expected} columns, found {actual}")
    total = table.num_rows + len(invalid)
    all_lines = np.arange(2, total + 2, dtype=np.int64)
    if invalid:
        all_lines = all_lines[~np.isin(all_lines, np.fromiter(bad.keys(), dtype=np.int64))]
    cols = {
        c: table.column(c).combine_chunks() if table.num_rows else pa.array([], pa.string()) for c in wanted
    }
    # Rows whose fields are all empty are blank lines: not data, not errors.
    import pyarrow.compute as pc

    blank = np.ones(table.num_rows, dtype=bool)
    for c in wanted:
        lengths = pc.binary_length(cols[c])
        if table.num_rows and pc.min(lengths).as_py() > 0:
            blank[:] = False
            break
        blank &= np.asarray(pc.equal(pc.utf8_trim_whitespace(cols[c]), "").to_numpy(zero_copy_only=False))
    if blank.any():
        keep = ~blank
        cols = {c: a.filter(pa.array(keep)) for c, a in cols.items()}
        all_lines = all_lines[keep]
    return cols, all_lines, bad


def _note(
    bad: dict[int, BadRow],
    ok: npt.NDArray[np.bool_],
    lines: npt.NDArray[np.int64],
    mask: npt.NDArray[np.bool_],
    shown: str,
    problem_of: object,
) -> None:
    """Record rows in `mask` as bad (keeping the first problem found per line)."""
    idx = np.flatnonzero(mask)
    ok[idx] = False
    for i in idx:
        line = int(lines[i])
        if line not in bad:
            bad[line] = BadRow(shown, line, problem_of(int(i)))  # type: ignore[operator]


class _Values:
    """Index a pyarrow string column lazily (only the bad rows' texts are ever needed)."""

    __slots__ = ("arr",)

    def __init__(self, arr: object) -> None:
        self.arr = arr

    def __getitem__(self, i: int) -> str:
        return str(self.arr[int(i)].as_py())  # type: ignore[index]


def _show(value: str) -> str:
    v = value if len(value) <= 40 else value[:37] + "..."
    return repr(v)


def _try_cast(arr: object, to: object) -> npt.NDArray | None:
    """The strict pyarrow cast of a whole column, or None when any value does not convert."""
    import pyarrow as pa
    import pyarrow.compute as pc

    try:
        return pc.cast(arr, to).to_numpy(zero_copy_only=False)
    except (pa.ArrowException, ValueError, OverflowError):
        return None


def _cast_subset(arr: object, good: npt.NDArray[np.bool_], to: object, dtype: type) -> npt.NDArray:
    """Cast the rows marked good (whitespace and a leading '+' removed); rows that still fail are
    unmarked in `good` (found one by one — error path only)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    out: np.ndarray = np.zeros(len(good), dtype=dtype)
    idx = np.flatnonzero(good)
    if not len(idx):
        return out
    sub = arr if good.all() else arr.filter(pa.array(good))  # type: ignore[attr-defined]
    sub = pc.utf8_ltrim(pc.utf8_trim_whitespace(sub), characters="+")
    try:
        out[idx] = pc.cast(sub, to).to_numpy(zero_copy_only=False)
    except (pa.ArrowException, ValueError, OverflowError):
        for j, v in zip(idx, sub.to_pylist(), strict=True):
            try:
                out[j] = pc.cast(pa.array([v]), to)[0].as_py()
            except (pa.ArrowException, ValueError, OverflowError):
                good[j] = False
    return out


def _match(arr: object, regex: str) -> npt.NDArray[np.bool_]:
    import pyarrow.compute as pc

    return np.asarray(pc.match_substring_regex(arr, regex).to_numpy(zero_copy_only=False), dtype=bool)


def _note_unparsed(
    arr: object,
    good: npt.NDArray[np.bool_],
    lines: npt.NDArray[np.int64],
    ok: npt.NDArray[np.bool_],
    bad: dict[int, BadRow],
    shown: str,
    name: str,
    expected: str,
) -> None:
    """Record the cells `good` rejects: "<name> is empty", else "<name> is not <expected>: <cell>"."""
    values = _Values(arr)
    _note(
        bad,
        ok,
        lines,
        ~good,
        shown,
        lambda i: (
            f"{name} is empty" if not values[i].strip() else f"{name} is not {expected}: {_show(values[i])}"
        ),
    )


def _ints(
    arr: object,
    lines: npt.NDArray[np.int64],
    ok: npt.NDArray[np.bool_],
    bad: dict[int, BadRow],
    shown: str,
    name: str,
    low: int,
) -> npt.NDArray[np.int64]:
    import pyarrow as pa

    fast = _try_cast(arr, pa.int64())  # clean columns stop here
    if fast is not None:
        good = np.ones(len(fast), dtype=bool)
        out = fast.astype(np.int64, copy=True)
    else:
        good = _match(arr, _INT_RE)
        out = _cast_subset(arr, good, pa.int64(), np.int64)
    if not good.all():
        values = _Values(arr)
        negative = _match(arr, _NEG_INT_RE)
        huge = _match(arr, _BIG_INT_RE)

        def problem(i: int) -> str:
            v = values[i]
            if not v.strip():
                return f"{name} is empty"
            if negative[i]:
                return f"{name} must be ≥ {low}, got {v.strip()}"
            if huge[i]:
                return f"{name} is too large: {_show(v)} has more than 18 digits"
            return f"{name} is not an integer: {_show(v)}"

        _note(bad, ok, lines, ~good, shown, problem)
    small = good & (out < low)
    if small.any():
        _note(bad, ok, lines, small, shown, lambda i: f"{name} must be ≥ {low}, got {out[i]}")
    out[~good | small] = max(low, 1)
    return out


def _floats(
    arr: object,
    lines: npt.NDArray[np.int64],
    ok: npt.NDArray[np.bool_],
    bad: dict[int, BadRow],
    shown: str,
    name: str,
) -> npt.NDArray[np.float64]:
    import pyarrow as pa

    fast = _try_cast(arr, pa.float64())  # clean columns stop here (inf is caught below)
    if fast is not None and (len(fast) == 0 or np.min(fast) >= 0):
        good = np.ones(len(fast), dtype=bool)
        out = fast.astype(np.float64, copy=True)
    else:
        good = _match(arr, _FLOAT_RE)
        out = _cast_subset(arr, good, pa.float64(), np.float64)
    finite = np.isfinite(out)
    if not good.all():
        _note_unparsed(arr, good, lines, ok, bad, shown, name, "a non-negative number")
    if not finite.all():
        _note(bad, ok, lines, good & ~finite, shown, lambda i: f"{name} is not finite")
    out[~(good & finite)] = np.nan
    return out


def _datetime_seconds(
    arr: object,
    lines: npt.NDArray[np.int64],
    ok: npt.NDArray[np.bool_],
    bad: dict[int, BadRow],
    shown: str,
    name: str,
) -> npt.NDArray[np.float64]:
    """Datetime strings → seconds since the epoch (float64; relative times keep µs precision).

    Naive times, or times with a UTC offset read as the instants they name; a column that mixes
    the two has no common clock, so the rows of the kind its first valid row is not are bad."""
    import pyarrow as pa

    naive, aware = pa.timestamp("ns"), pa.timestamp("ns", "UTC")
    fast = _try_cast(arr, naive)
    if fast is None:
        fast = _try_cast(arr, aware)
    if fast is not None:
        good = np.ones(len(fast), dtype=bool)
        ns = fast.astype("datetime64[ns]").astype(np.int64)
    else:
        good = _match(arr, _DATETIME_RE)
        ns = np.zeros(len(good), dtype=np.int64)
        with_offset = good & _match(arr, _OFFSET_RE)
        valid = np.flatnonzero(good)
        if len(valid):
            first = int(valid[0])
            mixed = good & (with_offset != with_offset[first])
            if mixed.any():
                problem = (
                    f"{name} has a UTC offset where line {int(lines[first])}'s has none"
                    if not with_offset[first]
                    else f"{name} has no UTC offset where line {int(lines[first])}'s has one"
                )
                _note(bad, ok, lines, mixed, shown, lambda i: problem)
                good &= ~mixed
        naive_rows, aware_rows = good & ~with_offset, good & with_offset
        _cast_times(arr, naive_rows, naive, ns)
        _cast_times(arr, aware_rows, aware, ns)
        good = naive_rows | aware_rows
    idx = np.flatnonzero(good)
    if not good.all():
        _note_unparsed(arr, good, lines, ok, bad, shown, name, _DATETIME_FORM)
    base = ns[idx[0]] if len(idx) else 0
    out = (ns - base).astype(np.float64) / 1e9
    out[~good] = np.nan
    return out


def _cast_times(arr: object, rows: npt.NDArray[np.bool_], to: object, ns: npt.NDArray[np.int64]) -> None:
    """Cast the date-times of `rows` to `to` (naive or UTC), into `ns` (ns since the epoch); the rows
    that are well formed but impossible dates (month 13, …) are unmarked in `rows`, found one by
    one (error path only)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    idx = np.flatnonzero(rows)
    if not len(idx):
        return
    sub = pc.utf8_trim_whitespace(arr if rows.all() else arr.filter(pa.array(rows)))  # type: ignore[attr-defined]
    try:
        ns[idx] = pc.cast(sub, to).cast(pa.int64()).to_numpy()
    except (pa.ArrowException, ValueError):
        for j, s in zip(idx, sub.to_pylist(), strict=True):
            try:
                ns[j] = int(pc.cast(pa.array([s]), to).cast(pa.int64())[0].as_py())
            except (pa.ArrowException, ValueError):
                rows[j] = False


def _monotonic(
    t: npt.NDArray[np.float64],
    lines: npt.NDArray[np.int64],
    ok: npt.NDArray[np.bool_],
    bad: dict[int, BadRow],
    shown: str,
    name: str,
) -> None:
    """Rows that arrive before an earlier valid row are bad (the earlier row is kept)."""
    idx = np.flatnonzero(ok)
    if len(idx) < 2:
        return
    tv = t[idx]
    running = np.maximum.accumulate(tv)
    back = np.zeros(len(idx), dtype=bool)
    back[1:] = tv[1:] < running[:-1]
    if not back.any():
        return
    # A later row is compared with the running maximum of the rows before it.
    mask = np.zeros(len(t), dtype=bool)
    mask[idx[back]] = True
    prev = np.zeros(len(t))
    prev[idx[1:]] = running[:-1]
    _note(
        bad,
        ok,
        lines,
        mask,
        shown,
        lambda i: f"{name} goes backwards (earlier than a previous row by {prev[i] - t[i]:.6g} s)",
    )


def write_trace(workload: Workload, path: str | Path) -> None:
    """The workload in the reference simulator's CSV format, written atomically."""
    import pyarrow as pa
    import pyarrow.csv as pcsv

    n = workload.n
    table = pa.table(
        {
            "request_id": np.arange(n, dtype=np.int64),
            "request_type": np.full(n, 2, dtype=np.int64),
            "application_id": np.zeros(n, dtype=np.int64),
            "arrival_timestamp": workload.arrival_s,
            "batch_size": np.ones(n, dtype=np.int64),
            "prompt_size": workload.prompt_tokens,
            "token_size": workload.output_tokens,
        }
    )

    def writer(tmp: Path) -> None:
        with open(tmp, "wb") as fh:
            fh.write((",".join(REFERENCE_COLUMNS) + "\n").encode())
            pcsv.write_csv(table, fh, write_options=pcsv.WriteOptions(include_header=False))

    write_with(path, writer)
