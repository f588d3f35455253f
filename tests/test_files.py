"""Output files are written whole or not at all."""
from __future__ import annotations

from pathlib import Path

import pytest

from kvplan.errors import KvplanInputError
from kvplan.files import atomic_output, write_atomic


def test_write_atomic_replaces_the_file(tmp_path: Path) -> None:
    out = tmp_path / "plan.json"
    out.write_text("old")
    write_atomic(out, "new")
    assert out.read_text() == "new" and [p.name for p in tmp_path.iterdir()] == ["plan.json"]


def test_a_failing_writer_leaves_the_old_file_and_no_temp(tmp_path: Path) -> None:
    out = tmp_path / "chart.png"
    out.write_text("old")
    with pytest.raises(ZeroDivisionError), atomic_output(out, suffix=".png") as tmp:
        tmp.write_text("half")
        raise ZeroDivisionError("the writer fails half-way")
    assert out.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["chart.png"]


def test_unwritable_folder_is_one_input_error(tmp_path: Path) -> None:
    with pytest.raises(KvplanInputError, match=r"cannot write .*Check the folder exists"):
        write_atomic(tmp_path / "missing" / "plan.json", "{}")
