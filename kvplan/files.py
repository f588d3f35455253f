"""Writing output files whole or not at all (every command that writes a file uses this).

A temp file beside the target is renamed over it once complete, so an interrupted or failed write
never leaves a half-written plan, report, chart or capture; a failure is one KvplanInputError line.
"""
from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kvplan.errors import KvplanInputError


@contextmanager
def atomic_output(path: str | Path, suffix: str = "") -> Iterator[Path]:
    """Yield a temp path to write; on success it replaces `path`, on any error it is removed.

    `suffix` keeps an extension for writers that pick the format from it (matplotlib: ".png").
    """
    p = Path(path)
    tmp = p.with_name(f".{p.name}.kvplan-tmp{suffix}")
    try:
        yield tmp
        os.replace(tmp, p)
    except OSError as e:
        raise KvplanInputError(f"cannot write {p}: {e.strerror or e}.",
                               "Check the folder exists and is writable.") from None
    finally:
        tmp.unlink(missing_ok=True)


def write_atomic(path: str | Path, text: str) -> None:
    """Write the whole text file or nothing."""
    with atomic_output(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
