"""vLLM's KV cache groups, pool blocks and capacity from the caches a model registers (cache_specs.CacheSpec).

Mirrors vllm/v1/core/kv_cache_planning.py (0.33.0 and 0.34.0; checked against every recorded `layer_specs` of
tests/data/vllm_oracle_capacity/ by tests/planner/test_packing.py):
* `get_kv_cache_groups`: one group when every cache has one spec (`is_kv_cache_spec_uniform`) or one uniform
  type and block size (`UniformTypeKVCacheSpecs.from_specs`); else, for a block-outermost layout with pages of
  several sizes, `_get_packed_kv_cache_groups` (buckets of one uniform type; a bucket holding one cache of each
  page size per repeat is split into groups of `_approximate_gcd` repeats; state buckets (Mamba, circular
  buffers, unsplit sliding windows) split to fit the widest group); else `unify_kv_cache_spec_page_size` and
  `_get_kv_cache_groups_uniform_page_size` (equal-size groups, bucket i's caches [j::n] in group j).
* `_get_kv_cache_bytes_per_block`: the widest group's pages, each padded to its block-stride alignment
  (layer-outermost), or summed and rounded up to the lcm of every alignment (block-outermost).
* `get_kv_cache_configs`: num_blocks = KV memory // bytes per block; one request needs, per group, the most
  blocks any of its caches holds (`UniformTypeKVCacheSpecs.max_memory_usage_pages`); the null block is held
  back from the check (`_check_enough_kv_cache_memory`, `_estimate_max_model_len_from_groups`).
Pure functions.
"""
from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from kvplan.planner.cache_specs import CacheSpec, blocks_per_request

_FULL = ("FullAttentionSpec", "MLAAttentionSpec")
_SLIDING = ("SlidingWindowSpec", "SlidingWindowMLASpec")
_STATE_LIKE = ("MambaSpec", "CircularBufferSpec")

UNIFY_REFUSAL = ("page size is not divisible by the maximum page size and cannot be padded. Padding is only "
                 "supported for non-MLA attention layers.")
"""vLLM's NotImplementedError in unify_kv_cache_spec_page_size (after "Layer <name>: ")."""


class PackingRefused(Exception):
    """vLLM raises while grouping these caches: the cache it names and its message."""

    def __init__(self, cache: CacheSpec, message: str) -> None:
        super().__init__(message)
        self.cache, self.message = cache, message


def _uniform_with(first: CacheSpec, specs: Sequence[CacheSpec]) -> bool:
    """`first.is_uniform_with_collection(specs)`: the registered base class of `first` (FullAttentionSpec for
    MLA) for every cache; a sliding window (or chunk) of the same size; SlidingWindowMLASpec also the same
    replay policy (uniform_key)."""
    if first.spec == "SlidingWindowMLASpec":
        return all(s.spec == first.spec and s.sliding_window == first.sliding_window
                   and s.uniform_key == first.uniform_key for s in specs)
    if first.spec == "SlidingWindowSpec":  # SlidingWindowMLASpec is a SlidingWindowSpec
        return all(s.spec in _SLIDING and s.sliding_window == first.sliding_window for s in specs)
    if first.spec == "ChunkedLocalAttentionSpec":
        return all(s.spec == first.spec and s.sliding_window == first.sliding_window for s in specs)
    if first.spec in _FULL:
        return all(s.spec in _FULL for s in specs)
    return all(s.spec == first.spec for s in specs)


def is_uniform_type(specs: Sequence[CacheSpec]) -> bool:
    """UniformTypeKVCacheSpecs.is_uniform_type: one block size, one DCP sharding (attention caches shard, state
    caches do not) and one uniform type."""
    return (len({s.block_size for s in specs}) == 1 and len({s.spec == "MambaSpec" for s in specs}) == 1
            and _uniform_with(specs[0], specs))


def _same_spec(s: CacheSpec) -> tuple[object, ...]:
    """What KVCacheSpec equality compares (the name, layer and draft flag aside)."""
    return s.spec, s.block_size, s.page_size_bytes, s.stride_alignment, s.sliding_window, s.fixed_blocks, \
        s.uniform_key, s.identity


def approximate_gcd(values: Sequence[int], lower_bound: int | None = None) -> int:
    """_approximate_gcd: the d in [lower_bound, max(values)] rounding every value up to a multiple of d with the
    least padding (ties: the larger d)."""
    min_d = max(1, lower_bound or 1)
    if min_d > max(values):
        return min_d
    best_d, best_pad = min_d, None
    for d in range(min_d, max(values) + 1):
        pad = sum((d - x % d) % d for x in values)
        if best_pad is None or pad <= best_pad:
            best_d, best_pad = d, pad
    return best_d


@dataclass
class _Bucket:
    specs: list[CacheSpec]
    by_page: dict[int, list[CacheSpec]]
    balanced: bool

    @property
    def max_per_page(self) -> int:
        """get_max_layers_per_page_size: the most caches sharing one page size (the pattern's repeats)."""
        return Counter(s.page_size_bytes for s in self.specs).most_common(1)[0][1]


def _buckets(specs: Sequence[CacheSpec]) -> list[_Bucket]:
    """Greedy buckets of one uniform type, each cache in the first bucket it keeps uniform."""
    lists: list[list[CacheSpec]] = []
    for s in specs:
        for b in lists:
            if is_uniform_type([*b, s]):
                b.append(s)
                break
        else:
            lists.append([s])
    out = []
    for b in lists:
        by_page: dict[int, list[CacheSpec]] = {}
        for s in b:
            by_page.setdefault(s.page_size_bytes, []).append(s)
        out.append(_Bucket(b, by_page, len({len(v) for v in by_page.values()}) == 1))
    return out


def packed_groups(specs: Sequence[CacheSpec]) -> list[list[CacheSpec]]:
    """_get_packed_kv_cache_groups (block-outermost layouts with pages of several sizes)."""
    buckets = _buckets(specs)
    floor = max((b.max_per_page for b in buckets if b.balanced and len(b.by_page) > 1), default=0)
    repeats = approximate_gcd([b.max_per_page for b in buckets if b.balanced], floor) if floor else None

    def num_groups(b: _Bucket) -> int:
        return -(-b.max_per_page // repeats) if b.balanced and repeats is not None else 1

    def is_state(b: _Bucket) -> bool:
        return b.specs[0].spec in _STATE_LIKE or (repeats is None and b.specs[0].spec in _SLIDING)

    def widest(b: _Bucket, n: int) -> int:
        return sum(-(-len(names) // n) * page for page, names in b.by_page.items())

    anchor = max((widest(b, len(b.specs) if is_state(b) else num_groups(b)) for b in buckets), default=0)
    groups: list[list[CacheSpec]] = []
    for b in buckets:
        n = num_groups(b)
        if anchor and is_state(b):  # a state group holds as many states as the block already fits
            n = max(n, -(-len(b.specs) // max(anchor // b.specs[0].page_size_bytes, 1)))
        if n == 1:
            groups.append(b.specs)
            continue
        pattern = list(zip(*b.by_page.values(), strict=False))
        if len(pattern) < n:  # more groups than repeats: vLLM builds a group of no layers and raises
            raise PackingRefused(b.specs[0], f"StopIteration (grouping {len(b.specs)} {b.specs[0].spec} caches of "
                                 f"{len(b.by_page)} page sizes into {n} groups leaves a group empty)")
        groups.extend([s for rep in pattern[i::n] for s in rep] for i in range(n))
    return groups


def unify_pages(specs: Sequence[CacheSpec]) -> list[CacheSpec]:
    """unify_kv_cache_spec_page_size: every page becomes the largest; a smaller page whose size divides it by a
    larger block, a Mamba page or a non-MLA attention page by padding; else vLLM raises (PackingRefused)."""
    top = max(s.page_size_bytes for s in specs)
    out = []
    for s in specs:
        if s.page_size_bytes == top:
            pass
        elif s.spec != "MambaSpec" and top % s.page_size_bytes == 0:
            s = replace(s, block_size=s.block_size * (top // s.page_size_bytes), page_size_bytes=top)
        elif s.spec == "MLAAttentionSpec":
            raise PackingRefused(s, f"Layer {s.name}: {UNIFY_REFUSAL}")
        else:
            s = replace(s, page_size_bytes=top)
        out.append(s)
    return out


def uniform_page_groups(specs: Sequence[CacheSpec]) -> list[list[CacheSpec]]:
    """_get_kv_cache_groups_uniform_page_size: caches of one spec in a bucket, every bucket split into groups
    of the smallest bucket's size (the largest's when it is < 1.5x the smallest), bucket i's caches [j::n] in
    group j."""
    buckets: dict[tuple[object, ...], list[CacheSpec]] = {}
    for s in specs:
        buckets.setdefault(_same_spec(s), []).append(s)
    sizes = [len(v) for v in buckets.values()]
    size = max(sizes) if max(sizes) < min(sizes) * 1.5 else min(sizes)
    out: list[list[CacheSpec]] = []
    for layers in buckets.values():
        n = -(-len(layers) // size)
        out.extend(layers[j::n] for j in range(n))
    return out


def kv_cache_groups(specs: Sequence[CacheSpec], block_outermost: bool) -> list[list[CacheSpec]]:
    """get_kv_cache_groups (the hybrid manager on)."""
    if len({_same_spec(s) for s in specs}) == 1 or is_uniform_type(specs):
        return [list(specs)]
    if block_outermost and len({s.page_size_bytes for s in specs}) > 1:
        return packed_groups(specs)
    return uniform_page_groups(unify_pages(specs))


def bytes_per_block(groups: Sequence[Sequence[CacheSpec]], block_outermost: bool) -> int:
    """_get_kv_cache_bytes_per_block: the widest group's bytes of one block."""
    if not block_outermost:
        return max(sum(-(-s.page_size_bytes // s.stride_alignment) * s.stride_alignment for s in g)
                   for g in groups)
    widest = max(sum(s.page_size_bytes for s in g) for g in groups)
    align = math.lcm(*(s.stride_alignment for g in groups for s in g))
    return -(-widest // align) * align


@dataclass(frozen=True)
class Packed:
    """The groups and what a KV memory holds with them."""

    groups: list[list[CacheSpec]]
    bytes_per_block: int
    blocks_per_request: list[int]
    """Per group: the most blocks one of its caches holds for one request at max_model_len."""
    num_blocks: int | None
    max_concurrency: float | None
    max_model_len_fits: int | None
    """When one request at max_model_len does not fit: the longest length that does (0: not one token)."""


def pack(specs: Sequence[CacheSpec], block_outermost: bool, max_model_len: int, in_flight: int,
         budget: int | None, reserve_null: bool = True, retained: int = 0) -> Packed:
    """Groups, bytes per block, blocks per request, pool blocks and concurrency for a KV memory (`budget`)."""
    groups = kv_cache_groups(specs, block_outermost)
    bpb = bytes_per_block(groups, block_outermost)

    def blocks_at(length: int) -> list[int]:
        return [max(blocks_per_request(s, length, in_flight, retained) for s in g) for g in groups]

    per_group = blocks_at(max_model_len)
    num_blocks = budget // bpb if budget is not None else None
    conc = num_blocks / sum(per_group) if num_blocks is not None else None
    usable = budget - bpb if budget is not None and reserve_null else budget
    fits = None
    if usable is not None and bpb * sum(per_group) > usable:
        fits = longest_fitting(lambda n: bpb * sum(blocks_at(n)), usable, max_model_len)
    return Packed(groups, bpb, per_group, num_blocks, conc, fits)


def longest_fitting(needed: Callable[[int], int], available: int, upper: int) -> int:
    """_estimate_max_model_len_from_groups: the longest length in [1, upper] whose request fits, else 0."""
    if available <= 0 or needed(1) > available:
        return 0
    lo, hi, best = 1, upper, 1
    while lo <= hi:
        mid = (lo + hi) // 2
        if needed(mid) <= available:
            best, lo = mid, mid + 1
        else:
            hi = mid - 1
    return best
