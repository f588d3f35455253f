"""Model architecture facts, as read from a config.json (no I/O here)."""
from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from kvplan.model.base import Frozen
from kvplan.model.limits import MAX_HEAD_SIZE, MAX_HEADS, MAX_LAYERS, MAX_TOKENS
from kvplan.model.vocab import LayerKind

# Constrained integers (limits: kvplan/model/limits.py, docs/limits.md). Every geometry fact is
# checked where it enters, so no rule sees a zero head count or a negative head size.
HeadCount = Annotated[int, Field(ge=1, le=MAX_HEADS)]
HeadSize = Annotated[int, Field(ge=1, le=MAX_HEAD_SIZE)]
HeadSizeOrZero = Annotated[int, Field(ge=0, le=MAX_HEAD_SIZE)]
Tokens = Annotated[int, Field(ge=1, le=MAX_TOKENS)]


class MlaDims(Frozen):
    """Multi-head latent attention dimensions (DeepSeek-V2/V3 style)."""

    kv_lora_rank: HeadSize
    """Rank of the compressed KV latent (512 on DeepSeek-V3)."""
    qk_rope_head_dim: HeadSizeOrZero
    """Decoupled RoPE key dimension stored next to the latent (64 on DeepSeek-V3)."""
    qk_nope_head_dim: HeadSizeOrZero
    """Non-RoPE query/key head dimension (128 on DeepSeek-V3)."""
    v_head_dim: HeadSizeOrZero
    """Value head dimension (128 on DeepSeek-V3)."""
    index_topk: Annotated[int, Field(ge=0, le=MAX_TOKENS)] | None = None
    """Sparse-attention indexer top-k (DeepSeek-V3.2 style sparse MLA); None for dense MLA."""
    index_head_dim: int | None = None
    """Sparse-attention indexer key head size (128 on DeepSeek-V3.2); None without an indexer."""

    @property
    def triple(self) -> tuple[int, int, int]:
        """(qk_nope, rope, v) head dims, as vLLM's MLA prefill backend selection compares them."""
        return self.qk_nope_head_dim, self.qk_rope_head_dim, self.v_head_dim


class ExtraCache(Frozen):
    """A KV cache vLLM registers at a layer next to its main attention cache (an indexer's keys, a
    ring of in-progress rows, a convolution state), with the per-token size of its spec."""

    name: str
    """What it holds, as vLLM's layer names it (e.g. 'indexer keys', 'conv state')."""
    elements: Annotated[int, Field(ge=0, le=MAX_HEADS * MAX_HEAD_SIZE)] = 0
    """Elements stored per state (all heads)."""
    element_bytes: Annotated[int, Field(ge=1, le=8)] | None = None
    """Bytes per element; None: the model dtype's (vLLM builds it in the model dtype)."""
    tokens_per_state: Annotated[int, Field(ge=1, le=MAX_TOKENS)] = 1
    """Tokens one stored state covers (vLLM's spec tokens_per_state: a pooled / compressed cache)."""
    same_as_layer: bool = False
    """Its page is sized as the layer's own KV cache page (Step 5's CSA tail ring): the same bytes per
    token as the layer's main cache, whatever its dtype."""
    window: Tokens | None = None
    """Tokens it keeps per request when it slides (Inkling's conv state: the kernel size); None: all."""
    unpooled_window: Tokens | None = None
    """A block-pooled cache's window in its own frames, where `window` is in pooled tokens (Voxtral Realtime's
    causal audio encoder: vLLM's spec keeps this one before 0.25)."""
    ring: bool = False
    """A circular buffer (vLLM's CircularBufferSpec): one block per request, whatever the context."""
    kv_heads: HeadCount | None = None
    """An attention K/V cache of another module that vLLM numbers with this layer (Voxtral Realtime's
    causal audio encoder layer of the same index): stored in the layer's KV cache dtype, with this many
    KV heads split over tensor-parallel ranks as the layer's are; `elements` are then per KV head
    (states per token x K and V x head size). None: elements cover all heads, in `element_bytes`."""


StateFamily = Literal["mamba1", "mamba2", "gated_delta_net", "kda", "short_conv", "linear_attention"]
_Dim = Annotated[int, Field(ge=0, le=MAX_HEADS * MAX_HEAD_SIZE)]


class StateCache(Frozen):
    """The per-request state a Mamba / gated-delta-net / linear-attention / short-conv layer keeps (vLLM's
    MambaSpec): its family (which of vLLM's MambaStateShapeCalculator formulas sizes it) and the config's
    dimensions, before tensor parallelism. Unused dimensions are 0."""

    family: StateFamily
    """mamba1 (MambaMixer), mamba2 (MambaMixer2), gated_delta_net (Qwen3-Next / Qwen3.5 GDN), kda (Kimi delta
    attention), short_conv (LFM2), linear_attention (lightning / MiniMax-style linear attention)."""
    conv_kernel: _Dim = 0
    """Convolution kernel size (the conv state keeps kernel - 1 columns, + speculative tokens); 0: no conv state."""
    intermediate_size: _Dim = 0
    """Channels of the SSM / conv (mamba1, mamba2, short_conv)."""
    n_groups: _Dim = 0
    """B/C groups of a Mamba2 mixer."""
    num_heads: _Dim = 0
    """SSM / linear-attention / KDA heads (value heads for a gated delta net)."""
    head_dim: _Dim = 0
    """Head size of those heads (value head size for a gated delta net)."""
    state_size: _Dim = 0
    """SSM state size (d_state) of a Mamba mixer."""
    num_k_heads: _Dim = 0
    """Key heads of a gated delta net (or a KDA with separate key heads)."""
    head_k_dim: _Dim = 0
    """Key head size of a gated delta net (or a KDA with separate key heads)."""
    prefill_checkpoint: Literal["none", "always", "flashinfer_gdn"] = "none"
    """Whether the layer exports a prefill checkpoint in align mode (one more state block per request):
    always (MambaMixer2), with FlashInfer's GDN prefill kernel (Qwen's gated delta net on SM90, or SM10x /
    SM12x with key heads of 128: checkpoints every 64 tokens), or none."""
    ssm_dtype_from_config: str | None = None
    """The SSM state dtype vLLM's config hook for the architecture takes when --mamba-ssm-cache-dtype is auto
    (Nemotron-H: mamba_ssm_cache_dtype, float32 when absent; Qwen3.5: mamba_ssm_dtype); None: none."""
    ssm_dtype_flag: Literal["layer", "hook", "ignored"] = "layer"
    """Where vLLM reads --mamba-ssm-cache-dtype for a KDA layer (MambaStateDtypeCalculator.kda_state_dtype, which
    takes only auto / float32 / bfloat16): layer (the layer's state dtype and the model class hook read it:
    GLM-5 Next, Kimi-K3's full-rank-gate layers), hook (only the model class hook that sizes the hybrid block
    reads it: Kimi-Linear's layers keep a float32 recurrent state), ignored (neither: Ling 3.0, AliceAI).
    Other families: layer."""


class LayerArch(Frozen):
    """One decoder layer as the engine builds it."""

    index: Annotated[int, Field(ge=0, le=MAX_LAYERS)]
    """Layer number as it appears in the engine's module prefix (model.layers.<index>...)."""
    kind: LayerKind
    """Attention kind of the layer; kinds without per-token KV are linear_attention, mamba, encoder_only, none."""
    sliding_window: Tokens | None = None
    """Sliding-window size in tokens for sliding_attention layers, else None."""
    attention_chunk_size: Tokens | None = None
    """Chunk size for chunked local attention layers (Llama 4), else None."""
    num_heads: HeadCount | None = None
    """Query heads of the layer (total, before tensor parallelism)."""
    num_kv_heads: HeadCount | None = None
    """KV heads of the layer (total, before tensor parallelism); 1 for MLA latent caches."""
    head_size: HeadSize | None = None
    """Key head size in elements (MLA: kv_lora_rank + qk_rope_head_dim)."""
    head_size_v: HeadSizeOrZero | None = None
    """Value head size in elements (MLA: 0, the latent is stored once)."""
    has_sinks: bool = False
    """The layer uses attention sinks (gpt-oss); restricts backends."""
    mla: MlaDims | None = None
    """MLA dimensions for kind == 'mla'."""
    source: str = ""
    """The config fact that decided this layer's kind and geometry (for explain)."""
    kv_cache_dtype_ignored: bool = False
    """vLLM's model class builds this layer's attention without the cache config (Falcon): its KV
    cache stays in the model dtype whatever --kv-cache-dtype says."""
    indexer_bytes_per_token: int = 0
    """Bytes per token of the layer's sparse-attention indexer key cache (uint8 keys + fp32 scales,
    DeepSeek-V3.2 / GLM-5: 128 + 4); vLLM allocates it next to the MLA latent, whatever --kv-cache-dtype."""
    dsv4_compress_ratio: Annotated[int, Field(ge=1, le=MAX_TOKENS)] | None = None
    """DeepSeek-V4 attention: tokens one stored state of the compressed MLA latent covers (the config's
    compress_rates of the layer type: 4 compressed sparse, 128 heavily compressed, 1 none); the layer also
    holds a sliding-window cache, compressor states and (ratio 4) an indexer. None for other layers."""
    dsv4_window: Tokens | None = None
    """DeepSeek-V4: tokens its sliding-window cache keeps (config sliding_window)."""
    cross_attention_tokens: Tokens | None = None
    """The decoder layer also builds a cross-attention KV cache (vLLM's CrossAttentionSpec: same dtype and
    geometry as its self-attention) over this many encoder tokens per request (Whisper: max_source_positions)."""
    kv_shared_with: Annotated[int, Field(ge=0, le=MAX_LAYERS)] | None = None
    """Index of the earlier layer whose KV cache this layer reads (vLLM's kv_sharing_target_layer_name:
    Gemma 3n / Gemma 4 `num_kv_shared_layers`); the layer allocates no KV cache of its own."""
    states_per_token: Annotated[int, Field(ge=1, le=MAX_TOKENS)] = 1
    """K/V states the layer's cache stores per (decoder) token: a block-pooled cache (vLLM's
    tokens_per_state 1/N; Voxtral Realtime's causal audio encoder keeps N = downsample_factor encoder
    frames per token, its window counted in frames). 1 for every other layer."""
    extra_caches: tuple[ExtraCache, ...] = ()
    """Further KV caches vLLM registers at this layer (sparse-indexer keys and rings of GLM-5 Next,
    MiniMax-M3 and Step 5, Inkling's convolution state); their bytes count in the layer's."""
    state: StateCache | None = None
    """The per-request state cache of a mamba / linear_attention layer, when kvplan reads its dimensions
    from the config (None: no state cache, or a family kvplan does not size)."""
    kda_gate_lower_bound: float | None = None
    """GLM-5 Next's KDA layers: the config's linear_lower_bound (-5.0 when absent; a bounded gate, which FlashKDA's
    prefill kernel needs: vllm/models/glm5next/common/kda.py::_resolve_kda_prefill_backend); None: unbounded
    (null), or no KDA layer."""
    build_order: Annotated[int, Field(ge=0, le=MAX_LAYERS)] | None = None
    """Where vLLM's model class registers this layer's attention among the model's layers, when that is not
    the layer order (IQuest-LoopCoder builds each layer's loop attentions together); vLLM splits a bucket of
    equal caches into KV cache groups in that order. None: the layer index."""


_Width = Annotated[int, Field(ge=0, le=MAX_HEADS * MAX_HEAD_SIZE * 64)]


class ProfileDims(Frozen):
    """Dimensions vLLM's memory profiling depends on (activation peak, sampler logits)."""

    hidden_size: _Width
    """Hidden size of the language model."""
    intermediate_size: _Width
    """Dense MLP width (4 x hidden when the config omits it)."""
    moe_intermediate_size: _Width = 0
    """Width of one expert's MLP (0 without experts)."""
    experts_per_token: _Width = 0
    """Experts each token is routed to (0 without experts)."""
    vocab_size: _Width
    """Vocabulary size: the sampler's logits are max-num-seqs x vocab_size float32."""


class ModelArch(Frozen):
    """What kvplan knows about a model's attention, independent of serving flags."""

    model_type: str
    """config.json model_type of the top level (e.g. 'gemma3', 'llama')."""
    text_model_type: str
    """model_type of the language model part (text_config's, or the top level's)."""
    architecture: str | None = None
    """First entry of config.json 'architectures'."""
    num_layers: Annotated[int, Field(ge=0, le=MAX_LAYERS)]
    """Decoder layers (num_hidden_layers or its per-family spelling)."""
    config_dtype: str | None = None
    """torch_dtype / dtype as written in the config (None when absent)."""
    max_position_embeddings: Tokens | None = None
    """The model's maximum context (vLLM's default --max-model-len)."""
    is_encoder_decoder: bool = False
    """Encoder-decoder model (T5, Whisper, BART): only decoder layers are planned."""
    layers: tuple[LayerArch, ...]
    """Decoder layers in order."""
    uses_mla: bool = False
    """Any layer is MLA."""
    mamba_ssm_cache_dtype: str | None = None
    """Declared SSM state dtype for hybrid models (governed by --mamba-ssm-cache-dtype, not KV flags)."""
    notes: tuple[str, ...] = ()
    """How defaults were filled in (e.g. 'num_key_value_heads absent: MHA, = num_attention_heads')."""
    architecture_status: str = "unregistered"
    """'verified' when kvplan matches vLLM's own model class for this architecture on every checked-in
    oracle case; else why not (kvplan/data/vllm_arch_coverage.json), or 'unregistered'."""
    refused_reason: str | None = None
    """vLLM's reason when its registry refuses the architecture (no longer supported, moved to a plugin)."""
    remote_code: str | None = None
    """Why vLLM runs the checkpoint's own code named in config.json's auto_map (its config class for a
    model_type transformers does not know, or its model class for an architecture vLLM does not
    register): vLLM loads it only with --trust-remote-code. None when no remote code is needed."""
    keys_read: tuple[str, ...] = ()
    """Config keys (of the language model's config) kvplan read to build the layers."""
    unused_geometry_keys: tuple[str, ...] = ()
    """Config keys that look like layer geometry but that kvplan did not read."""
    unknown_layer_types: tuple[str, ...] = ()
    """Layer-type entries kvplan does not know (planned as full attention, said by KV604)."""
    profile_dims: ProfileDims | None = None
    """Dimensions vLLM's memory profiling depends on, when the config gives the hidden size and vocabulary."""
    mtp_layers: Annotated[int, Field(ge=0, le=MAX_LAYERS)] = 0
    """Multi-token-prediction layers the checkpoint carries (mtp_num_hidden_layers, num_nextn_predict_layers):
    with --speculative-config method mtp vLLM builds them as the draft model, each with its own KV cache."""
    pooling: bool = False
    """vLLM runs the model as a pooling (embedding / classification) model: encoder-only attention,
    no KV cache, and a float32 config runs in float16."""
    fp8_kv_cache: bool = False
    """The text config declares an FP8 latent KV cache as the checkpoint's default (Mistral Large 4's
    `dsa.fp8_kv_cache`, vLLM 0.34: `--kv-cache-dtype auto` becomes fp8_ds_mla, fp8 on ROCm)."""
