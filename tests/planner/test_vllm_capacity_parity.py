"""kvplan's KV cache layout and capacity equal vLLM 0.33.0's own for the same model, flags and KV memory.

tests/data/vllm_oracle_capacity/answers hold what vLLM's code computed (scripts/oracle/capacity_oracle.py:
the real model class, the block-size alignment a CUDA launch runs, get_kv_cache_groups,
get_kv_cache_configs, get_kv_cache_capacity): block size, KV cache groups with their layers, page and
blocks per request, pool blocks, the "GPU KV cache size" and "Maximum concurrency" figures, or the startup
error when one request does not fit.
"""
from __future__ import annotations

import hashlib
import json
import re
from typing import Any

import pytest

import kvplan.api
from kvplan.model.plan import Plan
from tests.conftest import ROOT

DATA = ROOT / "tests" / "data" / "vllm_oracle_capacity"
CASES = json.loads((DATA / "cases.json").read_text())["cases"]
_KIND = {"FullAttentionSpec": "full_attention", "SlidingWindowSpec": "sliding_attention",
         "ChunkedLocalAttentionSpec": "chunked_attention", "MLAAttentionSpec": "mla", "MambaSpec": "state"}


def _answer(case: dict) -> dict[str, Any]:
    return json.loads((DATA / "answers" / f"{case['name']}.json").read_text())


def _argv(flags: dict[str, Any]) -> list[str]:
    argv = ["--max-model-len", str(flags["max_model_len"]), "--kv-cache-dtype", flags.get("kv_cache_dtype", "auto")]
    if flags.get("kv_cache_dtype_skip_layers"):
        argv += ["--kv-cache-dtype-skip-layers", *flags["kv_cache_dtype_skip_layers"]]
    if "dtype" in flags:
        argv += ["--dtype", flags["dtype"]]
    if flags.get("enable_prefix_caching") is False:
        argv.append("--no-enable-prefix-caching")
    if "mamba_ssm_cache_dtype" in flags:
        argv += ["--mamba-ssm-cache-dtype", flags["mamba_ssm_cache_dtype"]]
    return argv


def _plan(case: dict) -> Plan:
    # FlashInfer's GDN prefill kernel is vLLM's choice on a Hopper GPU (the oracle case says it ran it)
    return kvplan.api.compile((DATA / case["config"]).resolve(), _argv(case["flags"]),
                              gpu="h100" if case.get("gdn_prefill") == "flashinfer" else None,
                              kv_budget_bytes=case["available_bytes"],
                              engine=f"vllm=={_answer(case)['vllm_version']}")


def test_every_case_is_answered_for_its_config() -> None:
    for case in CASES:
        answer = _answer(case)
        digest = hashlib.sha256((DATA / case["config"]).resolve().read_bytes()).hexdigest()
        assert answer["config_sha256"] == digest, f"{case['name']}: re-run scripts/oracle/capacity_oracle.py"
        assert answer["error"] is None, case["name"]
    kinds = {g["spec"] for case in CASES for g in _answer(case)["answer"]["groups"]}
    assert {"FullAttentionSpec", "SlidingWindowSpec", "MLAAttentionSpec", "MambaSpec"} <= kinds


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_layout_and_capacity_equal_vllms(case: dict) -> None:
    answer = _answer(case)
    want = answer["answer"]
    plan = _plan(case)
    t = plan.totals
    lay = t.kv_cache_layout
    assert lay is not None, "kvplan computes no layout"
    assert lay.block_size == answer["engine"]["block_size"]
    got_groups = sorted((g.kind, g.layers, g.block_size, g.blocks_per_request) for g in lay.groups)
    want_groups = sorted((_KIND[g["spec"]], g["layers"], g["block_size"], g["blocks_per_request"])
                         for g in want["groups"])
    assert got_groups == want_groups
    assert max(g["page_size_bytes"] for g in want["groups"]) == lay.page_size_bytes
    assert lay.mamba_cache_mode == (answer["engine"]["mamba_cache_mode"] if "state" in
                                    {g[0] for g in got_groups} else None)
    if want["startup_error"] is not None:
        msg = next(f.message for f in plan.findings if f.code == "KV502")
        est = re.search(r"estimated maximum model length is (\d+)", want["startup_error"])
        assert est is not None and t.max_model_len_fits == int(est.group(1))
        assert msg.startswith(want["startup_error"].split(" GiB KV")[0].split(", (")[0])
        return
    assert not [f for f in plan.findings if f.code == "KV502"]
    assert lay.num_blocks == want["num_blocks"]
    assert t.tokens_capacity == want["gpu_kv_cache_tokens"]
    assert t.max_concurrency == round(want["max_concurrency"], 2)
