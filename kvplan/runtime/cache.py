"""Allocating a layer's paged KV cache and the views the kernels address it through.

One tensor holds the whole layer cache, so ``cache.nbytes == layout.bytes_per_token *
num_blocks * block_size`` exactly (the plan's number; no hidden padding or side tables).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import torch

from kvplan.runtime.layout import LayerLayout

_TORCH_DTYPES = {
    "bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32,
    "int8": torch.int8, "uint8": torch.uint8,
}


@dataclass
class PagedKVCache:
    """A layer's paged KV cache: the storage tensor plus what is needed to interpret it.

    ``k_scale``/``v_scale`` are the static per-tensor scales of FP8 per-tensor caches (vLLM's
    ``_k_scale``/``_v_scale``); per-token-head caches keep their scales inline in ``data``.
    """

    layout: LayerLayout
    num_blocks: int
    block_size: int
    data: torch.Tensor
    k_scale: float = 1.0
    v_scale: float = 1.0

    @property
    def nbytes(self) -> int:
        return self.data.numel() * self.data.element_size()

    @property
    def num_slots(self) -> int:
        return self.num_blocks * self.block_size

    @property
    def device(self) -> torch.device:
        return self.data.device

    # Views in the "logical" shape [num_blocks, block_size, num_kv_heads, ...] (strided, no copy).
    def key_data(self) -> torch.Tensor:
        """K data: [num_blocks, block_size, H, D] (INT4: D//2 packed bytes), storage dtype."""
        return self._data_view(0)

    def value_data(self) -> torch.Tensor:
        """V data: [num_blocks, block_size, H, D] (INT4: D//2 packed bytes), storage dtype."""
        return self._data_view(1)

    def key_scales(self) -> torch.Tensor:
        """Per-token-head K scales as an fp32 view [num_blocks, block_size, H] into ``data``."""
        return self._scale_view(0)

    def value_scales(self) -> torch.Tensor:
        """Per-token-head V scales as an fp32 view [num_blocks, block_size, H] into ``data``."""
        return self._scale_view(1)

    def _data_view(self, side: int) -> torch.Tensor:
        lay = self.layout
        if not lay.is_per_token_head:
            return self.data[side]
        db = lay.data_bytes_per_head
        start = 0 if side == 0 else db + 4
        return self.data[..., start:start + db].transpose(1, 2)

    def _scale_view(self, side: int) -> torch.Tensor:
        lay = self.layout
        if not lay.is_per_token_head:
            raise ValueError(f"{lay.quant_mode} cache has no per-token-head scales")
        db = lay.data_bytes_per_head
        f32 = self.data.view(torch.uint8).view(torch.float32)
        idx = db // 4 if side == 0 else (2 * db + 4) // 4
        return f32[..., idx].transpose(1, 2)


def torch_storage_dtype(layout: LayerLayout) -> torch.dtype:
    """torch dtype of the cache tensor for a layout."""
    return _TORCH_DTYPES[layout.storage_dtype]


def allocate_kv_cache(layout: LayerLayout, num_blocks: int, block_size: int,
                      device: str | torch.device = "cuda", *, k_scale: float = 1.0,
                      v_scale: float = 1.0) -> PagedKVCache:
    """Allocate a zeroed cache for ``num_blocks`` pages of ``block_size`` tokens.

    Per-token-head scales start at 1.0 like vLLM's ``_ensure_scale_caches`` so unwritten
    (padding) slots dequantize to zeros, never to NaN.
    """
    if num_blocks <= 0 or block_size <= 0:
        raise ValueError("num_blocks and block_size must be positive")
    if layout.quant_mode == "fp8_per_tensor" and not (k_scale > 0 and v_scale > 0):
        raise ValueError("fp8 per-tensor scales must be positive")
    shape = layout.cache_shape(num_blocks, block_size)
    data = torch.zeros(shape, dtype=torch_storage_dtype(layout), device=device)
    cache = PagedKVCache(layout=layout, num_blocks=num_blocks, block_size=block_size, data=data,
                         k_scale=float(k_scale), v_scale=float(v_scale))
    if layout.is_per_token_head:
        cache.key_scales().fill_(1.0)
        cache.value_scales().fill_(1.0)
    assert cache.nbytes == layout.cache_nbytes(num_blocks, block_size)
    return cache


def allocate_for_plan_layer(layer: dict, num_blocks: int, block_size: int,
                            device: str | torch.device = "cuda", **scales: float) -> PagedKVCache:
    """`LayerLayout.from_plan_layer` + `allocate_kv_cache` in one call (what validate uses)."""
    return allocate_kv_cache(LayerLayout.from_plan_layer(layer), num_blocks, block_size, device,
                             **scales)


@lru_cache(maxsize=16)
def _hadamard_cpu(head_size: int) -> torch.Tensor:
    h = torch.ones(1, 1, dtype=torch.float64)
    while h.shape[0] < head_size:
        h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)], 0)
    if h.shape[0] != head_size:
        raise ValueError(f"INT4 rotation needs a power-of-two head_size, got {head_size}")
    return (h / head_size ** 0.5).to(torch.float32)


def hadamard(head_size: int, device: str | torch.device) -> torch.Tensor:
    """Orthonormal, symmetric Sylvester-Hadamard matrix used to rotate INT4 K/V (and q, o).

    Rotation spreads outlier channels over all channels before 4-bit rounding (vLLM uses a
    randomized Hadamard for the same reason); since H = H^T = H^-1, q.k and P.V are unchanged
    when q is rotated too and the output is rotated back. One tensor per (size, device), shared
    by every caller (read it, never write it): a GPU call then pays no host-to-device copy.
    """
    return _hadamard_on(head_size, torch.device(device))


@lru_cache(maxsize=64)
def _hadamard_on(head_size: int, device: torch.device) -> torch.Tensor:
    return _hadamard_cpu(head_size).to(device)


def hadamard_scale(head_size: int) -> float:
    """The orthonormal Hadamard matrix's entry size, ``head_size ** -0.5``."""
    return 1.0 / math.sqrt(head_size)


def hadamard_rotate(x: torch.Tensor) -> torch.Tensor:
    """``x`` [..., D] as fp32 times `hadamard` (D, x's device), computed the way the INT4 write
    kernel computes it (`_common.hadamard_rows`: log2(D) butterflies pairing the top index bit
    and moving it to the bottom, then one multiply by `hadamard_scale`), so the reference and
    the kernel quantize the same fp32 values bit for bit."""
    d = x.shape[-1]
    y = x.float().reshape(-1, d)
    for _ in range(d.bit_length() - 1):
        a, b = y.view(-1, 2, d // 2).unbind(1)
        y = torch.stack((a + b, a - b), dim=-1).reshape(-1, d)
    return (y * hadamard_scale(d)).view(x.shape)
