"""Atomic output: all or nothing, usual file mode."""

from __future__ import annotations

import os
import stat

import pytest

from splitplan._io import write_text_atomic, write_with
from splitplan.errors import InputError


def test_written_file_has_the_usual_mode(tmp_path):
    target = tmp_path / "out.txt"
    write_text_atomic(target, "hello")
    assert target.read_text() == "hello"
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~mask


def test_failed_writer_leaves_no_file_and_no_temp(tmp_path):
    target = tmp_path / "out.bin"

    def boom(path):
        path.write_text("partial")
        raise RuntimeError("writer failed")

    with pytest.raises(RuntimeError):
        write_with(target, boom)
    assert not target.exists()
    assert list(tmp_path.iterdir()) == []


def test_missing_folder_is_a_clear_error(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        write_text_atomic(tmp_path / "nope" / "x.txt", "x")
