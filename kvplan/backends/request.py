"""What one layer asks of backend selection and what selection answers (vLLM `AttentionSelectorConfig`).

Types only: the walk lives in :mod:`kvplan.backends.select`, each backend's quirks in
:mod:`kvplan.backends.impl`, the advice functions in :mod:`kvplan.backends.advice`.
"""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from kvplan.backends.capabilities import AttnType
from kvplan.model.arch import MlaDims
from kvplan.model.vocab import QuantMode, quant_mode_of

__all__ = ["BackendChoice", "BackendRequest", "ErrorStage", "MlaDims", "ModelDtype"]

ModelDtype = Literal["bfloat16", "float16", "float32"]




class BackendRequest(BaseModel):
    """What one attention layer asks of backend selection (vLLM `AttentionSelectorConfig`).

    `kv_cache_dtype` is the LAYER's own string after checkpoint override and skip layers
    (reference §2.2), exactly what `get_attn_backend` receives.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    head_size: int
    """Attention head size; for MLA the cache head size kv_lora_rank + qk_rope_head_dim (576)."""
    kv_cache_dtype: str = "auto"
    """The layer's `--kv-cache-dtype` string (e.g. `auto` for a skipped layer, `fp8`)."""
    head_size_v: int | None = None
    """Value head size when it differs from `head_size` (None = same)."""
    model_dtype: ModelDtype = "bfloat16"
    """Model activation dtype (`--dtype` resolved)."""
    use_mla: bool = False
    """Layer is MLA (latent cache)."""
    use_sparse: bool = False
    """Layer uses sparse MLA (an indexer, `index_topk`)."""
    has_sinks: bool = False
    """Layer has attention sinks (gpt-oss)."""
    has_sliding_window: bool = False
    """Layer is sliding-window attention."""
    attn_type: AttnType = "decoder"
    """vLLM `AttentionType`: decoder, encoder, encoder_only, encoder_decoder (cross)."""
    use_per_head_quant_scales: bool = False
    """The checkpoint has compressed-tensors `strategy: attn_head` scales (applies to every
    layer of the model, even skipped ones, §1.4)."""
    num_heads: int | None = None
    """Query heads per TP rank (sparse-MLA ordering on SM100 looks at <= 16)."""
    num_kv_heads: int | None = None
    """KV heads per TP rank (FlashInfer trtllm needs num_heads % num_kv_heads == 0)."""
    block_size: int | None = None
    """`--block-size` if the user set it, else None (vLLM validates block size only then)."""
    kv_lora_rank: int | None = None
    """MLA latent rank."""
    qk_rope_head_dim: int | None = None
    """MLA RoPE head dim."""
    qk_nope_head_dim: int | None = None
    """MLA non-RoPE head dim."""
    v_head_dim: int | None = None
    """MLA value head dim."""
    index_topk: int | None = None
    """Sparse-MLA indexer top-k (DeepSeek-V3.2: 2048)."""

    @property
    def mla_dims(self) -> MlaDims | None:
        """MLA dims if the three head dims are known."""
        if (self.qk_nope_head_dim is None or self.qk_rope_head_dim is None or self.v_head_dim is None
                or self.kv_lora_rank is None):
            return None
        return MlaDims(qk_nope_head_dim=self.qk_nope_head_dim, qk_rope_head_dim=self.qk_rope_head_dim,
                       v_head_dim=self.v_head_dim, kv_lora_rank=self.kv_lora_rank)

    @property
    def quant_mode(self) -> QuantMode:
        """`get_kv_quant_mode` of the layer dtype."""
        return quant_mode_of(self.kv_cache_dtype)

    @property
    def cache_dtype(self) -> str:
        """Storage precision name: the model dtype for `auto`, else the kv dtype string."""
        return self.model_dtype if self.kv_cache_dtype == "auto" else self.kv_cache_dtype


ErrorStage = Literal["config", "selection", "impl", "builder", "forward"]


class BackendChoice(BaseModel):
    """The backend vLLM 0.33 would give one layer, or the error it would raise."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    status: Literal["selected", "error", "not_modelled"]
    """`selected` (backend set, error None), `error` (vLLM would fail: see `error`), or
    `not_modelled` (engine/version kvplan has no table for: nothing is guessed)."""
    backend: str | None
    """Registry name of the backend vLLM picks (also set when a later impl/forward check fails)."""
    forced: bool = False
    """True if the backend came from `--attention-backend` / `attention_config` rather than the
    priority list."""
    flash_attn_version: int | None = None
    """FlashAttention version the FLASH_ATTN impl runs (2/3/4), None for other backends."""
    candidates: tuple[str, ...] = ()
    """Backends considered, in priority order (just the forced one when forced)."""
    rejected: dict[str, tuple[str, ...]] = {}
    """Invalid candidates -> vLLM's reasons, in priority order (vLLM validates every candidate, so
    this includes lower-priority backends after the chosen one)."""
    error: str | None = None
    """One-line message of the exception vLLM would raise, None when the layer works."""
    error_stage: ErrorStage | None = None
    """When the error fires: config validation, backend selection, impl construction, metadata
    builder construction, or the first forward."""
    error_type: str | None = None
    """Python exception class vLLM raises (ValueError, NotImplementedError, AssertionError)."""
    notes: tuple[str, ...] = ()
    """Warnings/info vLLM would log for this layer and code-reading risks, one line each."""
    query_quant: bool = False
    """The layer quantizes its query to FP8 (`Attention.query_quant`, §4.5)."""
    prefill_query_dtype: str | None = None
    """Query dtype in prefill (torch dtype name); None for MLA (see `prefill_query_advice`)."""
    decode_query_dtype: str | None = None
    """Query dtype in decode (torch dtype name); None for MLA."""
    prefill_kernel: str | None = None
    """FlashInfer prefill kernel family (`trtllm-gen`, `native (fa2)`, ...); None elsewhere."""
    decode_kernel: str | None = None
    """FlashInfer decode kernel family (`trtllm-gen`, `xqa`, `native (fa2)`, ...); None elsewhere."""
    kv_cache_dtype: str
    """The layer dtype string that was requested."""
    effective_kv_cache_dtype: str
    """The dtype string after backend canonicalization (e.g. sparse MLA -> `fp8_ds_mla`)."""
    block_size: int | None = None
    """Block size this backend runs with: the user's, else vLLM's default 16 when accepted, else the
    backend's preferred size (FlashMLA 64, CUTLASS MLA 128). Hybrid/skip-layer alignment (§7.4) may
    raise it further."""
    engine: str
    """Engine and version modelled, e.g. `vllm==0.33.0`."""
