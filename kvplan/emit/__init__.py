"""Plan -> engine launch flags and config files (vLLM 0.33, SGLang, TensorRT-LLM).

    >>> from kvplan.api import compile
    >>> from kvplan.emit import emit
    >>> plan = compile("examples/gpt-oss-20b/config.json",
    ...                "--kv-cache-dtype fp8 --kv-cache-dtype-skip-layers 0 2 4 6 8 10 12 14 16 18 20 22")
    >>> emit(plan, "vllm").command
    '--kv-cache-dtype fp8 --kv-cache-dtype-skip-layers sliding_window'
"""
from __future__ import annotations

from kvplan.emit.codes import EMIT_RULES
from kvplan.emit.load import load_plan, looks_like_plan, plan_from_data
from kvplan.emit.model import EMIT_SCHEMA_VERSION, TARGETS, EmitResult, LayerDifference
from kvplan.emit.render import FORMATS, render
from kvplan.errors import KvplanInputError
from kvplan.model.plan import Plan

__all__ = ["EMIT_RULES", "EMIT_SCHEMA_VERSION", "FORMATS", "TARGETS", "EmitResult", "LayerDifference",
           "emit", "load_plan", "looks_like_plan", "plan_from_data", "render"]


def emit(plan: Plan, to: str = "vllm", *, per_layer: bool = False) -> EmitResult:
    """Realise `plan` in engine `to` (vllm | sglang | trtllm).

    `per_layer=True` lets SGLang / TensorRT-LLM use per-layer syntax from unreleased pull requests
    (a KV983 finding says so); vLLM 0.33 has none, so it is ignored there.
    """
    if to == "vllm":
        from kvplan.emit.vllm import emit_vllm
        return emit_vllm(plan, per_layer=per_layer)
    if to == "sglang":
        from kvplan.emit.sglang import emit_sglang
        return emit_sglang(plan, per_layer=per_layer)
    if to == "trtllm":
        from kvplan.emit.trtllm import emit_trtllm
        return emit_trtllm(plan, per_layer=per_layer)
    raise KvplanInputError(f"unknown engine {to!r} for emit.", "Use --to vllm, sglang or trtllm.")
