"""Helpers shared by the emitters (and the policy engine): KV layers, index runs, global choice."""
from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kvplan.model.plan import LayerPlan, Plan
from kvplan.model.vocab import NO_KV_KINDS


def has_kv(lp: LayerPlan) -> bool:
    """The layer holds a KV cache governed by --kv-cache-dtype."""
    return lp.kind not in NO_KV_KINDS and lp.kv_cache_dtype is not None


@dataclass(frozen=True)
class Mapped:
    """A plan layer's dtype in the target engine's spelling."""

    index: int
    planned: str
    value: str
    exact: bool
    note: str = ""


def map_layers(plan: Plan, to_target: Callable[[str, str], tuple[str, bool, str]]) -> list[Mapped]:
    """Map every KV layer's kv_cache_dtype; `to_target(kv_cache_dtype, model_dtype) -> (value, exact, note)`.

    The layer's kv_cache_dtype string is the source of truth (what the engine acts on); 'auto'
    means the plan's model dtype.
    """
    out = []
    for lp in plan.layers:
        if has_kv(lp):
            kv = lp.kv_cache_dtype or "auto"
            v, exact, note = to_target(kv, plan.model.dtype)
            out.append(Mapped(lp.index, kv, v, exact, note))
    return out


def choose_global(mapped: Sequence[Mapped], preferred: str | None) -> str:
    """The value most layers need; ties go to the plan's own global dtype, then the earliest layer."""
    if not mapped:
        return preferred or "auto"
    counts = Counter(m.value for m in mapped)
    first: dict[str, int] = {}
    for m in mapped:
        first.setdefault(m.value, m.index)
    return min(counts, key=lambda v: (-counts[v], v != preferred, first[v]))


def ranges(items: Sequence[tuple[int, str]]) -> str:
    """[(0,'bf16'),(1,'bf16'),(5,'fp8')] -> '0-1:bf16,5:fp8' (runs of consecutive indices, same value)."""
    parts: list[str] = []
    run: list[tuple[int, str]] = []
    for idx, val in sorted(items):
        if run and (idx != run[-1][0] + 1 or val != run[-1][1]):
            parts.append(_run(run))
            run = []
        run.append((idx, val))
    if run:
        parts.append(_run(run))
    return ",".join(parts)


def _run(run: list[tuple[int, str]]) -> str:
    a, b = run[0][0], run[-1][0]
    return f"{a}:{run[0][1]}" if a == b else f"{a}-{b}:{run[0][1]}"


def compact(indices: Sequence[int] | set[int]) -> str:
    """[0,1,2,5,7,8] -> '0-2,5,7-8'."""
    xs = sorted(set(indices))
    out: list[str] = []
    i = 0
    while i < len(xs):
        j = i
        while j + 1 < len(xs) and xs[j + 1] == xs[j] + 1:
            j += 1
        out.append(str(xs[i]) if i == j else f"{xs[i]}-{xs[j]}")
        i = j + 1
    return ",".join(out)


def by_planned(mapped: Sequence[Mapped]) -> str:
    """'auto on layers 0,2,4; nvfp4 on layer 7' for the layers listed."""
    groups: dict[str, list[int]] = {}
    for m in mapped:
        groups.setdefault(m.planned, []).append(m.index)
    return "; ".join(f"{p} on layer{'s' if len(ix) > 1 else ''} {compact(ix)}"
                     for p, ix in sorted(groups.items(), key=lambda kv: min(kv[1])))
