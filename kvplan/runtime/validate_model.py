"""The validate report: what `kvplan validate --format json` prints (schema: schemas/validate-report.schema.json).

Pydantic only (no torch), so the schema can be generated and checked without the runtime.
"""
from __future__ import annotations

from typing import Literal

from pydantic import Field

from kvplan.model.base import Frozen

VALIDATE_SCHEMA_VERSION = "1.1"


class ErrorMetrics(Frozen):
    """Attention output on the planned (quantized) cache vs an fp32 reference on the unquantized K/V."""

    rel_l2: float
    """||out - ref|| / ||ref|| over the whole output tensor."""
    cosine: float
    """Cosine similarity of the flattened output and reference."""
    max_abs: float
    """Largest absolute element error."""


class LayerResult(Frozen):
    """One plan layer: allocation check, attention error, verdict."""

    index: int
    """Plan layer index."""
    kind: str
    """Layer kind from the plan."""
    kv_cache_dtype: str | None = None
    """The layer's kv_cache_dtype as planned."""
    quant_mode: str
    """Quant mode as planned."""
    scale_source: str
    """Scale source as planned."""
    status: Literal["pass", "fail", "skipped"]
    """pass: within tolerance and bytes equal; fail: over tolerance or bytes differ; skipped: not executable."""
    reason: str | None = None
    """Why a layer was skipped, or the likely cause of a failure."""
    k_scale: float | None = None
    """Static per-tensor K scale used (fp8_per_tensor layers), else null."""
    v_scale: float | None = None
    """Static per-tensor V scale used (fp8_per_tensor layers), else null."""
    bytes_per_token_plan: int = 0
    """bytes_per_token the plan promises (per TP rank)."""
    bytes_allocated: int | None = None
    """Bytes of the cache the runtime allocated for this layer."""
    bytes_expected: int | None = None
    """plan bytes_per_token x allocated tokens (num_blocks x block_size)."""
    tokens_allocated: int | None = None
    """Cache capacity in tokens (num_blocks x block_size)."""
    bytes_equal: bool | None = None
    """bytes_allocated == bytes_expected."""
    decode: ErrorMetrics | None = None
    """Decode step (last token of each sequence) through the Triton kernel."""
    prefill: ErrorMetrics | None = None
    """A prefill chunk (last tokens of each sequence, causal) through the Triton kernel."""
    kernel_rel_err: float | None = None
    """Triton kernel vs the torch reference on the same quantized cache (kernel correctness, not quantization)."""
    tolerance: float | None = None
    """quant_rel_err bound of the layer's mode (kvplan.runtime.TOLERANCES)."""
    kernel_tolerance: float | None = None
    """kernel_rel_err bound of the layer's mode."""
    k_amax: float | None = None
    """Largest |K| of the source data for this layer."""
    v_amax: float | None = None
    """Largest |V| of the source data for this layer."""
    k_outlier_ratio: float | None = None
    """Largest per-channel |K| max over the median channel's (per head, worst head)."""


class ModeSummary(Frozen):
    """Per quant mode: how the layers of that mode did."""

    quant_mode: str
    """Quant mode."""
    layers: int
    """Executed layers in this mode."""
    failed: int
    """Layers over the tolerance (or with a bytes mismatch)."""
    mean_rel_l2: float
    """Mean over layers of the worse of decode/prefill rel L2."""
    max_rel_l2: float
    """Max over layers of the worse of decode/prefill rel L2."""
    min_cosine: float
    """Smallest cosine over layers (decode and prefill)."""
    tolerance: float
    """quant_rel_err bound of the mode."""


class EvalRow(Frozen):
    """One KV configuration run end to end through the real model."""

    name: str
    """Short label (plan, bf16, fp8-scale-1.0, ...)."""
    description: str
    """What the configuration stores, and which layers it keeps in bf16."""
    quantized_layers: int
    """Layers whose K/V are quantized."""
    kl_mean: float
    """Mean over positions of KL(p_reference || p_config) of the next-token distribution (nats)."""
    kl_max: float
    """Largest per-position KL (nats)."""
    top1_agreement: float
    """Fraction of positions whose argmax next token equals the reference run's."""
    perplexity: float
    """Perplexity of the eval text under this configuration."""
    bytes_per_token: int
    """KV bytes per token of the configuration (all layers, K+V, inline scales included)."""
    skip_layers: list[int] = Field(default_factory=list)
    """Attention layers this configuration keeps in the model dtype (vLLM's --kv-cache-dtype-skip-layers)."""
    seconds: float | None = None
    """Wall time of this configuration's forward pass."""


class LayerSensitivity(Frozen):
    """One attention layer quantized alone (every other layer in the model dtype)."""

    index: int
    """Plan layer index."""
    kind: str
    """full_attention or sliding_attention."""
    kl_mean: float
    """Mean next-token KL vs the reference with only this layer quantized (nats)."""
    kl_max: float
    """Largest per-position KL with only this layer quantized."""
    top1_agreement: float
    """Top-1 agreement with the reference with only this layer quantized."""
    share: float
    """kl_mean / sum of every layer's kl_mean (the layer's share of the summed single-layer KL)."""


class Sensitivity(Frozen):
    """Per-layer KL contributions, most sensitive first."""

    kv_cache_dtype: str
    """The --kv-cache-dtype each layer was quantized to."""
    quant_mode: str
    """Its quant mode."""
    layers: list[LayerSensitivity]
    """One entry per executed attention layer, sorted by kl_mean, largest first."""


class UnquantizedLayer(Frozen):
    """A plan layer the runtime cannot execute: the model runs it unquantized in every configuration."""

    index: int
    """Plan layer index."""
    kind: str
    """Layer kind (mla, mamba, linear_attention, ...)."""
    reason: str
    """Why the kvplan runtime does not execute it."""


class ModelEval(Frozen):
    """End-to-end accuracy: the model run with each KV configuration applied inside attention."""

    model: str
    """Model (and file) evaluated."""
    weights: str = "checkpoint"
    """checkpoint (a folder or Hub id), gguf (the bundled SmolLM2), or random (seeded random weights: timing only)."""
    model_dtype: str = "bfloat16"
    """dtype the model ran in (the plan's model dtype)."""
    text: str
    """Text evaluated: a bundled text's name or the --text file (calibration used a different text)."""
    tokens: int
    """Tokens evaluated."""
    quantizer: str
    """How K/V were quantized inside attention: triton kernels (cuda) or the torch reference quantizers (cpu)."""
    reference: str = ("K/V in the model dtype as the model computes them (vLLM's --kv-cache-dtype auto), "
                      "fp32 torch attention")
    """What KL, top-1 and perplexity are measured against."""
    reference_perplexity: float
    """Perplexity of the reference run."""
    skipped_layers: list[int] = Field(default_factory=list)
    """Layers the *-skip configurations keep in bf16."""
    unquantized_layers: list[UnquantizedLayer] = Field(default_factory=list)
    """Layers the runtime cannot execute (MLA, mamba, linear attention, ...): unquantized in every row."""
    torch_attention_layers: list[int] = Field(default_factory=list)
    """CUDA only: layers whose attention read the written cache in torch (sinks or soft-capping), not the paged
    kernel."""
    rows: list[EvalRow]
    """One row per configuration, in a fixed order (plan first)."""
    sensitivity: Sensitivity | None = None
    """Per-layer sensitivity (--sensitivity)."""
    seconds: float | None = None
    """Wall time of the end-to-end evaluation (loading excluded)."""


class SourceRef(Frozen):
    """Where the K/V came from."""

    name: str
    """synthetic, or the capture file path."""
    kind: Literal["synthetic", "captured"]
    """Synthetic data or captured activations."""
    description: str
    """One line for humans."""
    num_tokens: int
    """Tokens of K/V per layer."""
    sha256: str | None = None
    """sha256 of the capture file (captured only)."""
    model_sha256: str | None = None
    """sha256 of the model file the activations came from (captured only)."""


class ValidateReport(Frozen):
    """The result of executing a plan's per-layer KV layouts."""

    schema_version: str = VALIDATE_SCHEMA_VERSION
    """Version of this JSON contract."""
    kind: Literal["kvplan.validate-report"] = "kvplan.validate-report"
    """Document kind."""
    kvplan_version: str
    """kvplan version that ran the validation."""
    engine: dict[str, str]
    """Engine and version the plan models ({name, version})."""
    plan_source: str
    """The PLAN.json or config the plan came from."""
    model_type: str
    """Model type of the plan."""
    device: str
    """cpu (Triton interpreter) or cuda:N (name of the GPU)."""
    triton_interpret: bool
    """Kernels ran in Triton's CPU interpreter."""
    kv_source: SourceRef
    """Where the K/V came from."""
    block_size: int
    """Cache page size in tokens."""
    num_seqs: int
    """Sequences per layer check (each a copy of the source tokens, at a different length)."""
    prefill_tokens: int
    """Query tokens of the prefill chunk per sequence."""
    passed: bool
    """Every executed layer within its tolerance and allocation bytes equal to the plan's."""
    layers: list[LayerResult]
    """One entry per plan layer, in order."""
    modes: list[ModeSummary]
    """One entry per executed quant mode, sorted by mode."""
    failures: list[str] = Field(default_factory=list)
    """One line per failed layer: what, by how much, the likely cause."""
    model_eval: ModelEval | None = None
    """End-to-end run of the plan's model with each KV configuration (--e2e)."""


def validate_report_schema() -> dict:
    """The published JSON Schema (schemas/validate-report.schema.json, drift-tested)."""
    s = ValidateReport.model_json_schema(mode="serialization")
    s["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    s["$id"] = f"https://kvplan.dev/schemas/validate-report-{VALIDATE_SCHEMA_VERSION}.json"
    return s
