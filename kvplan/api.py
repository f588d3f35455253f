"""The library facade: `kvplan.compile` is `kvplan.pipeline.compile` (the one compile pipeline).

Only the top of the layer list (service, explore, cli) and users import this module; the layers
below it call `kvplan.pipeline` or the planner directly (tests/test_architecture.py enforces it).
"""
from __future__ import annotations

import warnings
from typing import Any

from kvplan.model.plan import Plan
from kvplan.model.quant import QuantMetadata
from kvplan.pipeline import compile, run

__all__ = ["compile", "compile_with_quant"]


def compile_with_quant(*args: Any, **kwargs: Any) -> tuple[Plan, QuantMetadata]:
    """Deprecated: `kvplan.pipeline.run(...)` (same arguments as `kvplan.compile`) returns `(plan, quant)`."""
    warnings.warn("kvplan.api.compile_with_quant is deprecated; use kvplan.pipeline.run (same arguments), "
                  "which returns (plan, quant).", DeprecationWarning, stacklevel=2)
    plan, quant = run(*args, **kwargs)
    return plan, quant
