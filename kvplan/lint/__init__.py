"""`kvplan lint`: find wrong KV cache flags in deployment files (Kubernetes, KServe, LeaderWorkerSet,
inference-operator resources, Helm, Kustomize, docker-compose, Dockerfiles, vLLM --config YAML, shell
launch scripts) before they fail at runtime, or silently.

    >>> from kvplan.lint import lint_paths
    >>> report = lint_paths(["examples/deploy/clean-deployment.yaml"])
    >>> report.summary.findings
    0

The package itself is callable, so `kvplan.lint("deploy/")` works whether or not this package
was imported before (importing it replaces the top-level `kvplan.lint` function with the module).
Imports are lazy: importing the package stays cheap.
"""
from __future__ import annotations

import os
import sys
import types
from typing import Any

__all__ = ["LintFinding", "LintReport", "exit_code", "lint_paths"]


def __getattr__(name: str) -> Any:
    if name in ("lint_paths", "exit_code"):
        from kvplan.lint import run
        return getattr(run, name)
    if name in ("LintFinding", "LintReport"):
        from kvplan.lint import report
        return getattr(report, name)
    raise AttributeError(name)


def _as_paths(paths: tuple[Any, ...]) -> list[str]:
    """`lint("a.yaml", "b/")`, `lint(["a.yaml", "b/"])` and Path objects all mean the same."""
    out: list[str] = []
    for p in paths:
        if isinstance(p, (str, os.PathLike)):
            out.append(os.fspath(p))
        else:
            out.extend(os.fspath(x) for x in p)
    return out


def lint(*paths: Any, **kwargs: Any) -> Any:
    """Lint files and folders; keyword arguments as for :func:`lint_paths`. Returns the LintReport."""
    from kvplan.lint.run import lint_paths
    return lint_paths(_as_paths(paths), **kwargs)


class _CallableModule(types.ModuleType):
    def __call__(self, *paths: Any, **kwargs: Any) -> Any:
        return lint(*paths, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
