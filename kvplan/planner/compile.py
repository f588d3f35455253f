"""The engine: apply decision rules in precedence order, size memory, run checks. Pure functions."""
from __future__ import annotations

import math
import re
from collections.abc import Iterable
from types import MappingProxyType
from typing import Any

from kvplan import __version__
from kvplan.backends.capabilities import EngineVersion
from kvplan.errors import KvplanInputError
from kvplan.model.arch import ModelArch
from kvplan.model.flags import ServingFlags
from kvplan.model.plan import (
    Decision,
    EngineRef,
    Finding,
    GpuRef,
    HubSource,
    LayerPlan,
    ModelRef,
    Plan,
    Totals,
)
from kvplan.model.quant import QuantMetadata
from kvplan.model.vocab import NO_KV_KINDS, QuantMode, ScaleSource, Severity
from kvplan.planner.precedence import GLOBAL_ORDER, LAYER_ORDER
from kvplan.rules.base import PLANNER_SCOPES, Emit, Rule, rules_in
from kvplan.rules.context import ENGINE_NAME, ENGINE_VERSION, GpuFacts, LayerState, RuleContext

DEFAULT_BLOCK_SIZE = 16
DEFAULT_MAX_NUM_BATCHED_TOKENS = 8192  # vLLM's default for online serving on datacenter GPUs
# Memory vLLM keeps outside weights and KV (activations at profile time, CUDA graphs, NCCL).
RUNTIME_OVERHEAD_BYTES = int(2.0 * 2**30)


def _rules() -> dict[str, Rule]:
    return {r.code: r for r in rules_in(*PLANNER_SCOPES)}  # lint, emit and policy rules run elsewhere


STRICT_CODES = ("KV604",)


def apply_strict(plan: Plan) -> Plan:
    """`--strict`: an unverified architecture or unused geometry key (KV604) becomes an error."""
    if not any(f.code in STRICT_CODES for f in plan.findings):
        return plan
    fs = [f.model_copy(update={"severity": Severity.error}) if f.code in STRICT_CODES else f for f in plan.findings]
    fs.sort(key=lambda f: (-f.severity.rank, f.code, f.layers[:1], f.message))
    return plan.model_copy(update={"findings": fs})


def _refuse_unsupported(arch: ModelArch, engine: EngineVersion) -> None:
    """vLLM's registry refuses the architecture in the release modelled: one input error, its reason."""
    reason = arch.refused_reason
    if not reason or engine.engine != "vllm":
        return
    m = re.search(r"until v(\d+)\.(\d+)\.(\d+)", reason)
    if m and engine.version is not None and tuple(engine.version) <= tuple(int(x) for x in m.groups()):
        return  # the modelled release still builds it
    raise KvplanInputError(f"vLLM {engine.version_str or ''} refuses architecture {arch.architecture}: {reason}".replace("  ", " "),
                           "Serve it with the vLLM release that still supports it (--engine vllm==X) or use a "
                           "supported architecture.")


def compile_plan(arch: ModelArch, quant: QuantMetadata, flags: ServingFlags,
                 gpu: GpuFacts | None = None, *, source: str | None = None,
                 weight_bytes: int | None = None, kv_budget_bytes: int | None = None,
                 extra_checks: Iterable[Rule] = (), engine: EngineVersion | None = None,
                 hub: HubSource | None = None) -> Plan:
    """Compile the per-layer KV plan. No I/O, no printing; deterministic for equal inputs.

    `hub` records where a Hugging Face id's files came from (plan.model.hub).

    `engine` is the release modelled (default vllm==0.33.0; see `kvplan.backends.engines`).
    """
    rules = _rules()
    engine = engine or EngineVersion()
    _refuse_unsupported(arch, engine)
    ctx = RuleContext(arch=arch, quant=quant, flags=flags, gpu=gpu, weight_bytes=weight_bytes,
                      engine=engine, engine_version=engine.version_str or ENGINE_VERSION)
    globals_: dict[str, Any] = {}
    global_decisions: dict[str, tuple[str, str]] = {}
    for code in GLOBAL_ORDER:
        for s in rules[code].fn(_with(ctx, globals_)):
            globals_[s.field] = s.value
            global_decisions[s.field] = (code, s.fact)
    gctx = _with(ctx, globals_)
    layer_order = [c for c in LAYER_ORDER if engine.satisfies(rules[c].versions)]  # rules of this release

    layers: list[LayerPlan] = []
    ct_mutated = False
    for la in arch.layers:
        st = LayerState()
        decisions: list[Decision] = []
        decided_by: list[str] = []
        has_kv = la.kind not in NO_KV_KINDS
        if has_kv:
            code, fact = global_decisions["kv_cache_dtype"]
            st["kv_cache_dtype"] = globals_["kv_cache_dtype"]
            decisions.append(_decision("kv_cache_dtype", st["kv_cache_dtype"], code, fact))
            decided_by.append(code)
        st["_ct_mutated_before"] = ct_mutated
        for code in layer_order:
            for s in rules[code].fn(gctx, la, st):
                st[s.field] = s.value
                decisions.append(_decision(s.field, _jsonable(s.value), code, s.fact))
                if code not in decided_by:
                    decided_by.append(code)
                if code == "KV103" and la.kind != "mla":
                    ct_mutated = True
        layers.append(LayerPlan(
            index=la.index, kind=la.kind, sliding_window=la.sliding_window,
            attention_chunk_size=la.attention_chunk_size,
            num_kv_heads=st.get("num_kv_heads", 0) if has_kv else 0,
            head_size=(la.head_size or 0) if has_kv else 0,
            head_size_v=(la.head_size_v or 0) if has_kv else 0,
            kv_cache_dtype=st.get("kv_cache_dtype"), dtype=st.get("dtype"),
            quant_mode=st.get("quant_mode", QuantMode.none),
            scale_source=st.get("scale_source", ScaleSource.none),
            skipped=bool(st.get("skipped", False)), bytes_per_token=st.get("bytes_per_token", 0),
            backend=st.get("backend"), flash_attn_version=st.get("flash_attn_version"),
            query_dtype=st.get("query_dtype"),
            decided_by=decided_by, decisions=decisions))

    layers, totals = _size_memory(arch, flags, gpu, layers, weight_bytes, kv_budget_bytes)
    cctx = RuleContext(arch=arch, quant=quant, flags=flags, gpu=gpu, weight_bytes=weight_bytes,
                       engine=engine, engine_version=ctx.engine_version, globals=MappingProxyType({**globals_, "totals": totals}), layers=tuple(layers))
    findings: list[Finding] = []
    checks = [r for r in rules.values() if r.kind == "check" and engine.satisfies(r.versions)] + list(extra_checks)
    for r in sorted(checks, key=lambda r: r.code):
        for e in r.fn(cctx):
            findings.append(_finding(r, e))
    findings.sort(key=lambda f: (-f.severity.rank, f.code, f.layers[:1], f.message))

    return Plan(
        kvplan_version=__version__, engine=EngineRef(name=ENGINE_NAME, version=ctx.engine_version),
        model=ModelRef(model_type=arch.text_model_type, architecture=arch.architecture,
                       num_layers=arch.num_layers, dtype=globals_["model_dtype"], source=source,
                       hub=hub),
        gpu=GpuRef(name=gpu.name, memory_gib=gpu.memory_gib,
                   compute_capability=".".join(map(str, gpu.compute_capability)) if gpu.compute_capability else None)
        if gpu else None,
        flags=_flag_summary(flags), kv_cache_dtype=globals_["kv_cache_dtype"],
        layers=layers, totals=totals, findings=findings)


_DECISIONS: dict[tuple[str, type, Any, str, str], Decision] = {}


def _decision(field: str, value: Any, rule: str, fact: str) -> Decision:
    """A Decision, shared between layers with the same one (frozen; most layers repeat their facts)."""
    key = (field, type(value), value, rule, fact)  # the type too: True == 1 must not share
    try:
        hit = _DECISIONS.get(key)
    except TypeError:  # unhashable value
        return Decision(field=field, value=value, rule=rule, fact=fact)
    if hit is None:
        if len(_DECISIONS) > 65536:
            _DECISIONS.clear()
        hit = _DECISIONS[key] = Decision(field=field, value=value, rule=rule, fact=fact)
    return hit


def _with(ctx: RuleContext, globals_: dict[str, Any]) -> RuleContext:
    return RuleContext(arch=ctx.arch, quant=ctx.quant, flags=ctx.flags, gpu=ctx.gpu,
                       globals=MappingProxyType(dict(globals_)), weight_bytes=ctx.weight_bytes,
                       engine=ctx.engine, engine_version=ctx.engine_version)


def _jsonable(v: Any) -> Any:
    return v.value if hasattr(v, "value") and not isinstance(v, (int, str)) else v


def _finding(r: Rule, e: Emit) -> Finding:
    sev = Severity(e.severity) if e.severity is not None else r.severity
    return Finding(code=r.code, name=r.name, severity=sev, message=e.message,
                   fix=e.fix or r.fix, layers=sorted(set(e.layers)), subject=e.subject)


def _flag_summary(f: ServingFlags) -> dict[str, Any]:
    out: dict[str, Any] = {"kv_cache_dtype": f.kv_cache_dtype}
    if f.kv_cache_dtype_skip_layers:
        out["kv_cache_dtype_skip_layers"] = list(f.kv_cache_dtype_skip_layers)
    for name in ("dtype", "tensor_parallel_size", "max_model_len", "block_size", "gpu_memory_utilization",
                 "max_num_batched_tokens", "attention_backend", "quantization"):
        v = getattr(f, name)
        default = ServingFlags.model_fields[name].default
        if v != default:
            out[name] = v
    if f.attention_config:
        out["attention_config"] = dict(sorted(f.attention_config.items()))
    if f.hf_overrides:
        out["hf_overrides"] = f.hf_overrides
    return out


def _bf16_bytes(lp: LayerPlan) -> int:
    if lp.kind in NO_KV_KINDS or lp.kv_cache_dtype is None:
        return 0
    if lp.kind == "mla":
        return lp.head_size * 2
    return lp.num_kv_heads * (lp.head_size + lp.head_size_v) * 2


def _request_bytes(lp: LayerPlan, mml: int, bs: int, mbt: int) -> int:
    """vLLM max_memory_usage_bytes per spec kind (vllm-0.33-kv-rules.md §7.2), one request."""
    page = bs * lp.bytes_per_token
    if lp.bytes_per_token == 0 or lp.kind == "cross_attention":
        return 0
    if lp.kind == "sliding_attention" and lp.sliding_window:
        return (math.ceil(min(lp.sliding_window - 1 + mbt, mml) / bs) + 1) * page
    if lp.kind == "chunked_attention" and lp.attention_chunk_size:
        return math.ceil(min(lp.attention_chunk_size + mbt, mml) / bs) * page
    return math.ceil(mml / bs) * page


def _size_memory(arch: ModelArch, flags: ServingFlags, gpu: GpuFacts | None, layers: list[LayerPlan],
                 weight_bytes: int | None, kv_budget_bytes: int | None) -> tuple[list[LayerPlan], Totals]:
    bs = flags.block_size or DEFAULT_BLOCK_SIZE
    mbt = flags.max_num_batched_tokens or DEFAULT_MAX_NUM_BATCHED_TOKENS
    mml = flags.max_model_len or arch.max_position_embeddings
    sized = []
    for lp in layers:
        mbr = _request_bytes(lp, mml, bs, mbt) if mml else None
        sized.append(lp.model_copy(update={"max_bytes_per_request": mbr if lp.bytes_per_token else None}))
    bpt = sum(lp.bytes_per_token for lp in sized)
    indexer = {la.index: la.indexer_bytes_per_token for la in arch.layers if la.kind == "mla"}
    base = sum(_bf16_bytes(lp) + (indexer.get(lp.index, 0) if _bf16_bytes(lp) else 0) for lp in sized)
    per_request = sum(lp.max_bytes_per_request or 0 for lp in sized) if mml else None
    budget = kv_budget_bytes
    if budget is None and gpu is not None and gpu.memory_gib and weight_bytes is not None:
        ranks = flags.tensor_parallel_size * flags.pipeline_parallel_size
        budget = int(gpu.memory_gib * 2**30 * flags.gpu_memory_utilization - weight_bytes / ranks
                     - RUNTIME_OVERHEAD_BYTES)
        budget = max(budget, 0)
    totals = Totals(
        bytes_per_token=bpt, bytes_per_token_bf16=base,
        saving_vs_bf16=round(1 - bpt / base, 4) if base else 0.0,
        kv_layers=sum(1 for lp in sized if lp.bytes_per_token > 0),
        quantized_layers=sum(1 for lp in sized if lp.quant_mode.is_quantized),
        max_model_len=mml, bytes_per_request=per_request, kv_budget_bytes=budget,
        tokens_capacity=(budget // bpt) if budget is not None and bpt else None,
        max_concurrency=round(budget / per_request, 2) if budget is not None and per_request else None)
    return sized, totals
