"""kvplan: a dtype-policy compiler for LLM KV caches."""
from __future__ import annotations

__version__ = "0.1.0"
