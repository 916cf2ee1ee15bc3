"""Loads the TOML catalog files once — the shipped ones, then the user's — and returns raw entries.

User catalogs: folders named by `$SPLITPLAN_CATALOG` (a list joined with the OS path separator) or
by `--catalog DIR` (which adds to it, so worker processes see the same catalog). Each may hold
gpus.toml, machines.toml, models.toml in the shipped schema, and a `perf/` folder of
performance-model stacks. A user entry adds a name or overrides the shipped entry of that name;
`entry_origin` says where each merged entry came from. Every entry is checked against its
dataclass: a missing field, an unknown key or a name given twice in one file is one clear line.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import tomllib
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

from splitplan._io import read_text_file, refuse_url
from splitplan._paths import data_dir
from splitplan.errors import CatalogError, InputError

SCHEMA_VERSION = 1
CATALOG_ENV = "SPLITPLAN_CATALOG"
SHIPPED = "shipped"
KINDS = ("gpu", "machine", "model")

# kind → the dataclass an entry becomes (registered by hardware.py and models.py)
_SCHEMAS: dict[str, type] = {}
# cached look-ups built on the tables, cleared when the user catalogs change
_CACHES: list[Callable[..., Any]] = []


def register_schema(kind: str, cls: type) -> None:
    _SCHEMAS[kind] = cls


def register_cache(fn: Callable[..., Any]) -> Callable[..., Any]:
    _CACHES.append(fn)
    return fn


def unknown_name(what: str, name: str, known: list[str], hint: str = "") -> CatalogError:
    """The one line for a name the catalog does not hold: the closest known names first (a typo's
    fix is then one glance away), then every known name, so that the line alone answers it."""
    close = difflib.get_close_matches(name.lower(), known, n=3, cutoff=0.6)
    quoted = [repr(c) for c in close]
    either = ", ".join(quoted[:-1]) + " or " if len(quoted) > 1 else ""
    guess = f"; did you mean {either}{quoted[-1]}?" if close else ""
    return CatalogError(f"unknown {what} {name!r}{guess} (known: {', '.join(known)}{hint})")


def user_catalog_dirs() -> tuple[Path, ...]:
    """User catalog folders, in override order (later wins): `$SPLITPLAN_CATALOG`, a list joined
    with the OS path separator. Each may hold gpus.toml, machines.toml, models.toml and a `perf/`
    folder of performance-model stacks, in the shipped schema.

    Each folder is checked as `--catalog` checks its own (a missing folder, a file or a folder with
    none of those files is one CatalogError line naming the variable): a mistyped variable would
    otherwise be ignored and every result computed from the shipped catalog alone."""
    value = os.environ.get(CATALOG_ENV, "")
    dirs = tuple(Path(p) for p in value.split(os.pathsep) if p.strip())
    for d in dirs:
        _check_folder(d, f"${CATALOG_ENV}")
    return dirs


def _check_folder(d: Path, option: str) -> None:
    """A user catalog folder exists, is a folder and holds some catalog file or `perf/`."""
    try:
        refuse_url(d, option)
    except InputError as exc:
        raise CatalogError(str(exc)) from None
    if not d.exists():
        raise CatalogError(
            f"{option}: catalog folder {d} does not exist (give a folder of gpus/machines/models.toml)"
        )
    if not d.is_dir():
        raise CatalogError(
            f"{option}: {d} is a file, not a folder (give a folder of gpus/machines/models.toml)"
        )
    if not any((d / f"{k}s.toml").is_file() for k in KINDS) and not (d / "perf").is_dir():
        raise CatalogError(
            f"{option}: catalog folder {d} has none of gpus.toml, machines.toml, models.toml or perf/"
        )


def use_user_catalogs(dirs: list[Path] | tuple[Path, ...], option: str = "--catalog") -> tuple[Path, ...]:
    """Add catalog folders (after those of `$SPLITPLAN_CATALOG`); returns every folder in use.
    `option` is how the caller's user named them, for the error line.

    The environment variable carries them, so worker processes load the same catalog.
    """
    added = []
    for d in dirs:
        p = Path(d).expanduser()
        _check_folder(p, option)
        added.append(str(p.resolve()))
    current = [str(p) for p in user_catalog_dirs()]
    os.environ[CATALOG_ENV] = os.pathsep.join(current + [a for a in added if a not in current])
    clear_caches()
    return user_catalog_dirs()


def clear_caches() -> None:
    _merged.cache_clear()
    for fn in _CACHES:
        fn.cache_clear()  # type: ignore[attr-defined]


def load_table(kind: str) -> dict[str, dict[str, Any]]:
    """`kind` is gpu|machine|model; returns name → raw entry (read-only use only), shipped entries
    overridden by the user catalogs'."""
    return _merged(kind, user_catalog_dirs())[0]


def entry_origin(kind: str, name: str) -> str:
    """`shipped`, or the user catalog file the entry comes from."""
    return _merged(kind, user_catalog_dirs())[1].get(name.lower(), SHIPPED)


@cache
def _merged(kind: str, dirs: tuple[Path, ...]) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    table = _read(data_dir() / "catalog" / f"{kind}s.toml", kind)
    origin = dict.fromkeys(table, SHIPPED)
    for d in dirs:
        path = d / f"{kind}s.toml"
        if not path.is_file():
            continue
        for name, entry in _read(path, kind).items():
            table[name] = entry
            origin[name] = str(path)
    return table, origin


def _read(path: Path, kind: str) -> dict[str, dict[str, Any]]:
    try:
        text = read_text_file(path, "catalog file")  # unreadable or not UTF-8: one line
    except InputError as exc:
        raise CatalogError(str(exc)) from None
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise CatalogError(f"catalog file {path}: {exc} (a name given twice, or not TOML)") from None
    if doc.get("schema_version") != SCHEMA_VERSION:
        raise CatalogError(f"{path}: schema_version must be {SCHEMA_VERSION}")
    extra = sorted(set(doc) - {"schema_version", kind})
    if extra:
        raise CatalogError(f"{path}: unknown table {extra[0]!r} (a {kind}s.toml holds [{kind}.NAME] tables)")
    raw = doc.get(kind, {})
    out: dict[str, dict[str, Any]] = {}
    for name, entry in raw.items():
        key = name.lower()
        if key in out:
            raise CatalogError(f"{path}: {kind} {name!r} is given twice (names are case-insensitive)")
        if not isinstance(entry, dict):
            raise CatalogError(f"{path}: {kind}.{name} must be a table of fields")
        _check_fields(path, kind, name, entry)
        out[key] = entry
    return out


def _check_fields(path: Path, kind: str, name: str, entry: dict[str, Any]) -> None:
    cls = _SCHEMAS.get(kind)
    if cls is None:
        return
    fields = {f.name: f for f in dataclasses.fields(cls) if f.name != "name"}
    unknown = sorted(set(entry) - set(fields))
    if unknown:
        raise CatalogError(
            f"{path}: {kind} {name!r}: unknown key {unknown[0]!r} (known: {', '.join(fields)})"
        )
    required = [
        n
        for n, f in fields.items()
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    ]
    missing = [n for n in required if n not in entry]
    if missing:
        raise CatalogError(
            f"{path}: {kind} {name!r}: missing field {missing[0]!r} (needs: {', '.join(required)})"
        )
