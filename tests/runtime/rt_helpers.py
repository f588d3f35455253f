"""Builders shared by the runtime tests: random paged caches with realistic block tables."""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from kvplan.runtime.cache import PagedKVCache, allocate_kv_cache
from kvplan.runtime.layout import LayerLayout
from kvplan.runtime.reference import reference_write_kv_cache
from kvplan.runtime.write import write_kv_cache

ALL_KV_CACHE_DTYPES = ("bfloat16", "fp8", "fp8_e5m2", "int8_per_token_head",
                       "fp8_per_token_head", "int4_per_token_head")


def random_kv(n: int, hkv: int, d: int, gen: torch.Generator, device: str,
              dtype: torch.dtype = torch.bfloat16) -> tuple[torch.Tensor, torch.Tensor]:
    """Fresh random K/V (never zeros); K has a few outlier channels (x20) like real keys."""
    k = torch.randn(n, hkv, d, generator=gen, device=device, dtype=torch.float32)
    v = torch.randn(n, hkv, d, generator=gen, device=device, dtype=torch.float32)
    k[:, :, torch.randperm(d, generator=gen, device=device)[: max(1, d // 32)]] *= 20
    return k.to(dtype), v.to(dtype)


@dataclass
class PagedBatch:
    cache: PagedKVCache
    block_tables: torch.Tensor
    seq_lens: torch.Tensor
    key: torch.Tensor  # [total_tokens, Hkv, D] written tokens, sequence-major
    value: torch.Tensor
    slot_mapping: torch.Tensor


def build_paged_batch(layout: LayerLayout, seq_lens: list[int], block_size: int, device: str,
                      gen: torch.Generator, *, shared_prefix_blocks: int = 0,
                      model_dtype: torch.dtype = torch.bfloat16, use_reference_write: bool = False,
                      poison_outside_window: bool = False, k_scale: float = 1.0,
                      v_scale: float = 1.0) -> PagedBatch:
    """Allocate a cache, give each sequence randomly placed blocks and write random K/V.

    Sequences 0 and 1 share their first ``shared_prefix_blocks`` physical blocks (a shared
    prompt prefix, written once). Unused block-table entries point at a poisoned block.
    With ``poison_outside_window``, pages wholly before the sliding window are re-pointed at
    the poisoned block too, so any read of them shows up as NaN / huge values.
    """
    b = len(seq_lens)
    blocks_per_seq = [math.ceil(n / block_size) for n in seq_lens]
    max_blocks = max(blocks_per_seq) + 1  # one spare column of padding
    num_blocks = sum(blocks_per_seq) + 2
    cache = allocate_kv_cache(layout, num_blocks, block_size, device, k_scale=k_scale,
                              v_scale=v_scale)
    poison_block = num_blocks - 1
    _poison_block(cache, poison_block)
    free = torch.randperm(num_blocks - 1, generator=gen, device=device).tolist()
    tables = torch.full((b, max_blocks), poison_block, dtype=torch.int32, device=device)
    for s in range(b):
        for i in range(blocks_per_seq[s]):
            if s == 1 and i < shared_prefix_blocks and i < blocks_per_seq[0]:
                tables[s, i] = tables[0, i]
            else:
                tables[s, i] = free.pop()
    keys, values, slots = [], [], []
    for s, n in enumerate(seq_lens):
        k, v = random_kv(n, layout.num_kv_heads, layout.head_size, gen, device, model_dtype)
        j = torch.arange(n, device=device)
        slot = tables[s, j // block_size].long() * block_size + j % block_size
        if s == 1 and shared_prefix_blocks:
            shared = min(shared_prefix_blocks * block_size, n, seq_lens[0])
            k[:shared], v[:shared] = keys[0][:shared], values[0][:shared]
            slot[:shared] = -1  # already written by sequence 0
        keys.append(k)
        values.append(v)
        slots.append(slot)
    key, value, slot_mapping = torch.cat(keys), torch.cat(values), torch.cat(slots)
    writer = reference_write_kv_cache if use_reference_write else write_kv_cache
    writer(cache, key, value, slot_mapping)
    if poison_outside_window and layout.sliding_window is not None:
        for s, n in enumerate(seq_lens):
            first_visible = max(0, n - layout.sliding_window)  # decode query at n - 1
            for i in range(first_visible // block_size):
                tables[s, i] = poison_block
    return PagedBatch(cache, tables, torch.tensor(seq_lens, dtype=torch.int32, device=device),
                      key, value, slot_mapping)


def _poison_block(cache: PagedKVCache, block: int) -> None:
    """Fill one block with values that wreck any output that reads them."""
    lay = cache.layout
    if lay.quant_mode == "none":
        cache.key_data()[block].fill_(float("nan"))
        cache.value_data()[block].fill_(float("nan"))
    elif lay.is_per_token_head:
        cache.key_data()[block].view(torch.uint8).fill_(0x7E)
        cache.value_data()[block].view(torch.uint8).fill_(0x7E)
        cache.key_scales()[block].fill_(float("nan"))
        cache.value_scales()[block].fill_(float("nan"))
    else:
        cache.key_data()[block].fill_(0x7F)  # e4m3fn NaN / e5m2 NaN
        cache.value_data()[block].fill_(0x7F)


def rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    return float((out.float() - ref.float()).norm() / ref.float().norm())


def bench_row_validator(kind: str):
    """A JSON Schema validator for one row kind of the bench result (decode, prefill, write),
    from the published schemas/bench-result.schema.json; the calling test is skipped where
    jsonschema is not installed (GPU images)."""
    import json
    from pathlib import Path

    import pytest
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((Path(__file__).resolve().parents[2] / "schemas"
                         / "bench-result.schema.json").read_text())
    name = {"decode": "DecodeRow", "prefill": "PrefillRow", "write": "WriteRow"}[kind]
    return jsonschema.Draft202012Validator({**schema["$defs"][name], "$defs": schema["$defs"]})
