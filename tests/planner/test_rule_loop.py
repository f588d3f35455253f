"""The planner's rule loop reads the typed rule contract: it runs only declared decision rules, and it
passes the carried engine state (vLLM's cache_config.cache_dtype) from layer to layer without knowing
which rule changed it."""
from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from kvplan.backends.capabilities import EngineVersion
from kvplan.backends.engines import resolve_engine
from kvplan.ingest.flags import parse_flags
from kvplan.ingest.hf_config import parse_hf_config
from kvplan.ingest.quant import parse_quant_metadata
from kvplan.model.arch import LayerArch, ModelArch
from kvplan.model.plan import LayerPlan
from kvplan.model.quant import QuantMetadata
from kvplan.model.vocab import Severity
from kvplan.planner import compile as planner
from kvplan.planner.precedence import LAYER_ORDER
from kvplan.rules.base import Rule
from kvplan.rules.context import RuleContext
from kvplan.rules.state import LayerState, RuleContractError, Set, decides_layer
from tests.conftest import EXAMPLES

CT_SCHEME = {"quant_method": "compressed-tensors", "kv_cache_scheme": {
    "type": "float", "num_bits": 8, "strategy": "tensor", "symmetric": True}}


def _mixed_arch(mla_first: bool) -> tuple[ModelArch, QuantMetadata]:
    """A two-layer model: one dense Attention layer and one MLA layer (DeepSeek-V3's), in either order."""
    path = EXAMPLES / "DeepSeek-V3" / "config.json"
    cfg = json.loads(path.read_text())
    arch = parse_hf_config(cfg, Path(path))
    mla = arch.layers[0]
    dense = LayerArch(index=0, kind="full_attention", num_heads=16, num_kv_heads=8, head_size=128, head_size_v=128)
    layers = (mla, dense.model_copy(update={"index": 1})) if mla_first else (dense, mla.model_copy(update={"index": 1}))
    return arch.model_copy(update={"layers": layers, "num_layers": 2}), parse_quant_metadata({**cfg, **{
        "quantization_config": CT_SCHEME}}, None)


def _layers(arch: ModelArch, quant: QuantMetadata, argv: list[str], engine: EngineVersion) -> list[LayerPlan]:
    rules = planner._rules()
    ctx = RuleContext(arch=arch, quant=quant, flags=parse_flags(argv), engine=engine)
    gstate, decided = planner._decide_globals(ctx, rules)
    layer_rules = [(c, planner._layer_decision(rules[c])) for c in LAYER_ORDER if engine.satisfies(rules[c].versions)]
    return planner._decide_layers(planner._with(ctx, gstate), layer_rules, decided["kv_cache_dtype"])


def _kv103(lp: LayerPlan) -> str | None:
    return next((d.fact for d in lp.decisions if d.rule == "KV103"), None)


def test_mla_layer_reads_cache_config_rewritten_by_an_earlier_attention_layer() -> None:
    arch, quant = _mixed_arch(mla_first=False)
    dense, mla = _layers(arch, quant, [], EngineVersion())
    assert (dense.kv_cache_dtype, mla.kv_cache_dtype) == ("fp8", "fp8")
    assert "rewrote cache_config.cache_dtype" in (_kv103(mla) or "")
    # the carried field is engine state, not a field of the layer's plan
    assert all(d.field != "cache_config_dtype" for lp in (dense, mla) for d in lp.decisions)


def test_mla_layer_built_first_keeps_auto() -> None:
    arch, quant = _mixed_arch(mla_first=True)
    mla, dense = _layers(arch, quant, [], EngineVersion())
    assert (mla.kv_cache_dtype, dense.kv_cache_dtype) == ("auto", "fp8")
    assert _kv103(mla) is None


def test_before_pr_42782_the_rewrite_reaches_an_explicit_mla_dtype() -> None:
    arch, quant = _mixed_arch(mla_first=False)
    dense, mla = _layers(arch, quant, ["--kv-cache-dtype", "bfloat16"], resolve_engine("vllm==0.21.0"))
    assert (dense.kv_cache_dtype, mla.kv_cache_dtype) == ("fp8", "fp8")
    assert "(cache_config.cache_dtype rewritten by an earlier Attention layer)" in (_kv103(mla) or "")
    # from PR #42782 on, the explicit dtype wins on both layers
    dense, mla = _layers(arch, quant, ["--kv-cache-dtype", "bfloat16"], EngineVersion())
    assert (dense.kv_cache_dtype, mla.kv_cache_dtype) == ("bfloat16", "bfloat16")


def _undeclared(ctx: RuleContext, la: LayerArch, st: LayerState) -> Iterator[Set]:
    yield Set("dtype", "bfloat16", "no declaration")


def test_rule_setting_an_undeclared_field_stops_the_plan() -> None:
    arch, quant = _mixed_arch(mla_first=False)
    ctx = RuleContext(arch=arch, quant=quant, flags=parse_flags([]))
    gstate, decided = planner._decide_globals(ctx, planner._rules())
    sneaky = decides_layer("quant_mode")(_undeclared)  # declares quant_mode, sets dtype
    with pytest.raises(RuleContractError, match="rule KV999 set 'dtype', which it does not declare"):
        planner._decide_layers(planner._with(ctx, gstate), [("KV999", sneaky)], decided["kv_cache_dtype"])


@pytest.mark.parametrize("kind,scope", [("decision", "layer"), ("check", "layer"), ("decision", "global")])
def test_planner_runs_only_declared_layer_decisions(kind: str, scope: str) -> None:
    rule = Rule(code="KV999", name="undeclared", severity=Severity.info, summary="s", why="w", fix="f",
                family="test", kind=kind, scope=scope, fn=_undeclared)  # type: ignore[arg-type]
    with pytest.raises(RuleContractError, match="KV999 runs as a layer decision"):
        planner._layer_decision(rule)
    with pytest.raises(RuleContractError, match="KV999 runs as a global decision"):
        planner._global_decision(rule)
