"""Per-layer paged KV-cache layouts, as vLLM 0.33 lays them out.

Pure Python on purpose: the planner and `kvplan validate` can build a :class:`LayerLayout`
and compute exact byte sizes without importing torch or triton. Allocation lives in
:mod:`kvplan.runtime.cache`.

Two physical layouts are used (both documented in BENCHMARKS.md and the README of the
runtime):

* ``flash`` (unquantized and FP8 per-tensor caches): vLLM's FlashAttention layout
  ``[2, num_blocks, block_size, num_kv_heads, head_size]`` of the storage dtype; K is
  ``cache[0]``, V is ``cache[1]``.
* ``per_token_head`` (INT8/FP8/INT4 per-token-head): vLLM 0.33's
  ``TritonAttentionBackend.customize_spec`` packing, a byte page
  ``[num_blocks, num_kv_heads, block_size, slot_bytes]`` where each (block, head, slot) holds
  ``[K data | K scale fp32 | V data | V scale fp32]`` with ``slot_bytes = 2*D + 8``
  (INT4: ``D + 8``, two nibbles per byte).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# Plain-Python vocabulary (no pydantic): the runtime imports it on machines without the planner's deps.
from kvplan.model.vocab import (
    MODEL_DTYPE_ALIASES,
    NO_KV_KINDS,
    PER_HEAD_KV_KINDS,
    SHORT_DTYPE_NAMES,
    VLLM_033_KV_CACHE_DTYPES,
    QuantMode,
    quant_mode_of,
)

#: Quant modes the Triton runtime executes (write + attention).
EXECUTED_QUANT_MODES: tuple[str, ...] = (
    QuantMode.none.value, QuantMode.fp8_per_tensor.value, QuantMode.int8_per_token_head.value,
    QuantMode.fp8_per_token_head.value, QuantMode.int4_per_token_head.value,
)
# The kv_cache_dtype strings it executes: vLLM's whose mode it runs (fp8_ds_mla is an MLA-only layout),
# and float32, which is no --kv-cache-dtype but what "auto" stores for an fp32 model.
_EXECUTED_DTYPES = frozenset(d for d in (*VLLM_033_KV_CACHE_DTYPES, "float32")
                             if quant_mode_of(d).value in EXECUTED_QUANT_MODES and d != "fp8_ds_mla")
_UNQUANTIZED_STORAGE = {"bfloat16": 2, "float16": 2, "float32": 4}
_DTYPE_ALIASES = {**MODEL_DTYPE_ALIASES, **SHORT_DTYPE_NAMES}
#: Layer kinds the attention kernels execute (others may still be allocated and written).
ATTENTION_EXECUTED_KINDS: tuple[str, ...] = ("full_attention", "sliding_attention")
# The plan layer fields the runtime reads (a dict, a LayerPlan, or any object with these attributes).
_LAYER_FIELDS = ("index", "kind", "kv_cache_dtype", "quant_mode", "dtype", "num_kv_heads", "head_size",
                 "head_size_v", "sliding_window", "bytes_per_token")


@dataclass(frozen=True)
class LayerLayout:
    """What the runtime needs to know to allocate, write and read one layer's paged KV cache.

    Build it from a plan layer with :meth:`from_plan_layer`; sizes are per tensor-parallel rank.
    """

    kv_cache_dtype: str
    quant_mode: str
    num_kv_heads: int
    head_size: int
    storage_dtype: str  # torch dtype name of the stored elements: bfloat16/float16/float32/uint8/int8
    fp8_format: str | None = None  # "e4m3fn" / "e5m2" for FP8 modes, else None
    sliding_window: int | None = None
    kind: str = "full_attention"
    index: int | None = None

    # ----------------------------------------------------------------------------- derived sizes
    @property
    def is_per_token_head(self) -> bool:
        return QuantMode(self.quant_mode).is_per_token_head

    @property
    def physical_layout(self) -> str:
        """``flash`` ([2, blocks, block_size, H, D]) or ``per_token_head`` (inline-scale byte page)."""
        return "per_token_head" if self.is_per_token_head else "flash"

    @property
    def element_size(self) -> int:
        """Bytes per stored element (INT4 packs two elements per byte; reported as 1)."""
        if self.quant_mode == "none":
            return _UNQUANTIZED_STORAGE[self.storage_dtype]
        return 1

    @property
    def data_bytes_per_head(self) -> int:
        """Bytes of K (or V) data per (token, kv head), scales excluded."""
        if self.quant_mode == "int4_per_token_head":
            return self.head_size // 2
        return self.head_size * self.element_size

    @property
    def slot_bytes(self) -> int:
        """Bytes per (token, kv head) for K and V together, inline scales included."""
        if self.is_per_token_head:
            return 2 * self.data_bytes_per_head + 8
        return 2 * self.data_bytes_per_head

    @property
    def bytes_per_token(self) -> int:
        """vLLM 0.33 page bytes per token (K+V, scales included) — equals the plan's field."""
        return self.num_kv_heads * self.slot_bytes

    def cache_nbytes(self, num_blocks: int, block_size: int) -> int:
        """Exact bytes of a cache of ``num_blocks`` pages of ``block_size`` tokens (no extra padding)."""
        return self.bytes_per_token * num_blocks * block_size

    def cache_shape(self, num_blocks: int, block_size: int) -> tuple[int, ...]:
        """Shape of the single tensor that holds the whole layer cache."""
        if self.is_per_token_head:
            return (num_blocks, self.num_kv_heads, block_size, self.slot_bytes)
        return (2, num_blocks, block_size, self.num_kv_heads, self.head_size)

    # ----------------------------------------------------------------------------- construction
    @classmethod
    def from_plan_layer(cls, layer: Any) -> LayerLayout:
        """Build the layout of one plan layer; ValueError for what the runtime cannot execute.

        `layer` is a plan layer dict, a typed ``LayerPlan`` (``kvplan.compile(...).layers[i]``) or
        any object with its attributes. Reads ``kv_cache_dtype``, ``num_kv_heads``, ``head_size``
        (required), ``dtype``, ``quant_mode``, ``sliding_window``, ``kind``, ``index`` and checks
        ``bytes_per_token`` when the plan states it, so a planner/runtime disagreement fails loudly.
        """
        f = _layer_fields(layer)
        where = f"layer {f.get('index', '?')}"
        for key in ("kv_cache_dtype", "num_kv_heads", "head_size"):
            if f.get(key) is None:
                raise ValueError(f"{where}: plan layer has no '{key}'")
        kv_cache_dtype = str(f["kv_cache_dtype"])
        kind = str(f.get("kind") or "full_attention")
        _check_kind(where, kind)
        mode = _executed_mode(where, kv_cache_dtype, f.get("quant_mode"))
        num_kv_heads, head_size = _geometry(where, f)
        storage, fp8_format = _storage(where, mode, kv_cache_dtype, f.get("dtype"), head_size)
        out = cls(kv_cache_dtype=kv_cache_dtype, quant_mode=mode, num_kv_heads=num_kv_heads,
                  head_size=head_size, storage_dtype=storage, fp8_format=fp8_format,
                  sliding_window=_sliding_window(where, f.get("sliding_window")), kind=kind,
                  index=None if f.get("index") is None else int(f["index"]))
        want = f.get("bytes_per_token")
        if want is not None and int(want) != out.bytes_per_token:
            raise ValueError(f"{where}: plan bytes_per_token {want} != runtime layout "
                             f"{out.bytes_per_token} for kv_cache_dtype '{kv_cache_dtype}', "
                             f"{num_kv_heads} kv heads x head_size {head_size}")
        return out

    @classmethod
    def simple(cls, kv_cache_dtype: str, num_kv_heads: int, head_size: int,
               model_dtype: str = "bfloat16", sliding_window: int | None = None) -> LayerLayout:
        """Convenience constructor for tests and benchmarks (no plan at hand)."""
        return cls.from_plan_layer({
            "kv_cache_dtype": kv_cache_dtype, "num_kv_heads": num_kv_heads,
            "head_size": head_size, "sliding_window": sliding_window,
            "dtype": model_dtype if kv_cache_dtype == "auto" else None,
            "kind": "sliding_attention" if sliding_window else "full_attention",
        })


# ----------------------------------------------------------------------------- reading a plan layer
def _layer_fields(layer: Any) -> Mapping[str, Any]:
    """The plan layer's fields, enum values as their strings (a LayerPlan's quant_mode is a QuantMode)."""
    if isinstance(layer, Mapping):
        fields: Mapping[str, Any] = layer
    else:
        fields = {k: getattr(layer, k) for k in _LAYER_FIELDS if hasattr(layer, k)}
    return {k: getattr(v, "value", v) for k, v in fields.items()}


def _check_kind(where: str, kind: str) -> None:
    if kind in NO_KV_KINDS:
        raise ValueError(f"{where}: kind '{kind}' holds no per-token KV cache; nothing to run")
    if kind == "mla":
        raise ValueError(
            f"{where}: MLA latent caches are not executed by the kvplan Triton runtime "
            "(only per-head K/V attention layers are); validate MLA layers with vLLM")
    if kind not in PER_HEAD_KV_KINDS:
        raise ValueError(f"{where}: unknown layer kind '{kind}'")


def _executed_mode(where: str, kv_cache_dtype: str, plan_mode: Any) -> str:
    """The layer's quant mode as vLLM 0.33 `get_kv_quant_mode` derives it, if the runtime executes it."""
    try:
        mode = quant_mode_of(kv_cache_dtype).value
    except ValueError:  # a family prefix with a member vLLM 0.33 does not have (turboquant_x)
        mode = kv_cache_dtype
    if plan_mode is not None and str(plan_mode) != mode:
        raise ValueError(f"{where}: quant_mode '{plan_mode}' contradicts kv_cache_dtype "
                         f"'{kv_cache_dtype}' (vLLM 0.33 maps it to '{mode}')")
    if kv_cache_dtype not in _EXECUTED_DTYPES:
        raise ValueError(
            f"{where}: kv_cache_dtype '{kv_cache_dtype}' (quant_mode '{mode}') is not executed "
            f"by the kvplan Triton runtime; executed modes: {', '.join(EXECUTED_QUANT_MODES)}")
    return mode


def _geometry(where: str, f: Mapping[str, Any]) -> tuple[int, int]:
    num_kv_heads = int(f["num_kv_heads"])
    head_size = int(f["head_size"])
    if num_kv_heads <= 0 or head_size <= 0:
        raise ValueError(f"{where}: num_kv_heads and head_size must be positive")
    head_size_v = f.get("head_size_v")
    if head_size_v is not None and int(head_size_v) != head_size:
        raise ValueError(f"{where}: head_size_v {head_size_v} != head_size {head_size} "
                         "is not supported by the runtime")
    if head_size % 8 != 0 or head_size > 512:
        raise ValueError(f"{where}: head_size {head_size} unsupported (need a multiple of 8, "
                         "at most 512)")
    return num_kv_heads, head_size


def _storage(where: str, mode: str, kv_cache_dtype: str, dtype: Any, head_size: int) -> tuple[str, str | None]:
    """(storage dtype, fp8 format) of the stored elements, checked against the plan's `dtype`."""
    stored = _DTYPE_ALIASES.get(str(dtype), str(dtype)) if dtype is not None else None
    if mode == QuantMode.none.value:
        return _unquantized_storage(where, kv_cache_dtype, stored), None
    if mode == QuantMode.int8_per_token_head.value:
        if stored not in (None, "int8", "uint8"):
            raise ValueError(f"{where}: dtype '{stored}' is not an int8 storage type")
        return "int8", None
    if mode == QuantMode.int4_per_token_head.value:
        if stored not in (None, "uint8", "int8", "int4"):  # the plan names the logical type, int4
            raise ValueError(f"{where}: dtype '{stored}' is not a packed int4 storage type")
        if head_size < 32 or head_size & (head_size - 1):
            raise ValueError(f"{where}: int4_per_token_head needs a power-of-two head_size "
                             ">= 32 (the runtime rotates heads with a Hadamard matrix)")
        return "uint8", None
    # fp8 per-tensor / per-token-head
    if stored not in (None, "uint8", "float8_e4m3fn", "float8_e5m2"):
        raise ValueError(f"{where}: dtype '{stored}' is not an fp8 storage type")
    e5m2 = kv_cache_dtype == "fp8_e5m2" or stored == "float8_e5m2"
    return "uint8", "e5m2" if e5m2 else "e4m3fn"


def _unquantized_storage(where: str, kv_cache_dtype: str, stored: str | None) -> str:
    if kv_cache_dtype in _UNQUANTIZED_STORAGE:
        if stored is not None and stored != kv_cache_dtype:
            raise ValueError(f"{where}: dtype '{stored}' contradicts kv_cache_dtype '{kv_cache_dtype}'")
        storage = kv_cache_dtype
    else:  # "auto": the model dtype, which the plan records in `dtype`
        if stored is None:
            raise ValueError(f"{where}: kv_cache_dtype 'auto' needs the plan's 'dtype' "
                             "(the model dtype) to know the stored element type")
        storage = stored
    if storage not in _UNQUANTIZED_STORAGE:
        raise ValueError(f"{where}: unquantized storage dtype '{storage}' unsupported "
                         f"(one of {sorted(_UNQUANTIZED_STORAGE)})")
    return storage


def _sliding_window(where: str, value: Any) -> int | None:
    if value is None:
        return None
    window = int(value)
    if window <= 0:
        raise ValueError(f"{where}: sliding_window must be positive or null")
    return window
