"""Errors kvplan raises for bad input.

Every user-facing problem (missing file, malformed JSON/YAML, invalid flag value, contradictory
flags, corrupt safetensors header) is a :class:`KvplanInputError`. The CLI prints its message as
one line and exits with code 2; library callers catch it like any ``ValueError``.
"""
from __future__ import annotations


class KvplanInputError(ValueError):
    """Bad input: the message names the problem and the fix, on one line."""

    def __init__(self, problem: str, fix: str | None = None):
        self.problem = problem
        self.fix = fix
        super().__init__(problem if not fix else f"{problem} {fix}")
