"""Golden plans: a compact, reviewable projection of a Plan (one line per layer)."""
from __future__ import annotations

from typing import Any

from kvplan.model.plan import Plan


def compact(plan: Plan) -> dict[str, Any]:
    layers = []
    for lp in plan.layers:
        layers.append(" ".join(str(x) for x in (
            lp.index, lp.kind, lp.sliding_window or lp.attention_chunk_size or "-", f"{lp.num_kv_heads}x{lp.head_size}",
            lp.kv_cache_dtype or "-", lp.dtype or "-", lp.quant_mode.value, lp.scale_source.value,
            lp.bytes_per_token, "skip" if lp.skipped else "-", ",".join(lp.decided_by) or "-"))
            + (f" state={lp.state_bytes}" if lp.state_bytes is not None else ""))
    t = plan.totals
    lay = t.kv_cache_layout
    return {"model": plan.model.model_dump(mode="json", exclude={"source"}), "kv_cache_dtype": plan.kv_cache_dtype,
            "totals": {"bytes_per_token": t.bytes_per_token, "bytes_per_token_bf16": t.bytes_per_token_bf16,
                       "bytes_per_request": t.bytes_per_request, "kv_layers": t.kv_layers,
                       "quantized_layers": t.quantized_layers,
                       "kv_cache_layout": None if lay is None else
                       f"block {lay.block_size} page {lay.page_size_bytes} per-block {lay.bytes_per_block} groups "
                       + " ".join(f"{g.kind}:{len(g.layers)}x{g.blocks_per_request}" for g in lay.groups)},
            "layers": layers,
            "findings": [f"{f.severity.value} {f.code} {f.name} layers={','.join(map(str, f.layers))}"
                         for f in plan.findings]}
