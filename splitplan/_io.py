"""File input and output below every layer.

Outputs are atomic: written to a temp file in the destination's folder, then renamed onto it, so a
destination is either its old complete content or the new complete content. Temp files left by a
run killed mid-write (SIGKILL cannot be caught) are removed by the next write to the same place.
Output paths are checked before any work (`check_output_path`), so a bad path never costs the
results of a long computation. Text inputs are read through `read_text_file`, which turns unreadable
or non-UTF-8 files into one-line input errors.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from splitplan.errors import InputError, redact

# A temp file of a killed writer older than this is stale (a live writer renames its file long before).
STALE_TEMP_S = 3600.0
_TMP_SUFFIX = ".tmp"


# a URL given where a local path is expected (also as a path collapses it: s3://x → s3:/x); a
# one-letter scheme is a Windows drive (C:/…), not a URL
_URL_LIKE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+:/")


def refuse_url(path: str | Path, option: str) -> None:
    """Refuse a URL where splitplan reads or writes a local file or folder: one InputError line,
    the URL's password (if any) not repeated. Without it `s3://host/x` would be read as, or
    written to, a local folder named `s3:`."""
    if _URL_LIKE.match(str(path)):
        raise InputError(
            f"{option}: {redact(str(path))} is a URL; splitplan reads and writes local files only"
        )


def read_text_file(path: str | Path, what: str) -> str:
    """The UTF-8 text of a user-supplied file; any reason it cannot be read is one InputError line."""
    refuse_url(path, what)
    p = Path(path)
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise InputError(f"{what} {p} does not exist") from None
    except IsADirectoryError:
        raise InputError(f"{what} {p} is a folder, not a file") from None
    except OSError as exc:
        raise InputError(f"cannot read {what} {p}: {exc.strerror or exc}") from None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise InputError(f"{what} {p}:{line}: not UTF-8 text (byte {exc.start + 1} of the file)") from None


def check_output_path(path: str | Path, option: str, suffixes: tuple[str, ...] = ()) -> Path:
    """Validate an output path before any work: right extension, folder exists and is writable, the
    path is not a folder (nor a special file). Returns the path; raises InputError naming `option`."""
    target = Path(path)
    if not str(path) or target.name in ("", ".", ".."):
        raise InputError(f"{option} needs a file name, got {str(path)!r}")
    refuse_url(path, option)
    parent = target.parent if str(target.parent) else Path(".")
    if not parent.exists():
        raise InputError(f"{option}: folder {parent} does not exist")
    if not parent.is_dir():
        raise InputError(f"{option}: {parent} is not a folder")
    if target.is_dir():
        raise InputError(f"{option}: {target} is a folder, not a file")
    if suffixes and target.suffix.lower() not in suffixes:
        want = " or ".join(suffixes)
        raise InputError(f"{option} must name a {want} file, got {target.name}")
    if target.exists() and not target.is_file():
        raise InputError(f"{option}: {target} is not a regular file")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(f"{option}: folder {parent} is not writable")
    if target.exists() and not os.access(target, os.W_OK):
        raise InputError(f"{option}: {target} is not writable")
    if _is_virtual_fs(parent):
        raise InputError(f"{option}: {parent} is a system folder, not a place for output files")
    return target


def check_output_folder(folder: str | Path, option: str) -> Path:
    """A folder to write output files into (created if need be), checked before any work: not a
    URL (which would become a local folder `s3:`, its password in the name), not a file, and not
    below one. Returns it as a Path; raises InputError naming `option`."""
    refuse_url(folder, option)
    d = Path(folder)
    if d.exists() and not d.is_dir():
        raise InputError(f"{option}: {d} is a file, not a folder")
    for above in d.parents:
        if above.exists():
            if not above.is_dir():
                raise InputError(f"{option}: {above} is a file, not a folder")
            if not os.access(above, os.W_OK | os.X_OK):
                raise InputError(f"{option}: folder {above} is not writable")
            break
    return d


def make_output_folder(folder: Path, option: str) -> None:
    """Create `folder` (and its parents): a failure is one InputError line naming `option`."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"{option}: cannot create folder {folder}: {exc.strerror or exc}") from None


def _is_virtual_fs(folder: Path) -> bool:
    try:
        resolved = folder.resolve()
    except OSError:
        return False
    return resolved.parts[:2] in (("/", "proc"), ("/", "sys"), ("/", "dev"))


def partial_path(path: str | Path) -> Path:
    """Where the partial result of an interrupted run goes: X.parquet → X.partial.parquet (beside,
    never over, a complete X.parquet)."""
    target = Path(path)
    return target.with_name(f"{target.stem}.partial{target.suffix}")


def remove_stale_temps(target: Path, *, older_than_s: float = STALE_TEMP_S) -> int:
    """Remove `.NAME.<pid>.<random>.tmp` files of earlier writers to `target` that were killed
    mid-write: their process is gone (or, for names without a pid, they are older than an hour)."""
    parent = target.parent if str(target.parent) else Path(".")
    pattern = re.compile(rf"^\.{re.escape(target.name)}\.(?:(\d+)\.)?[A-Za-z0-9_]+{re.escape(_TMP_SUFFIX)}$")
    removed = 0
    now = time.time()
    with contextlib.suppress(OSError):
        for entry in os.scandir(parent):
            m = pattern.match(entry.name)
            if not m:
                continue
            with contextlib.suppress(OSError):
                pid = int(m.group(1)) if m.group(1) else None
                if pid is not None:
                    stale = pid != os.getpid() and not _alive(pid)
                else:
                    stale = now - entry.stat(follow_symlinks=False).st_mtime >= older_than_s
                if stale:
                    os.unlink(entry.path)
                    removed += 1
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yields a temporary path beside `path`; renamed onto `path` only if the block succeeds."""
    target = Path(path)
    parent = target.parent if str(target.parent) else Path(".")
    if not parent.is_dir():
        raise InputError(f"output folder {parent} does not exist")
    if target.is_dir():
        raise InputError(f"output {target} is a folder, not a file")
    remove_stale_temps(target)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.{os.getpid()}.", suffix=_TMP_SUFFIX, dir=parent)
    except OSError as exc:
        raise InputError(f"cannot write {target}: {exc.strerror or exc}") from None
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600 files; outputs get the usual mode
        os.replace(tmp, target)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError) and not isinstance(exc, InputError):
            raise InputError(f"cannot write {target}: {exc.strerror or exc}") from None
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_text_atomic(path: str | Path, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def write_with(path: str | Path, writer: Callable[[Path], None]) -> None:
    """Run `writer(tmp_path)` and move the result onto `path` atomically."""
    with atomic_path(path) as tmp:
        writer(tmp)
