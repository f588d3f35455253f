"""The engine: apply decision rules in precedence order, size memory, run checks. Pure functions."""
from __future__ import annotations

import math
import re
from collections.abc import Iterable
from fractions import Fraction
from types import MappingProxyType
from typing import Any, Literal, cast

from kvplan import __version__
from kvplan.backends.capabilities import EngineVersion
from kvplan.backends.defaults import default_block_size, preferred_block_size
from kvplan.backends.vllm_rows import engine_feature
from kvplan.errors import KvplanInputError
from kvplan.ingest.state_layers import NEMOTRON_H_OMNI_SSM_HOOK
from kvplan.model.arch import ExtraCache, LayerArch, ModelArch
from kvplan.model.flags import ServingFlags
from kvplan.model.plan import (
    BudgetTerm,
    Decision,
    DraftKv,
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
from kvplan.planner.budget import budget_error, estimate_budget, fixed_budget
from kvplan.planner.cache_layout import plan_capacity
from kvplan.planner.layout import Capacity, LayoutRefused, draft_layers, is_mtp, speculative_method
from kvplan.planner.precedence import GLOBAL_ORDER, LAYER_ORDER
from kvplan.planner.state_cache import state_tensors
from kvplan.rules.backend import backend_choice
from kvplan.rules.base import PLANNER_SCOPES, Emit, Rule, rules_in
from kvplan.rules.context import ENGINE_NAME, ENGINE_VERSION, KV_CACHE_DTYPE_SET_BY, GpuFacts, RuleContext
from kvplan.rules.memory import (
    DTYPE_BYTES,
    LAYOUT_REFERENCE,
    LAYOUT_REFUSAL,
    LayoutReference,
    dsv4_bytes_per_token,
    dsv4_caches,
    extra_cache_bytes,
)
from kvplan.rules.state import (
    CARRIED_FIELDS,
    GLOBAL_FIELDS,
    GlobalDecision,
    GlobalState,
    LayerDecision,
    LayerState,
    RuleContractError,
    apply_set,
    check_declared,
)

DEFAULT_BLOCK_SIZE = 16
DEFAULT_MAX_NUM_BATCHED_TOKENS = 8192  # vLLM's default for online serving on datacenter GPUs


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


def _refuse_untrusted(arch: ModelArch, flags: ServingFlags, engine: EngineVersion) -> None:
    """A config whose model_type or architecture only the checkpoint's own code (auto_map) provides:
    vLLM refuses to load it without --trust-remote-code (transformers' resolve_trust_remote_code,
    vllm/transformers_utils/config.py::get_config; registry.py::_try_resolve_transformers)."""
    if arch.remote_code is None or flags.trust_remote_code or engine.engine != "vllm":
        return
    raise KvplanInputError(
        f"vLLM {engine.version_str or ''} refuses this config without --trust-remote-code: {arch.remote_code} "
        "(vLLM: \"contains custom code which must be executed to correctly load the model ... Please pass the "
        "argument `trust_remote_code=True`\").".replace("  ", " "),
        "Pass --trust-remote-code, as the checkpoint's model card says (vLLM then runs the code its auto_map "
        "names; kvplan cannot read that code and plans from config.json, KV604).")


def _refuse_unsupported(arch: ModelArch, engine: EngineVersion) -> None:
    """vLLM's registry refuses the architecture in the release modelled: one input error, its reason."""
    reason = arch.refused_reason
    if not reason or engine.engine != "vllm":
        return
    m = re.search(r"until v(\d+)\.(\d+)\.(\d+)", reason)
    if m and engine.version is not None and tuple(engine.version) <= tuple(int(x) for x in m.groups()):
        return  # the modelled release still builds it
    raise KvplanInputError(f"vLLM {engine.version_str or ''} refuses architecture {arch.architecture}: "
                           f"{reason}".replace("  ", " "),
                           "Serve it with the vLLM release that still supports it (--engine vllm==X) or use a "
                           "supported architecture.")


def _refuse_unregistered_in_release(arch: ModelArch, engine: EngineVersion) -> None:
    """An architecture vLLM builds natively (0.33's registry) that the modelled release's own registry lacks
    (added later, or removed: 0.34 dropped Keye) and that transformers cannot build either: vLLM refuses it
    at startup ("Model architectures [...] are not supported for now"; registry.py::_raise_for_unsupported).
    Each release's registry is generated from its wheel (kvplan.releases)."""
    from kvplan.backends.engines import release_of
    from kvplan.ingest import architectures as vreg
    from kvplan.releases import known_releases, release_key

    name, rel = arch.architecture, release_of(engine)
    if rel is None or not name or name in rel.architectures or arch.remote_code is not None \
            or not vreg.is_registered(name) or vreg.modelled_release().transformers_builds(name):
        return
    last = rel.previously_supported.get(name)
    having = [r.version for r in known_releases() if name in r.architectures]
    if last:
        why = f"vLLM {rel.version} no longer supports it (the last release that did: {last})"
    elif having and release_key(having[0]) > rel.key:
        why = f"vLLM added it in {having[0]}"
    else:
        why = f"it is not in vLLM {rel.version}'s model registry"
    raise KvplanInputError(
        f"vLLM {rel.version} refuses architecture {name}: {why} (vLLM: \"Model architectures ['{name}'] are not "
        "supported for now\").",
        f"Pass --engine with a release that builds it ({_span(having)}; `kvplan engines`), or serve another "
        "architecture.")


def _span(versions: list[str]) -> str:
    """`0.9.2 to 0.33.0` (known releases, oldest first), or `none known`."""
    if not versions:
        return "none known"
    return versions[0] if len(versions) == 1 else f"{versions[0]} to {versions[-1]}"


def compile_plan(arch: ModelArch, quant: QuantMetadata, flags: ServingFlags,
                 gpu: GpuFacts | None = None, *, source: str | None = None,
                 weight_bytes: int | None = None, kv_budget_bytes: int | None = None,
                 extra_checks: Iterable[Rule] = (), engine: EngineVersion | None = None,
                 hub: HubSource | None = None, draft: list[LayerPlan] | None = None,
                 draft_weight_bytes: int | None = None) -> Plan:
    """Compile the per-layer KV plan. No I/O, no printing; deterministic for equal inputs.

    `hub` records where a Hugging Face id's files came from (plan.model.hub). `draft` is the plan's layers of
    the draft model --speculative-config names (EAGLE / EAGLE3 / draft_model), compiled under the draft's flags;
    the checkpoint's own MTP layers need none. `draft_weight_bytes`: that draft's checkpoint weights (vLLM loads
    them before profiling: a term of the GPU budget), None when unknown.

    `engine` is the release modelled (default vllm==0.33.0; see `kvplan.backends.engines`).
    """
    rules = _rules()
    engine = engine or EngineVersion()
    _refuse_unsupported(arch, engine)
    _refuse_unregistered_in_release(arch, engine)
    _refuse_untrusted(arch, flags, engine)
    ctx = RuleContext(arch=arch, quant=quant, flags=flags, gpu=gpu, weight_bytes=weight_bytes,
                      engine=engine, engine_version=engine.version_str or ENGINE_VERSION)
    gstate, global_decisions = _decide_globals(ctx, rules)
    globals_ = {**_globals_of(gstate), KV_CACHE_DTYPE_SET_BY: global_decisions["kv_cache_dtype"][0]}
    gctx = _with(ctx, gstate, global_decisions)
    layer_rules = [(c, _layer_decision(rules[c])) for c in LAYER_ORDER if engine.satisfies(rules[c].versions)]
    layers = _decide_layers(gctx, layer_rules, global_decisions["kv_cache_dtype"])

    layers, totals, refused = _size_memory(arch, flags, gpu, layers, weight_bytes, kv_budget_bytes, engine,
                                  model_dtype=str(globals_["model_dtype"]),
                                  backend_block_size=_backend_block_size(gctx, layers), draft=draft,
                                  draft_weight_bytes=draft_weight_bytes)
    reference = _layout_reference(gctx, layer_rules, global_decisions["kv_cache_dtype"], layers, totals,
                                     weight_bytes=weight_bytes, kv_budget_bytes=kv_budget_bytes, draft=draft,
                                     draft_weight_bytes=draft_weight_bytes)
    refusal = (refused.layers, refused.message) if refused is not None else None
    cctx = RuleContext(arch=arch, quant=quant, flags=flags, gpu=gpu, weight_bytes=weight_bytes,
                       engine=engine, engine_version=ctx.engine_version,
                       globals=MappingProxyType({**globals_, "totals": totals, LAYOUT_REFERENCE: reference,
                                                 LAYOUT_REFUSAL: refusal}),
                       layers=tuple(layers))
    findings = _run_checks(cctx, rules, extra_checks)

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


def _ideal_request_bytes(layers: list[LayerPlan], totals: Totals) -> int:
    """One request's bytes at --max-model-len without page padding: every layer's own (and the draft's)."""
    drafts = totals.draft.layers if totals.draft is not None else []
    return sum(lp.max_bytes_per_request or 0 for lp in [*layers, *drafts])


def _layout_reference(gctx: RuleContext, layer_rules: list[tuple[str, LayerDecision]], kv_decision: tuple[str, str],
                      layers: list[LayerPlan], totals: Totals, *, weight_bytes: int | None,
                      kv_budget_bytes: int | None, draft: list[LayerPlan] | None,
                      draft_weight_bytes: int | None = None) -> LayoutReference | None:
    """The same plan laid out with one page size (for KV503): without --kv-cache-dtype-skip-layers, and with MTP
    layers at the model's KV cache dtype instead of the speculative config's; only where such layers hold KV in
    another dtype and vLLM's layout is computed for a budget."""
    f = gctx.flags
    skipped = any(lp.skipped and lp.bytes_per_token for lp in layers) and bool(f.kv_cache_dtype_skip_layers)
    mtp = is_mtp(f) and draft is not None and totals.draft is not None and any(
        lp.kv_cache_dtype != gctx.kv_cache_dtype for lp in totals.draft.layers)
    if not ((skipped or mtp) and totals.tokens_capacity and totals.kv_cache_layout is not None):
        return None
    update: dict[str, Any] = {"kv_cache_dtype_skip_layers": ()}
    if mtp:
        update["speculative_kv_cache_dtype"] = None
    flags = f.model_copy(update=update)
    ctx = RuleContext(arch=gctx.arch, quant=gctx.quant, flags=flags, gpu=gctx.gpu, globals=gctx.globals,
                      weight_bytes=weight_bytes, engine=gctx.engine, engine_version=gctx.engine_version)
    base = _decide_layers(ctx, layer_rules, kv_decision)
    sized, t, _ = _size_memory(gctx.arch, flags, gctx.gpu, base, weight_bytes, kv_budget_bytes, gctx.engine,
                               model_dtype=gctx.model_dtype, backend_block_size=_backend_block_size(ctx, base),
                               draft=None if mtp else draft, draft_weight_bytes=draft_weight_bytes)
    if not t.tokens_capacity or t.kv_cache_layout is None:
        return None
    what = " and ".join(x for x, on in (("without the skip list", skipped),
                                        (f"with the MTP layers at {gctx.kv_cache_dtype}", mtp)) if on)
    return LayoutReference(tokens_capacity=t.tokens_capacity, ideal_bytes_per_request=_ideal_request_bytes(sized, t),
                           block_size=t.kv_cache_layout.block_size, groups=len(t.kv_cache_layout.groups),
                           reference=what)


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


def _globals_of(state: GlobalState) -> dict[str, Any]:
    """The global fields decided so far, as `RuleContext.globals` holds them."""
    return {f: v for f in sorted(GLOBAL_FIELDS) if (v := getattr(state, f)) is not None}


def _with(ctx: RuleContext, state: GlobalState, decided: dict[str, tuple[str, str]] | None = None) -> RuleContext:
    g = _globals_of(state)
    if decided and "kv_cache_dtype" in decided:
        g[KV_CACHE_DTYPE_SET_BY] = decided["kv_cache_dtype"][0]
    return RuleContext(arch=ctx.arch, quant=ctx.quant, flags=ctx.flags, gpu=ctx.gpu,
                       globals=MappingProxyType(g), weight_bytes=ctx.weight_bytes,
                       engine=ctx.engine, engine_version=ctx.engine_version)


def config_context(arch: ModelArch, quant: QuantMetadata, flags: ServingFlags, gpu: GpuFacts | None = None, *,
                   engine: EngineVersion | None = None) -> RuleContext:
    """The rule context once the global (config-time) decisions ran: what vLLM's VllmConfig holds after
    create_engine_config and the architecture's verify_and_update_config (model dtype, cache_config.cache_dtype
    and the rule that set it). A speculative draft model is built from this config (its cache dtype, its model
    dtype), so the pipeline plans the draft from it before the target's layers."""
    engine = engine or EngineVersion()
    ctx = RuleContext(arch=arch, quant=quant, flags=flags, gpu=gpu, engine=engine,
                      engine_version=engine.version_str or ENGINE_VERSION)
    gstate, decided = _decide_globals(ctx, _rules())
    return _with(ctx, gstate, decided)


# ---------------------------------------------------------------- the rule loop


def _global_decision(rule: Rule) -> GlobalDecision:
    if rule.kind != "decision" or rule.scope != "global" or not isinstance(rule.fn, GlobalDecision):
        raise RuleContractError(f"{rule.code} runs as a global decision (planner.precedence.GLOBAL_ORDER) but is "
                                "not declared as one: kind='decision', scope='global', @decides_global(...)")
    return rule.fn


def _layer_decision(rule: Rule) -> LayerDecision:
    if rule.kind != "decision" or rule.scope != "layer" or not isinstance(rule.fn, LayerDecision):
        raise RuleContractError(f"{rule.code} runs as a layer decision (planner.precedence.LAYER_ORDER) but is "
                                "not declared as one: kind='decision', scope='layer', @decides_layer(...)")
    return rule.fn


def _decide_globals(ctx: RuleContext, rules: dict[str, Rule]) -> tuple[GlobalState, dict[str, tuple[str, str]]]:
    """Run the global decision rules in precedence order: the config-time state, and for each field the
    (rule, fact) that set it last."""
    state = GlobalState()
    decided: dict[str, tuple[str, str]] = {}
    for code in GLOBAL_ORDER:
        decide = _global_decision(rules[code])
        for s in decide(_with(ctx, state)):
            check_declared(code, decide.fields, s)
            apply_set(state, s)
            decided[s.field] = (code, s.fact)
    return state, decided


def _decide_layers(gctx: RuleContext, layer_rules: list[tuple[str, LayerDecision]],
                   kv_decision: tuple[str, str]) -> list[LayerPlan]:
    """Run the per-layer decision rules in precedence order on every layer, in the order vLLM builds them.

    Each layer starts from the global kv_cache_dtype; the carried fields (vLLM's cache_config.cache_dtype)
    start from where the previous layer left them. Every Set of a plan field becomes a Decision."""
    layers: list[LayerPlan] = []
    carried = LayerState(cache_config_dtype=gctx.kv_cache_dtype)  # cache_config before the first layer
    for la in gctx.arch.layers:
        has_kv = la.kind not in NO_KV_KINDS
        st = LayerState(kv_cache_dtype=gctx.kv_cache_dtype if has_kv else None,
                        **{f: getattr(carried, f) for f in CARRIED_FIELDS})
        decisions: list[Decision] = []
        decided_by: list[str] = []
        if has_kv:
            code, fact = kv_decision
            decisions.append(_decision("kv_cache_dtype", gctx.kv_cache_dtype, code, fact))
            decided_by.append(code)
        for code, decide in layer_rules:
            for s in decide.body(gctx, la, st):
                check_declared(code, decide.fields, s)
                apply_set(st, s)
                if s.field in CARRIED_FIELDS:
                    continue  # engine state the next layers read, not a field of this layer's plan
                decisions.append(_decision(s.field, _jsonable(s.value), code, s.fact))
                if code not in decided_by:
                    decided_by.append(code)
        carried = st
        layers.append(_layer_plan(la, st, has_kv, decided_by, decisions))
    return layers


def _layer_plan(la: LayerArch, st: LayerState, has_kv: bool, decided_by: list[str],
                decisions: list[Decision]) -> LayerPlan:
    return LayerPlan(
        index=la.index, kind=la.kind, sliding_window=la.sliding_window,
        attention_chunk_size=la.attention_chunk_size,
        num_kv_heads=(st.num_kv_heads or 0) if has_kv else 0,
        head_size=(la.head_size or 0) if has_kv else 0,
        head_size_v=(la.head_size_v or 0) if has_kv else 0,
        kv_cache_dtype=st.kv_cache_dtype, dtype=st.dtype,
        quant_mode=st.quant_mode if st.quant_mode is not None else QuantMode.none,
        scale_source=st.scale_source if st.scale_source is not None else ScaleSource.none,
        skipped=st.skipped, bytes_per_token=st.bytes_per_token or 0, kv_shared_with=la.kv_shared_with,
        cross_attention_bytes_per_token=st.cross_attention_bytes_per_token,
        bytes_per_token_exact=st.bytes_per_token_exact,
        backend=st.backend,
        flash_attn_version=cast("Literal[2, 3, 4] | None", st.flash_attn_version),  # pydantic checks the value
        query_dtype=st.query_dtype, decided_by=decided_by, decisions=decisions)


def _run_checks(cctx: RuleContext, rules: dict[str, Rule], extra_checks: Iterable[Rule]) -> list[Finding]:
    """Every check rule of the release modelled (plus `extra_checks`, e.g. a policy's), sorted findings."""
    findings: list[Finding] = []
    checks = [r for r in rules.values() if r.kind == "check" and cctx.engine.satisfies(r.versions)]
    for r in sorted([*checks, *extra_checks], key=lambda r: r.code):
        findings.extend(_finding(r, e) for e in r.fn(cctx))
    findings.sort(key=lambda f: (-f.severity.rank, f.code, f.layers[:1], f.message))
    return findings


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
    if f.speculative_method is not None or f.num_speculative_tokens:
        spec = {"method": f.speculative_method, "num_speculative_tokens": f.num_speculative_tokens,
                "model": f.speculative_model, "kv_cache_dtype": f.speculative_kv_cache_dtype}
        out["speculative_config"] = {k: v for k, v in spec.items() if v is not None}
    return out


def _bf16_bytes(lp: LayerPlan) -> int:
    if lp.kind in NO_KV_KINDS or lp.kv_cache_dtype is None or lp.kv_shared_with is not None:
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


def _dsv4_request_bytes(la: LayerArch, kv_cache_dtype: str, dtype: str, mml: int, mbt: int) -> int:
    """DeepSeek-V4, one request: the latent and indexer keys grow with the context, the sliding-window
    cache and the compressor states keep their window (+ one prefill chunk), as vLLM's windowed specs do."""
    parts = dsv4_caches(la, kv_cache_dtype, dtype)
    return math.ceil(sum((b * (mml if w is None else min(w - 1 + mbt, mml)) for b, w, _ in parts), Fraction(0)))


def _extra_request_bytes(lp: LayerPlan, la: LayerArch, mml: int, bs: int, mbt: int, model_dtype: str,
                         tp: int = 1) -> int:
    """A layer with further caches, one request: its main cache as its kind keeps it; each further
    cache over the whole context, its window (+ one prefill chunk) or one block (a ring)."""
    total = Fraction(lp.bytes_per_token_exact if lp.bytes_per_token_exact is not None else lp.bytes_per_token)
    kvb = DTYPE_BYTES.get(lp.dtype or "", 1)
    main = total - extra_cache_bytes(la, 0, model_dtype, kvb, tp)[0]
    if any(x.same_as_layer for x in la.extra_caches):
        main /= 1 + sum(1 for x in la.extra_caches if x.same_as_layer)
    mbr = Fraction(_request_bytes(lp.model_copy(update={"bytes_per_token": math.ceil(main)}), mml, bs, mbt))
    for x in la.extra_caches:
        one = main if x.same_as_layer else _one_extra(x, la, model_dtype, kvb, tp)
        mbr += one * _extra_tokens(x, mml, bs, mbt)
    return math.ceil(mbr)


def _one_extra(x: ExtraCache, la: LayerArch, model_dtype: str, kv_bytes: int = 2, tp: int = 1) -> Fraction:
    return extra_cache_bytes(la.model_copy(update={"extra_caches": (x,)}), 0, model_dtype, kv_bytes, tp)[0]


def _extra_tokens(x: ExtraCache, mml: int, bs: int, mbt: int) -> int:
    """Tokens of a further cache one request holds: one block (a ring), its window, or the context."""
    return bs if x.ring else (mml if x.window is None else min(x.window - 1 + mbt, mml))


def _pooled_window(lp: LayerPlan, la: LayerArch | None) -> LayerPlan:
    """A block-pooled sliding cache keeps its window in pooled units (vLLM: ceil(window / N) + 1 tokens)."""
    if la is None or la.states_per_token == 1 or not lp.sliding_window:
        return lp
    return lp.model_copy(update={"sliding_window": -(-lp.sliding_window // la.states_per_token) + 1})


def _sized_layer(lp: LayerPlan, arch_layer: LayerArch | None, mml: int | None, bs: int, mbt: int,
                 model_dtype: str = "bfloat16", tp: int = 1) -> LayerPlan:
    """The layer with its bytes for one request at --max-model-len (None without KV or context)."""
    if not lp.bytes_per_token or not mml:
        return lp.model_copy(update={"max_bytes_per_request": None})
    la = arch_layer
    if la is not None and la.dsv4_compress_ratio is not None and lp.kv_cache_dtype and lp.dtype:
        mbr = _dsv4_request_bytes(la, lp.kv_cache_dtype, lp.dtype, mml, mbt)
        mbr += math.ceil(sum((_one_extra(x, la, model_dtype) * _extra_tokens(x, mml, bs, mbt)
                              for x in la.extra_caches), Fraction(0)))
    elif la is not None and la.extra_caches and la.kv_shared_with is None:
        mbr = _extra_request_bytes(lp, la, mml, bs, mbt, model_dtype, tp)
    else:
        mbr = _request_bytes(_pooled_window(lp, la), mml, bs, mbt)
    if la is not None and la.cross_attention_tokens and lp.cross_attention_bytes_per_token:
        # CrossAttentionSpec: the request's encoder tokens, in blocks (vLLM's CrossAttentionManager).
        mbr += math.ceil(la.cross_attention_tokens / bs) * bs * lp.cross_attention_bytes_per_token
    return lp.model_copy(update={"max_bytes_per_request": mbr})


def _bf16_total(arch: ModelArch, sized: list[LayerPlan], tp: int = 1) -> int:
    """Bytes per token of the same model with every KV layer in 16-bit (indexer caches as they are)."""
    by_index = {la.index: la for la in arch.layers}
    total = 0
    for lp in sized:
        la = by_index.get(lp.index)
        if la is not None and la.dsv4_compress_ratio is not None and lp.bytes_per_token:
            total += math.ceil(dsv4_bytes_per_token(la, "bfloat16", "bfloat16")[0]
                               + extra_cache_bytes(la, 0, "bfloat16")[0])
        elif _bf16_bytes(lp):
            states = la.states_per_token if la is not None else 1
            total += _bf16_bytes(lp) * states + (la.indexer_bytes_per_token if la is not None and la.kind == "mla"
                                                 else 0)
            if la is not None and la.extra_caches and la.kv_shared_with is None:
                total += math.ceil(extra_cache_bytes(la, _bf16_bytes(lp), "bfloat16", 2, tp)[0])
    return total


def _budget(arch: ModelArch, flags: ServingFlags, gpu: GpuFacts | None, weight_bytes: int | None,
            kv_budget_bytes: int | None, model_dtype: str, engine: EngineVersion | None,
            draft_weight_bytes: int | None = None) -> tuple[int | None, list[BudgetTerm] | None]:
    """KV memory per GPU: given (--kv-budget-gib), or estimated from the GPU (kvplan.planner.budget)."""
    fixed = fixed_budget(flags) if kv_budget_bytes is None else None
    if fixed is not None:
        return fixed
    if kv_budget_bytes is not None or gpu is None or not gpu.memory_gib or weight_bytes is None:
        return kv_budget_bytes, None
    budget, terms = estimate_budget(arch, flags, gpu, weight_bytes, model_dtype, engine or EngineVersion(),
                                    draft_weight_bytes)
    return max(budget, 0), terms  # the terms keep the sign (KV502 quotes vLLM's negative figure)


def _with_state(lp: LayerPlan, la: LayerArch | None, flags: ServingFlags, model_dtype: str,
                config_hook: bool = True) -> LayerPlan:
    """A state layer with its state tensors and bytes (vLLM's MambaSpec), when kvplan reads its dimensions;
    `config_hook`: the release applies the architecture's SSM-dtype config hook."""
    if la is None or la.state is None or lp.kind not in ("mamba", "linear_attention"):
        return lp
    sc = la.state if config_hook else la.state.model_copy(update={"ssm_dtype_from_config": None})
    st = state_tensors(sc, flags, model_dtype)
    return lp.model_copy(update={"state_bytes": st.page_bytes, "state_shapes": [list(s) for s in st.shapes],
                                 "state_dtypes": list(st.dtypes)})


def _state_request_bytes(sized: list[LayerPlan], cap: Capacity) -> list[LayerPlan]:
    """State layers hold their state once per state block of their group (unpadded bytes)."""
    blocks = next((g.blocks_per_request for g in cap.layout.groups if g.kind == "state"), 0)
    return [lp.model_copy(update={"max_bytes_per_request": lp.state_bytes * blocks})
            if lp.state_bytes is not None else lp for lp in sized]


def _with_layout(totals: Totals, cap: Capacity | None) -> Totals:
    """Totals with vLLM's layout: its capacity figures replace the per-token estimate."""
    if cap is None:
        return totals
    return totals.model_copy(update={
        "kv_cache_layout": cap.layout, "tokens_capacity": cap.tokens_capacity,
        "max_model_len_fits": cap.max_model_len_fits,
        "max_concurrency": round(cap.max_concurrency, 2) if cap.max_concurrency is not None else None})


def _draft_kv(flags: ServingFlags, drafts: list[LayerPlan]) -> DraftKv | None:
    if not drafts:
        return None
    return DraftKv(method=speculative_method(flags), model=flags.speculative_model,
                   num_speculative_tokens=flags.num_speculative_tokens, layers=drafts,
                   bytes_per_token=sum(lp.bytes_per_token for lp in drafts))


def _backend_block_size(gctx: RuleContext, layers: list[LayerPlan]) -> int | None:
    """With --gpu: the block size vLLM gives the layers' attention backends (FlashMLA 64, CUTLASS MLA 128,
    FlashInfer-MLA 32 at 0.33's default; a sparse-MLA model's indexer backend with them:
    `kvplan.backends.defaults.preferred_block_size`)."""
    if gctx.gpu is None or gctx.gpu.profile is None:
        return None
    by_index = {la.index: la for la in gctx.arch.layers}
    chosen = [(lp.backend, choice.block_size) for lp in layers
              if lp.backend and lp.kv_cache_dtype and lp.index in by_index
              and (choice := backend_choice(gctx, by_index[lp.index], lp.kv_cache_dtype)).block_size]
    indexer = any(by_index[lp.index].indexer_bytes_per_token for lp in layers
                  if lp.index in by_index and lp.kind == "mla" and lp.bytes_per_token)
    return preferred_block_size(chosen, gctx.gpu.profile, default_block_size(gctx.engine), sparse_indexer=indexer)


def _block_size(flags: ServingFlags, engine: EngineVersion | None, backend_block_size: int | None) -> int:
    """--block-size, else the block size vLLM gives the layers' backends, else the release's default."""
    return (flags.block_size or backend_block_size
            or (default_block_size(engine) if engine is not None else DEFAULT_BLOCK_SIZE))


def _exact_bytes(sized: list[LayerPlan]) -> tuple[Fraction, bool]:
    """The layers' bytes per token summed exactly (compressed caches, DeepSeek-V4, have fractional bytes per
    token), and whether some layer's is fractional."""
    exact = sum((Fraction(lp.bytes_per_token_exact) if lp.bytes_per_token_exact is not None
                 else Fraction(lp.bytes_per_token) for lp in sized), Fraction(0))
    return exact, any(lp.bytes_per_token_exact is not None for lp in sized)


def _per_request_estimate(sized: list[LayerPlan], drafts: list[LayerPlan], mml: int | None) -> int | None:
    return sum(lp.max_bytes_per_request or 0 for lp in sized + drafts) if mml else None


def _size_memory(arch: ModelArch, flags: ServingFlags, gpu: GpuFacts | None, layers: list[LayerPlan],
                 weight_bytes: int | None, kv_budget_bytes: int | None, engine: EngineVersion | None,
                 model_dtype: str = "bfloat16", backend_block_size: int | None = None,
                 draft: list[LayerPlan] | None = None,
                 draft_weight_bytes: int | None = None) -> tuple[list[LayerPlan], Totals, LayoutRefused | None]:
    """The layers sized, the totals with vLLM's layout, and vLLM's refusal where it cannot lay the cache out."""
    bs = _block_size(flags, engine, backend_block_size)
    mbt = flags.max_num_batched_tokens or DEFAULT_MAX_NUM_BATCHED_TOKENS
    mml = flags.max_model_len or arch.max_position_embeddings
    by_index = {la.index: la for la in arch.layers}
    hook = (arch.architecture not in NEMOTRON_H_OMNI_SSM_HOOK
            or engine_feature("nemotron_h_omni_ssm_dtype_hook").holds_for(engine or EngineVersion()))
    sized = [_with_state(_sized_layer(lp, by_index.get(lp.index), mml, bs, mbt, model_dtype,
                                      flags.tensor_parallel_size), by_index.get(lp.index), flags, model_dtype,
                         hook)
             for lp in layers]
    exact, fractional = _exact_bytes(sized)
    bpt = math.ceil(exact)
    base = _bf16_total(arch, sized, flags.tensor_parallel_size)
    drafts = draft_layers(sized, arch, flags, draft)
    pool = exact + sum(lp.bytes_per_token for lp in drafts)  # the draft's layers share the pool
    per_request = _per_request_estimate(sized, drafts, mml)
    budget, terms = _budget(arch, flags, gpu, weight_bytes, kv_budget_bytes, model_dtype, engine,
                            draft_weight_bytes if drafts and not is_mtp(flags) else None)
    refused: LayoutRefused | None = None
    try:
        cap = plan_capacity(sized, arch, flags, mml, bs, mbt, budget, engine,
                            gpu.compute_capability if gpu is not None else None, drafts=drafts,
                            model_dtype=model_dtype)
    except LayoutRefused as e:  # vLLM raises while laying the cache out: finding KV504, no layout
        cap, refused = None, e
    if cap is not None:
        sized, per_request = _state_request_bytes(sized, cap), cap.bytes_per_request
    state_total = sum(lp.state_bytes for lp in sized if lp.state_bytes is not None)
    totals = Totals(
        bytes_per_token=bpt, bytes_per_token_exact=float(exact) if fractional else None,
        bytes_per_token_bf16=base,
        saving_vs_bf16=round(1 - bpt / base, 4) if base else 0.0,
        kv_layers=sum(1 for lp in sized if lp.bytes_per_token > 0),
        quantized_layers=sum(1 for lp in sized if lp.quant_mode.is_quantized),
        max_model_len=mml, bytes_per_request=per_request, kv_budget_bytes=budget,
        tokens_capacity=math.floor(budget / pool) if budget is not None and pool else None,
        max_concurrency=round(budget / per_request, 2) if budget is not None and per_request else None,
        state_bytes_per_request=state_total or None, draft=_draft_kv(flags, drafts), kv_budget_terms=terms,
        kv_budget_error_bytes=budget_error(terms) if terms else None)
    return sized, _with_layout(totals, cap), refused
