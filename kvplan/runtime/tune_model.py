"""The tune report: what `kvplan tune --format json` prints (schema: schemas/tune-report.schema.json).

Pydantic only (no torch), so the schema can be generated and checked without the runtime.
"""
from __future__ import annotations

from typing import Literal

from pydantic import Field

from kvplan.model.base import Frozen
from kvplan.runtime.validate_model import EvalRow, Sensitivity, UnquantizedLayer

TUNE_SCHEMA_VERSION = "1.0"


class Budget(Frozen):
    """The accuracy budget the skip list must meet (end to end, against the reference run)."""

    max_kl: float | None = None
    """Largest mean next-token KL allowed (nats), or null."""
    min_top1: float | None = None
    """Smallest top-1 agreement allowed, or null."""


class Trial(Frozen):
    """One skip set run end to end while searching."""

    skip_layers: list[int]
    """Layers kept in the model dtype."""
    predicted_kl: float
    """mean KL the per-layer sensitivities predicted (all-quantized KL minus the skipped layers' KL)."""
    row: EvalRow
    """What the end-to-end run measured."""
    meets_budget: bool
    """The measured row meets the budget."""


class TuneReport(Frozen):
    """The smallest set of layers to keep in the model dtype for a KV cache dtype and an accuracy budget."""

    schema_version: str = TUNE_SCHEMA_VERSION
    """Version of this JSON contract."""
    kind: Literal["kvplan.tune-report"] = "kvplan.tune-report"
    """Document kind."""
    kvplan_version: str
    """kvplan version that ran the search."""
    engine: dict[str, str]
    """Engine and version the flags are for ({name, version})."""
    model: str
    """The model run (folder, Hub id@revision, or the bundled GGUF)."""
    weights: str
    """checkpoint, gguf, or random (timing only)."""
    device: str
    """cpu or cuda:N (name of the GPU)."""
    text: str
    """Eval text."""
    tokens: int
    """Tokens evaluated."""
    kv_cache_dtype: str
    """The --kv-cache-dtype tuned for."""
    budget: Budget
    """The accuracy budget."""
    met: bool
    """The chosen skip set met the budget when run end to end."""
    skip_layers: list[int]
    """Layers to keep in the model dtype (global decoder-layer indices)."""
    skip_layers_vllm: list[str]
    """The same set in vLLM's --kv-cache-dtype-skip-layers values ('sliding_window' when it covers exactly the
    sliding-window layers in the set)."""
    vllm_args: list[str]
    """vLLM launch arguments: --kv-cache-dtype X [--kv-cache-dtype-skip-layers ...]."""
    bytes_per_token: int
    """KV bytes per token with the skip set (planner totals, per tensor-parallel rank)."""
    bytes_per_token_all_quantized: int
    """KV bytes per token with every layer quantized."""
    bytes_per_token_bf16: int
    """KV bytes per token with every layer in 16 bits."""
    capacity_cost: float
    """Share of the all-quantized token capacity the skip set gives up: 1 - all_quantized / with_skip."""
    tokens_capacity: int | None = None
    """Tokens of KV that fit with the skip set (only with --gpu or --kv-budget-gib)."""
    tokens_capacity_all_quantized: int | None = None
    """Tokens of KV that fit with every layer quantized (only with --gpu or --kv-budget-gib)."""
    reference_perplexity: float
    """Perplexity of the reference run (K/V in the model dtype)."""
    all_quantized: EvalRow
    """Every executed layer quantized."""
    chosen: EvalRow
    """The chosen skip set, run end to end (the confirmation)."""
    trials: list[Trial] = Field(default_factory=list)
    """Skip sets confirmed end to end, in the order tried."""
    sensitivity: Sensitivity | None = None
    """Per-layer sensitivity the search ordered layers by (null when all-quantized already met the budget)."""
    unquantized_layers: list[UnquantizedLayer] = Field(default_factory=list)
    """Layers the runtime cannot execute, unquantized in every run."""
    forward_passes: int
    """Model forward passes the search took (reference and calibration included)."""
    seconds: float
    """Wall time of the search (loading excluded)."""


def tune_report_schema() -> dict:
    """The published JSON Schema (schemas/tune-report.schema.json, drift-tested)."""
    s = TuneReport.model_json_schema(mode="serialization")
    s["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    s["$id"] = f"https://kvplan.dev/schemas/tune-report-{TUNE_SCHEMA_VERSION}.json"
    return s
