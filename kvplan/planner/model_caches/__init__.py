"""Per-family builders of the caches a model registers (kvplan/planner/cache_specs.py), by architecture.

Each module mirrors one vLLM model package (vllm/models/<family>/) and exports ARCHITECTURES (the
config.json architectures it builds) and `build` (a cache_specs.Builder).
"""
from __future__ import annotations

from kvplan.planner.cache_specs import Builder
from kvplan.planner.model_caches import deepseek_v4, deepseek_v41, glm5next, inkling, minimax_m3, step5

_MODULES: tuple[object, ...] = (deepseek_v4, deepseek_v41, glm5next, inkling, minimax_m3, step5)

BUILDERS: dict[str, Builder] = {arch: mod.build for mod in _MODULES  # type: ignore[attr-defined]
                                for arch in mod.ARCHITECTURES}  # type: ignore[attr-defined]
"""Architecture -> builder."""
