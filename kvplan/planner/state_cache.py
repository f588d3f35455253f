"""Per-request state of Mamba / gated-delta-net / linear-attention / short-conv layers, as vLLM sizes it.

Shapes follow `MambaStateShapeCalculator` and dtypes `MambaStateDtypeCalculator`
(vllm/model_executor/layers/mamba/mamba_utils.py, vLLM 0.33.0); the page is MambaSpec.page_size_bytes
(vllm/v1/kv_cache_interface.py): the sum over the state tensors of elements x dtype size. Pure functions.
"""
from __future__ import annotations

from dataclasses import dataclass
from math import prod

from kvplan.backends.capabilities import EngineVersion
from kvplan.backends.vllm_rows import engine_feature
from kvplan.model.arch import StateCache
from kvplan.model.flags import ServingFlags

_DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


@dataclass(frozen=True)
class StateTensors:
    """The state tensors one request holds at one layer on one tensor-parallel rank."""

    names: tuple[str, ...]
    shapes: tuple[tuple[int, ...], ...]
    dtypes: tuple[str, ...]

    @property
    def page_bytes(self) -> int:
        """MambaSpec.page_size_bytes before padding: one state of every tensor."""
        return sum(prod(s) * _DTYPE_BYTES[d] for s, d in zip(self.shapes, self.dtypes, strict=True))


def _extra_groups(n_groups: int, tp: int) -> int:
    # extra_groups_for_head_shards: groups are replicated so every head shard has its group.
    return 0 if n_groups % tp == 0 else tp - n_groups


def _shapes(sc: StateCache, tp: int, spec: int) -> tuple[tuple[str, ...], tuple[tuple[int, ...], ...]]:
    """(names, shapes) of the state tensors, conv state as (state_len, dim) (vLLM's default SD layout)."""
    if sc.family == "mamba1":  # conv state keeps no speculative columns
        return ("conv", "ssm"), ((sc.conv_kernel - 1, sc.intermediate_size // tp),
                                 (sc.intermediate_size // tp, sc.state_size))
    if sc.family == "mamba2":
        groups = sc.n_groups + _extra_groups(sc.n_groups, tp)
        conv_dim = sc.intermediate_size + 2 * groups * sc.state_size
        return ("conv", "ssm"), ((sc.conv_kernel - 1 + spec, conv_dim // tp),
                                 (sc.num_heads // tp, sc.head_dim, sc.state_size))
    if sc.family == "gated_delta_net":
        conv_dim = sc.head_k_dim * sc.num_k_heads * 2 + sc.head_dim * sc.num_heads
        return ("conv", "recurrent"), ((sc.conv_kernel - 1 + spec, conv_dim // tp),
                                       (sc.num_heads // tp, sc.head_dim, sc.head_k_dim))
    if sc.family == "kda":
        nk, hk = sc.num_k_heads or sc.num_heads, sc.head_k_dim or sc.head_dim
        conv_dim = sc.num_heads * sc.head_dim + 2 * nk * hk
        return ("conv", "recurrent"), ((sc.conv_kernel - 1 + spec, conv_dim // tp),
                                       (sc.num_heads // tp, sc.head_dim, sc.head_dim))
    if sc.family == "short_conv":
        return ("conv",), ((sc.conv_kernel - 1 + spec, sc.intermediate_size // tp),)
    return ("state",), ((sc.num_heads // tp, sc.head_dim, sc.head_dim),)  # linear_attention


def ssm_cache_dtype(sc: StateCache, flags: ServingFlags) -> str:
    """--mamba-ssm-cache-dtype after the architecture's config hook (auto -> the config's value)."""
    if flags.mamba_ssm_cache_dtype == "auto" and sc.ssm_dtype_from_config in _DTYPE_BYTES:
        return sc.ssm_dtype_from_config or "auto"
    return flags.mamba_ssm_cache_dtype


def _dtypes(sc: StateCache, flags: ServingFlags, model_dtype: str, n: int) -> tuple[str, ...]:
    conv = model_dtype if flags.mamba_cache_dtype == "auto" else flags.mamba_cache_dtype
    conv = conv if conv in _DTYPE_BYTES else "bfloat16"
    if sc.family in ("short_conv", "linear_attention"):
        return (conv,) * n
    ssm = ssm_cache_dtype(sc, flags)
    if sc.family == "kda":  # kda_state_dtype: the recurrent state is float32 unless the layer passes the flag
        return conv, ("float32" if ssm == "auto" or sc.ssm_dtype_flag != "layer" else ssm)
    return conv, (conv if ssm == "auto" else ssm)


def state_tensors(sc: StateCache, flags: ServingFlags, model_dtype: str) -> StateTensors:
    """The layer's state tensors for these flags (TP split, speculative columns, dtypes)."""
    names, shapes = _shapes(sc, flags.tensor_parallel_size, flags.num_speculative_tokens)
    return StateTensors(names=names, shapes=shapes, dtypes=_dtypes(sc, flags, model_dtype, len(shapes)))


FLASHINFER_GDN_CHECKPOINT_ALIGNMENT = 64  # vllm/v1/attention/backends/gdn_attn.py


def _exports_checkpoint(sc: StateCache, engine: EngineVersion | None) -> bool:
    """The release's state layer exports prefill checkpoints at all: MambaMixer2 from 0.32, Qwen's GDN (with
    FlashInfer's prefill kernel) from 0.33 (ENGINE_FEATURES mamba2_prefill_checkpoint,
    gdn_flashinfer_prefill_checkpoint); None = the newest release."""
    feature = {"always": "mamba2_prefill_checkpoint", "flashinfer_gdn": "gdn_flashinfer_prefill_checkpoint"}.get(
        sc.prefill_checkpoint or "")
    return feature is not None and (engine is None or engine_feature(feature).holds_for(engine))


def flashinfer_gdn(sc: StateCache, compute_capability: tuple[int, int] | None) -> bool:
    """vLLM's _resolve_gdn_prefill_backend picks FlashInfer's GDN prefill kernel: SM90, or SM10x / SM12x with
    key heads of 128 (and a CUDA 13 runtime, assumed there); never without a GPU."""
    if sc.prefill_checkpoint != "flashinfer_gdn" or compute_capability is None:
        return False
    return compute_capability == (9, 0) or (compute_capability[0] in (10, 12) and sc.head_k_dim == 128)


def checkpoint_blocks(sc: StateCache, compute_capability: tuple[int, int] | None,
                      engine: EngineVersion | None = None) -> int:
    """Prefill-checkpoint blocks a request holds in align mode: MambaMixer2 exports one always
    (mamba_mixer2.py::get_kv_cache_spec, 0.32 on), Qwen's GDN with FlashInfer's prefill kernel one
    (qwen_gdn_linear_attn.py::get_kv_cache_spec, 0.33 on), the other families none."""
    if not _exports_checkpoint(sc, engine):
        return 0
    return 1 if sc.prefill_checkpoint == "always" or flashinfer_gdn(sc, compute_capability) else 0


def checkpoint_alignment(sc: StateCache, compute_capability: tuple[int, int] | None,
                         engine: EngineVersion | None = None) -> int:
    """Tokens the block size must be a multiple of in align mode (get_mamba_prefill_checkpoint_alignment)."""
    if not _exports_checkpoint(sc, engine):
        return 1
    return FLASHINFER_GDN_CHECKPOINT_ALIGNMENT if flashinfer_gdn(sc, compute_capability) else 1
