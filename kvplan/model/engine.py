"""The engine release kvplan models when none is named (`--engine`): defined here once, imported everywhere.

Lowest layer so that ingest (the vLLM serve options of that release), backends, rules, emit, lint,
the service and the CLI read the same constant. `kvplan.backends.engines` lists every release kvplan
plans for.
"""
from __future__ import annotations

__all__ = ["DEFAULT_ENGINE", "DEFAULT_ENGINE_NAME", "DEFAULT_ENGINE_VERSION"]

DEFAULT_ENGINE_NAME = "vllm"
"""Engine modelled by default."""
DEFAULT_ENGINE_VERSION = "0.33.0"
"""Its release: the one kvplan's vLLM reference and capability tables were read from."""
DEFAULT_ENGINE = f"{DEFAULT_ENGINE_NAME}=={DEFAULT_ENGINE_VERSION}"
"""The `--engine` value of the default, `vllm==0.33.0`."""
