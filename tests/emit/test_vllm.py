"""vLLM 0.33 emitter: compact skip lists, checkpoint 'auto', inexpressible plans, carried flags."""
from __future__ import annotations

import shlex

import yaml

from kvplan.api import compile as compile_plan
from kvplan.emit import emit, render
from kvplan.ingest.flags import parse_flags
from kvplan.model.plan import Plan
from kvplan.releases import DEFAULT_ENGINE
from tests.emit.helpers import EXAMPLES, config, per_layer, vllm_config_argv

GPT_OSS = EXAMPLES / "gpt-oss-20b" / "config.json"
SLIDING = [str(i) for i in range(0, 24, 2)]


def _edit(plan: Plan, **dtypes: str) -> Plan:
    """Hand-edit layer kv_cache_dtypes: _edit(plan, l3="nvfp4")."""
    want = {int(k[1:]): v for k, v in dtypes.items()}
    return plan.model_copy(update={"layers": [lp.model_copy(update={"kv_cache_dtype": want[lp.index]})
                                              if lp.index in want else lp for lp in plan.layers]})


def _recompile(model_path, result) -> Plan:
    return compile_plan(model_path, parse_flags(shlex.split(result.command)))


def test_vllm_sliding_indices_become_the_sliding_window_keyword() -> None:
    plan = compile_plan(GPT_OSS, ["--kv-cache-dtype", "fp8", "--kv-cache-dtype-skip-layers", *SLIDING])
    r = emit(plan, "vllm")
    assert r.args == ["--kv-cache-dtype", "fp8", "--kv-cache-dtype-skip-layers", "sliding_window"]
    assert r.exact and r.findings == []


def test_vllm_sliding_keyword_plus_extra_full_layer() -> None:
    plan = compile_plan(GPT_OSS, ["--kv-cache-dtype", "fp8", "--kv-cache-dtype-skip-layers", *SLIDING, "23"])
    assert emit(plan, "vllm").args[2:] == ["--kv-cache-dtype-skip-layers", "sliding_window", "23"]


def test_vllm_partial_sliding_skip_stays_as_indices() -> None:
    plan = compile_plan(GPT_OSS, ["--kv-cache-dtype", "fp8", "--kv-cache-dtype-skip-layers", "0", "2"])
    assert emit(plan, "vllm").args[2:] == ["--kv-cache-dtype-skip-layers", "0", "2"]


def test_vllm_modelopt_checkpoint_auto_is_not_hard_coded() -> None:
    model = EXAMPLES / "nvidia-Llama-3.1-70B-Instruct-FP8"
    plan = compile_plan(model, ["--kv-cache-dtype-skip-layers", "0", "79"])
    assert plan.kv_cache_dtype == "fp8_e4m3"
    r = emit(plan, "vllm")
    assert r.args == ["--kv-cache-dtype", "auto", "--kv-cache-dtype-skip-layers", "0", "79"]
    assert per_layer(_recompile(model, r)) == per_layer(plan)


def test_vllm_explicit_dtype_is_kept_explicit() -> None:
    model = EXAMPLES / "nvidia-Llama-3.1-70B-Instruct-FP8"
    plan = compile_plan(model, ["--kv-cache-dtype", "fp8_e4m3"])
    assert emit(plan, "vllm").args == ["--kv-cache-dtype", "fp8_e4m3"]


def test_vllm_compressed_tensors_mla_keeps_auto() -> None:
    # MLA layers ignore a compressed-tensors kv_cache_scheme under 'auto' (KV108); an explicit fp8
    # would quantize them, so only 'auto' reproduces the plan.
    model = config("ct-fp8-kv-deepseek")
    plan = compile_plan(model)
    assert all(lp.kv_cache_dtype == "auto" for lp in plan.layers)
    r = emit(plan, "vllm")
    assert r.args == ["--kv-cache-dtype", "auto"]


def test_vllm_compressed_tensors_attention_layers_keep_auto() -> None:
    model = config("ct-fp8-kv-llama")
    plan = compile_plan(model, ["--kv-cache-dtype-skip-layers", "0", "31"])
    assert plan.layers[1].kv_cache_dtype == "fp8" and plan.kv_cache_dtype == "auto"
    r = emit(plan, "vllm")
    assert r.args == ["--kv-cache-dtype", "auto", "--kv-cache-dtype-skip-layers", "0", "31"]


def test_vllm_two_quantized_dtypes_name_the_layers_and_keep_precision() -> None:
    model = EXAMPLES / "Meta-Llama-3.1-8B" / "config.json"
    plan = _edit(compile_plan(model, ["--kv-cache-dtype", "nvfp4"]), l0="fp8", l1="fp8", l31="int8_per_token_head")
    r = emit(plan, "vllm")
    assert r.args == ["--kv-cache-dtype", "nvfp4", "--kv-cache-dtype-skip-layers", "0", "1", "31"]
    assert not r.exact
    assert [(d.index, d.planned, d.emitted) for d in r.differences] == [
        (0, "fp8", "auto"), (1, "fp8", "auto"), (31, "int8_per_token_head", "auto")]
    kv980 = [f for f in r.findings if f.code == "KV980"]
    assert len(kv980) == 1 and kv980[0].layers == [0, 1, 31]
    assert "layers 0-1: fp8 -> auto" in kv980[0].message and "fp8, int8_per_token_head, nvfp4" in kv980[0].message
    got = _recompile(model, r)
    assert [lp.kv_cache_dtype for lp in got.layers[:3]] == ["auto", "auto", "nvfp4"]


def test_vllm_lower_bit_layer_gets_the_global_8bit_dtype() -> None:
    model = EXAMPLES / "Meta-Llama-3.1-8B" / "config.json"
    plan = _edit(compile_plan(model, ["--kv-cache-dtype", "fp8"]), l5="nvfp4")
    r = emit(plan, "vllm")
    assert r.args == ["--kv-cache-dtype", "fp8"]
    assert [(d.index, d.planned, d.emitted) for d in r.differences] == [(5, "nvfp4", "fp8")]


def test_vllm_16bit_other_than_model_dtype_is_kv981() -> None:
    model = EXAMPLES / "Meta-Llama-3.1-8B" / "config.json"
    plan = _edit(compile_plan(model, ["--kv-cache-dtype", "fp8"]), l2="float16")
    r = emit(plan, "vllm")
    assert r.args == ["--kv-cache-dtype", "fp8", "--kv-cache-dtype-skip-layers", "2"]
    assert [f.code for f in r.findings] == ["KV981"] and r.findings[0].layers == [2]


def test_vllm_carries_the_other_serving_flags_and_yaml_matches_args() -> None:
    plan = compile_plan(GPT_OSS, ["--kv-cache-dtype", "fp8", "-tp", "2", "--max-model-len", "32768",
                                  "--attention-config", '{"use_prefill_query_quantization": true}',
                                  "--dtype", "bfloat16", "--block-size", "32"])
    r = emit(plan, "vllm")
    assert r.args == ["--kv-cache-dtype", "fp8", "--dtype", "bfloat16", "--tensor-parallel-size", "2",
                      "--max-model-len", "32768", "--block-size", "32", "--attention-config",
                      '{"use_prefill_query_quantization":true}']
    cfg = yaml.safe_load(render(r, "yaml"))
    assert cfg["attention-config"] == {"use_prefill_query_quantization": True}
    assert parse_flags(vllm_config_argv(cfg)) == parse_flags(r.args)
    assert _recompile(GPT_OSS, r).flags == plan.flags


def test_vllm_plan_with_errors_is_flagged() -> None:
    plan = compile_plan(config("gemma-2b"), ["--kv-cache-dtype", "bfloat16"])  # float16 model: KV201
    r = emit(plan, "vllm")
    assert r.args == ["--kv-cache-dtype", "bfloat16"]
    assert "KV986" in [f.code for f in r.findings]


def test_vllm_model_without_kv_layers_emits_auto() -> None:
    plan = compile_plan(GPT_OSS)
    plan = plan.model_copy(update={"layers": [lp.model_copy(update={"kind": "mamba", "kv_cache_dtype": None})
                                              for lp in plan.layers]})
    assert emit(plan, "vllm").args == ["--kv-cache-dtype", "auto"]


def test_render_yaml_header_is_versioned_and_lists_findings() -> None:
    model = EXAMPLES / "Meta-Llama-3.1-8B" / "config.json"
    r = emit(_edit(compile_plan(model, ["--kv-cache-dtype", "fp8"]), l2="nvfp4"), "vllm")
    text = render(r, "yaml")
    lines = text.splitlines()
    assert lines[0].startswith(f"# kvplan 0.1.0: KV cache settings for {DEFAULT_ENGINE.replace('==', ' ')} "
                               "(kvplan.emit schema 1.1)")
    assert any(line.startswith("# NOT exact: 1 layer(s)") for line in lines)
    assert any(line.startswith("# KV981 warning:") or line.startswith("# KV980 warning:") for line in lines)
    assert render(r, "args") == "--kv-cache-dtype fp8\n"
