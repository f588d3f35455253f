"""The plan kvplan emits: per-layer KV decisions with provenance, totals and findings."""
from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, model_serializer

from kvplan.model.base import Frozen
from kvplan.model.vocab import LayerKind, QuantMode, ScaleSource, Severity

SCHEMA_VERSION = "1.5"  # 1.2: findings may carry a `subject`; 1.3: layers may carry `kv_shared_with`,
# `cross_attention_bytes_per_token`, `bytes_per_token_exact` (layers and totals); 1.4: state layers carry
# `state_bytes`, `state_shapes`, `state_dtypes`; totals carry `state_bytes_per_request`, `kv_cache_layout`,
# `max_model_len_fits`, `kv_budget_terms` (each with `error_bytes`), `kv_budget_error_bytes`
# (1.4 also: totals carry `draft`, the speculative-decoding draft's KV layers); 1.5: KV cache groups may carry
# `spec` and `page_size_bytes`, kind `ring`; the layout `memory_layout` (models laid out cache by cache)


class OmitsAbsent(Frozen):
    """A model whose optional fields named in `omit_when_none` are left out of its JSON when None
    (fields added in a schema minor version, so older plans and consumers see the same keys)."""

    omit_when_none: ClassVar[tuple[str, ...]] = ()

    @model_serializer(mode="wrap")
    def _drop_absent(self, handler):  # no return type: the schema stays the model's
        data = handler(self)
        if isinstance(data, dict):
            for key in self.omit_when_none:
                if data.get(key) is None:
                    data.pop(key, None)
        return data


class Decision(Frozen):
    """Why one per-layer field has its value: the rule that set it and the input fact behind it."""

    field: str
    """The LayerPlan field decided (kv_cache_dtype, dtype, quant_mode, scale_source, bytes_per_token, ...)."""
    value: Any
    """The value set."""
    rule: str
    """Code of the rule that set it (e.g. KV103)."""
    fact: str
    """The input fact that triggered the rule (e.g. "--kv-cache-dtype-skip-layers contains 'sliding_window' and the layer slides (window 128)")."""  # noqa: E501 - a schema description: pydantic keeps a docstring's line breaks


class Subject(Frozen):
    """What a finding is about, as data (a linter maps it to a file position; nothing parses the message)."""

    flag: str | None = None
    """The engine flag, as written or as it resolved (e.g. --kv-cache-dtype-skip-layers, --kv-cache-type)."""
    value: str | None = None
    """One word of that flag's value (e.g. the skip-layer token '7')."""
    argument: str | None = None
    """A positional argument the engine's parser rejects (a stray word)."""
    launch_fact: Literal["image", "gpu_label"] | None = None
    """A fact of a deployment file's launch outside its flags: the container image or the GPU node label."""


class Finding(OmitsAbsent):
    """Something the user should know: an error vLLM would raise, a silent behaviour, advice."""

    code: str
    """Stable rule code (KVnnn)."""
    name: str
    """Rule name (kebab-case)."""
    severity: Severity
    """error: vLLM would refuse or crash; warning: works but likely not what you want; info: advice."""
    message: str
    """What is wrong, in one sentence."""
    fix: str | None = None
    """How to fix it."""
    layers: list[int] = Field(default_factory=list)
    """Layer indices the finding names (may be empty)."""
    subject: Subject | None = None
    """The flag, value or argument the finding is about, when the rule names one (absent otherwise)."""

    omit_when_none = ("subject",)


class LayerPlan(OmitsAbsent):
    """The KV plan for one decoder layer."""

    index: int
    """Layer number as it appears in the engine's module prefix."""
    kind: LayerKind
    """Attention kind."""
    sliding_window: int | None = None
    """Sliding window in tokens (sliding_attention layers), else null."""
    attention_chunk_size: int | None = None
    """Chunk size of chunked local attention layers, else null."""
    num_kv_heads: int = 0
    """KV heads stored per tensor-parallel rank (replicated when KV heads < TP; 1 for MLA)."""
    head_size: int = 0
    """Key head size in elements."""
    head_size_v: int = 0
    """Value head size in elements (0 for MLA)."""
    kv_cache_dtype: str | None = None
    """The kv_cache_dtype string the engine's layer ends with ("auto" = model dtype); null without KV."""
    dtype: str | None = None
    """Stored element type: bfloat16, float16, float32, float8_e4m3fn, float8_e4m3fnuz, float8_e5m2, int8, int4, fp4_e2m1, packed; null without KV."""  # noqa: E501 - a schema description: pydantic keeps a docstring's line breaks
    quant_mode: QuantMode = QuantMode.none
    """KV quantization mode."""
    scale_source: ScaleSource = ScaleSource.none
    """Where k/v scales come from."""
    skipped: bool = False
    """--kv-cache-dtype-skip-layers kept this layer in the model dtype."""
    bytes_per_token: int = 0
    """KV bytes per token for this layer on one tensor-parallel rank, K+V, scales included; 0 without per-token KV."""
    bytes_per_token_exact: float | None = None
    """Exact KV bytes per token when they are not a whole number (caches that store one state per several tokens:
    DeepSeek-V4's compressed MLA, 584 B per 128 tokens); bytes_per_token is then its ceiling. Absent otherwise."""
    cross_attention_bytes_per_token: int | None = None
    """Bytes per encoder token of the layer's cross-attention KV cache (encoder-decoder models: vLLM allocates it
    for every request's encoder tokens, next to the self-attention cache); absent for a layer without one."""
    kv_shared_with: int | None = None
    """Index of the earlier layer whose KV cache this layer reads (vLLM's kv_sharing_target_layer_name); the
    layer allocates no KV cache (bytes_per_token 0). Absent for a layer with its own cache."""
    state_bytes: int | None = None
    """Bytes of one per-request state of a Mamba / gated-delta-net / linear-attention / short-conv layer on one
    tensor-parallel rank (vLLM's MambaSpec page before padding: conv + SSM / recurrent state); absent for
    attention layers and for state layers kvplan does not size."""
    state_shapes: list[list[int]] | None = None
    """Shapes of the layer's state tensors (conv state as (columns, channels), then the SSM / recurrent state),
    per tensor-parallel rank, as vLLM's MambaStateShapeCalculator gives them; absent without a state."""
    state_dtypes: list[str] | None = None
    """dtypes of those state tensors (--mamba-cache-dtype for conv, --mamba-ssm-cache-dtype for the SSM state)."""
    max_bytes_per_request: int | None = None
    """Upper bound of this layer's KV bytes for one request at --max-model-len (window/chunk-limited layers are smaller)."""  # noqa: E501 - a schema description: pydantic keeps a docstring's line breaks
    backend: str | None = None
    """Attention backend the engine would select for this layer (needs --gpu): vLLM's backend enum name exactly (FLASH_ATTN, FLASHINFER, TRITON_ATTN, FLASHMLA, ...)."""  # noqa: E501 - a schema description: pydantic keeps a docstring's line breaks
    flash_attn_version: Literal[2, 3, 4] | None = None
    """FlashAttention version the FLASH_ATTN / FLASH_ATTN_MLA backend runs for this layer (2, 3 or 4); null for other backends or without --gpu."""  # noqa: E501 - a schema description: pydantic keeps a docstring's line breaks
    query_dtype: str | None = None
    """Query dtype the backend uses for this layer (e.g. float8_e4m3fn when the query is quantized)."""
    decided_by: list[str] = Field(default_factory=list)
    """Codes of the rules that decided this layer's fields, in precedence order."""
    decisions: list[Decision] = Field(default_factory=list)
    """Per-field provenance: rule and input fact."""

    omit_when_none = ("kv_shared_with", "cross_attention_bytes_per_token", "bytes_per_token_exact",
                      "state_bytes", "state_shapes", "state_dtypes")


class EngineRef(Frozen):
    """The serving engine a plan models."""

    name: str
    """Engine name (vllm)."""
    version: str
    """Engine version whose behaviour is modelled."""


class HubSource(Frozen):
    """Where a Hugging Face model id's files came from (present only for a Hub id)."""

    repo_id: str
    """The repository id, e.g. meta-llama/Llama-3.1-8B-Instruct."""
    revision: str | None = None
    """The revision asked for (--revision: branch, tag or commit); null for the default branch."""
    commit: str
    """The commit sha the revision resolved to: every file read is from this commit."""
    files: list[str]
    """Repository files read: config.json and the other small files whole, *.safetensors only their
    header and scale tensors (by HTTP range requests; weights are never downloaded)."""


class ModelRef(OmitsAbsent):
    """The model a plan is for."""

    model_type: str
    """config.json model_type (text model's, for multimodal wrappers)."""
    architecture: str | None = None
    """config.json architectures[0]."""
    num_layers: int
    """Decoder layers."""
    dtype: str
    """Model dtype the engine will run in (what 'auto' KV means)."""
    source: str | None = None
    """Path the config came from (the model id for a Hugging Face id)."""
    hub: HubSource | None = None
    """For a Hugging Face model id: repository, resolved commit and files read (absent for a local path)."""

    omit_when_none = ("hub",)


class GpuRef(Frozen):
    """The GPU a plan was made for."""

    name: str
    """GPU profile name."""
    memory_gib: float | None = None
    """Total memory per GPU."""
    compute_capability: str | None = None
    """CUDA compute capability, e.g. '9.0'."""


class BudgetTerm(Frozen):
    """One term of the KV memory estimated from a GPU (what vLLM's startup profiling adds or takes away)."""

    name: str
    """requested, weights, activation peak, CUDA graphs, non-torch."""
    bytes: int
    """Signed bytes per GPU: the requested memory is positive, what vLLM keeps outside the KV cache negative."""
    basis: str
    """What the term is computed from."""
    error_bytes: int = 0
    """How far the term can be off either way (its error band from public vLLM startup logs; 0 when exact)."""


class KvCacheGroup(OmitsAbsent):
    """One KV cache group of vLLM's hybrid allocator: layers sharing one block table."""

    omit_when_none = ("spec", "page_size_bytes")

    kind: Literal["full_attention", "sliding_attention", "chunked_attention", "mla", "cross_attention", "state",
                  "ring"]
    """The spec kind of its layers (state: Mamba / linear-attention state layers; cross_attention: an
    encoder-decoder's cross-attention caches, vLLM's CrossAttentionSpec; ring: a circular buffer holding one
    block per request, CircularBufferSpec)."""
    layers: list[int]
    """Layer indices in the group (vLLM gives group i of a kind the kind's layers i, i + n, i + 2n, ...); a layer
    with two caches in one group (a sparse-MLA indexer's keys next to its latent) is listed twice; the
    speculative-decoding draft's layers are numbered after the model's layers."""
    block_size: int
    """Tokens per block of the group's layers (a sliding-window skip layer padded to the shared page keeps
    a smaller one; state layers: the attention block size)."""
    blocks_per_request: int
    """Blocks one request at max_model_len holds in this group (vLLM: cdiv(max_memory_usage_bytes, page))."""
    spec: str | None = None
    """vLLM's KVCacheSpec class of the group's first cache (FullAttentionSpec, MLAAttentionSpec,
    SlidingWindowMLASpec, CircularBufferSpec, MambaSpec, ...), for models laid out cache by cache (a layer
    with several caches: DeepSeek-V4, GLM-5 Next, Step 5, Inkling); absent otherwise."""
    page_size_bytes: int | None = None
    """Bytes of one block of the group's first cache (pages differ within a group of a block-outermost
    layout); absent where every page is the layout's page_size_bytes."""


class KvCacheLayout(OmitsAbsent):
    """How vLLM lays the KV cache pool out for this model and these flags (vllm/v1/core/kv_cache_planning.py)."""

    omit_when_none = ("memory_layout",)

    block_size: int
    """Tokens per attention block, after vLLM raised it so an attention page holds a state page (hybrid)."""
    page_size_bytes: int
    """Bytes of one page (one layer's block) on one tensor-parallel rank: every layer's page is this one (the
    largest, where a block-outermost layout packs pages of several sizes)."""
    state_page_size_bytes: int | None = None
    """The largest state layer's page before padding (None without state layers); vLLM pads it to
    page_size_bytes."""
    bytes_per_block: int
    """Bytes of one pool block: the largest group's pages (vLLM divides the KV memory by it)."""
    groups: list[KvCacheGroup]
    """The KV cache groups, attention kinds first, in vLLM's order."""
    blocks_per_request: int
    """Blocks one request at max_model_len holds, summed over the groups."""
    mamba_cache_mode: Literal["align", "none"] | None = None
    """State layers' cache mode (align with prefix caching: 2 state blocks + draft + checkpoint blocks per
    request; none: 1 + draft); None without state layers."""
    num_blocks: int | None = None
    """Blocks in the pool for the KV budget (null without a budget)."""
    memory_layout: str | None = None
    """The physical KV cache layout vLLM resolves from the backends (resolve_kv_cache_layout: BLHNC and BLNHC
    are block-outermost, pages of different sizes packed side by side in each block; LBNHC layer-outermost),
    for models laid out cache by cache; absent otherwise."""


class DraftKv(Frozen):
    """The speculative-decoding draft's KV cache: vLLM builds the draft model's attention layers (an EAGLE /
    EAGLE3 head, a draft_model checkpoint, or the checkpoint's own MTP layers) and adds their caches to the
    pool next to the target's (gpu_model_runner.get_kv_cache_spec: every attention layer of the static forward
    context, the drafter's included)."""

    method: str
    """The --speculative-config method (eagle, eagle3, mtp, draft_model, ...)."""
    model: str | None = None
    """The draft model as given in --speculative-config (None: the checkpoint's own MTP layers)."""
    num_speculative_tokens: int
    """Draft tokens per step."""
    layers: list[LayerPlan]
    """The draft's KV layers, numbered after the target's layers (as vLLM names an EAGLE head's layer
    model.layers.<num_hidden_layers>), each with its dtype and bytes per token."""
    bytes_per_token: int
    """KV bytes per token of the draft's layers (per TP rank); not in Totals.bytes_per_token (the target's)."""


class Totals(OmitsAbsent):
    """Whole-model numbers per tensor-parallel rank."""

    bytes_per_token: int
    """KV bytes per token summed over layers (per TP rank)."""
    bytes_per_token_exact: float | None = None
    """Exact sum of the layers' bytes per token when some layer's is not a whole number (bytes_per_token is then
    its ceiling, and tokens_capacity uses it); absent otherwise."""
    bytes_per_token_bf16: int
    """The same model with every KV layer in 16-bit (the all-bf16 plan)."""
    saving_vs_bf16: float
    """1 - bytes_per_token / bytes_per_token_bf16 (0 when nothing is quantized)."""
    kv_layers: int
    """Layers holding per-token KV."""
    quantized_layers: int
    """Layers whose KV is quantized."""
    max_model_len: int | None = None
    """Context length used for per-request numbers."""
    bytes_per_request: int | None = None
    """KV bytes one request at max_model_len needs: with a kv_cache_layout, its blocks in every group x bytes
    per block (what vLLM's startup check compares with the KV memory; state and padding included); else the
    layers' sum (window- and chunk-limited layers counted as such)."""
    kv_budget_bytes: int | None = None
    """KV memory per GPU: --kv-budget-gib, or estimated from the GPU's memory, --gpu-memory-utilization, the
    weights and vLLM's profiling terms (kv_budget_terms); null without either."""
    tokens_capacity: int | None = None
    """vLLM's "GPU KV cache size": with a kv_cache_layout, int(max_concurrency x max_model_len) as vLLM 0.33
    computes and logs it; otherwise the tokens of full-attention context that fit (null without a budget)."""
    max_concurrency: float | None = None
    """Requests of max_model_len that fit at once (null without a GPU)."""
    state_bytes_per_request: int | None = None
    """Bytes of state one request holds over all state layers (unpadded, per TP rank); absent without state
    layers."""
    kv_cache_layout: KvCacheLayout | None = None
    """vLLM's block layout: block size, page, groups, blocks per request and in the pool; absent where kvplan
    does not model it (caches of several page sizes that vLLM packs)."""

    draft: DraftKv | None = None
    """The speculative-decoding draft's KV layers and bytes when --speculative-config gives a draft whose
    layers hold KV (they are in kv_cache_layout's groups and in bytes_per_request); absent otherwise."""
    kv_budget_terms: list[BudgetTerm] | None = None
    """The terms of kv_budget_bytes when it is estimated from --gpu (absent when --kv-budget-gib gives it)."""
    kv_budget_error_bytes: int | None = None
    """How far the estimated kv_budget_bytes can be off either way (absent when --kv-budget-gib gives it)."""
    max_model_len_fits: int | None = None
    """When one request at max_model_len does not fit the KV budget: the longest --max-model-len that does, as
    vLLM estimates it in its startup error (0: not even one token); absent otherwise."""

    omit_when_none = ("bytes_per_token_exact", "state_bytes_per_request", "kv_cache_layout", "max_model_len_fits",
                      "draft",
                      "kv_budget_terms", "kv_budget_error_bytes")


class Plan(Frozen):
    """A per-layer KV cache plan."""

    schema_version: str = SCHEMA_VERSION
    """Version of this JSON contract."""
    kvplan_version: str
    """kvplan version that produced the plan."""
    engine: EngineRef
    """Engine and version modelled."""
    model: ModelRef
    """Model facts."""
    gpu: GpuRef | None = None
    """GPU the plan was made for, when given."""
    flags: dict[str, Any] = Field(default_factory=dict)
    """The serving flags the plan was made for (vLLM names, only those that matter)."""
    kv_cache_dtype: str
    """Global --kv-cache-dtype after config-time resolution (ModelOpt 'auto' resolution applied)."""
    layers: list[LayerPlan]
    """One entry per decoder layer, in order."""
    totals: Totals
    """Totals per TP rank."""
    findings: list[Finding] = Field(default_factory=list)
    """Findings, sorted by severity (errors first), then code, then first layer."""
    kind: Literal["kvplan.plan"] = "kvplan.plan"
    """Document kind."""
