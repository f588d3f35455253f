"""Request and response bodies of the HTTP service (pydantic only; the OpenAPI document comes from these)."""
from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from kvplan.model.base import Frozen

SERVICE_SCHEMA_VERSION = "1.0"


class _Request(BaseModel):
    """Request bodies: unknown keys are an error (a typo must not be ignored silently)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)


class ModelRequest(_Request):
    """A model and serving flags to plan for: an inline config.json object, or a path the server allows."""

    config: dict[str, Any] | None = None
    """The model's config.json object."""
    hf_quant_config: dict[str, Any] | None = None
    """The checkpoint's hf_quant_config.json object (ModelOpt), if it has one."""
    config_path: str | None = None
    """Instead of `config`: a config.json or checkpoint folder on the server, under a `--allow-path` directory."""
    model: str | None = None
    """Instead of `config`: a Hugging Face model id (org/name) the server resolves through its Hugging Face
    cache and Hub (`--revision` in `flags` picks a branch, tag or commit; servers started with --no-hub refuse it)."""
    flags: list[str] | str = Field(default_factory=list)
    """vLLM serving flags: an argv list or a pasted launch line (`vllm serve M --kv-cache-dtype fp8 ...`)."""
    gpu: str | None = None
    """GPU profile: a name (h100), a compute capability (sm90)."""
    kv_budget_gib: float | None = Field(default=None, gt=0)
    """KV cache memory per GPU in GiB (else estimated from the GPU and the checkpoint's weights)."""
    policy: str | None = None
    """A kvplan policy as YAML text (errors name its lines)."""
    engine: str | None = None
    """Engine release to model, as `kvplan plan --engine`: vllm==0.33.0 (default) back to vllm==0.18.0."""


class PlanRequest(ModelRequest):
    """POST /v1/plan."""


class EmitRequest(ModelRequest):
    """POST /v1/emit: a PLAN.json object, or a model to plan first."""

    plan: dict[str, Any] | None = None
    """A PLAN.json object (from /v1/plan or `kvplan plan`); the model fields must then be empty."""
    to: Literal["vllm", "sglang", "trtllm"] = "vllm"
    """Target engine."""
    per_layer: bool = False
    """SGLang / TensorRT-LLM: use per-layer syntax from unreleased engine pull requests (KV983)."""


class LintRequest(_Request):
    """POST /v1/lint: deployment files carried inline, linted in an empty scratch folder."""

    files: dict[str, str] = Field(min_length=1)
    """Relative file name -> file text (Kubernetes YAML, vLLM --config YAML, shell scripts, ...)."""
    select: list[str] | None = None
    """Code prefixes to report (default: all)."""
    ignore: list[str] = Field(default_factory=list)
    """Code prefixes to drop."""
    gpu: str | None = None
    """Default GPU for launches whose manifest names none."""
    fail_level: Literal["error", "warning", "info"] | None = None
    """Severity that makes the report fail (summary only; the HTTP status stays 200)."""


class ErrorDetail(Frozen):
    """What went wrong, in the same words as the CLI."""

    type: str
    """input_error | request_invalid | path_not_allowed | request_too_large | not_implemented | internal_error."""
    message: str
    """One line: the problem and the fix (the CLI prints the same text after `kvplan: error:`)."""
    problem: str | None = None
    """The problem part alone."""
    fix: str | None = None
    """The fix part alone."""


class ErrorResponse(Frozen):
    """Body of every 4xx/5xx response."""

    error: ErrorDetail
    """The error."""


class Health(Frozen):
    """GET /healthz."""

    status: Literal["ok"] = "ok"
    """Always ok when the server answers."""
    kvplan_version: str
    """kvplan version."""
    engine: dict[str, str]
    """Engine and version the planner models."""
    schema_version: str = SERVICE_SCHEMA_VERSION
    """Version of the service's JSON contract."""
