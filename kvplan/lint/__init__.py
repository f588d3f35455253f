"""`kvplan lint`: find wrong KV cache flags in deployment files (Kubernetes, KServe, LeaderWorkerSet,
docker-compose, vLLM --config YAML, shell launch scripts) before they fail at runtime, or silently.

    >>> from kvplan.lint import lint_paths
    >>> report = lint_paths(["examples/deploy/clean-deployment.yaml"])
    >>> report.summary.findings
    0

Imports are lazy so that `kvplan.rules.catalog` can import `kvplan.lint.rules` without a cycle.
"""
from __future__ import annotations

from typing import Any

__all__ = ["LintFinding", "LintReport", "exit_code", "lint_paths"]


def __getattr__(name: str) -> Any:
    if name in ("lint_paths", "exit_code"):
        from kvplan.lint import run  # noqa: PLC0415
        return getattr(run, name)
    if name in ("LintFinding", "LintReport"):
        from kvplan.lint import report  # noqa: PLC0415
        return getattr(report, name)
    raise AttributeError(name)
