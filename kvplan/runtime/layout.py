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

# kv_cache_dtype -> quant mode, for the strings the runtime executes (vLLM 0.33 get_kv_quant_mode).
_EXECUTED_DTYPES: dict[str, str] = {
    "auto": "none",
    "float16": "none",
    "bfloat16": "none",
    "float32": "none",  # not a vLLM --kv-cache-dtype, but "auto" on an fp32 model stores fp32
    "fp8": "fp8_per_tensor",
    "fp8_e4m3": "fp8_per_tensor",
    "fp8_e5m2": "fp8_per_tensor",
    "fp8_inc": "fp8_per_tensor",
    "int8_per_token_head": "int8_per_token_head",
    "fp8_per_token_head": "fp8_per_token_head",
    "int4_per_token_head": "int4_per_token_head",
}

#: Quant modes the Triton runtime executes (write + attention).
EXECUTED_QUANT_MODES: tuple[str, ...] = (
    "none", "fp8_per_tensor", "int8_per_token_head", "fp8_per_token_head", "int4_per_token_head",
)

_UNQUANTIZED_STORAGE = {"bfloat16": 2, "float16": 2, "float32": 4}
_DTYPE_ALIASES = {"bf16": "bfloat16", "half": "float16", "fp16": "float16", "float": "float32",
                  "fp32": "float32"}
# Layer kinds whose per-token KV is laid out like full attention.
_ATTENTION_KINDS = ("full_attention", "sliding_attention", "chunked_attention", "cross_attention")
_NO_KV_KINDS = ("linear_attention", "mamba", "encoder_only", "none")
#: Layer kinds the attention kernels execute (others may still be allocated and written).
ATTENTION_EXECUTED_KINDS: tuple[str, ...] = ("full_attention", "sliding_attention")


def _quant_mode_of(kv_cache_dtype: str) -> str:
    """Same resolution order as vLLM 0.33 `get_kv_quant_mode` (prefix rules included)."""
    d = kv_cache_dtype
    if d in ("int4_per_token_head", "int8_per_token_head", "fp8_per_token_head"):
        return d
    if d == "nvfp4_ds_mla":
        return "nvfp4_ds_mla"
    if d.startswith("nvfp4"):
        return "nvfp4"
    if d.startswith(("turboquant_", "octave_")) or d == "ultraquant_4bit":
        return d
    if d.startswith("fp8"):
        return "fp8_per_tensor"
    return "none"


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
        return self.quant_mode in ("int8_per_token_head", "fp8_per_token_head",
                                   "int4_per_token_head")

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
    def from_plan_layer(cls, layer: Mapping[str, Any]) -> LayerLayout:
        """Build the layout of one plan layer dict; ValueError for what the runtime cannot execute.

        Reads ``kv_cache_dtype``, ``num_kv_heads``, ``head_size`` (required), ``dtype``,
        ``quant_mode``, ``sliding_window``, ``kind``, ``index`` and checks ``bytes_per_token``
        when the plan states it, so a planner/runtime disagreement fails loudly. A typed
        ``LayerPlan`` (``kvplan.compile(...).layers[i]``) is accepted too.
        """
        if hasattr(layer, "model_dump"):
            layer = layer.model_dump(mode="json")
        where = f"layer {layer.get('index', '?')}"
        for key in ("kv_cache_dtype", "num_kv_heads", "head_size"):
            if key not in layer or layer[key] is None:
                raise ValueError(f"{where}: plan layer has no '{key}'")
        kv_cache_dtype = str(layer["kv_cache_dtype"])
        kind = str(layer.get("kind") or "full_attention")
        if kind in _NO_KV_KINDS:
            raise ValueError(f"{where}: kind '{kind}' holds no per-token KV cache; nothing to run")
        if kind == "mla":
            raise ValueError(
                f"{where}: MLA latent caches are not executed by the kvplan Triton runtime "
                "(only per-head K/V attention layers are); validate MLA layers with vLLM")
        if kind not in _ATTENTION_KINDS:
            raise ValueError(f"{where}: unknown layer kind '{kind}'")

        derived = _EXECUTED_DTYPES.get(kv_cache_dtype)
        plan_mode = layer.get("quant_mode")
        mode = derived if derived is not None else _quant_mode_of(kv_cache_dtype)
        if plan_mode is not None and str(plan_mode) != mode:
            raise ValueError(f"{where}: quant_mode '{plan_mode}' contradicts kv_cache_dtype "
                             f"'{kv_cache_dtype}' (vLLM 0.33 maps it to '{mode}')")
        if derived is None:
            raise ValueError(
                f"{where}: kv_cache_dtype '{kv_cache_dtype}' (quant_mode '{mode}') is not executed "
                f"by the kvplan Triton runtime; executed modes: {', '.join(EXECUTED_QUANT_MODES)}")
        if kv_cache_dtype == "fp8_ds_mla":  # pragma: no cover - caught above (not in the table)
            raise ValueError(f"{where}: fp8_ds_mla is an MLA-only layout")

        num_kv_heads = int(layer["num_kv_heads"])
        head_size = int(layer["head_size"])
        if num_kv_heads <= 0 or head_size <= 0:
            raise ValueError(f"{where}: num_kv_heads and head_size must be positive")
        head_size_v = layer.get("head_size_v")
        if head_size_v is not None and int(head_size_v) != head_size:
            raise ValueError(f"{where}: head_size_v {head_size_v} != head_size {head_size} "
                             "is not supported by the runtime")
        if head_size % 8 != 0 or head_size > 512:
            raise ValueError(f"{where}: head_size {head_size} unsupported (need a multiple of 8, "
                             "at most 512)")

        stored = layer.get("dtype")
        stored = _DTYPE_ALIASES.get(str(stored), str(stored)) if stored is not None else None
        fp8_format = None
        if mode == "none":
            if kv_cache_dtype in ("bfloat16", "float16", "float32"):
                if stored is not None and stored != kv_cache_dtype:
                    raise ValueError(f"{where}: dtype '{stored}' contradicts kv_cache_dtype "
                                     f"'{kv_cache_dtype}'")
                storage = kv_cache_dtype
            else:  # "auto": the model dtype, which the plan records in `dtype`
                if stored is None:
                    raise ValueError(f"{where}: kv_cache_dtype 'auto' needs the plan's 'dtype' "
                                     "(the model dtype) to know the stored element type")
                storage = stored
            if storage not in _UNQUANTIZED_STORAGE:
                raise ValueError(f"{where}: unquantized storage dtype '{storage}' unsupported "
                                 f"(one of {sorted(_UNQUANTIZED_STORAGE)})")
        elif mode == "int8_per_token_head":
            if stored not in (None, "int8", "uint8"):
                raise ValueError(f"{where}: dtype '{stored}' is not an int8 storage type")
            storage = "int8"
        elif mode == "int4_per_token_head":
            if stored not in (None, "uint8", "int8", "int4"):  # the plan names the logical type, int4
                raise ValueError(f"{where}: dtype '{stored}' is not a packed int4 storage type")
            if head_size < 32 or head_size & (head_size - 1):
                raise ValueError(f"{where}: int4_per_token_head needs a power-of-two head_size "
                                 ">= 32 (the runtime rotates heads with a Hadamard matrix)")
            storage = "uint8"
        else:  # fp8 per-tensor / per-token-head
            fp8_format = "e5m2" if kv_cache_dtype == "fp8_e5m2" else "e4m3fn"
            ok = {None, "uint8", "float8_e4m3fn", "float8_e5m2"}
            if stored not in ok:
                raise ValueError(f"{where}: dtype '{stored}' is not an fp8 storage type")
            if stored == "float8_e5m2":
                fp8_format = "e5m2"
            storage = "uint8"

        sliding_window = layer.get("sliding_window")
        if sliding_window is not None:
            sliding_window = int(sliding_window)
            if sliding_window <= 0:
                raise ValueError(f"{where}: sliding_window must be positive or null")

        out = cls(kv_cache_dtype=kv_cache_dtype, quant_mode=mode, num_kv_heads=num_kv_heads,
                  head_size=head_size, storage_dtype=storage, fp8_format=fp8_format,
                  sliding_window=sliding_window, kind=kind,
                  index=None if layer.get("index") is None else int(layer["index"]))
        want = layer.get("bytes_per_token")
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
