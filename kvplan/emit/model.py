"""What an emitter returns: the engine's launch flags and config file for a plan, and what differs."""
from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from kvplan.model.base import Frozen
from kvplan.model.plan import EngineRef, Finding

EMIT_SCHEMA_VERSION = "1.1"  # 1.1: findings may carry a `subject` (kvplan.model.plan.Finding)
Target = Literal["vllm", "sglang", "trtllm"]
TARGETS: tuple[str, ...] = ("vllm", "sglang", "trtllm")


class LayerDifference(Frozen):
    """A layer the emitted launch does not give its planned KV dtype."""

    index: int
    """Layer index (engine module-prefix numbering, as in the plan)."""
    planned: str
    """The layer's kv_cache_dtype in the plan (vLLM spelling; 'auto' = model dtype)."""
    emitted: str
    """What the emitted launch gives the layer, in the target engine's spelling."""
    reason: str
    """Why the planned dtype cannot be expressed."""


class EmitResult(Frozen):
    """Launch flags and a config file that realise a kvplan plan in one serving engine."""

    schema_version: str = EMIT_SCHEMA_VERSION
    """Version of this JSON contract."""
    kind: Literal["kvplan.emit"] = "kvplan.emit"
    """Document kind."""
    kvplan_version: str
    """kvplan version that produced this document."""
    target: EngineRef
    """Engine (and version or version range) the flags are written for."""
    plan_engine: EngineRef
    """Engine the plan was compiled for."""
    model_source: str | None = None
    """Config path the plan was compiled from, when known."""
    args: list[str] = Field(default_factory=list)
    """Launch flags, one token per item, in a fixed order (append to `vllm serve MODEL` etc.)."""
    command: str
    """`args` shell-quoted on one line."""
    config: dict[str, Any] = Field(default_factory=dict)
    """The same settings as the engine's config file takes them (vLLM/SGLang --config YAML keys; TensorRT-LLM extra_llm_api_options)."""  # noqa: E501 - a schema description: pydantic keeps a docstring's line breaks
    config_usage: str
    """How to pass `config` to the engine."""
    per_layer_syntax: bool = False
    """Per-layer syntax from an unreleased engine pull request was used (--per-layer)."""
    exact: bool
    """Every KV layer gets exactly its planned dtype."""
    differences: list[LayerDifference] = Field(default_factory=list)
    """Layers that do not get their planned dtype, by index."""
    findings: list[Finding] = Field(default_factory=list)
    """Emitter findings (KV98x), errors first."""


def emit_schema() -> dict[str, Any]:
    """JSON Schema of `kvplan emit --format json` (published as schemas/emit-result.schema.json)."""
    s = EmitResult.model_json_schema(mode="serialization")
    s["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    s["$id"] = f"https://kvplan.dev/schemas/emit-result-{EMIT_SCHEMA_VERSION}.json"
    return s
