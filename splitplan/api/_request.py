"""A search's full request as a TOML file (`--save-request`), and that file replayed (`--request`).

Replaying must give the same search, so the file holds every field of the request — the SLO limits
resolved inline (a file plus any `--…-ms` flags), input paths made absolute — and the SHA-256 of
every input file it names (trace, profile, simulator config). A file that changed since is refused
rather than silently searched under other inputs. Fields that were unset (None) are absent; on
loading, an absent optional field is None again, so absence round-trips exactly.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import tomllib
from dataclasses import fields, replace
from enum import Enum
from pathlib import Path
from typing import Any

from splitplan._io import read_text_file, write_text_atomic
from splitplan._version import __version__
from splitplan.api._search import DEFAULT_CAP, SearchRequest
from splitplan.api._simulate import WorkloadRequest
from splitplan.errors import InputError, redact
from splitplan.sim.config import config_perf
from splitplan.slo import SloSpec, load_slo
from splitplan.workload.presets import PRESETS

REQUEST_KIND = "splitplan/search-request"
REQUEST_VERSION = 1
# Fields that decide how a search runs, not what it finds: a replay may change them.
EXECUTION_FIELDS = ("jobs", "backend", "scheduler", "storage")
_TUPLES = ("designs", "prompt_gpus", "token_gpus")
_PATHS = ("config",)
_PAIRS = (
    "prompt_power_cap",
    "token_power_cap",
    "prompt_range",
    "token_range",
)  # (lo, hi) in TOML as [lo, hi]
# one value or a tuple of choices: the saver writes a tuple as a TOML array, read back as a tuple
_CHOICES = (
    "prompt_tp",
    "token_tp",
    "prompt_precision",
    "token_precision",
    "prompt_kv_precision",
    "token_kv_precision",
)
_BACKTICKED = re.compile(r"`([a-z][a-z0-9_]*)`")  # a library message's parameter name
_TOP_KEYS = ("kind", "request_version", "splitplan_version", "search", "workload", "slo", "files")
_SLO_TABLES = ("slowdown", "latency_s")


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _abs(path: str | Path) -> str:
    return str(Path(path).expanduser().resolve())


def _input_files(req: SearchRequest) -> list[str]:
    """Every input file the request reads (absolute paths)."""
    files = []
    wl = req.workload
    if wl.workload not in PRESETS:
        files.append(wl.workload)
    if wl.trace is not None:
        files.append(wl.trace)
    if req.perf not in (None, "analytic"):
        files.append(str(req.perf))
    if req.config is not None:
        files.append(str(req.config))
        perf = config_perf(req.config)
        if req.perf is None and perf not in (None, "analytic"):
            files.append(str(perf))
    return [_abs(f) for f in files]


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            raise InputError(f"cannot save a non-finite number ({v}) in a request")
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)  # a JSON string is a TOML basic string
    if isinstance(v, list | tuple):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise TypeError(f"cannot write {type(v).__name__} to a request file")


def _toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key, ensure_ascii=False)


def _table(name: str, values: dict[str, Any]) -> list[str]:
    lines = [f"[{name}]"]
    lines += [f"{_toml_key(k)} = {_toml_value(v)}" for k, v in values.items() if v is not None]
    return [*lines, ""]


def request_document(req: SearchRequest, *, hash_files: bool = True) -> dict[str, Any]:
    """`req` as plain data: [search], [workload], [slo] resolved, [files] with SHA-256 (None-valued
    fields dropped). Also the `request` of a search-points parquet file's metadata."""
    search: dict[str, Any] = {}
    for f in fields(SearchRequest):
        if f.name in ("workload", "slo"):
            continue
        v = getattr(req, f.name)
        if f.name in _PATHS and v is not None:
            v = _abs(v)
        if f.name == "perf" and v not in (None, "analytic"):
            v = _abs(v)
        if isinstance(v, Enum):
            v = v.value  # the request parses the value back into its enum
        if v is DEFAULT_CAP:
            v = None  # "not given" (a named design keeps its caps): absent, so a replay reads None
        if f.name in ("scheduler", "storage") and v is not None:
            v = redact(v)  # also the metadata of `--out` files: never a URL's password
        search[f.name] = list(v) if isinstance(v, tuple) else v
    wl = req.workload
    workload = {f.name: getattr(wl, f.name) for f in fields(WorkloadRequest)}
    if wl.workload not in PRESETS:
        workload["workload"] = _abs(wl.workload)
    if wl.trace is not None:
        workload["trace"] = _abs(wl.trace)
    slo = load_slo(req.slo)
    files = {}
    for path in _input_files(req):
        p = Path(path)
        if not p.is_file():
            raise InputError(f"cannot save the request: input file {p} does not exist")
        files[path] = _sha256(p) if hash_files else None
    drop = lambda d: {k: v for k, v in d.items() if v is not None}  # noqa: E731
    return {
        "search": drop(search),
        "workload": drop(workload),
        "slo": {"slowdown": dict(slo.slowdown), "latency_s": dict(slo.latency_s)},
        "files": files,
    }


def check_savable(req: SearchRequest) -> None:
    """Refuse saving a request whose storage URL or scheduler address carries a password: the
    file would hold it in clear, and a masked one could not be replayed. Checked before the search
    runs, so a long search does not end in a request that cannot be written."""
    if req.scheduler is not None and redact(req.scheduler) != req.scheduler:
        raise InputError(
            "cannot save the request: `scheduler` carries a password, which the request file would "
            "hold; a Dask scheduler address takes none (tcp://HOST:PORT)"
        )
    if req.storage is not None and redact(req.storage) != req.storage:
        raise InputError(
            "cannot save the request: the `storage` URL carries a password, which the request file "
            "would hold; drop it from the URL and give it to the database client instead (for "
            "PostgreSQL the PGPASSWORD environment variable or ~/.pgpass, for MySQL an option file)"
        )


def request_toml(req: SearchRequest) -> str:
    """The TOML text of `req` (inputs absolute, SLOs inline, input files hashed)."""
    check_savable(req)
    doc = request_document(req)
    out = [
        "# A splitplan search request. Replay it exactly: splitplan search --request THIS_FILE",
        f"kind = {_toml_value(REQUEST_KIND)}",
        f"request_version = {REQUEST_VERSION}",
        f"splitplan_version = {_toml_value(__version__)}",
        "",
        *_table("search", doc["search"]),
        *_table("workload", doc["workload"]),
        *_table("slo.slowdown", doc["slo"]["slowdown"]),
        *_table("slo.latency_s", doc["slo"]["latency_s"]),
        "# SHA-256 of every input file; a replay refuses files that changed",
        *_table("files", doc["files"]),
    ]
    return "\n".join(out).rstrip() + "\n"


def save_request(req: SearchRequest, path: str | Path) -> Path:
    """Write `req` to `path` (.toml) atomically."""
    target = Path(path)
    if target.suffix.lower() != ".toml":
        raise InputError(f"`save_request` must end in .toml, got {target.name}")
    write_text_atomic(target, request_toml(req))
    return target


def _fill(
    cls: type, values: dict[str, Any], section: str, source: Path, skip: tuple[str, ...] = ()
) -> dict[str, Any]:
    known = {f.name: f for f in fields(cls) if f.name not in skip}
    unknown = set(values) - set(known)
    if unknown:
        raise InputError(f"request {source}: unknown key(s) in [{section}]: {', '.join(sorted(unknown))}")
    out = dict(values)
    for name, f in known.items():
        if name not in out and "None" in str(f.type):
            out[name] = None  # saved files omit unset fields
    return out


def _check_tables(doc: dict[str, Any], p: Path) -> None:
    """The request file's outline: known top-level keys, tables where tables belong, a string
    version, and [files] a table of SHA-256 strings. Unknown keys are refused as in [search]
    and [workload]: a misspelt key would otherwise be silently ignored."""
    unknown = set(doc) - set(_TOP_KEYS)
    if unknown:
        raise InputError(f"request {p}: unknown top-level key(s): {', '.join(sorted(unknown))}")
    version = doc.get("splitplan_version")
    if version is not None and not isinstance(version, str):
        raise InputError(f"request {p}: splitplan_version must be a string, got {version!r}")
    for section in ("search", "workload", "slo"):
        if not isinstance(doc.get(section), dict):
            raise InputError(f"request {p}: missing [{section}] table")
    unknown = set(doc["slo"]) - set(_SLO_TABLES)
    if unknown:
        raise InputError(f"request {p}: unknown key(s) in [slo]: {', '.join(sorted(unknown))}")
    for table in _SLO_TABLES:
        limits = doc["slo"].get(table, {})
        if not isinstance(limits, dict):
            raise InputError(f"request {p}: [slo.{table}] must be a table of limits, got {limits!r}")
    files = doc.get("files", {})
    if not isinstance(files, dict):
        raise InputError(f"request {p}: [files] must be a table of file = SHA-256, got {files!r}")
    for file, digest in files.items():
        if not isinstance(digest, str):
            raise InputError(f"request {p}: [files] {file!r} must be a SHA-256 string, got {digest!r}")


def _as_tuples(search: dict[str, Any]) -> dict[str, Any]:
    """TOML arrays back into the tuples the saver wrote them from; other types are left for
    SearchRequest to refuse by name (a bare 5 for `designs`, a string for a range)."""
    out = dict(search)
    for name in _TUPLES:
        if out.get(name) is None:
            out[name] = ()
    for name in (*_TUPLES, *_PAIRS, *_CHOICES):
        v = out.get(name)
        if name in _TUPLES and isinstance(v, list) and not all(isinstance(x, str) for x in v):
            continue  # refused as the file wrote it ([1], not (1,))
        if isinstance(v, list):
            out[name] = tuple(out[name])
    return out


def load_request(path: str | Path) -> SearchRequest:
    """The SearchRequest saved in `path`; refuses input files that changed since.

    Every value is checked where the dataclasses check a library caller's (SearchRequest,
    WorkloadRequest, SloSpec); their one-line errors are prefixed with the file and table."""
    p = Path(path)
    text = read_text_file(p, "request")  # unreadable, not UTF-8 or a URL: one line
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"request {p} is not valid TOML: {exc}") from None
    if doc.get("kind") != REQUEST_KIND:
        raise InputError(f"{p} is not a saved search request (no kind = {REQUEST_KIND!r})")
    if doc.get("request_version") != REQUEST_VERSION:
        raise InputError(f"request {p}: request_version {doc.get('request_version')!r} is not supported")
    _check_tables(doc, p)
    for file, digest in doc.get("files", {}).items():
        fp = Path(file)
        if not fp.is_file():
            raise InputError(f"request {p}: input file {fp} no longer exists")
        if _sha256(fp) != digest:
            raise InputError(f"request {p}: input file {fp} changed since the request was saved")
    search = _as_tuples(_fill(SearchRequest, doc["search"], "search", p, skip=("workload", "slo")))
    section = "workload"
    try:
        workload = WorkloadRequest(**_fill(WorkloadRequest, doc["workload"], "workload", p))
        section = "slo"
        slo_doc = doc["slo"]
        slo = SloSpec(
            slowdown=dict(slo_doc.get("slowdown", {})), latency_s=dict(slo_doc.get("latency_s", {}))
        )
        section = "search"
        return SearchRequest(**search, workload=workload, slo=slo)
    except InputError as exc:
        # the dataclass's line, said of this file and table; its `parameter` is the file's key and
        # is named as the file spells it (the CLI would turn `rate_rps` into a --rate-rps no
        # command has)
        message = _BACKTICKED.sub(r"\1", str(exc).removeprefix("SLO: "))  # the table says "SLO"
        raise type(exc)(f"request {p} [{section}]: {message}") from None
    except TypeError as exc:
        raise InputError(f"request {p}: {exc}") from None


def with_execution(req: SearchRequest, **execution: Any) -> SearchRequest:
    """`req` with some of EXECUTION_FIELDS changed (a replay on more workers, another storage)."""
    bad = set(execution) - set(EXECUTION_FIELDS)
    if bad:
        raise InputError(f"only {', '.join(EXECUTION_FIELDS)} may change in a replay, not {', '.join(bad)}")
    return replace(req, **execution)
