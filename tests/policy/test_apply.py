"""Applying policies: settings become flags (pre-pass), decisions carry KV9xx codes, constraints are findings."""
from __future__ import annotations

import json

import pytest

from kvplan import compile as compile_plan
from kvplan.emit import emit
from kvplan.errors import KvplanInputError
from kvplan.policy import load_policy, policy_from_text
from tests.emit.helpers import EXAMPLES, config, load_config, per_layer

GPT_OSS = EXAMPLES / "gpt-oss-20b"
LLAMA = EXAMPLES / "Meta-Llama-3.1-8B"
MODELOPT = EXAMPLES / "nvidia-Llama-3.1-70B-Instruct-FP8"

EDGES = policy_from_text("""\
version: 1
name: edges
rules:
  - {code: KV901, name: fp8-kv, reason: halve KV memory, set: {kv_cache_dtype: fp8}}
  - {code: KV902, name: edges-16bit, reason: edge layers are sensitive, select: {index: [0, -1]},
     set: {kv_cache_dtype: model}}
""", "edges.yaml")


def _codes(plan) -> list[str]:
    return [f.code for f in plan.findings]


def test_settings_are_realised_as_flags_and_recorded_per_layer() -> None:
    plan = compile_plan(LLAMA, policy=EDGES)
    assert plan.flags["kv_cache_dtype"] == "fp8" and plan.flags["kv_cache_dtype_skip_layers"] == ["0", "31"]
    first, mid = plan.layers[0], plan.layers[5]
    assert first.kv_cache_dtype == "auto" and mid.kv_cache_dtype == "fp8"
    assert first.decided_by[0] == "KV902" and mid.decided_by[0] == "KV901"
    d = first.decisions[0]
    assert (d.rule, d.field, d.value) == ("KV902", "kv_cache_dtype", "auto")
    assert "edges.yaml:5" in d.fact and "edge layers are sensitive" in d.fact
    assert "realised as --kv-cache-dtype fp8 --kv-cache-dtype-skip-layers 0 31" in d.fact
    # The same plan as writing the flags by hand, apart from the policy's annotations.
    by_hand = compile_plan(LLAMA, "--kv-cache-dtype fp8 --kv-cache-dtype-skip-layers 0 31")
    assert per_layer(plan) == per_layer(by_hand)
    assert "KV991" in _codes(plan)


def test_later_rule_overrides_earlier_one() -> None:
    pol = policy_from_text("""\
version: 1
rules:
  - {code: KV901, name: bf16-first, reason: a, select: {index: 0}, set: {kv_cache_dtype: model}}
  - {code: KV902, name: fp8-all, reason: b, set: {kv_cache_dtype: fp8}}
""")
    plan = compile_plan(LLAMA, policy=pol)
    assert plan.layers[0].kv_cache_dtype == "fp8" and plan.layers[0].decided_by[0] == "KV902"
    assert "KV901" not in plan.layers[0].decided_by


def test_quant_mode_setting_keeps_the_checkpoint_spelling() -> None:
    pol = policy_from_text("""\
version: 1
rules:
  - {code: KV901, name: fp8, reason: r, set: {quant_mode: fp8_per_tensor}}
  - {code: KV902, name: last-16bit, reason: r, select: {index: -1}, set: {quant_mode: none}}
""")
    plan = compile_plan(MODELOPT, policy=pol)
    # ModelOpt resolves 'auto' to fp8_e4m3 (per-tensor FP8): the policy keeps 'auto' and skips the last layer.
    assert plan.flags["kv_cache_dtype"] == "auto" and plan.flags["kv_cache_dtype_skip_layers"] == ["79"]
    assert plan.layers[0].kv_cache_dtype == "fp8_e4m3" and plan.layers[79].kv_cache_dtype == "auto"
    assert emit(plan).args == ["--kv-cache-dtype", "auto", "--kv-cache-dtype-skip-layers", "79"]


def test_two_quantized_settings_are_a_kv990_finding() -> None:
    pol = policy_from_text("""\
version: 1
rules:
  - {code: KV901, name: nvfp4, reason: r, set: {kv_cache_dtype: nvfp4}}
  - {code: KV902, name: fp8-edges, reason: r, select: {index: [0, 1]}, set: {kv_cache_dtype: fp8}}
""")
    plan = compile_plan(LLAMA, policy=pol)
    assert plan.flags["kv_cache_dtype"] == "nvfp4"
    kv990 = [f for f in plan.findings if f.code == "KV990"]
    assert len(kv990) == 1 and kv990[0].layers == [0, 1]
    assert "layers 0-1: KV902 fp8 -> auto" in kv990[0].message
    # Closest without losing precision: the fp8 layers stay 16-bit rather than nvfp4.
    assert [lp.kv_cache_dtype for lp in plan.layers[:3]] == ["auto", "auto", "nvfp4"]


def test_policy_that_changes_nothing_keeps_the_launch_flags() -> None:
    pol = policy_from_text("version: 1\nrules:\n  - {code: KV901, name: fp8, reason: r, set: {kv_cache_dtype: fp8}}\n")
    flags = ["--kv-cache-dtype", "fp8", "--kv-cache-dtype-skip-layers", "full_attention"]
    plan = compile_plan(LLAMA, flags, policy=pol)
    assert plan.flags["kv_cache_dtype_skip_layers"] == ["full_attention"]  # untouched, still KV301
    assert "KV301" in _codes(plan) and "KV991" not in _codes(plan)
    assert plan.layers[3].decided_by[0] == "KV901"


def test_constraints_are_findings_with_the_policy_code_and_severity() -> None:
    pol = policy_from_text("""\
version: 1
name: guard
constraints:
  - {code: KV910, name: no-e5m2, reason: bad evals, forbid: {kv_cache_dtype: fp8_e5m2}}
  - code: KV911
    name: gpt-oss-sliding-16bit
    reason: sinks are sensitive
    severity: warning
    select: {model_type: gpt_oss, kind: sliding_attention}
    require: {quantized: false}
""", "guard.yaml")
    plan = compile_plan(GPT_OSS, "--kv-cache-dtype fp8_e5m2", policy=pol)
    by_code = {f.code: f for f in plan.findings}
    assert by_code["KV910"].severity.value == "error" and by_code["KV910"].layers == list(range(24))
    assert by_code["KV910"].name == "no-e5m2" and "bad evals" in by_code["KV910"].message
    assert by_code["KV911"].severity.value == "warning" and by_code["KV911"].layers == list(range(0, 24, 2))
    assert "guard.yaml:5" in by_code["KV911"].message
    assert "requires quantized: false: sinks are sensitive" in by_code["KV911"].message
    ok = compile_plan(GPT_OSS, "--kv-cache-dtype fp8 --kv-cache-dtype-skip-layers sliding_window", policy=pol)
    assert not {"KV910", "KV911"} & set(_codes(ok))
    # Findings stay sorted like the planner's: errors first, then code.
    ranks = [(-f.severity.rank, f.code) for f in plan.findings]
    assert ranks == sorted(ranks)


def test_capacity_constraints_need_a_budget() -> None:
    pol = policy_from_text("""\
version: 1
constraints:
  - {code: KV940, name: four-requests, reason: product needs 4, min_concurrency: 4}
  - {code: KV941, name: tokens, reason: long context, min_tokens: 300000}
""")
    unchecked = compile_plan(LLAMA, "--max-model-len 32768", policy=pol)
    assert _codes(unchecked).count("KV992") == 2 and "KV940" not in _codes(unchecked)
    small = compile_plan(LLAMA, "--max-model-len 32768", kv_budget_bytes=8 * 2**30, policy=pol)
    msgs = {f.code: f.message for f in small.findings}
    assert "2.00 requests of --max-model-len 32,768" in msgs["KV940"]
    assert "is 65,536 tokens (2.00 requests)" in msgs["KV941"] and "at least 300,000" in msgs["KV941"]
    big = compile_plan(LLAMA, "--max-model-len 32768 --kv-cache-dtype fp8", kv_budget_bytes=40 * 2**30, policy=pol)
    assert not {"KV940", "KV941", "KV992"} & set(_codes(big))


def test_rules_that_select_nothing_are_reported() -> None:
    pol = policy_from_text("""\
version: 1
rules:
  - {code: KV901, name: oss-only, reason: r, select: {model_type: gpt_oss}, set: {kv_cache_dtype: fp8}}
""", "p.yaml")
    plan = compile_plan(LLAMA, policy=pol)
    kv993 = [f for f in plan.findings if f.code == "KV993"]
    assert len(kv993) == 1 and "KV901 oss-only (p.yaml:3)" in kv993[0].message
    assert plan.flags["kv_cache_dtype"] == "auto"


def test_inline_config_object_with_hf_quant_config() -> None:
    cfg = load_config("nvidia-Llama-3.1-70B-Instruct-FP8")
    hq = json.loads((config("nvidia-Llama-3.1-70B-Instruct-FP8").parent / "hf_quant_config.json").read_text())
    plan = compile_plan(cfg, [], None, hf_quant_config=hq)
    assert plan.kv_cache_dtype == "fp8_e4m3" and plan.model.source is None
    assert per_layer(plan) == per_layer(compile_plan(config("nvidia-Llama-3.1-70B-Instruct-FP8")))
    with pytest.raises(KvplanInputError, match="<request> has no model_type"):
        compile_plan({"num_hidden_layers": 2})


def test_policy_path_and_policy_object_give_the_same_plan() -> None:
    path = EXAMPLES / "policies" / "protect-edges.yaml"
    by_path = compile_plan(LLAMA, "--kv-cache-dtype fp8", policy=path)
    assert by_path == compile_plan(LLAMA, "--kv-cache-dtype fp8", policy=load_policy(path))
    assert by_path != compile_plan(LLAMA, "--kv-cache-dtype fp8")
