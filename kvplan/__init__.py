"""kvplan: a dtype-policy compiler for LLM KV caches.

    >>> import kvplan
    >>> plan = kvplan.compile("examples/gpt-oss-20b/config.json", "--kv-cache-dtype fp8")
    >>> plan.totals.bytes_per_token
    24576
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kvplan.pipeline import compile

__version__ = "0.1.0"
__all__ = ["KvplanInputError", "Plan", "__version__", "compile", "explain", "lint", "validate"]


def explain(path: Any, flags: Any = None, gpu: Any = None, *, all_layers: bool = False, width: int = 180) -> str:
    """The `kvplan explain` text for a model and flags, as a string."""
    from io import StringIO

    from rich.console import Console

    from kvplan.report.table import render_plan
    buf = StringIO()
    from kvplan.pipeline import compile as compile_plan
    render_plan(compile_plan(path, flags, gpu), Console(file=buf, width=width, no_color=True), expand=all_layers)
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
    return _v.validate(*args, **kwargs)


def __getattr__(name: str) -> Any:
    # Resolved on first use, so `import kvplan` (which every module does for __version__) stays cheap.
    if name == "compile":  # the one compile entry: kvplan.compile is kvplan.pipeline.compile
        from kvplan.pipeline import compile as compile_
        globals()["compile"] = compile_
        return compile_
    if name == "KvplanInputError":
        from kvplan.errors import KvplanInputError
        return KvplanInputError
    if name == "Plan":
        from kvplan.model.plan import Plan
        return Plan
    raise AttributeError(name)
