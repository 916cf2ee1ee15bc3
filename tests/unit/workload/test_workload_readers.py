"""Trace readers: both formats, every kind of bad row named by file:line, skip mode, round trip."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from splitplan.errors import InputError
from splitplan.workload import Workload, read_trace, scan_trace, write_trace
from splitplan.workload.readers import AZURE_COLUMNS, REFERENCE_COLUMNS

REF_HEADER = ",".join(REFERENCE_COLUMNS)
AZ_HEADER = ",".join(AZURE_COLUMNS)
BURST_HEADER = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type"  # BurstGPT's


def _write(tmp_path: Path, text: str, name: str = "t.csv") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def _refused_then_skipped(p: Path, first: str, kept_arrival_s: list[float], bad_lines: list[int]) -> None:
    """The file is refused with one line starting `first`, and skip mode keeps the other rows."""
    with pytest.raises(InputError) as exc:
        read_trace(p)
    assert str(exc.value).startswith(first)
    assert "\n" not in str(exc.value)
    read = scan_trace(p, skip_bad_rows=True)
    np.testing.assert_allclose(read.workload.arrival_s, kept_arrival_s)
    assert [b.line for b in read.bad_rows] == bad_lines


def test_reference_format(tmp_path: Path) -> None:
    p = _write(tmp_path, f"{REF_HEADER}\n0,2,0,0.5,1,10,3\n1,2,0,0.75,1,20,4\n", "my_trace.csv")
    wl = read_trace(p)
    assert wl.name == "my_trace"
    np.testing.assert_array_equal(wl.arrival_s, [0.5, 0.75])
    np.testing.assert_array_equal(wl.prompt_tokens, [10, 20])
    np.testing.assert_array_equal(wl.output_tokens, [3, 4])
    assert wl.meta["format"] == "reference"


def test_azure_format_relative_seconds(tmp_path: Path) -> None:
    p = _write(
        tmp_path,
        f"{AZ_HEADER}\n2024-03-05 09:41:12.1234500,2201,17\n"
        "2024-03-05 09:41:12.1754500,1630,9\n2024-03-05 09:42:12,5,1\n",
    )
    wl = read_trace(p)
    np.testing.assert_allclose(wl.arrival_s, [0.0, 0.052, 59.87655], atol=1e-9)
    np.testing.assert_array_equal(wl.prompt_tokens, [2201, 1630, 5])
    assert wl.meta["format"] == "azure"


@pytest.mark.parametrize(
    ("name", "text", "fmt", "arrival_s", "prompts", "outputs"),
    [
        pytest.param(
            # the 2024 release: a UTC offset on every time, some without fractional seconds; another
            # offset, Z or a T separator names the same instant
            "azure_2024.csv",
            f"{AZ_HEADER}\n2024-05-10 00:00:00.009930+00:00,1000,20\n2024-05-10 00:00:01+00:00,2000,30\n"
            "2024-05-10 02:00:01.509930+02:00,300,5\n2024-05-10T00:00:02Z,40,6\n"
            "2024-05-09 19:00:03-0500,50,7\n",
            "azure",
            [0.0, 0.99007, 1.5, 1.99007, 2.99007],
            [1000, 2000, 300, 40, 50],
            [20, 30, 5, 6, 7],
            id="azure-2024",
        ),
        pytest.param(
            # seconds from the trace's start (here a later shard's), ties allowed, the model and the
            # log type not read
            "BurstGPT_without_fails_2.csv",
            f"{BURST_HEADER}\n"
            "5270414,ChatGPT,472,18,490,Conversation log\n5270414,GPT-4,1087,230,1317,API log\n"
            "5270460.5,ChatGPT,417,276,693,Conversation log\n",
            "burstgpt",
            [0.0, 0.0, 46.5],
            [472, 1087, 417],
            [18, 230, 276],
            id="burstgpt",
        ),
        pytest.param(
            # JSON lines in milliseconds from the first row, the prefix-cache block ids not read
            "conversation_trace.jsonl",
            '{"timestamp": 1000, "input_length": 6955, "output_length": 52, "hash_ids": [46, 47]}\n'
            '{"timestamp": 1000, "input_length": 6472, "output_length": 26, "hash_ids": [46]}\n\n'
            '{"timestamp": 28482.5, "input_length": 6940, "output_length": 61, "hash_ids": []}\n',
            "mooncake",
            [0.0, 0.0, 27.4825],
            [6955, 6472, 6940],
            [52, 26, 61],
            id="mooncake",
        ),
        pytest.param(
            # a UTF-8 byte-order mark before the first line
            "with_bom.jsonl",
            '\ufeff{"timestamp": 0, "input_length": 5, "output_length": 2}\n'
            '{"timestamp": 10, "input_length": 6, "output_length": 3}\n',
            "mooncake",
            [0.0, 0.01],
            [5, 6],
            [2, 3],
            id="mooncake-bom",
        ),
    ],
)
def test_public_trace_formats(
    tmp_path: Path, name: str, text: str, fmt: str, arrival_s: list, prompts: list, outputs: list
) -> None:
    """The public traces planners replay beside the 2023 Azure ones, each read as its own format."""
    wl = read_trace(_write(tmp_path, text, name))
    np.testing.assert_allclose(wl.arrival_s, arrival_s, atol=1e-9)
    np.testing.assert_array_equal(wl.prompt_tokens, prompts)
    np.testing.assert_array_equal(wl.output_tokens, outputs)
    assert wl.meta["format"] == fmt
    assert wl.name == Path(name).stem


@pytest.mark.parametrize(
    ("first", "other", "fragment"),
    [
        ("2024-05-10 00:00:00+00:00", "2024-05-10 00:00:01", "has no UTC offset where line 2's has one"),
        ("2024-05-10 00:00:00", "2024-05-10 00:00:01Z", "has a UTC offset where line 2's has none"),
        ("2024-05-10 00:00:00+00:00", "2024-05-10 00:00:01+25:00", "is not a date-time"),
    ],
)
def test_azure_times_with_and_without_an_offset_do_not_mix(
    tmp_path: Path, first: str, other: str, fragment: str
) -> None:
    """Naive times and times with an offset have no common clock: the rows unlike the first are
    bad rows (skipped with --skip-bad-rows), named by line."""
    p = _write(tmp_path, f"{AZ_HEADER}\n{first},1,1\n{other},2,2\n2024-05-10 00:00:02{first[19:]},3,3\n")
    _refused_then_skipped(p, f"{p}:3: TIMESTAMP {fragment}", [0.0, 2.0], [3])


def test_burstgpt_failed_requests_are_bad_rows(tmp_path: Path) -> None:
    """A failed request in BurstGPT has 0 response tokens: a bad row, dropped by skip mode."""
    p = _write(
        tmp_path,
        f"{BURST_HEADER}\n5,ChatGPT,472,18,490,Conversation log\n7,ChatGPT,300,0,300,API log\n"
        "9,GPT-4,0,20,20,API log\n45,ChatGPT,1087,230,1317,Conversation log\n",
    )
    _refused_then_skipped(
        p, f"{p}:3: Response tokens must be ≥ 1, got 0; 1 more bad rows (lines 4)", [0.0, 40.0], [3, 4]
    )


@pytest.mark.parametrize(
    ("row", "fragment"),
    [
        ("[1, 2]", "not a JSON object"),
        ("not json", "not a JSON object"),
        ('{"timestamp": 2000, "input_length": 7}', "missing output_length"),
        ('{"timestamp": 2000, "input_length": 0, "output_length": 3}', "input_length must be ≥ 1, got 0"),
        ('{"timestamp": 2000, "input_length": 7, "output_length": 2.5}', "output_length is not an integer"),
        (
            '{"timestamp": 2000, "input_length": 100000000000000000000, "output_length": 2}',
            "input_length is too large",
        ),
        ('{"timestamp": 1e400, "input_length": 7, "output_length": 2}', "timestamp is not a non-negative"),
        ('{"timestamp": NaN, "input_length": 7, "output_length": 2}', "timestamp is not a non-negative"),
        ('{"timestamp": "soon", "input_length": 7, "output_length": 2}', "timestamp is not a non-negative"),
        ('{"timestamp": 500, "input_length": 7, "output_length": 2}', "timestamp goes backwards"),
    ],
)
def test_mooncake_bad_lines(tmp_path: Path, row: str, fragment: str) -> None:
    p = _write(
        tmp_path,
        f'{{"timestamp": 1000, "input_length": 5, "output_length": 1}}\n{row}\n'
        '{"timestamp": 3000, "input_length": 9, "output_length": 4}\n',
    )
    _refused_then_skipped(p, f"{p}:2: {fragment}", [0.0, 2.0], [2])


def test_column_order_free_and_blank_lines(tmp_path: Path) -> None:
    p = _write(
        tmp_path,
        "GeneratedTokens,TIMESTAMP,ContextTokens\r\n7,2023-01-01 00:00:00,9\r\n\r\n"
        "8,2023-01-01 00:00:01.5,10\r\n",
    )
    wl = read_trace(p)
    np.testing.assert_array_equal(wl.output_tokens, [7, 8])
    np.testing.assert_array_equal(wl.arrival_s, [0.0, 1.5])


@pytest.mark.parametrize(
    ("row", "line", "fragment"),
    [
        ("2,2,0,x,1,5,6", 4, "arrival_timestamp is not a non-negative number"),
        ("2,2,0,1.0,1,-5,6", 4, "prompt_size must be ≥ 1, got -5"),
        ("2,2,0,1.0,1,5,0", 4, "token_size must be ≥ 1, got 0"),
        ("2,2,0,1.0,1,5,6.5", 4, "token_size is not an integer"),
        ("2,2,0,1.0,1,1000000000000000000000000000000,6", 4, "prompt_size is too large"),
        ("2,2,0,1.0,1,,6", 4, "prompt_size is empty"),
        ("2,2,0", 4, "expected 7 columns, found 3"),
        ("2,2,0,0.1,1,5,6", 4, "arrival_timestamp goes backwards"),
        ("2,2,0,inf,1,5,6", 4, "arrival_timestamp"),
    ],
)
def test_reference_bad_rows_named_by_line(tmp_path: Path, row: str, line: int, fragment: str) -> None:
    p = _write(tmp_path, f"{REF_HEADER}\n0,2,0,0.5,1,10,3\n1,2,0,0.75,1,20,4\n{row}\n3,2,0,2.0,1,5,5\n")
    with pytest.raises(InputError) as exc:
        read_trace(p)
    msg = str(exc.value)
    assert msg.startswith(f"{p}:{line}: ")
    assert fragment in msg
    assert "\n" not in msg
    read = scan_trace(p, skip_bad_rows=True)
    assert read.workload.n == 3
    assert read.workload.meta["skipped_rows"] == "1"
    assert [b.line for b in read.bad_rows] == [line]


@pytest.mark.parametrize(
    ("row", "fragment"),
    [
        ("2023-13-01 00:00:00,5,6", "TIMESTAMP is not a date-time"),
        ("yesterday,5,6", "TIMESTAMP is not a date-time"),
        ("2023-01-01 00:00:00,5,6", "TIMESTAMP goes backwards"),
        ("2023-01-02 00:00:00,0,6", "ContextTokens must be ≥ 1"),
        ("2023-01-02 00:00:00,5,-1", "GeneratedTokens must be ≥ 1"),
        ("2023-01-02 00:00:00,5,abc", "GeneratedTokens is not an integer"),
    ],
)
def test_azure_bad_rows(tmp_path: Path, row: str, fragment: str) -> None:
    p = _write(tmp_path, f"{AZ_HEADER}\n2023-01-01 12:00:00,1,1\n{row}\n2023-01-03 00:00:00,2,2\n")
    with pytest.raises(InputError, match=fragment) as exc:
        read_trace(p)
    assert str(exc.value).startswith(f"{p}:3: ")
    assert read_trace(p, skip_bad_rows=True).n == 2


def test_many_bad_rows_summarised_in_one_line(tmp_path: Path) -> None:
    rows = "\n".join(f"{i},2,0,{i},1,{'x' if i % 2 else 5},6" for i in range(20))
    p = _write(tmp_path, f"{REF_HEADER}\n{rows}\n")
    with pytest.raises(InputError) as exc:
        read_trace(p)
    msg = str(exc.value)
    assert "\n" not in msg
    assert msg.startswith(f"{p}:3: ")
    assert "9 more bad rows" in msg
    read = scan_trace(p, skip_bad_rows=True)
    assert [b.line for b in read.bad_rows] == list(range(3, 22, 2))
    assert read.workload.meta["skipped_rows"] == "10"


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("", "empty file"),
        ("a,b,c\n1,2,3\n", "unrecognised header"),
        ("TIMESTAMP,ContextTokens\n2023-01-01 00:00:00,5\n", "missing column GeneratedTokens"),
        (f"{REF_HEADER}\n", "no valid requests"),
        ("prompt_size,prompt_size\n1,2\n", "duplicate column"),
    ],
)
def test_file_level_errors(tmp_path: Path, text: str, fragment: str) -> None:
    with pytest.raises(InputError, match=fragment):
        read_trace(_write(tmp_path, text))


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not found"):
        read_trace(tmp_path / "nope.csv")
    with pytest.raises(InputError, match="folder"):
        read_trace(tmp_path)


def test_write_read_round_trip(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    t = np.cumsum(rng.exponential(0.01, 1000))
    wl = Workload(
        arrival_s=t,
        prompt_tokens=rng.integers(1, 9000, 1000),
        output_tokens=rng.integers(1, 2000, 1000),
        name="x",
    )
    out = tmp_path / "rt.csv"
    write_trace(wl, out)
    assert out.read_text().splitlines()[0] == ",".join(REFERENCE_COLUMNS)
    back = read_trace(out)
    np.testing.assert_array_equal(back.arrival_s, wl.arrival_s)  # floats round-trip exactly
    np.testing.assert_array_equal(back.prompt_tokens, wl.prompt_tokens)
    np.testing.assert_array_equal(back.output_tokens, wl.output_tokens)
    assert not list(tmp_path.glob(".*tmp"))


def test_write_to_missing_folder_is_input_error(tmp_path: Path) -> None:
    wl = Workload(arrival_s=[0.0], prompt_tokens=[1], output_tokens=[1])
    with pytest.raises(InputError):
        write_trace(wl, tmp_path / "no" / "x.csv")


def test_shared_azure_traces(azure_dir: Path) -> None:
    code = read_trace(azure_dir / "AzureLLMInferenceTrace_code.csv")
    conv = read_trace(azure_dir / "AzureLLMInferenceTrace_conv.csv")
    assert (code.n, conv.n) == (8819, 19366)
    assert code.arrival_s[0] == 0.0
    # SPLITWISE.md §7 table
    assert np.percentile(code.prompt_tokens, 50) == 1469
    assert int(np.max(conv.prompt_tokens)) == 14050
    assert int(np.max(conv.output_tokens)) == 1000


@pytest.mark.parametrize("fname", ["AzureLLMInferenceTrace_conv.csv", "rr_code_70_2min.csv"])
def test_row_by_row_path_agrees_with_fast_path(
    tmp_path: Path, azure_dir: Path, reference_dir: Path, fname: str
) -> None:
    """A single bad row sends the file through the validating path; the good rows must not change."""
    src = azure_dir / fname if fname.startswith("Azure") else reference_dir / "traces" / fname
    clean = read_trace(src)
    text = src.read_text()
    bad_row = "2099-01-01 00:00:00,5,x\n" if fname.startswith("Azure") else "9,2,0,999,1,5,x\n"
    dirty = _write(tmp_path, text + ("" if text.endswith("\n") else "\n") + bad_row)
    read = scan_trace(dirty, skip_bad_rows=True)
    assert [b.line for b in read.bad_rows] == [clean.n + 2]
    assert read.workload.arrival_s.tobytes() == clean.arrival_s.tobytes()
    np.testing.assert_array_equal(read.workload.prompt_tokens, clean.prompt_tokens)
    np.testing.assert_array_equal(read.workload.output_tokens, clean.output_tokens)
