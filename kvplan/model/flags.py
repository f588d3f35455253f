"""Serving flags as the engine receives them (vLLM spelling)."""
from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator

from kvplan.model.base import Frozen
from kvplan.model.limits import MAX_BLOCK_SIZE, MAX_JSON_DEPTH, MAX_PARALLEL, MAX_SEQS, MAX_TOKENS, json_depth

# Ranges of the numeric flags (limits: kvplan/model/limits.py, docs/limits.md).
_Parallel = Annotated[int, Field(ge=1, le=MAX_PARALLEL)]
_Tokens = Annotated[int, Field(ge=1, le=MAX_TOKENS)]


class FlagSpan(Frozen):
    """Where a flag appeared in a pasted launch line (for lint positions)."""

    flag: str
    """The flag as written (e.g. '--kv-cache-dtype')."""
    position: int
    """Index of the token in argv."""


class FlagError(Frozen):
    """A launch-line problem that makes vLLM's argument parser exit with status 2."""

    kind: Literal["unknown", "ambiguous", "invalid_value"]
    """unknown: an option (or stray argument) vLLM does not know; ambiguous: a prefix of several
    options; invalid_value: a value the option's type or choices reject, or a missing value."""
    flag: str
    """The flag as written (underscores turned into dashes, as vLLM does), or the stray argument."""
    message: str
    """vLLM's own error text (argparse wording), without the `vllm serve: error:` prefix."""
    suggestion: str | None = None
    """The closest real option, for unknown and ambiguous flags; for a removed flag, the successor vLLM
    names (None when it names none: kvplan never guesses one)."""
    removed_in: str | None = None
    """For an option an earlier vLLM release accepted: the release that removed it."""
    added_in: str | None = None
    """For an option only later releases accept: the first release that does."""


class ServingFlags(Frozen):
    """vLLM serving flags that shape the KV cache, parsed from a launch line."""

    kv_cache_dtype: str = "auto"
    """--kv-cache-dtype (one of vLLM 0.33's 22 values)."""
    kv_cache_dtype_explicit: bool = False
    """The user passed --kv-cache-dtype (even if its value is 'auto')."""
    kv_cache_dtype_skip_layers: tuple[str, ...] = ()
    """--kv-cache-dtype-skip-layers tokens: 'sliding_window' and decimal layer indices."""
    dtype: str = "auto"
    """--dtype (model dtype): auto, bfloat16, float16, float32, half, float."""
    tensor_parallel_size: _Parallel = 1
    """--tensor-parallel-size."""
    pipeline_parallel_size: _Parallel = 1
    """--pipeline-parallel-size."""
    max_model_len: _Tokens | None = None
    """--max-model-len (None: the model's max_position_embeddings)."""
    block_size: Annotated[int, Field(ge=1, le=MAX_BLOCK_SIZE)] | None = None
    """--block-size (None: chosen by the backend)."""
    gpu_memory_utilization: Annotated[float, Field(gt=0, le=1)] | None = None
    """--gpu-memory-utilization (fraction of GPU memory vLLM may use); None when not passed: the release's
    default (0.92 up to vLLM 0.33; from 0.34 1.0 with the extensible KV cache on CUDA/ROCm, else 0.92:
    `kvplan.backends.defaults.resolved_gpu_memory_utilization`)."""
    max_num_batched_tokens: _Tokens | None = None
    """--max-num-batched-tokens."""
    max_num_seqs: Annotated[int, Field(ge=1, le=MAX_SEQS)] | None = None
    """--max-num-seqs."""
    attention_backend: str | None = None
    """--attention-backend."""
    attention_config: dict[str, Any] = {}  # noqa: RUF012 - a pydantic field: each instance gets a copy
    """--attention-config JSON (e.g. {"use_prefill_query_quantization": true})."""
    quantization: str | None = None
    """--quantization (e.g. fp8 for online FP8 weights)."""
    calculate_kv_scales: bool = False
    """--calculate-kv-scales was passed (removed in vLLM 0.33)."""
    unknown_flags: tuple[str, ...] = ()
    """Options vLLM 0.33's `vllm serve` parser does not know (KV001; vLLM exits with status 2)."""
    flag_errors: tuple[FlagError, ...] = ()
    """Everything vLLM's parser would stop on: unknown, ambiguous or invalid flags (KV001, KV006, KV007)."""
    model: str | None = None
    """Positional model path / --model, when present in a pasted launch line."""
    revision: str | None = None
    """--revision: the branch, tag or commit of a Hugging Face model id (ignored for a local path)."""
    hf_overrides: dict[str, Any] = {}  # noqa: RUF012 - a pydantic field: each instance gets a copy
    """--hf-overrides JSON, applied to config.json before planning (as vLLM does)."""
    trust_remote_code: bool = False
    """--trust-remote-code: vLLM may run the checkpoint's own configuration and model code (config.json's
    auto_map); without it a config that needs that code is refused."""
    mamba_cache_dtype: Literal["auto", "bfloat16", "float16", "float32"] = "auto"
    """--mamba-cache-dtype: dtype of Mamba / linear-attention conv states (and of the SSM state when
    --mamba-ssm-cache-dtype is auto); auto = the model dtype."""
    mamba_ssm_cache_dtype: Literal["auto", "bfloat16", "float16", "float32"] = "auto"
    """--mamba-ssm-cache-dtype: dtype of the SSM / recurrent state; auto = the config's (Nemotron-H, Qwen3.5)
    or --mamba-cache-dtype's."""
    mamba_cache_mode: Literal["align", "none"] | None = None
    """--mamba-cache-mode as passed; vLLM 0.33 derives the mode from prefix caching whatever it says
    (MambaModelConfig: align with prefix caching, none without), and so does kvplan."""
    enable_prefix_caching: bool | None = None
    """--enable-prefix-caching / --no-enable-prefix-caching (None: vLLM's default, on for generative models)."""
    enforce_eager: bool = False
    """--enforce-eager: no CUDA graphs, so vLLM's startup profiling sets no graph memory aside."""
    enable_lora: bool = False
    """--enable-lora: vLLM's startup profiling also runs LoRA adapters, which kvplan's GPU budget does not estimate."""
    kv_cache_memory_bytes: Annotated[int, Field(ge=1)] | None = None
    """--kv-cache-memory-bytes: vLLM skips memory profiling and gives the KV cache exactly this per GPU."""
    disable_hybrid_kv_cache_manager: bool | None = None
    """--disable-hybrid-kv-cache-manager / --no-disable-hybrid-kv-cache-manager (None: vLLM decides; it turns
    the hybrid manager off for a chunked-attention model with an EAGLE / MTP draft)."""
    speculative_method: str | None = None
    """method of --speculative-config (mtp, eagle3, ngram, ...); None without speculative decoding."""
    num_speculative_tokens: Annotated[int, Field(ge=0, le=MAX_TOKENS)] = 0
    """num_speculative_tokens of --speculative-config (0 without speculative decoding): Mamba layers keep one
    state block per draft token and their conv state that many more columns."""
    speculative_model: Annotated[str, Field(max_length=4096)] | None = None
    """model of --speculative-config: the draft model (EAGLE / EAGLE3 head or draft_model checkpoint: a
    config.json, its folder or a Hub id) whose attention layers vLLM adds to the KV cache pool; None: the
    checkpoint's own MTP layers (method mtp) or no draft model (ngram, suffix)."""
    speculative_kv_cache_dtype: Annotated[str, Field(max_length=64)] | None = None
    """kv_cache_dtype of --speculative-config: the draft's KV cache dtype (None: the target's --kv-cache-dtype)."""

    @field_validator("attention_config", "hf_overrides", mode="before")
    @classmethod
    def _bounded_json(cls, v: Any) -> Any:
        if json_depth(v) > MAX_JSON_DEPTH:
            raise ValueError(f"nests deeper than {MAX_JSON_DEPTH} levels")
        return v
