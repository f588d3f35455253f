"""Each attention backend's behaviour beyond its capability row, one module per backend family.

`hooks_for(name)` gives the `BackendHooks` of a backend in :data:`kvplan.backends.vllm_rows.BACKENDS`:
its family module's subclass when it has quirks, else the row-only defaults. Selection code asks
the hooks and never compares backend names (tests/backends/test_impl.py enforces it).
"""
from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from types import MappingProxyType

from kvplan.backends.impl import b12x, cpu, flash_attn, flashinfer, flashmla, rocm, tokenspeed, triton, turboquant
from kvplan.backends.impl.base import BackendHooks
from kvplan.backends.vllm_rows import BACKENDS

__all__ = ["FAMILIES", "HOOK_CLASSES", "BackendHooks", "hooks_for"]

FAMILIES = (b12x, cpu, flash_attn, flashinfer, flashmla, rocm, tokenspeed, triton, turboquant)
"""The family modules; each exports `HOOKS` (backend name -> its hooks class)."""

HOOK_CLASSES: Mapping[str, type[BackendHooks]] = MappingProxyType(
    {name: cls for family in FAMILIES for name, cls in family.HOOKS.items()})
"""Backends with quirks -> their hooks class."""


@cache
def hooks_for(name: str) -> BackendHooks:
    """The hooks of backend `name` (a key of BACKENDS)."""
    return HOOK_CLASSES.get(name, BackendHooks)(BACKENDS[name])
