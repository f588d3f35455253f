"""SGLang and TensorRT-LLM emitters: dtype spelling, one-dtype limits, per-layer syntax, config files."""
from __future__ import annotations

import yaml

from kvplan.api import compile as compile_plan
from kvplan.emit import emit, render
from kvplan.emit.sglang import SGLANG_KV_CACHE_DTYPES, to_sglang
from kvplan.emit.trtllm import TRTLLM_KV_CACHE_DTYPES, to_trtllm
from kvplan.model.vocab import VLLM_033_KV_CACHE_DTYPES
from tests.emit.helpers import EXAMPLES, config

GPT_OSS = EXAMPLES / "gpt-oss-20b" / "config.json"
LLAMA = EXAMPLES / "Meta-Llama-3.1-8B" / "config.json"
MODELOPT = EXAMPLES / "nvidia-Llama-3.1-70B-Instruct-FP8"


def test_every_vllm_dtype_maps_to_a_valid_engine_value() -> None:
    for kv in VLLM_033_KV_CACHE_DTYPES:
        assert to_sglang(kv, "bfloat16")[0] in SGLANG_KV_CACHE_DTYPES, kv
        assert to_trtllm(kv, "bfloat16")[0] in TRTLLM_KV_CACHE_DTYPES, kv


def test_sglang_uniform_fp8_is_exact() -> None:
    r = emit(compile_plan(LLAMA, ["--kv-cache-dtype", "fp8", "-tp", "2", "--max-model-len", "8192"]), "sglang")
    assert r.args == ["--kv-cache-dtype", "fp8_e4m3", "--tp-size", "2", "--context-length", "8192"]
    assert r.exact and r.findings == []
    assert yaml.safe_load(render(r, "yaml")) == {"kv-cache-dtype": "fp8_e4m3", "tp-size": 2, "context-length": 8192}


def test_sglang_skip_layers_are_not_expressible_without_per_layer() -> None:
    plan = compile_plan(GPT_OSS, ["--kv-cache-dtype", "fp8", "--kv-cache-dtype-skip-layers", "sliding_window"])
    r = emit(plan, "sglang")
    assert r.args == ["--kv-cache-dtype", "fp8_e4m3"]
    assert not r.exact and [d.index for d in r.differences] == list(range(0, 24, 2))
    kv982 = [f for f in r.findings if f.code == "KV982"]
    assert kv982 and kv982[0].layers == list(range(0, 24, 2))
    assert "auto on layers 0,2,4" in kv982[0].message


def test_sglang_per_layer_uses_the_pull_request_syntax() -> None:
    plan = compile_plan(LLAMA, ["--kv-cache-dtype", "fp8", "--kv-cache-dtype-skip-layers", "0", "1", "31"])
    r = emit(plan, "sglang", per_layer=True)
    assert r.args == ["--kv-cache-dtype", "fp8_e4m3", "--kv-cache-per-layer-dtype", "0-1:bf16,31:bf16"]
    assert r.exact and r.per_layer_syntax
    assert [f.code for f in r.findings] == ["KV983"]


def test_sglang_checkpoint_fp8_is_written_out() -> None:
    # SGLang's 'auto' is the model dtype, so a checkpoint-resolved FP8 must be explicit there.
    r = emit(compile_plan(MODELOPT), "sglang")
    assert r.args == ["--kv-cache-dtype", "fp8_e4m3"]


def test_sglang_approximated_dtypes_are_named() -> None:
    r = emit(compile_plan(LLAMA, ["--kv-cache-dtype", "int8_per_token_head"]), "sglang")
    assert r.args == ["--kv-cache-dtype", "fp8_e4m3"]
    assert [f.code for f in r.findings] == ["KV984"] and not r.exact
    assert all(d.planned == "int8_per_token_head" and d.emitted == "fp8_e4m3" for d in r.differences)


def test_sglang_flags_without_equivalent_are_reported() -> None:
    r = emit(compile_plan(LLAMA, ["--kv-cache-dtype", "fp8", "--gpu-memory-utilization", "0.8",
                                  "--attention-backend", "FLASHINFER"]), "sglang")
    assert "--mem-fraction-static" not in r.args
    notes = [f.message for f in r.findings if f.code == "KV985"]
    assert any("--gpu-memory-utilization" in m for m in notes) and any("--attention-backend" in m for m in notes)


def test_trtllm_uniform_fp8() -> None:
    r = emit(compile_plan(LLAMA, ["--kv-cache-dtype", "fp8", "-tp", "4", "--max-model-len", "16384"]), "trtllm")
    assert r.args == ["--kv_cache_dtype", "fp8", "--tp_size", "4", "--max_seq_len", "16384"]
    assert r.config == {"kv_cache_config": {"dtype": "fp8"}, "tensor_parallel_size": 4, "max_seq_len": 16384}
    assert r.exact
    assert "QuantAlgo.FP8" in render(r, "yaml")


def test_trtllm_checkpoint_resolved_dtype_stays_auto() -> None:
    r = emit(compile_plan(MODELOPT), "trtllm")
    assert r.args == ["--kv_cache_dtype", "auto"] and r.exact


def test_trtllm_cannot_force_16bit_over_a_checkpoint_kv_algo() -> None:
    r = emit(compile_plan(MODELOPT, ["--kv-cache-dtype", "bfloat16"]), "trtllm")
    assert r.args == ["--kv_cache_dtype", "auto"]
    assert "KV987" in [f.code for f in r.findings] and not r.exact


def test_trtllm_per_layer_spec_covers_every_kv_layer() -> None:
    plan = compile_plan(LLAMA, ["--kv-cache-dtype", "nvfp4", "--kv-cache-dtype-skip-layers", "0", "31"])
    r = emit(plan, "trtllm", per_layer=True)
    assert r.config["kv_cache_config"]["dtype"] == "0:bf16,1-30:nvfp4,31:bf16"
    assert r.args == ["--extra_llm_api_options", "kvplan-trtllm.yaml"]
    assert r.exact and [f.code for f in r.findings] == ["KV983"]


def test_trtllm_e5m2_is_approximated() -> None:
    r = emit(compile_plan(LLAMA, ["--kv-cache-dtype", "fp8_e5m2"]), "trtllm")
    assert r.args == ["--kv_cache_dtype", "fp8"] and "KV984" in [f.code for f in r.findings]


def test_engines_ignore_layers_without_kv() -> None:
    # Nemotron-H: 6 attention layers among Mamba / MoE blocks; only attention layers count.
    plan = compile_plan(config("nvidia-Nemotron-3-Nano-30B-A3B-NVFP4"), ["--kv-cache-dtype", "fp8"])
    for to in ("sglang", "trtllm"):
        r = emit(plan, to, per_layer=True)
        assert r.exact, (to, r.findings)
