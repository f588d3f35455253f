"""Shared by the lint tests: write a dedented deployment file and lint it in isolation."""
from __future__ import annotations

import textwrap
from pathlib import Path

from kvplan.lint import lint_paths


def write_file(tmp_path: Path, name: str, text: str) -> Path:
    """`text` dedented into `tmp_path / name` (folders created)."""
    p = tmp_path / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(textwrap.dedent(text).lstrip("\n"))
    return p


def lint_text(tmp_path: Path, name: str, text: str, **kw):
    """Lint one file written from `text`, ignoring any configuration (`--isolated`)."""
    return lint_paths([str(write_file(tmp_path, name, text))], cwd=tmp_path, isolated=True, **kw)
