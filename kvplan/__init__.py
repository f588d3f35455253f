"""kvplan: a dtype-policy compiler for LLM KV caches.

    >>> import kvplan
    >>> plan = kvplan.compile("examples/gpt-oss-20b/config.json", "--kv-cache-dtype fp8")
    >>> plan.totals.bytes_per_token
    24576
"""
from __future__ import annotations

from typing import Any

__version__ = "0.1.0"
__all__ = ["KvplanInputError", "Plan", "__version__", "compile", "explain", "lint", "validate"]


def compile(path: Any, flags: Any = None, gpu: Any = None, **kwargs: Any):
    """Compile a per-layer KV plan (see kvplan.api.compile)."""
    from kvplan.api import compile as _compile
    return _compile(path, flags, gpu, **kwargs)


def explain(path: Any, flags: Any = None, gpu: Any = None, *, all_layers: bool = False, width: int = 180) -> str:
    """The `kvplan explain` text for a model and flags, as a string."""
    from io import StringIO

    from rich.console import Console

    from kvplan.report.table import render_plan
    buf = StringIO()
    render_plan(compile(path, flags, gpu), Console(file=buf, width=width, no_color=True), expand=all_layers)
    return buf.getvalue()


def lint(*paths: Any, **kwargs: Any):
    """Lint deployment files and folders: `kvplan.lint("deploy/", gpu="h100")` -> LintReport.

    Once `kvplan.lint` (the package) is imported, this name is the package, which is callable
    with the same arguments.
    """
    from importlib import import_module
    return import_module("kvplan.lint").lint(*paths, **kwargs)


def validate(*args: Any, **kwargs: Any):
    """Execute a plan on real or synthetic K/V and report accuracy (see kvplan.validate)."""
    from kvplan.runtime import validate as _v
    return _v.validate(*args, **kwargs)  # type: ignore[attr-defined]


def __getattr__(name: str) -> Any:
    if name == "KvplanInputError":
        from kvplan.errors import KvplanInputError
        return KvplanInputError
    if name == "Plan":
        from kvplan.model.plan import Plan
        return Plan
    raise AttributeError(name)
