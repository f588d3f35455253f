"""kvplan's KV cache layout and capacity equal vLLM's own for the same model, flags and KV memory, per release.

tests/data/vllm_oracle_capacity/answers (vLLM 0.33.0) and releases/<version>/ (other releases, answered with
`capacity_oracle.py --release VERSION`) hold what vLLM's code computed (scripts/oracle/capacity_oracle.py:
the real model class, the block-size alignment a CUDA launch runs, get_kv_cache_groups,
get_kv_cache_configs, get_kv_cache_capacity): block size, KV cache groups with their layers, page and
blocks per request, pool blocks, the "GPU KV cache size" and "Maximum concurrency" figures, or the startup
error when one request does not fit.
"""
from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import kvplan.api
from kvplan.model.plan import Plan
from tests.conftest import ROOT

DATA = ROOT / "tests" / "data" / "vllm_oracle_capacity"
CASES = json.loads((DATA / "cases.json").read_text())["cases"]
RELEASES = ["0.33.0", *sorted(p.name for p in (DATA / "releases").iterdir() if p.is_dir())]
RUNS = [(r, c) for r in RELEASES for c in CASES]
ORACLE_LIMITS = {
    ("0.28.0", "Lfm2ForCausalLM__auto__4096"):
        "0.28's lfm2.py reads Lfm2Config.conv_dim, which the oracle venv's transformers (5.20.2) does not have",
    ("0.28.0", "Lfm2ForCausalLM__fp8__4096__no-prefix-caching"):
        "0.28's CPU attention refuses FP8 at a head size that is not a multiple of 32 (a CPU kernel limit); "
        "past it the model is the conv_dim case above",
    ("0.25.1", "Lfm2ForCausalLM__auto__4096"):
        "0.25.1's lfm2.py reads Lfm2Config.conv_dim, which the oracle venv's transformers (5.20.2) does not have",
    ("0.25.1", "Lfm2ForCausalLM__fp8__4096__no-prefix-caching"):
        "0.25.1's CPU attention refuses FP8 at a head size that is not a multiple of 32 (a CPU kernel limit); "
        "past it the model is the conv_dim case above",
    ("0.22.0", "Lfm2ForCausalLM__auto__4096"):
        "0.22's lfm2.py reads Lfm2Config.conv_dim, which the oracle venv's transformers (5.20.2) does not have",
    ("0.22.0", "Lfm2ForCausalLM__fp8__4096__no-prefix-caching"):
        "0.22's lfm2.py reads Lfm2Config.conv_dim, which the oracle venv's transformers (5.20.2) does not have",
}
"""Cases a release's code could not answer on the CPU, and why (the oracle's limit, not the release's)."""


def assert_answer_current(case: dict[str, Any], answer: dict[str, Any], release: str) -> None:
    """The answer is the release's, for the case's config as it is now (else the oracle must run again)."""
    assert answer["vllm_version"] == release
    digest = hashlib.sha256((DATA / case["config"]).resolve().read_bytes()).hexdigest()
    assert answer["config_sha256"] == digest, f"{case['name']}: re-run scripts/oracle/capacity_oracle.py"


def refused_by_release(answer: dict[str, Any]) -> bool:
    """The release refuses the model at create_engine_config (an architecture it does not have)."""
    err = answer["error"]
    return (err is not None and err["stage"] == "create_engine_config"
            and "are not supported for now" in " ".join(err["traceback_tail"]))


def crashes_laying_out(answer: dict[str, Any]) -> bool:
    """The release's own layout code raises (an exception, or a failed assert) and vLLM does not start."""
    err = answer["error"]
    return err is not None and err["stage"] == "capacity"


def check_layout_refusal(plan: Plan, answer: dict[str, Any]) -> None:
    """kvplan computes no layout where vLLM's layout code raises, and reports KV504 (an error) with vLLM's message
    (a bare assert has none: kvplan names the assert)."""
    assert plan.totals.kv_cache_layout is None
    (finding,) = [f for f in plan.findings if f.code == "KV504"]
    assert finding.severity.value == "error" and finding.layers
    message = answer["error"]["message"]  # "Layer <name>: <why>", or before 0.24 a message naming no layer
    message = message.partition(": ")[2] if message.startswith("Layer ") else message
    assert (message or "AssertionError in unify_kv_cache_spec_page_size") in finding.message


_KIND = {"FullAttentionSpec": "full_attention", "SlidingWindowSpec": "sliding_attention",
         "ChunkedLocalAttentionSpec": "chunked_attention", "MLAAttentionSpec": "mla", "MambaSpec": "state"}


def _answer(case: dict, release: str = "0.33.0") -> dict[str, Any]:
    folder = DATA / "answers" if release == "0.33.0" else DATA / "releases" / release
    return json.loads((folder / f"{case['name']}.json").read_text())


def _argv(flags: dict[str, Any]) -> list[str]:
    argv = ["--max-model-len", str(flags["max_model_len"]), "--kv-cache-dtype", flags.get("kv_cache_dtype", "auto")]
    if flags.get("kv_cache_dtype_skip_layers"):
        argv += ["--kv-cache-dtype-skip-layers", *flags["kv_cache_dtype_skip_layers"]]
    if "dtype" in flags:
        argv += ["--dtype", flags["dtype"]]
    if flags.get("enable_prefix_caching") is False:
        argv.append("--no-enable-prefix-caching")
    if "tensor_parallel_size" in flags:
        argv += ["--tensor-parallel-size", str(flags["tensor_parallel_size"])]
    if "mamba_ssm_cache_dtype" in flags:
        argv += ["--mamba-ssm-cache-dtype", flags["mamba_ssm_cache_dtype"]]
    return argv


def _gpu(case: dict) -> str | None:
    """The GPU the case was answered for: its `gpu`, or a Hopper GPU where the oracle ran FlashInfer's GDN
    prefill kernel (vLLM's choice there)."""
    return case.get("gpu") or ("h100" if case.get("gdn_prefill") == "flashinfer" else None)


def _plan(case: dict, release: str) -> Plan:
    # `force_backend`: the launch passes --attention-backend (the oracle ran that backend's class)
    forced = ["--attention-backend", case["backend"]] if case.get("force_backend") else []
    return kvplan.api.compile((DATA / case["config"]).resolve(), _argv(case["flags"]) + forced, gpu=_gpu(case),
                              kv_budget_bytes=case["available_bytes"],
                              engine=f"vllm=={_answer(case, release)['vllm_version']}")


@pytest.mark.parametrize("release", RELEASES)
def test_every_case_is_answered_for_its_config(release: str) -> None:
    for case in CASES:
        answer = _answer(case, release)
        assert_answer_current(case, answer, release)
        assert answer["error"] is None or (release, case["name"]) in ORACLE_LIMITS or crashes_laying_out(answer), \
            case["name"]
        assert answer.get("backend") == case.get("backend"), f"{case['name']}: re-run with --force"
    kinds = {g["spec"] for case in CASES for g in (_answer(case, release)["answer"] or {"groups": []})["groups"]}
    assert {"FullAttentionSpec", "SlidingWindowSpec", "MLAAttentionSpec", "MambaSpec"} <= kinds


@pytest.mark.parametrize(("release", "case"), RUNS, ids=[f"{r}-{c['name']}" for r, c in RUNS])
def test_layout_and_capacity_equal_vllms(release: str, case: dict) -> None:
    answer = _answer(case, release)
    if (release, case["name"]) in ORACLE_LIMITS:
        pytest.skip(f"vLLM {release} could not answer on the CPU: {ORACLE_LIMITS[release, case['name']]}")
    want = answer["answer"]
    plan = _plan(case, release)
    if crashes_laying_out(answer):
        check_layout_refusal(plan, answer)
        return
    if case.get("gpu") and case.get("backend"):  # the backend the oracle ran is the one kvplan selects there
        assert {lp.backend for lp in plan.layers if lp.bytes_per_token} == {case["backend"]}
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


def _oracle(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "oracle" / "capacity_oracle.py"), *args],
                          capture_output=True, text=True, timeout=60)


def test_capacity_oracle_cli_documents_a_release_and_refuses_bad_input(tmp_path: Path) -> None:
    # The release script calls this CLI; it needs no vLLM to explain itself or to refuse bad input.
    helptext = _oracle("--help").stdout
    assert "--release VERSION" in helptext and "releases/VERSION/" in helptext
    cases = str(DATA / "cases.json")
    missing = _oracle("--cases", str(tmp_path / "none.json"))
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1 and "no cases file" in missing.stderr
    empty = _oracle("--cases", cases, "--release", "9.9.9", "--site", str(tmp_path))
    assert empty.returncode == 2 and f"no vLLM in {tmp_path}" in empty.stderr
    (tmp_path / "vllm").mkdir()
    partial = _oracle("--cases", cases, "--release", "9.9.9", "--site", str(tmp_path))
    assert partial.returncode == 2 and "still being installed" in partial.stderr


def test_mla_layers_ignore_the_skip_list_before_0_28() -> None:
    # vLLM 0.25.1's one MLA group has the fp8 page (32 tokens x 576 B) with layer 0 listed; 0.28's the bf16 page.
    # Both raise the block to 32 tokens: Platform._align_heterogeneous_kv_block_size reads the flag, not the layers
    case = next(c for c in CASES if c["name"] == "DeepSeek-V3__fp8__32768__skip-0-2")
    for release, skipped, page in (("0.25.1", False, 32 * 576), ("0.28.0", True, 32 * 1152)):
        assert max(g["page_size_bytes"] for g in _answer(case, release)["answer"]["groups"]) == page
        plan = _plan(case, release)
        layer0 = plan.layers[0]
        assert (layer0.skipped, layer0.kv_cache_dtype) == (skipped, "auto" if skipped else "fp8")
        assert plan.totals.kv_cache_layout is not None and plan.totals.kv_cache_layout.block_size == 32
